"""Randomized networks of Bai & Lee (2020): exact moments vs enumeration and Monte Carlo."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from lazylab.models import (
    HigherOrderRandomizedNet,
    SignRandomizedNet,
    TwoLayerNet,
    moment_matched_pair,
)

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _net(d: int, m: int, activation: str, seed: int, **kw) -> tuple[TwoLayerNet, torch.Tensor]:
    g = _gen(seed)
    net = TwoLayerNet(d, m, activation=activation, init="symmetric", dtype=F64, generator=g,
                      **kw)
    return net, torch.randn(5, d, generator=g, dtype=F64)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_moment_matched_pair_moments(k):
    pair = moment_matched_pair(k)
    assert math.isclose(sum(pair.plus_probs), 1.0) and math.isclose(sum(pair.minus_probs), 1.0)
    assert min(pair.plus_probs + pair.minus_probs) > 0
    for j in range(k):
        assert abs(pair.moment_gap(j)) < 1e-12
    assert abs(pair.moment_gap(k) - 1.0) < 1e-12


def test_moment_matched_pair_special_cases():
    two = moment_matched_pair(2)  # the sign randomization
    assert two.plus_nodes == (-1.0, 1.0) and two.plus_probs == (0.5, 0.5)
    assert two.minus_nodes == (0.0,) and two.minus_probs == (1.0,)
    three = moment_matched_pair(3)  # spec Sec. 2.7: {-0.437: 3/4, 1.310: 1/4} and P- = -P+
    np.testing.assert_allclose(three.plus_nodes, [-0.43679, 1.31037], atol=1e-5)
    np.testing.assert_allclose(three.plus_probs, [0.75, 0.25])
    np.testing.assert_allclose(three.minus_nodes, [-n for n in three.plus_nodes[::-1]])
    with pytest.raises(ValueError, match="k must be"):
        moment_matched_pair(0)


def test_sign_group_enumeration_m6():
    # Average over all 2^6 sign patterns = the exact expectation over Sigma; odd Taylor terms
    # average to 0 and even terms are sign-invariant (z^2 = 1), so E f^(j) = f^(j)(U) for even j.
    net, X = _net(3, 6, "sin", 1, a_init="gaussian")
    rnet = SignRandomizedNet(net, init_std=0.8, generator=_gen(2))
    signs = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=6)), dtype=F64)
    with torch.no_grad():
        outs = torch.stack([rnet(X, s) for s in signs])
        terms = [torch.stack(t) for t in zip(*(rnet.terms(X, 4, s) for s in signs), strict=True)]
        plain = rnet.terms(X, 4)
        torch.testing.assert_close(outs.mean(0), rnet.expectation(X), rtol=0, atol=1e-12)
        torch.testing.assert_close(outs.var(0, unbiased=False), rnet.variance(X), rtol=0,
                                   atol=1e-12)
        for j in range(5):
            if j % 2:
                assert float(terms[j].mean(0).abs().max()) < 1e-12
            else:
                assert float((terms[j] - plain[j]).abs().max()) < 1e-12
        for j, e in enumerate(rnet.expected_terms(X, 4)):
            torch.testing.assert_close(e, terms[j].mean(0), rtol=0, atol=1e-12)


def test_sign_expectation_is_the_even_taylor_series():
    # E_Sigma f(W0 + tU Sigma) - [f0 + t^2 f^(2) + t^4 f^(4)] = t^6 f^(6) + ...: slope 6.
    net, X = _net(4, 10, "sin", 3)
    rnet = SignRandomizedNet(net, init_std=1.0, generator=_gen(4))
    U = rnet.U.detach().clone()
    with torch.no_grad():
        f0, _, f2, _, f4 = rnet.terms(X, 4)
        ts = 0.2 * 2.0 ** -np.arange(5)
        rems = []
        for t in ts:
            rnet.U.copy_(t * U)
            rems.append(float((rnet.expectation(X) - f0 - t**2 * f2 - t**4 * f4).abs().max()))
    slope = np.polyfit(np.log(ts), np.log(rems), 1)[0]
    assert abs(slope - 6) < 0.15, slope


def test_sign_monte_carlo_matches_exact_moments():
    net, X = _net(5, 100, "tanh", 5, a_init="ones")
    rnet = SignRandomizedNet(net, init_std=100**-0.25, generator=_gen(6))
    n_draws = 3000
    with torch.no_grad():
        mean, se = rnet.monte_carlo(X, n_draws, generator=_gen(7))
        exact_se = (rnet.variance(X) / n_draws).sqrt()
        # mean within 4 standard errors (5 points: false-alarm probability ~3e-4)
        assert ((mean - rnet.expectation(X)).abs() <= 4 * exact_se).all()
        # f is a sum of 100 independent neuron terms, close to Gaussian, so the sample standard
        # deviation has relative standard error ~ sqrt(1 / (2N)) ~ 1.3%; allow 6% (4.6 SE)
        np.testing.assert_allclose((se / exact_se).numpy(), 1.0, atol=0.06)
        # squared-error identity E (y - f)^2 = (y - E f)^2 + Var f, by Monte Carlo as well
        y = torch.ones(5, dtype=F64)
        outs = rnet.sample_outputs(X, n_draws, generator=_gen(7))  # the draws behind `mean`
        torch.testing.assert_close(outs.mean(0), mean, rtol=0, atol=1e-14)
        sq = (y - outs) ** 2
        assert ((sq.mean(0) - rnet.expected_squared_error(X, y)).abs()
                <= 4 * sq.std(0) / math.sqrt(n_draws)).all()


def test_sign_forward_draws_and_reproducibility():
    net, X = _net(3, 8, "tanh", 9)
    rnet = SignRandomizedNet(net, init_std=0.5, generator=_gen(10))
    with torch.no_grad():
        a, b = rnet(X, generator=_gen(11)), rnet(X, generator=_gen(11))
        assert torch.equal(a, b)
        g = _gen(12)
        draws = torch.stack([rnet(X, generator=g) for _ in range(5)])
        assert draws.std(0).max() > 0  # a fresh Sigma per call
        ones = torch.ones(8, dtype=F64)
        torch.testing.assert_close(rnet(X, ones), net.evaluate(X, net.W + rnet.U))
    s = rnet.sample_signs(100, generator=_gen(13))
    assert s.shape == (100, 8) and set(s.unique().tolist()) == {-1.0, 1.0}
    with pytest.raises(ValueError, match="generator"):
        SignRandomizedNet(net)(X)


def test_sign_randomized_gradient_matches_finite_differences():
    net, X = _net(3, 8, "tanh", 14)
    rnet = SignRandomizedNet(net, init_std=0.5, generator=_gen(15))
    y = torch.linspace(-1, 1, 5, dtype=F64)

    def loss():
        return rnet.expected_squared_error(X, y).mean()

    (grad,) = torch.autograd.grad(loss(), rnet.U)
    v = torch.randn(rnet.U.shape, generator=_gen(16), dtype=F64)
    h = 1e-5
    with torch.no_grad():
        rnet.U.add_(h * v)
        up = float(loss())
        rnet.U.sub_(2 * h * v)
        down = float(loss())
    exact = float((grad * v).sum())
    assert abs((up - down) / (2 * h) - exact) <= 1e-6 * max(abs(exact), 1e-3)


@pytest.mark.parametrize("k", [3, 4])
def test_higher_order_enumeration(k):
    # Enumerate every (z_+, z_-) configuration of 3 pairs with its probability: the weighted
    # mean equals the exact expectation; f^(j) averages to 0 for 1 <= j < k, and f^(k) to
    # s sum_r a_r sigma^(k)(w0_r.x) (w*_r.x)^k / k! over the "+" half.
    net, X = _net(4, 6, "sin", 17, a_init="ones")
    rnet = HigherOrderRandomizedNet(net, k, init_std=0.7, generator=_gen(18))
    pair = rnet.pair
    plus = list(zip(pair.plus_nodes, pair.plus_probs, strict=True))
    minus = list(zip(pair.minus_nodes, pair.minus_probs, strict=True))
    with torch.no_grad():
        mean, second = 0.0, 0.0
        terms_mean = [0.0] * (k + 2)
        for cfg in itertools.product(plus, plus, plus, minus, minus, minus):
            z = torch.tensor([c[0] for c in cfg], dtype=F64)
            p = math.prod(c[1] for c in cfg)
            f = rnet(X, z)
            mean, second = mean + p * f, second + p * f**2
            for j, t in enumerate(rnet.terms(X, k + 1, z)):
                terms_mean[j] = terms_mean[j] + p * t
        torch.testing.assert_close(mean, rnet.expectation(X), rtol=0, atol=1e-12)
        torch.testing.assert_close(second - mean**2, rnet.variance(X), rtol=0, atol=1e-12)
        for j in range(1, k):
            assert float(terms_mean[j].abs().max()) < 1e-12
        W0, Ws = net.W[:3], rnet.W_star
        deriv = net.act.deriv(X @ W0.T, k)
        limit = net.scale * (deriv * (X @ Ws.T) ** k).sum(1) / math.factorial(k)
        torch.testing.assert_close(terms_mean[k], limit, rtol=1e-12, atol=1e-12)
        for j, e in enumerate(rnet.expected_terms(X, k + 1)):
            torch.testing.assert_close(e, terms_mean[j], rtol=0, atol=1e-12)


def test_higher_order_k2_is_sign_randomization_of_the_plus_half():
    net, X = _net(3, 8, "tanh", 19, a_init="ones")
    ho = HigherOrderRandomizedNet(net, 2, init_std=0.6, generator=_gen(20))
    U = torch.cat([ho.W_star.detach(), torch.zeros(4, 3, dtype=F64)])
    sr = SignRandomizedNet(net, init=U)
    with torch.no_grad():
        torch.testing.assert_close(ho.expectation(X), sr.expectation(X), rtol=0, atol=1e-13)
        torch.testing.assert_close(ho.variance(X), sr.variance(X), rtol=0, atol=1e-13)
        mean, se = ho.monte_carlo(X, 3000, generator=_gen(21))
        assert ((mean - ho.expectation(X)).abs() <= 4 * se).all()
    with pytest.raises(ValueError, match="symmetric"):
        HigherOrderRandomizedNet(TwoLayerNet(3, 4), 2)
    with pytest.raises(ValueError, match="init must have shape"):
        HigherOrderRandomizedNet(net, 3, init=torch.zeros(8, 3))
