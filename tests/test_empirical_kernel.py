"""EmpiricalKernel: the empirical NTK of a module as a kernel object, taken by the estimators
and kernel regression like a closed form."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.estimators import KernelRegressor
from lazylab.kernels import EmpiricalKernel, Kernel, empirical_ntk


def _mlp(outputs: int = 1, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, outputs)).double()


def _x(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_it_is_a_kernel_equal_to_empirical_ntk() -> None:
    net, X, Z = _mlp(), _x(7, 1), _x(5, 2)
    K = EmpiricalKernel(net)
    assert isinstance(K, Kernel) and K.dtype == torch.float64
    assert torch.equal(K(X, Z), empirical_ntk(net, X, Z))
    full = K(X)
    assert torch.equal(full, full.T) or torch.allclose(full, full.T, rtol=1e-14, atol=0)
    assert torch.allclose(EmpiricalKernel(net, block=3).diag(X), full.diagonal(),
                          rtol=1e-12, atol=0)


def test_several_outputs_give_the_trace_or_one_output() -> None:
    net, X = _mlp(outputs=3), _x(6, 3)
    per = [empirical_ntk(net, X, output=o) for o in range(3)]
    assert torch.allclose(EmpiricalKernel(net)(X), sum(per), rtol=1e-12, atol=0)
    assert torch.allclose(EmpiricalKernel(net, output=1)(X), per[1], rtol=1e-12, atol=0)


def test_kernel_regression_on_it_interpolates_its_training_targets() -> None:
    """n = 20 points, P = 1249 parameters: the kernel is full rank, so ridge 1e-10 fits y."""
    net, X = _mlp(), _x(20, 4)
    y = np.sin(X.sum(1).numpy())
    reg = KernelRegressor(kernel=EmpiricalKernel(net), ridge=1e-10).fit(X.numpy(), y)
    assert np.abs(reg.predict(X.numpy()) - y).max() < 1e-5


@pytest.mark.parametrize("bad", [{"block": 0}, {"block": True}])
def test_bad_arguments_name_the_parameter(bad: dict) -> None:
    with pytest.raises(ValueError, match="block"):
        EmpiricalKernel(_mlp(), **bad)
    with pytest.raises(ValueError, match="net"):
        EmpiricalKernel("not a module")  # type: ignore[arg-type]
