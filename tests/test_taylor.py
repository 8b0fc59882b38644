"""Taylor models: closed form vs torch.func, remainder orders, homogeneity, gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.models import (
    LinearizedModel,
    QuadraticModel,
    TaylorModel,
    TwoLayerNet,
    taylor_terms,
)

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mlp(seed: int) -> nn.Module:
    torch.manual_seed(0)  # nn.Linear's own init uses the global RNG; overwrite it below
    mlp = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 4), nn.Tanh(),
                        nn.Linear(4, 1), nn.Flatten(0)).to(F64)
    g = _gen(seed)
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64))
    return mlp


@pytest.mark.parametrize("activation", ["tanh", "sin", "sigmoid", "relu3_6", "quad"])
@pytest.mark.parametrize("init", ["gaussian", "symmetric"])
def test_closed_form_matches_torch_func(activation, init):
    # Both compute (1/j!) d^j/dt^j f(theta0 + tU) exactly (no truncation), so they agree to
    # rounding: 1e-10 in float64.
    g = _gen(1)
    net = TwoLayerNet(4, 8, activation=activation, init=init, a_init="gaussian",
                      train_second=True, bias=True, dtype=F64, generator=g)
    X = torch.randn(5, 4, generator=g, dtype=F64)
    fast = TaylorModel(net, order=4, init_std=0.7, generator=g)
    slow = TaylorModel(net, order=4, path="autodiff")
    assert fast.path == "closed_form" and fast.wrt == ("W", "a", "c")
    dirs = {k: v.detach() for k, v in fast.direction.items()}
    for a, b in zip(fast.terms(X), slow.terms(X, dirs), strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-10, atol=1e-10)
    # the first-layer-only direction as well
    U = dirs["W"]
    ref = taylor_terms(net, None, {"W": U}, X, 4)
    for a, b in zip(net.taylor_terms(X, U, 4), ref, strict=True):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-10, atol=1e-10)


def _remainder_slope(full, terms, k: int) -> float:
    ts = 0.05 * 2.0 ** -np.arange(6)
    rem = [float((full(t) - sum(t**j * f for j, f in enumerate(terms[: k + 1]))).abs().max())
           for t in ts]
    return float(np.polyfit(np.log(ts), np.log(rem), 1)[0])


# relu3_6 is C^2 with a jump in sigma''' at 0: its order-3 expansion is exact once no
# preactivation crosses 0, so only k = 1, 2 are meaningful for it.
@pytest.mark.parametrize("activation,k", [("tanh", 1), ("tanh", 2), ("tanh", 3), ("sin", 1),
                                          ("sin", 2), ("sin", 3), ("relu3_6", 1),
                                          ("relu3_6", 2)])
def test_taylor_remainder_order_two_layer(activation, k):
    # |f(W0 + tU) - sum_{j<=k} t^j f^(j)| = |f^(k+1)| t^(k+1) (1 + O(t)): log-log slope k+1.
    g = _gen(2)
    net = TwoLayerNet(5, 20, activation=activation, dtype=F64, generator=g)
    X = torch.randn(6, 5, generator=g, dtype=F64)
    tm = TaylorModel(net, order=k, init_std=1.0, generator=g)
    with torch.no_grad():
        terms = tm.terms(X)
        slope = _remainder_slope(lambda t: tm.network(X, t), terms, k)
    assert abs(slope - (k + 1)) < 0.15, slope


@pytest.mark.parametrize("k", [1, 2, 3])
def test_taylor_remainder_order_generic_module(k):
    mlp = _mlp(3)
    X = torch.randn(6, 3, generator=_gen(4), dtype=F64)
    tm = TaylorModel(mlp, order=k, init_std=0.5, generator=_gen(5))
    assert tm.path == "autodiff" and len(tm.wrt) == 6
    with torch.no_grad():
        slope = _remainder_slope(lambda t: tm.network(X, t), tm.terms(X), k)
    assert abs(slope - (k + 1)) < 0.15, slope


def test_linearized_and_quadratic_models():
    g = _gen(6)
    net = TwoLayerNet(4, 10, activation="tanh", init="symmetric", dtype=F64, generator=g)
    X = torch.randn(7, 4, generator=g, dtype=F64)
    lin = LinearizedModel(net)
    assert {k for k, p in lin.named_parameters() if p.requires_grad} == {"_dirs.0"}
    torch.testing.assert_close(lin(X).detach(), net(X).detach())  # U starts at 0: f = f0
    U = torch.randn(10, 4, generator=g, dtype=F64)
    f0, fL, fQ = lin.terms(X, U) + [QuadraticModel(net).terms(X, U)[2]]
    # f_L is <phi(x), U> with the tangent features (Nichani et al. 2022, Eq. (13))
    torch.testing.assert_close(fL, (net.tangent_features(X) * U).sum((1, 2)), rtol=1e-12,
                               atol=1e-13)
    # homogeneity: f_L(2U) = 2 f_L(U), f_Q(2U) = 4 f_Q(U)
    torch.testing.assert_close(lin.terms(X, 2 * U)[1], 2 * fL, rtol=1e-12, atol=1e-13)
    quad = QuadraticModel(net, include_linear=True)
    with torch.no_grad():
        quad.U.copy_(U)
        lin.U.copy_(U)
    torch.testing.assert_close(quad(X), fL + fQ, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(lin(X), f0 + fL, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(quad.terms(X, 2 * U)[2], 4 * fQ, rtol=1e-12, atol=1e-13)
    # Euler's identity for the 2-homogeneous f_Q: <grad_U f_Q(x), U> = 2 f_Q(x) (Bai & Lee 2020,
    # Sec. 4.1)
    qonly = QuadraticModel(net)
    with torch.no_grad():
        qonly.U.copy_(U)
    (grad,) = torch.autograd.grad(qonly(X[:1]).sum(), qonly.U)
    assert float((grad * U).sum()) == pytest.approx(2 * float(fQ[0]), rel=1e-12, abs=1e-13)


def test_taylor_model_base_is_a_frozen_copy():
    g = _gen(7)
    net = TwoLayerNet(3, 6, activation="tanh", dtype=F64, generator=g)
    X = torch.randn(4, 3, generator=g, dtype=F64)
    tm = TaylorModel(net, order=2)
    before = tm(X).detach().clone()
    with torch.no_grad():
        net.W.add_(1.0)  # training the original afterwards must not move theta0
    torch.testing.assert_close(tm(X).detach(), before, rtol=0, atol=0)
    trainable = [p for p in tm.parameters() if p.requires_grad]
    assert len(trainable) == 1 and trainable[0] is tm.U


@pytest.mark.parametrize("path", ["closed_form", "autodiff"])
def test_taylor_model_gradients_match_finite_differences(path):
    g = _gen(8)
    net = TwoLayerNet(4, 9, activation="sin", a_init="gaussian", train_second=True,
                      dtype=F64, generator=g)
    X = torch.randn(6, 4, generator=g, dtype=F64)
    y = torch.randn(6, generator=g, dtype=F64)
    tm = TaylorModel(net, order=3, terms=(1, 2, 3), path=path, init_std=0.3, generator=g)
    params = list(tm.direction.values())

    def loss():
        return ((tm(X) - y) ** 2).mean()

    grads = torch.autograd.grad(loss(), params)
    h = 1e-5
    for _ in range(3):
        dirs = [torch.randn(p.shape, generator=g, dtype=F64) for p in params]
        exact = sum(float((gr * v).sum()) for gr, v in zip(grads, dirs, strict=True))
        with torch.no_grad():
            for p, v in zip(params, dirs, strict=True):
                p.add_(h * v)
            up = float(loss())
            for p, v in zip(params, dirs, strict=True):
                p.sub_(2 * h * v)
            down = float(loss())
            for p, v in zip(params, dirs, strict=True):
                p.add_(h * v)
        # truncation h^2 |L'''| / 6 ~ 1e-10 and rounding eps |L| / h ~ 1e-11 << 1e-6
        assert abs((up - down) / (2 * h) - exact) <= 1e-6 * max(abs(exact), 1e-3)


def test_taylor_term_values_for_a_polynomial_activation():
    # sigma(u) = u^2: f(W0 + tU) = s sum_r a_r (z_r + t v_r)^2 has exactly three terms
    # s a.(z^2), 2 s a.(z v), s a.(v^2) and nothing beyond order 2.
    g = _gen(9)
    net = TwoLayerNet(3, 5, activation="quad", dtype=F64, generator=g)
    X = torch.randn(4, 3, generator=g, dtype=F64)
    U = torch.randn(5, 3, generator=g, dtype=F64)
    Z, V = X @ net.W.detach().T, X @ U.T
    s, a = net.scale, net.a
    expected = [s * (Z**2) @ a, 2 * s * (Z * V) @ a, s * (V**2) @ a,
                torch.zeros(4, dtype=F64)]
    for got, want in zip(net.taylor_terms(X, U, 3), expected, strict=True):
        torch.testing.assert_close(got.detach(), want, rtol=1e-12, atol=1e-12)
    assert math.isclose(float(net.taylor_terms(X, U, 0)[0][0].detach()), float(expected[0][0]))


def test_taylor_model_rejects_bad_input():
    net = TwoLayerNet(3, 4)
    with pytest.raises(ValueError, match="order"):
        TaylorModel(net, order=-1)
    with pytest.raises(ValueError, match="terms"):
        TaylorModel(net, order=2, terms=(3,))
    with pytest.raises(ValueError, match="wrt"):
        TaylorModel(net, order=1, wrt=("V",))
    with pytest.raises(ValueError, match="closed_form"):
        TaylorModel(_mlp(0), order=1, path="closed_form")
    with pytest.raises(ValueError, match="generator"):
        TaylorModel(net, order=1, init_std=0.1)
    with pytest.raises(ValueError, match="shape"):
        taylor_terms(net, None, {"W": torch.zeros(2, 3)}, torch.zeros(1, 3), 1)


def test_linearized_fast_path_equals_nested_jvp_in_value_and_gradient():
    """The first-order Taylor model of a generic module (one jvp forward, one vjp backward)
    gives the value and the gradient in U of the reverse-over-forward path, to 1e-12."""
    g = torch.Generator().manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                              torch.nn.Tanh(), torch.nn.Linear(16, 1)).double()
    lin = LinearizedModel(net, init_std=0.1, generator=g)
    X = torch.randn(11, 5, generator=g, dtype=torch.float64)
    y = torch.randn(11, 1, generator=g, dtype=torch.float64)
    assert lin._fast_linear(X)
    fast = lin(X)
    gf = torch.autograd.grad(((fast - y) ** 2).mean(), list(lin.direction.values()))
    slow = sum(taylor_terms(lin.base, None, lin.direction, X, 1))
    gs = torch.autograd.grad(((slow - y) ** 2).mean(), list(lin.direction.values()))
    torch.testing.assert_close(fast, slow, rtol=1e-12, atol=1e-12)
    for a, b in zip(gf, gs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
