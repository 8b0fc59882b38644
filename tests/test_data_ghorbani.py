"""Samplers and exact population risks of Ghorbani et al. (2019): quadratic target (qf) and
two-Gaussian mixture (mg).  Monte Carlo checks use float64 draws from seeded generators and
compare within 4 standard errors (a false alarm rate ~ 6e-5 per check)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lazylab.data.mixture import GaussianMixture, diag_delta, mmse_asymptotic
from lazylab.data.quadratic import QuadraticTarget, exponential_B
from lazylab.seeding import numpy_rng, torch_generator


def _mc(values: torch.Tensor) -> tuple[float, float]:
    """Sample mean and its standard error."""
    v = values.double()
    return float(v.mean()), float(v.std()) / math.sqrt(v.numel())


def _random_sym(d: int, seed: int, scale: float) -> np.ndarray:
    A = numpy_rng(seed).standard_normal((d, d)) * scale
    return (A + A.T) / 2


# ----------------------------------------------------------------------------- qf
def test_exponential_B_distribution_and_seeding():
    d = 400
    B = exponential_B(d, seed=3)
    b = np.diag(B) * math.sqrt(d)  # default scale 1/sqrt(d)
    assert np.array_equal(B, np.diag(np.diag(B))) and np.all(b > 0)
    # Exp(1): mean 1 and variance 1, so the sample mean is within 4/sqrt(d) of 1.
    assert abs(b.mean() - 1) < 4 / math.sqrt(d)
    assert np.array_equal(B, exponential_B(d, seed=3))
    assert not np.array_equal(B, exponential_B(d, seed=4))
    assert np.allclose(exponential_B(d, seed=3, scale=2.0), 2 * math.sqrt(d) * B, rtol=1e-14)
    with pytest.raises(ValueError, match="d must"):
        exponential_B(0, seed=1)
    with pytest.raises(ValueError, match="scale"):
        exponential_B(5, seed=1, scale=-1.0)


def test_quadratic_target_values_and_norm():
    d = 7
    B = _random_sym(d, 1, 0.5)
    t = QuadraticTarget(B, b0=0.3)
    X, y = t.sample(50, torch_generator(2), dtype=torch.float64)
    direct = np.einsum("ij,jk,ik->i", X.numpy(), B, X.numpy()) + 0.3
    assert np.allclose(y.numpy(), direct, atol=1e-12)
    assert t.norm2() == pytest.approx(2 * np.sum(B**2) + (0.3 + np.trace(B)) ** 2, rel=1e-14)
    centred = QuadraticTarget(B)
    assert centred.b0 == pytest.approx(-np.trace(B))
    assert centred.norm2() == pytest.approx(2 * np.sum(B**2), rel=1e-14)
    # The trivial predictor has risk R0 = E f*^2.
    assert t.risk_of_quadratic(np.zeros((d, d)), 0.0) == pytest.approx(t.norm2(), rel=1e-14)
    # Same seed, same draw.
    X2, _ = t.sample(50, torch_generator(2), dtype=torch.float64)
    assert torch.equal(X, X2)


def test_quadratic_target_risk_matches_monte_carlo():
    d, n = 10, 200_000
    target = QuadraticTarget(exponential_B(d, seed=5))
    # Non-symmetric M: only its symmetric part acts on x^T M x.
    M = numpy_rng(6).standard_normal((d, d)) * 0.15
    c = 0.4
    X, y = target.sample(n, torch_generator(7), dtype=torch.float64)
    pred = ((X @ torch.from_numpy(M)) * X).sum(1) + c
    mean, se = _mc((y - pred) ** 2)
    exact = target.risk_of_quadratic(M, c)
    assert abs(mean - exact) < 4 * se
    # E y = 0 (centred) and E y^2 = R0 within 4 SE.
    m1, se1 = _mc(y)
    m2, se2 = _mc(y**2)
    assert abs(m1) < 4 * se1 and abs(m2 - target.norm2()) < 4 * se2


def test_quadratic_target_rejects_bad_input():
    with pytest.raises(ValueError, match="symmetric"):
        QuadraticTarget(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="square"):
        QuadraticTarget(np.ones((2, 3)))
    t = QuadraticTarget(np.eye(3))
    with pytest.raises(ValueError, match="M must be"):
        t.risk_of_quadratic(np.eye(4), 0.0)
    with pytest.raises(ValueError, match="n must"):
        t.sample(-1, torch_generator(0))
    with pytest.raises(ValueError, match="device"):
        t.sample(2, torch_generator(0), device="meta")


# ----------------------------------------------------------------------------- mg
def test_diag_delta_support_and_seeding():
    d = 300
    D = diag_delta(d, seed=1)
    v = np.diag(D) * math.sqrt(d)
    assert set(np.round(v, 12)) <= {1.0, 1.5, 2.0}
    # Each value has frequency 1/3: binomial count within 4 SE.
    for val in (1.0, 1.5, 2.0):
        assert abs(np.mean(np.isclose(v, val)) - 1 / 3) < 4 * math.sqrt(2 / 9 / d)
    assert np.array_equal(D, diag_delta(d, seed=1))
    assert np.array_equal(np.diag(diag_delta(5, 0, values=(3.0,))), np.full(5, 3 / math.sqrt(5)))


def _general_mixture(d: int = 6) -> GaussianMixture:
    rng = numpy_rng(11)
    A = rng.standard_normal((d, d))
    Sigma = np.eye(d) + 0.3 * (A @ A.T) / d
    Delta = _random_sym(d, 12, 0.12)
    return GaussianMixture(Delta, Sigma)


def test_mixture_labels_and_class_covariances():
    mix = _general_mixture()
    n = 100_000
    X, y = mix.sample(n, torch_generator(3), dtype=torch.float64)
    assert set(y.unique().tolist()) == {-1.0, 1.0}
    frac, se = _mc((y > 0).double())
    assert abs(frac - 0.5) < 4 * se
    # Class-conditional second moments E[x x^T | y = s] = Sigma - s Delta, entrywise within 4 SE.
    for s in (1, -1):
        Xs = X[y == s]
        outer = Xs.unsqueeze(2) * Xs.unsqueeze(1)
        mean = outer.mean(0).numpy()
        se = (outer.std(0) / math.sqrt(Xs.shape[0])).numpy()
        assert np.all(np.abs(mean - (mix.Sigma - s * mix.Delta)) < 4 * se + 1e-12)


def test_mixture_risk_of_quadratic_matches_monte_carlo():
    mix = _general_mixture()
    d = mix.d
    M = numpy_rng(13).standard_normal((d, d)) * 0.2
    c = -0.3
    X, y = mix.sample(200_000, torch_generator(4), dtype=torch.float64)
    pred = ((X @ torch.from_numpy(M)) * X).sum(1) + c
    mean, se = _mc((y - pred) ** 2)
    assert abs(mean - mix.risk_of_quadratic(M, c)) < 4 * se
    assert mix.risk_of_quadratic(np.zeros((d, d)), 0.0) == 1.0  # R0 = E y^2 = 1


def test_mixture_diagonal_fast_path_matches_general_formulae():
    d = 20
    D = diag_delta(d, seed=2)
    fast = GaussianMixture(D)
    # A permuted copy with the fast path switched off goes through the dense formulae.
    P = np.eye(d)[numpy_rng(1).permutation(d)]
    slow = GaussianMixture(P @ D @ P.T)
    slow._diagonal = False
    X, _ = fast.sample(100, torch_generator(5), dtype=torch.float64)
    llr_fast = fast.log_likelihood_ratio(X)
    llr_slow = slow.log_likelihood_ratio(X @ torch.from_numpy(P.T))
    assert torch.allclose(llr_fast, llr_slow, atol=1e-10)


def test_mixture_posterior_and_bayes_error():
    d = 50
    mix = GaussianMixture(diag_delta(d, seed=0))
    m = mix.snr()
    assert m == pytest.approx(np.sum(mix.Delta**2), rel=1e-12)  # Sigma = I: Delta~ = Delta
    X, y = mix.sample(100_000, torch_generator(9), dtype=torch.float64)
    t = mix.posterior_mean(X)
    # Nishimori identity E[y E[y|x]] = E[E[y|x]^2]: fails for a wrong LLR (sign, scale,
    # log-det offset).  4 SE of the difference of the two per-sample quantities.
    diff, se = _mc(y * t - t * t)
    assert abs(diff) < 4 * se
    mmse = mix.bayes_mmse("mc", n=100_000, seed=1)
    # The Bayes error beats the best quadratic predictor 1/(1 + m/2) (spec C11: 0.408 vs 0.4745
    # at d = 50); the MC standard error is < 0.002, far below the ~0.07 gap.
    assert mmse < 1 / (1 + m / 2) - 0.03
    assert mix.bayes_mmse("asymptotic") == pytest.approx(mmse_asymptotic(m), abs=1e-15)
    with pytest.raises(ValueError, match="method"):
        mix.bayes_mmse("exact")


def test_mmse_asymptotic_properties():
    assert mmse_asymptotic(0.0) == pytest.approx(1.0, abs=1e-14)
    ms = np.linspace(0.05, 20, 40)
    vals = np.array([mmse_asymptotic(m) for m in ms])
    assert np.all(np.diff(vals) < 0)
    # Strictly below the best-quadratic risk 1/(1 + m/2), and ~1 - m/2 for small m.
    assert np.all(vals < 1 / (1 + ms / 2))
    assert mmse_asymptotic(1e-3) == pytest.approx(1 - 1e-3 / 2, abs=1e-5)
    # Nishimori: 1 - E tanh Z = 1 - E tanh^2 Z for Z ~ N(m/2, m/2) (checked by MC, 4 SE).
    z = 1.2 + math.sqrt(1.2) * torch.randn(200_000, generator=torch_generator(0),
                                           dtype=torch.float64)
    diff, se = _mc(torch.tanh(z) - torch.tanh(z) ** 2)
    assert abs(diff) < 4 * se
    mean_tanh, se_tanh = _mc(torch.tanh(z))
    assert abs(1 - mean_tanh - mmse_asymptotic(2.4)) < 4 * se_tanh


def test_mixture_rejects_bad_input():
    d = 4
    with pytest.raises(ValueError, match="positive definite"):
        GaussianMixture(np.eye(d) * 1.5)
    with pytest.raises(ValueError, match="symmetric"):
        GaussianMixture(np.triu(np.ones((d, d))) * 0.1)
    with pytest.raises(ValueError, match="Sigma"):
        GaussianMixture(np.eye(d) * 0.1, np.eye(d + 1))


@pytest.mark.parametrize("make", [
    lambda: QuadraticTarget(exponential_B(6, 1)),  # diagonal B
    lambda: QuadraticTarget(np.eye(6) + 0.1 * np.ones((6, 6))),
    lambda: GaussianMixture(diag_delta(6, 2))], ids=["qf-diagonal", "qf-dense", "mg"])
def test_samplers_make_no_tensor_from_the_host_after_the_first_draw(make):
    """One-pass SGD draws a batch a step: after the first draw, a draw dispatches no tensor
    made from numpy (on a GPU a host copy a step, which a CUDA graph cannot capture either)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    src = make()
    gen = torch_generator(0)
    first = Ops()
    with first:
        src.sample(8, gen)
    again = Ops()
    with again:
        X, y = src.sample(8, gen)
    # lift_fresh: a tensor made from host data (torch.as_tensor of a numpy array)
    assert "lift_fresh" in first.names  # the counter sees the first draw's copy
    assert "lift_fresh" not in again.names, again.names
    assert X.shape == (8, 6) and y.shape == (8,)
