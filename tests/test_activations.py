"""Activations: derivatives, Hermite coefficients, registry errors."""

import math

import numpy as np
import pytest
import torch

from lazylab.activations import ACTIVATIONS, _gauss_nodes, get_activation, hermite_e

SQ2PI = math.sqrt(2 * math.pi)


def test_relu_hermite_coefficients_known():
    # E[relu(G) He_k(G)] from the half-moments E[G^j 1{G>0}]: 1/sqrt(2pi), 1/2, ...
    lam = get_activation("relu").hermite(4)
    expected = [1 / SQ2PI, 0.5, 1 / SQ2PI, 0.0, -1 / SQ2PI]
    np.testing.assert_allclose(lam, expected, atol=1e-12)


def test_polynomial_hermite_coefficients_exact():
    # u^2 = He_2 + He_0 -> lambda_0 = 1, lambda_2 = 2!; u^2 - 1 = He_2.
    np.testing.assert_allclose(get_activation("quad").hermite(4), [1, 0, 2, 0, 0], atol=1e-12)
    np.testing.assert_allclose(get_activation("quad_centered").hermite(3), [0, 0, 2, 0],
                               atol=1e-12)
    # relu^3 / 6: lambda_3 = E[sigma'''(G)] = P(G > 0) = 1/2 (Stein).
    assert get_activation("relu3_6").hermite(3)[3] == pytest.approx(0.5, abs=1e-12)


def test_sin_hermite_and_parseval():
    # Stein: lambda_k = E[sin^(k)(G)] = (-1)^((k-1)/2) e^{-1/2} for odd k, 0 for even k;
    # Parseval: sum_k lambda_k^2 / k! = E[sin(G)^2] = (1 - e^{-2}) / 2.
    # Quadrature is exact to ~1e-13 at low k; He_k's cancellations cost ~k! eps at k ~ 13.
    lam = get_activation("sin").hermite(13)
    for k, v in enumerate(lam):
        want = 0.0 if k % 2 == 0 else (-1) ** ((k - 1) // 2) * math.exp(-0.5)
        assert v == pytest.approx(want, abs=1e-12 if k <= 7 else 1e-8)
    parseval = sum(v**2 / math.factorial(k) for k, v in enumerate(lam))
    assert parseval == pytest.approx((1 - math.exp(-2)) / 2, abs=1e-10)
    assert get_activation("sin").second_moment() == pytest.approx((1 - math.exp(-2)) / 2,
                                                                  abs=1e-12)


@pytest.mark.parametrize("name", ["tanh", "erf", "sigmoid", "softplus", "sin"])
def test_stein_identity_smooth(name):
    # For smooth sigma, lambda_k = E[sigma^(k)(G)] (Gaussian integration by parts).
    act = get_activation(name)
    nodes, weights = _gauss_nodes()
    u = torch.from_numpy(nodes)
    lam = act.hermite(3)
    for k in range(1, 4):
        assert float(np.sum(weights * act.deriv(u, k).numpy())) == pytest.approx(lam[k],
                                                                                abs=1e-10)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("order", [1, 2, 3])
def test_derivatives_match_autograd(name, order):
    act = get_activation(name)
    # Stay away from the relu kink at 0, where derivatives are one-sided.
    u = torch.linspace(-2.3, 2.1, 23, dtype=torch.float64)
    u = u[u.abs() > 0.05]
    x = u.clone().requires_grad_(True)
    y = act.fn(x)
    for _ in range(order):
        if not y.requires_grad:  # a polynomial differentiated past its degree
            y = torch.zeros_like(x)
            break
        (y,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    torch.testing.assert_close(act.deriv(u, order), y.detach(), atol=1e-10, rtol=1e-10)


def test_fourth_derivative_fallback_matches_closed_form_of_sin():
    u = torch.linspace(-2, 2, 9, dtype=torch.float64)
    # sin'''' = sin, computed by nested autograd beyond the closed forms.
    torch.testing.assert_close(get_activation("sin").deriv(u, 4), torch.sin(u))
    # relu powers have closed forms at every order: (relu^3/6)'''' = 0 a.e.
    assert torch.all(get_activation("relu3_6").deriv(u, 4) == 0)


def test_hermite_recurrence_orthogonality():
    nodes, weights = _gauss_nodes()
    for j in range(6):
        for k in range(6):
            inner = float(np.sum(weights * hermite_e(j, nodes) * hermite_e(k, nodes)))
            assert inner == pytest.approx(math.factorial(k) if j == k else 0.0, abs=1e-9)


def test_lambda_tilde_relu():
    # E[relu^2] - lambda_1^2 = 1/2 - 1/4.
    assert get_activation("relu").lambda_tilde() == pytest.approx(0.25, abs=1e-12)


def test_unknown_activation_message():
    with pytest.raises(ValueError, match="activation must be one of"):
        get_activation("swish42")
    with pytest.raises(ValueError, match="order"):
        get_activation("relu").deriv(torch.zeros(2), -1)
