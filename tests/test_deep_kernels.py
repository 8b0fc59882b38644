"""Deep kernels (lazylab.kernels.deep): limits, closed forms, neural-tangents reference values,
finite-width convergence, PSD at depth, tiling and refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.kernels import gaussian_expectation, nngp, ntk
from lazylab.kernels.deep import (
    ABRelu,
    Abs,
    AvgPool,
    Conv,
    DeepKernel,
    Dense,
    Elementwise,
    Erf,
    Flatten,
    Gelu,
    GlobalAvgPool,
    LayerNorm,
    LeakyRelu,
    Relu,
    Residual,
    Serial,
    Sin,
    UnsupportedLayer,
    from_spec,
    kernel_from_module,
    layers_from_module,
    ntk_parametrize,
)

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
REFERENCE = Path(__file__).parent / "data" / "deep_kernels_nt.json"


def _unit(n: int, d: int, seed: int = 0) -> torch.Tensor:
    X = torch.randn(n, d, dtype=F64, generator=torch.Generator().manual_seed(seed))
    return X / X.norm(dim=1, keepdim=True)


def arora(L: int, d: int) -> Serial:
    """Arora et al. 2019's relu net: NTK parametrization, no bias, c_sigma = 2; the first
    layer sees x.z (W_std = sqrt(d) undoes neural-tangents' 1/d on the inputs)."""
    layers = [Dense(W_std=math.sqrt(d))]
    for _ in range(L):
        layers += [Relu(), Dense(W_std=math.sqrt(2))]
    return Serial(*layers)


# -- limits and closed forms ------------------------------------------------------------


@pytest.mark.parametrize("L", [1, 2, 5, 20, 100])
def test_arora_ntk_diagonal_is_depth_plus_one(L: int) -> None:
    X = _unit(6, 4)
    K = DeepKernel(arora(L, 4))
    assert torch.allclose(K(X).diagonal(), torch.full((6,), L + 1.0, dtype=F64), rtol=0,
                          atol=1e-10)
    assert torch.allclose(K.diag(X), torch.full((6,), L + 1.0, dtype=F64), rtol=0, atol=1e-10)


def test_arora_off_diagonal_ntk_over_depth_tends_to_a_quarter() -> None:
    X = _unit(8, 5)
    off = ~torch.eye(8, dtype=torch.bool)
    gaps = []
    for L in (10, 100, 1000):
        T = DeepKernel(arora(L, 5))(X)
        gaps.append(float((T[off] / (L + 1) - 0.25).abs().max()))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.015


def test_depth_one_equals_the_two_layer_closed_form() -> None:
    X, Z = _unit(7, 4, 1) * 1.7, torch.randn(5, 4, dtype=F64)
    net = Serial(Dense(W_std=2.0), Relu(), Dense())  # W_std = sqrt(d): w ~ N(0, I_d)
    for A, B in ((X, Z), (X, None)):
        nngp_, ntk_ = DeepKernel(net).both(A, B)
        assert torch.allclose(ntk_, ntk(A, B, activation="relu", trained="both"), rtol=0,
                              atol=1e-12)
        assert torch.allclose(nngp_, nngp(A, B, activation="relu"), rtol=0, atol=1e-12)


def _pair_inputs(va: float, vb: float, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.tensor([[math.sqrt(va), 0.0]], dtype=F64)
    z = torch.tensor([[c / math.sqrt(va), math.sqrt(vb - c * c / va)]], dtype=F64)
    return x, z


@pytest.mark.parametrize("act, fn", [
    (Relu(), torch.relu),
    (LeakyRelu(0.2), lambda u: torch.where(u > 0, u, 0.2 * u)),
    (Abs(), torch.abs),
    (ABRelu(-0.3, 1.7), lambda u: torch.where(u > 0, 1.7 * u, -0.3 * u)),
    (Erf(1.3, 0.7, 0.2), lambda u: 1.3 * torch.erf(0.7 * u) + 0.2),
    (Sin(1.1, 0.8, 0.3), lambda u: 1.1 * torch.sin(0.8 * u + 0.3)),
    (Gelu(), torch.nn.functional.gelu),
])
def test_closed_form_duals_match_quadrature(act, fn) -> None:  # type: ignore[no-untyped-def]
    def d1(u: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            u = u.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(fn(u).sum(), u)
        return g

    for va, vb, c in ((1.0, 0.5, 0.3), (0.7, 1.4, -0.5), (2.0, 0.3, 0.0), (1.5, 1.0, 1.2)):
        x, z = _pair_inputs(va, vb, c)
        k, dot = act.dual(*(torch.tensor([v], dtype=F64) for v in (c, va, vb)), True)
        assert abs(float(k) - float(gaussian_expectation(fn, fn, x, z))) < 1e-9
        assert abs(float(dot) - float(gaussian_expectation(d1, d1, x, z))) < 1e-9


def test_elementwise_quadrature_matches_closed_form_for_smooth_activation() -> None:
    c, va, vb = (torch.tensor([v], dtype=F64) for v in (0.4, 1.2, 0.8))
    k1, d1 = Erf().dual(c, va, vb, True)
    k2, d2 = Elementwise(torch.erf, nodes=96).dual(c, va, vb, True)
    assert abs(float(k1 - k2)) < 1e-12 and abs(float(d1 - d2)) < 1e-12


# -- neural-tangents reference values --------------------------------------------------


def _reference() -> dict:
    return json.loads(REFERENCE.read_text())


@pytest.mark.parametrize("name", sorted(_reference()))
def test_matches_neural_tangents_reference(name: str) -> None:
    ref = _reference()[name]
    x = torch.tensor(ref["x"], dtype=F64)
    K, T = DeepKernel(from_spec(ref["spec"])).both(x)
    for ours, theirs in ((K, ref["nngp"]), (T, ref["ntk"])):
        theirs = torch.tensor(theirs, dtype=F64)
        d = (ours - theirs).abs() / theirs.abs().max()
        # off the diagonal to rounding; on it neural-tangents' arccos sees a correlation of
        # 1 - O(eps) for coincident inputs (an O(sqrt(eps)) error), lazylab exactly 1
        assert float(d.fill_diagonal_(0).max()) < 1e-12
        assert float(((ours - theirs).diagonal().abs() / theirs.abs().max()).max()) < 1e-8


# -- finite networks ------------------------------------------------------------------


def test_dense_nngp_matches_a_wide_random_network() -> None:
    X = torch.randn(5, 3, dtype=F64, generator=torch.Generator().manual_seed(3))
    net = Serial(Dense(1.5, 0.2), Relu(), Dense(1.3, 0.1), Erf(), Dense(1.2))
    model = ntk_parametrize(net, (3,), 2000, out_dim=4000, seed=1)
    with torch.no_grad():
        f = model(X)
    emp = f @ f.T / f.shape[1]
    K = DeepKernel(net, kind="nngp")(X)
    assert float((emp - K).norm() / K.norm()) < 0.05


def test_empirical_ntk_error_falls_like_width_to_minus_half() -> None:
    from lazylab.kernels import empirical_ntk

    X = torch.randn(3, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    net = Serial(Dense(1.4, 0.1), Relu(), Dense(1.4, 0.1), Relu(), Dense(1.0))
    T = DeepKernel(net)(X)
    widths = (16, 64, 256, 1024)
    errs = []
    for w in widths:
        e = [float((empirical_ntk(ntk_parametrize(net, (3,), w, seed=s), X) - T).norm()
                   / T.norm()) for s in range(4)]
        errs.append(np.mean(e))
    slope = np.polyfit(np.log(widths), np.log(errs), 1)[0]
    assert -0.8 < slope < -0.3, (errs, slope)
    assert errs[-1] < errs[0] / 3


# -- PSD, symmetry, NaN -----------------------------------------------------------------


@pytest.mark.parametrize("depth", [50, 100])
@pytest.mark.parametrize("act", [Relu(), Erf(), Gelu()])
def test_deep_mlp_is_symmetric_psd_without_nan(depth: int, act) -> None:  # type: ignore
    X = torch.randn(12, 4, dtype=F64, generator=torch.Generator().manual_seed(depth))
    X = torch.cat([X, X[:2], torch.zeros(1, 4, dtype=F64)])  # coincident and zero inputs
    layers = [Dense(1.0, 0.1)]
    for _ in range(depth):
        layers += [act, Dense(math.sqrt(2), 0.1)]
    K, T = DeepKernel(Serial(*layers)).both(X)
    for M in (K, T):
        assert not M.isnan().any()
        assert torch.equal(M, M.T)
        ev = torch.linalg.eigvalsh(M)
        assert float(ev.min()) >= -1e-12 * float(ev.max())


def test_deep_cnn_with_global_pooling_is_symmetric_psd() -> None:
    X = torch.randn(6, 2, 5, 5, dtype=F64, generator=torch.Generator().manual_seed(0))
    X = torch.cat([X, X[:1]])
    layers = [Conv((3, 3), padding="same", W_std=1.4, b_std=0.1)]
    for _ in range(50):
        layers += [Relu(), Conv((3, 3), padding="circular", W_std=math.sqrt(2), b_std=0.1)]
    K, T = DeepKernel(Serial(*layers, GlobalAvgPool(), Dense())).both(X)
    for M in (K, T):
        assert not M.isnan().any() and torch.equal(M, M.T)
        ev = torch.linalg.eigvalsh(M)
        assert float(ev.min()) >= -1e-12 * float(ev.max())


# -- tiling, diag, dtype ----------------------------------------------------------------


def _cnn(head: str) -> Serial:
    end = [Flatten()] if head == "flatten" else [AvgPool((2, 2)), GlobalAvgPool()]
    return Serial(Conv((3, 3), padding="same", W_std=1.5, b_std=0.2), Relu(),
                  Conv((3, 3), strides=(1, 1), padding="circular", W_std=1.3), Gelu(),
                  *end, Dense())


@pytest.mark.parametrize("head", ["flatten", "gap"])
def test_tiles_of_uneven_size_give_the_same_matrix(head: str) -> None:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(11, 2, 6, 6, dtype=F64, generator=g)
    Z = torch.randn(7, 2, 6, 6, dtype=F64, generator=g)
    whole = DeepKernel(_cnn(head))
    per_pair = max(t.elems for t in whole.plan((2, 6, 6))) * 8
    tiled = DeepKernel(_cnn(head), memory_budget=per_pair * 24)  # 4 x 4: 4^2 + 2 * 4 = 24
    assert tiled.tile_size((2, 6, 6), 8) == 4
    for A, B in ((X, Z), (X, None)):
        assert torch.allclose(tiled(A, B), whole(A, B), rtol=1e-13, atol=0)
    assert torch.equal(tiled(X), tiled(X).T)
    assert torch.allclose(whole.diag(X), whole(X).diagonal(), rtol=1e-13, atol=0)


def test_float64_on_request_from_float32_inputs() -> None:
    X = torch.randn(4, 3)
    K = DeepKernel(arora(2, 3), dtype=F64)
    assert K(X).dtype == F64 and K.dtype == F64
    assert torch.allclose(K(X), DeepKernel(arora(2, 3))(X.double()), rtol=0, atol=0)


# -- refusals --------------------------------------------------------------------------


def test_budget_too_small_for_one_tile_names_the_costliest_layer() -> None:
    X = torch.randn(3, 1, 8, 8, dtype=F64)
    K = DeepKernel(_cnn("gap"), memory_budget="1KiB")
    with pytest.raises(MemoryError, match=r"memory_budget=1024 bytes cannot hold one 1x1 "
                                          r"tile: layer ABRelu\(a=0.0, b=1.0\) \(output "
                                          r"\(1, 8, 8\), full spatial covariance\) needs "
                                          r"about 1966080 bytes"):
        K(X)


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "both"}, "kind must be one of ntk, nngp; got 'both'"),
    ({"memory_budget": "lots"}, "memory_budget must be a positive byte count"),
    ({"memory_budget": -1}, "memory_budget must be a positive byte count; got -1"),
])
def test_bad_arguments_are_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DeepKernel(arora(1, 2), **kwargs)


def test_spatial_output_and_correlated_branches_are_refused() -> None:
    with pytest.raises(ValueError, match="end it in Flatten or GlobalAvgPool"):
        DeepKernel(Serial(Conv((3, 3)), Relu()))(torch.randn(2, 1, 5, 5))
    with pytest.raises(ValueError, match="2 branches do not end in Dense or Conv"):
        Residual([Relu()], [])
    with pytest.raises(ValueError, match="parameterization must be one of ntk, standard"):
        Dense(parameterization="mup")
    with pytest.raises(ValueError, match="padding must be one of same, valid, circular"):
        DeepKernel(Serial(Conv((3,), padding="full"), Flatten()))(torch.randn(2, 1, 5))


# -- lifting ----------------------------------------------------------------------------


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(self.act(x))


def test_module_lifts_to_the_same_kernel_as_the_description() -> None:
    model = nn.Sequential(nn.Conv2d(2, 8, 3, padding="same"), _Block(8), nn.GELU(),
                          nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 16), nn.LayerNorm(16), nn.Tanh(), nn.Linear(16, 1))
    desc = Serial(Conv((3, 3), (1, 1), "same", 1.3, 0.2, width=8),
                  Residual(Serial(), Serial(Relu(), Conv((3, 3), (1, 1), (1, 1), 1.3, 0.2,
                                                         width=8))),
                  Gelu(), AvgPool((2, 2), (2, 2), (0, 0)), GlobalAvgPool(),
                  Dense(1.3, 0.2, width=16), LayerNorm(1e-5),
                  Elementwise(torch.tanh), Dense(1.3, 0.2, width=1))
    X = torch.randn(4, 2, 6, 6, dtype=F64)
    lifted = kernel_from_module(model, W_std=1.3, b_std=0.2)
    assert torch.allclose(lifted(X), DeepKernel(desc)(X), rtol=1e-14, atol=0)
    assert len(layers_from_module(model).layers) == 10


@pytest.mark.parametrize("layer, name", [
    (nn.BatchNorm1d(4), "BatchNorm1d"), (nn.MaxPool1d(2), "MaxPool1d"),
    (nn.MultiheadAttention(4, 1), "MultiheadAttention"),
])
def test_unsupported_layers_are_refused_in_one_line(layer: nn.Module, name: str) -> None:
    model = nn.Sequential(nn.Linear(4, 4), layer, nn.Linear(4, 1))
    if name == "MultiheadAttention":
        class Att(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.att = layer

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.att(x, x, x)[0]
        model = nn.Sequential(nn.Linear(4, 4), Att())
    with pytest.raises(UnsupportedLayer) as info:
        kernel_from_module(model)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"kernel_from_module: {name} has no infinite-width rule; "
                          "supported: Linear, Conv1d, Conv2d")


def test_residual_branches_do_not_share_state() -> None:
    # layers overwrite their input state in place: each branch must get its own copy
    X = torch.randn(5, 3, dtype=F64, generator=torch.Generator().manual_seed(2))
    head = Serial(Dense(1.2, 0.1), Relu())
    K1, T1 = DeepKernel(head).both(X)
    K, T = DeepKernel(Serial(head, Residual([Dense(1.3, 0.2)], []))).both(X)
    # K' = K + (W^2 K + b^2), Theta' = Theta + (W^2 K + b^2 + W^2 Theta)
    assert torch.allclose(K, K1 + 1.69 * K1 + 0.04, rtol=1e-14, atol=0)
    assert torch.allclose(T, T1 + 1.69 * K1 + 0.04 + 1.69 * T1, rtol=1e-14, atol=0)


class _Functional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 3, padding=1, padding_mode="circular", bias=False)
        self.fc = nn.Linear(4 * 7, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        return self.fc(torch.flatten(h + self.conv(h), 1))


def test_traced_functions_and_residual_sums_lift() -> None:
    desc = Serial(Conv((3,), (1,), (1,), 1.0, None, width=4, padding_mode="circular"), Relu())
    desc = Serial(desc, Residual([], [Conv((3,), (1,), (1,), 1.0, None, width=4,
                                           padding_mode="circular")]),
                  Flatten(), Dense(1.0, 0.5, width=1))
    X = torch.randn(3, 2, 7, dtype=F64)
    lifted = kernel_from_module(_Functional(), b_std=0.5)
    assert torch.allclose(lifted(X), DeepKernel(desc)(X), rtol=1e-14, atol=0)


def test_flatten_of_other_dims_is_refused() -> None:
    class Bad(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flatten(x, 2)

    with pytest.raises(UnsupportedLayer, match=r"flatten\(start_dim=2\) \(only flatten"):
        layers_from_module(Bad())
