"""Projections P_{<=k} onto spherical harmonics of degree <= k (exact for ridge sums, Monte Carlo
for any callable), and the harmonic (closed-form) R1 against its stochastic estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lazylab.data import sphere
from lazylab.data.harmonic_projection import (
    RidgeSum,
    project_mc,
    projection_norm_mc,
    residual_norm_mc,
)
from lazylab.data.harmonics import gegenbauer_q, num_harmonics
from lazylab.data.spherical import tau_expect
from lazylab.experiments.toolkit import K_SE
from lazylab.models.nichani import TaylorFeatures, construct_wl, nichani_net
from lazylab.train.nichani import R1Harmonic

D = 7


def _sphere(n: int, d: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed).standard_normal((n, d))
    return math.sqrt(d) * g / np.linalg.norm(g, axis=1, keepdims=True)


def _gegen_ridges(j: int, d: int = D) -> RidgeSum:
    """2 Q_j(sqrt(d) b1.x) - 0.7 Q_j(sqrt(d) b2.x) with non-orthogonal unit b1, b2: a degree-j
    harmonic."""
    b = np.random.default_rng(j).standard_normal((2, d))
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    q = lambda z: gegenbauer_q(j, d, math.sqrt(d) * z)  # noqa: E731
    return RidgeSum([lambda z: 2.0 * q(z), lambda z: -0.7 * q(z)], b)


@pytest.mark.parametrize("j", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_projection_of_a_degree_j_harmonic_is_itself_or_zero(j, k):
    f = _gegen_ridges(j)
    x = _sphere(50, D, 1)
    p = f.project(k, x)
    expected = f(x) if j <= k else np.zeros(len(x))
    assert np.max(np.abs(p - expected)) < 1e-10
    norms = f.degree_norms(5)
    assert np.all(np.abs(np.delete(norms, j)) < 1e-10) and norms[j] > 1e-3


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_pythagoras_low_plus_high_is_the_norm(k):
    # f = (b1.x)^3 + (b1.x)(b2.x)-free ridge sum: 0.5 (b1.x)^3 - (b2.x)^2 + (b3.x) (degree 3)
    b = np.random.default_rng(7).standard_normal((3, D))
    f = RidgeSum([lambda z: 0.5 * z**3, lambda z: -(z**2), lambda z: z], b)
    norms = f.degree_norms(8)
    assert np.all(np.abs(norms[4:]) < 1e-10)          # a cubic has no degree > 3 part
    low, high = norms[: k + 1].sum(), norms[k + 1:].sum()
    # ||f||^2 by direct sampling (independent of Funk-Hecke), within K_SE SE
    x = _sphere(200_000, D, 3)
    fx2 = f(x) ** 2
    se = fx2.std(ddof=1) / math.sqrt(len(x))
    assert abs(low + high - fx2.mean()) <= K_SE * se
    # ... and P_{>k} f = f - P_{<=k} f pointwise has norm ||P_{>k} f||^2, orthogonal to P_{<=k}
    r = f(x) - f.project(k, x)
    e = r**2
    assert abs(e.mean() - high) <= K_SE * e.std(ddof=1) / math.sqrt(len(x)) + 1e-12
    cross = r * f.project(k, x)
    assert abs(cross.mean()) <= K_SE * cross.std(ddof=1) / math.sqrt(len(x)) + 1e-12


def test_single_ridge_parseval_is_exact():
    g = lambda z: np.tanh(z - 0.5)  # noqa: E731 - not a polynomial: all degrees
    f = RidgeSum([g], np.eye(D)[:1])
    norms = f.degree_norms(40)
    assert abs(norms.sum() - tau_expect(lambda z: g(z) ** 2, D)) < 1e-10


@pytest.mark.parametrize("j,k", [(1, 2), (2, 2), (3, 2), (2, 1)])
def test_monte_carlo_projection_matches_the_exact_one(j, k):
    f = _gegen_ridges(j)
    x = _sphere(20, D, 11)
    y = _sphere(40_000, D, 12)
    est, se = project_mc(f, k, x, y)
    exact = f.project(k, x)
    assert np.all(np.abs(est - exact) <= K_SE * se * 1.5)   # 20 points: max of 20 z-scores
    nrm, nse = projection_norm_mc(f, k, y[:3000])
    exact_norm = f.degree_norms(k).sum()
    assert abs(nrm - exact_norm) <= K_SE * nse + 1e-12
    if j > k:
        assert exact_norm < 1e-10


def test_monte_carlo_projection_fails_on_a_wrong_kernel():
    # the same estimator with B(d, l) left out (a wrong reproducing kernel) is detected
    f = _gegen_ridges(2)
    x = _sphere(20, D, 11)
    y = _sphere(40_000, D, 12)
    est, se = project_mc(f, 2, x, y)
    wrong = est / num_harmonics(D, 2)
    assert np.any(np.abs(wrong - f.project(2, x)) > K_SE * se * 1.5)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="k must be"):
        _gegen_ridges(1).project(-1, _sphere(2, D, 0))
    with pytest.raises(ValueError, match="coordinates"):
        _gegen_ridges(1).project(1, np.ones((2, D + 1)))




# ----------------------------------------------------------------------------- harmonic R1
F64 = torch.float64


def _r1_problem(d: int = 8, m: int = 400, seed: int = 0):
    """A net, a displacement W = W_L(u, b0 = 0.5) + noise with degree 0, 1 and higher parts
    (R2 ~ 1.3),
    and an independent sphere sampler."""
    g = torch.Generator().manual_seed(seed)
    net = nichani_net(d, m, generator=g, dtype=F64)
    u = torch.randn(d, generator=g, dtype=F64)
    u /= u.norm()
    W = construct_wl(net, u, b0=0.5) + 3.0 * torch.randn(m, d, generator=g, dtype=F64) \
        / math.sqrt(d)
    return net, W, g


def _fl(net, W):
    return lambda y: TaylorFeatures.of(net, torch.as_tensor(y)).f_L(W).numpy()


def test_harmonic_r1_coefficients_match_monte_carlo_and_a_wrong_formula_does_not():
    net, W, g = _r1_problem()
    h = R1Harmonic.build(net)
    X = sphere(40_000, net.d, radius=math.sqrt(net.d), generator=g, dtype=F64)
    fl = TaylorFeatures.of(net, X).f_L(W)
    terms = torch.cat([fl.unsqueeze(1), fl.unsqueeze(1) * X], dim=1)   # f_L and f_L x
    mc, se = terms.mean(0), terms.std(0) / math.sqrt(len(X))
    mean, lin = h.low(W)
    exact = torch.cat([mean.reshape(1), lin])
    assert bool(((exact - mc).abs() <= K_SE * se).all()), ((exact - mc) / se)
    # without the beta w0 w0^T term (E[sigma'(z) x x^T] taken isotropic) the check fails
    wrong = R1Harmonic(h.W0, h.s, h.c0, h.alpha, 0.0).low(W)[1]
    assert bool(((wrong - mc[1:]).abs() > K_SE * se[1:]).any())


def test_harmonic_r1_equals_the_stochastic_estimate():
    net, _, g = _r1_problem()
    h = R1Harmonic.build(net)
    # radial moves w_r = c_r w0_r: f_L = sum_r s_r c_r sigma'(z_r) z_r, with E f_L and
    # E[f_L x] (prop. to sum_r s_r c_r and sum_r s_r c_r w0_r) shrunk to 30% by projecting c,
    # so that the high-degree part R1 is not buried in the Monte Carlo noise of the low one
    W0 = net.W.detach()
    c = 5.0 * torch.randn(net.width, generator=g, dtype=F64)
    A = torch.cat([h.s.unsqueeze(0), (h.s.unsqueeze(1) * W0).T])          # (d + 1, m)
    low = A.T @ torch.linalg.solve(A @ A.T, A @ c)
    W = (c - 0.7 * low).unsqueeze(1) * W0
    d = net.d
    # harmonic R1: closed-form R2 and E f_L^2 on a fresh sample A
    XA = sphere(100_000, d, radius=math.sqrt(d), generator=g, dtype=F64)
    fa = TaylorFeatures.of(net, XA)
    r1 = float(h.r1(fa, W))
    se_a = float(fa.f_L(W).pow(2).std() / math.sqrt(len(XA)))
    # stochastic estimate on an independent sample B: mean f_L^2 - unbiased ||P_<=1 f_L||^2
    yB = sphere(8000, d, radius=math.sqrt(d), generator=g, dtype=F64).numpy()
    f = _fl(net, W)
    r2_mc, se_u = projection_norm_mc(f, 1, yB)
    r1_mc, se_b = residual_norm_mc(f, 1, yB)
    tol = K_SE * math.hypot(se_a, se_b)
    assert abs(r1 - r1_mc) <= tol, (r1, r1_mc, se_a, se_b)
    assert abs(float(h.r2(W)) - r2_mc) <= K_SE * se_u
    assert r1 > 2 * tol, (r1, se_a, se_b)    # the check resolves R1 to better than 50%
    # the isotropic (beta = 0) closed form is off by more than the Monte Carlo tolerance
    wrong = R1Harmonic(h.W0, h.s, h.c0, h.alpha, 0.0)
    assert abs(float(wrong.r1(fa, W)) - r1_mc) > tol


def test_harmonic_r1_gradients_are_exact():
    net, W, g = _r1_problem(d=6, m=30)
    h = R1Harmonic.build(net)
    fresh = TaylorFeatures.of(net, sphere(50, 6, radius=math.sqrt(6), generator=g, dtype=F64))
    for val, grad in ((h.r2, h.r2_grad), (lambda V: h.r1(fresh, V),
                                           lambda V: h.r1_grad(fresh, V))):
        V = W.clone().requires_grad_(True)
        (auto,) = torch.autograd.grad(val(V), V)
        torch.testing.assert_close(grad(W), auto, rtol=1e-10, atol=1e-12)
    # batched W (B, m, d) gives one value per member
    Wb = torch.stack([W, 2 * W])
    torch.testing.assert_close(h.r2(Wb), torch.stack([h.r2(W), 4 * h.r2(W)]))
