"""The param_groups() protocol: group declarations, and kernels / Taylor models / fit by group."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lazylab.kernels import empirical_ntk
from lazylab.models import RandomFeatures, SignRandomizedNet, TaylorModel, TwoLayerNet
from lazylab.models.groups import group_param_names, param_group, param_groups
from lazylab.train import fit

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_two_layer_groups_match_the_trained_modes() -> None:
    fixed = TwoLayerNet(3, 6, generator=_gen(0), dtype=F64)
    assert {k: group_param_names(fixed, k) for k in param_groups(fixed)} == {
        "first": ["W"], "all": ["W"]}
    full = TwoLayerNet(3, 6, train_second=True, bias=True, generator=_gen(0), dtype=F64)
    assert group_param_names(full, "last") == ["a", "c"]
    assert group_param_names(full, "all") == ["W", "a", "c"]
    with pytest.raises(ValueError, match="hidden"):
        param_group(full, "hidden")
    with pytest.raises(ValueError, match="group must be one of"):
        param_group(full, "middle")
    rf = RandomFeatures(3, 5, generator=_gen(1))
    assert group_param_names(rf, "last") == ["a"] and "first" not in param_groups(rf)
    sr = SignRandomizedNet(TwoLayerNet(3, 4, generator=_gen(2)))
    assert param_group(sr, "first")[0] is sr.U


def test_empirical_ntk_by_group_equals_the_named_parameters() -> None:
    net = TwoLayerNet(4, 32, train_second=True, bias=True, generator=_gen(3), dtype=F64)
    X = torch.randn(7, 4, generator=_gen(4), dtype=F64)
    first = empirical_ntk(net, X, trained="first")
    last = empirical_ntk(net, X, trained="last")
    assert torch.equal(first, empirical_ntk(net, X, trained=["W"]))
    assert torch.equal(last, empirical_ntk(net, X, trained=["a", "c"]))
    # kernels of disjoint groups add up: first + last = all = both (to rounding)
    torch.testing.assert_close(first + last, empirical_ntk(net, X, trained="all"),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(empirical_ntk(net, X, trained="all"),
                               empirical_ntk(net, X, trained="both"), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="trained"):
        empirical_ntk(net, X, trained="hidden")


class _ThreeLayer(nn.Module):
    """A small module declaring first / hidden / last, to check the generic (autodiff) path."""

    def __init__(self) -> None:
        super().__init__()
        g = _gen(5)
        self.V = nn.Parameter(torch.randn(6, 3, generator=g, dtype=F64))
        self.H = nn.Parameter(torch.randn(5, 6, generator=g, dtype=F64))
        self.b = nn.Parameter(torch.randn(5, generator=g, dtype=F64))

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        return {"first": [self.V], "hidden": [self.H], "last": [self.b],
                "all": [self.V, self.H, self.b]}

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.tanh(X @ self.V.T) @ self.H.T) @ self.b


def test_generic_module_groups_in_kernels_taylor_and_fit() -> None:
    mod = _ThreeLayer()
    X = torch.randn(5, 3, generator=_gen(6), dtype=F64)
    parts = [empirical_ntk(mod, X, trained=g) for g in ("first", "hidden", "last")]
    torch.testing.assert_close(sum(parts), empirical_ntk(mod, X, trained="all"),
                               rtol=1e-12, atol=1e-12)
    tm = TaylorModel(mod, 1, wrt="hidden")
    assert tm.wrt == ("H",)
    assert list(tm.param_groups()) == ["hidden", "all"]
    # fit(params="hidden") moves H only
    V0, H0 = mod.V.detach().clone(), mod.H.detach().clone()
    y = torch.zeros(5, dtype=F64)
    fit(mod, data=(X, y), lr=0.1, steps=3, params="hidden", log_points=1)
    assert torch.equal(mod.V, V0) and not torch.equal(mod.H, H0)
    with pytest.raises(ValueError, match="params"):
        fit(TwoLayerNet(3, 4, generator=_gen(7)), data=(X.float(), y.float()), lr=0.1,
            steps=1, params="last")
