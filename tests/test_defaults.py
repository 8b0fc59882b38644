"""Defaults that work as the README says, each checked numerically.

``lazylab.models.ntk_parametrize(net)``, called with no options, puts a standard
``nn.Linear`` stack into the NTK parametrization "so its empirical NTK meets the closed forms
without hand scaling" (README). For the two-layer ReLU net ``Linear(d, m), ReLU, Linear(m, 1)``
that parametrization is Arora et al. (2019), Eq. (1):

    f(x) = m^-1/2 sum_r a_r relu(w_r . x),   w_r ~ N(0, I_d), a_r ~ N(0, 1),

whose all-parameter NTK is the mean over neurons of i.i.d. terms

    t_r(x, x') = a_r^2 (x . x') 1{w_r . x > 0} 1{w_r . x' > 0} + relu(w_r . x) relu(w_r . x'),

with expectation ``lazylab.kernels.ntk(X, trained="both")``. The tests check the identity
(empirical NTK = mean of t_r, to rounding) and the limit (each entry within a few standard
errors std_r(t_r) / sqrt(m) of the closed form: the Monte Carlo tolerance comes from the width
and the network's own neurons, not from a tuned constant).
"""

from __future__ import annotations

import math

import pytest
import torch

from lazylab.kernels import empirical_ntk, ntk
from lazylab.models import ntk_parametrize

D, N, WIDTH = 10, 8, 16384
#: Standard errors allowed per entry: with N (N + 1) / 2 = 36 distinct entries, a Gaussian
#: deviation beyond 5 standard errors has probability below 36 x 6e-7 = 2e-5.
Z_MAX = 5.0


def _inputs() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.nn.functional.normalize(torch.randn(N, D, generator=g, dtype=torch.float64),
                                         dim=1)


def _readme_net(seed: int, **options: bool) -> torch.nn.Sequential:
    """``ntk_parametrize(net)`` exactly as the README calls it (the global generator seeded in
    a forked RNG state, so the test is deterministic and leaves the global state alone)."""
    net = torch.nn.Sequential(torch.nn.Linear(D, WIDTH), torch.nn.ReLU(),
                              torch.nn.Linear(WIDTH, 1)).double()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return ntk_parametrize(net, **options)


def _neuron_terms(net: torch.nn.Sequential, X: torch.Tensor) -> torch.Tensor:
    """t_r(x_i, x_j) of the module docstring for every neuron r: shape (m, N, N), from the
    trained N(0, 1) variables (the parametrization's ``original`` tensors)."""
    W = net[0].parametrizations.weight.original            # (m, d): w_r
    a = net[2].parametrizations.weight.original[0]          # (m,): a_r
    pre = X @ W.T                                           # (N, m): w_r . x_i
    on = (pre > 0).to(X.dtype)
    act = pre.clamp_min(0)
    gram = X @ X.T
    return ((a**2)[:, None, None] * gram * on.T[:, :, None] * on.T[:, None, :]
            + act.T[:, :, None] * act.T[:, None, :])


def test_ntk_parametrize_default_is_the_neuron_average_of_arora_eq_1():
    """The identity behind the README's sentence: with its defaults, the all-parameter
    empirical NTK of the parametrized net is exactly the mean of t_r (no factor of d, m or
    sigma to fix by hand); any other scaling of either layer breaks it."""
    X = _inputs()
    net = _readme_net(0)
    K = empirical_ntk(net, X, trained="all")
    torch.testing.assert_close(K, _neuron_terms(net, X).mean(0), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ntk_parametrize_default_meets_the_closed_form_within_monte_carlo_error(seed):
    """README: ``ntk_parametrize(net)`` "so its empirical NTK meets the closed forms without
    hand scaling". Every entry of the empirical NTK is within Z_MAX standard errors
    std_r(t_r) / sqrt(m) of ``ntk(X, trained="both")`` (relative error about 2 / sqrt(m) in
    Frobenius norm, measured 1.2-2.7 / sqrt(m) over 16 seeds at m = 4096 and 16384)."""
    X = _inputs()
    net = _readme_net(seed)
    K = empirical_ntk(net, X, trained="all")
    H = ntk(X, trained="both")
    se = _neuron_terms(net, X).std(0) / math.sqrt(WIDTH)
    z = ((K - H).abs() / se).max()
    assert z < Z_MAX, (float(z), float((K - H).norm() / H.norm()))
    assert float((K - H).norm() / H.norm()) < 6 / math.sqrt(WIDTH)


def test_scale_input_layer_is_the_kernel_of_x_over_sqrt_d():
    """The non-default option divides the input layer by sqrt(d): its limit is the kernel of
    x / sqrt(d), which is far from ``ntk(X)`` (relative 0.899 at d = 10): the reason the
    default is False."""
    X = _inputs()
    K = empirical_ntk(_readme_net(0, scale_input_layer=True), X, trained="all")
    H, Hd = ntk(X, trained="both"), ntk(X / math.sqrt(D), trained="both")
    assert float((K - Hd).norm() / Hd.norm()) < 6 / math.sqrt(WIDTH)
    assert float((K - H).norm() / H.norm()) > 0.5
