"""The fan-in product of lazylab.kernels.deep (neural-tangents' FanInProd): the closed form,
its finite-width limit, the lifting of ``a(x) * b(x)`` and the independence check."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.kernels import empirical_ntk
from lazylab.kernels.deep import (
    DeepKernel,
    Dense,
    Erf,
    Product,
    Relu,
    Serial,
    from_spec,
    kernel_from_module,
    ntk_parametrize,
)

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64


def _x(n: int = 4, d: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, dtype=F64, generator=torch.Generator().manual_seed(seed))


def _branch_nets() -> tuple[Serial, Serial, Serial]:
    trunk = Serial(Dense(1.3, 0.2), Relu())
    return trunk, Serial(Dense(1.2, 0.1), Relu()), Serial(Dense(1.1, 0.3), Erf())


def test_product_is_the_product_rule_of_the_branches() -> None:
    X = _x()
    trunk, a, b = _branch_nets()
    # each branch's kernels, read out by a unit-scale dense layer without bias: K_out = K_i
    # and Theta_out = K_i + Theta_i, so K_i = K_out and Theta_i = Theta_out - K_out
    Ka, Ta = DeepKernel(Serial(trunk, a, Dense(1.0))).both(X)
    Kb, Tb = DeepKernel(Serial(trunk, b, Dense(1.0))).both(X)
    K, T = DeepKernel(Serial(trunk, Product(a, b), Dense(1.0))).both(X)
    Ta, Tb = Ta - Ka, Tb - Kb
    assert torch.allclose(K, Ka * Kb, rtol=1e-13, atol=0)
    assert torch.allclose(T - K, Ka * Tb + Ta * Kb, rtol=1e-12, atol=0)
    # the diagonal alone (paired blocks) agrees with the matrix
    diag = DeepKernel(Serial(trunk, Product(a, b), Dense(1.0))).diag(X)
    assert torch.allclose(diag, T.diagonal(), rtol=1e-13, atol=0)


def test_empirical_ntk_of_a_wide_product_network_tends_to_the_closed_form() -> None:
    X = _x(3, 3, 1)
    trunk, a, b = _branch_nets()
    net = Serial(trunk, Product(a, b), Dense(1.0))
    T = DeepKernel(net)(X)
    widths = (64, 256, 1024)
    errs = []
    for w in widths:
        e = [float((empirical_ntk(ntk_parametrize(net, (3,), w, seed=s), X) - T).norm()
                   / T.norm()) for s in range(6)]
        errs.append(float(np.mean(e)))
    # measured: 0.52, 0.15, 0.05 (a product's fluctuations fall at least like width^-1/2)
    slope = np.polyfit(np.log(widths), np.log(errs), 1)[0]
    assert slope < -0.4, (errs, slope)
    # within a few width^-1/2 at the largest width, and far from it for a wrong rule
    assert errs[-1] < 3 / np.sqrt(widths[-1]), errs
    Ka, Ta = DeepKernel(Serial(trunk, a, Dense(1.0))).both(X)
    Kb, Tb = DeepKernel(Serial(trunk, b, Dense(1.0))).both(X)
    K = Ka * Kb
    wrong = K + Ka * (Tb - Kb)  # the product rule without its Theta_1 K_2 term
    assert float((wrong - T).norm() / T.norm()) > 3 / np.sqrt(widths[-1])


def test_a_product_of_two_weight_free_branches_is_refused() -> None:
    with pytest.raises(ValueError, match="Product: 2 branches have no Dense or Conv layer"):
        Product([Relu()], [])
    # a skip connection times a branch with weights is exact, and so accepted
    Product([], [Dense(1.0), Relu()])


class _Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 8)
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc(x))
        return self.out(torch.relu(self.a(h)) * torch.erf(self.b(h)))


def test_a_module_product_lifts_to_the_description_and_the_spec() -> None:
    X = _x()
    desc = Serial(Dense(1.2, 0.4, width=8), Relu(),
                  Product([Dense(1.2, 0.4, width=8), Relu()], [Dense(1.2, 0.4, width=8), Erf()]),
                  Dense(1.2, 0.4, width=1))
    lifted = kernel_from_module(_Gated(), W_std=1.2, b_std=0.4)
    assert torch.allclose(lifted(X), DeepKernel(desc)(X), rtol=1e-14, atol=0)
    dense = {"type": "Dense", "W_std": 1.2, "b_std": 0.4}
    spec = from_spec([dense, {"type": "ABRelu", "a": 0.0, "b": 1.0},
                      {"type": "Product", "branches": [[dense, {"type": "ABRelu", "a": 0.0,
                                                                "b": 1.0}],
                                                       [dense, {"type": "Erf"}]]}, dense])
    assert torch.allclose(DeepKernel(spec)(X), DeepKernel(desc)(X), rtol=1e-14, atol=0)
