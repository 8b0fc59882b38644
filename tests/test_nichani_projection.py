"""Projections P_{<=k} onto spherical harmonics of degree <= k (exact for ridge sums, Monte Carlo
for any callable), and the harmonic (closed-form) R1 against its stochastic estimate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lazylab.data.harmonic_projection import RidgeSum, project_mc, projection_norm_mc
from lazylab.data.harmonics import gegenbauer_q, num_harmonics
from lazylab.data.spherical import tau_expect
from lazylab.experiments.toolkit import K_SE

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


