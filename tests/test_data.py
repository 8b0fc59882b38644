"""Samplers, orthogonal polynomials, targets and label helpers of lazylab.data.

Monte Carlo checks use fixed seeds and a tolerance of 4-5 standard errors estimated from the
sample itself, so they fail only if the mean is wrong (or with probability < 1e-4).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.special import eval_gegenbauer, eval_legendre

from lazylab.data import (
    DenseHarmonic,
    Gegenbauer,
    HardInstance,
    Hermite,
    HierarchicalParity,
    Parity,
    Polynomial,
    QuadraticForm,
    allenzhu_parity6,
    anisotropic_sphere,
    arora_example,
    corrupt_labels,
    dense_quadratic,
    dim_poly_leq,
    flip_labels,
    gaussian,
    gegenbauer_q,
    hard_instance_inputs,
    hermite_e,
    hypercube,
    low_degree_plus_sparse,
    nichani_fig1_target,
    nichani_fig2_target,
    num_harmonics,
    projection_law,
    random_labels,
    random_sparse,
    random_teacher,
    random_unit_vector,
    sign_labels,
    sphere,
    xor2,
)

F64 = torch.float64


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def assert_mean(samples: torch.Tensor, expected: float, k: float = 4.0) -> None:
    """|mean - expected| <= k standard errors (SE estimated from the samples)."""
    s = samples.double().flatten()
    se = float(s.std()) / math.sqrt(s.numel())
    err = abs(float(s.mean()) - expected)
    assert err <= k * se + 1e-12, f"mean {float(s.mean()):.5f} vs {expected:.5f} (SE {se:.2e})"


# ----------------------------------------------------------------------------- samplers

@pytest.mark.parametrize("radius", [1.0, math.sqrt(17.0), 3.5])
def test_sphere_norms_exact_and_second_moment_isotropic(radius):
    d = 17
    X = sphere(30_000, d, radius=radius, generator=gen(1), dtype=F64)
    assert torch.allclose(X.norm(dim=1), torch.full((len(X),), radius, dtype=F64), atol=1e-12)
    # E[x x^T] = radius^2/d I: check two diagonal and one off-diagonal entry.
    assert_mean(X[:, 0] ** 2, radius**2 / d)
    assert_mean(X[:, 5] ** 2, radius**2 / d)
    assert_mean(X[:, 0] * X[:, 1], 0.0)


def test_gaussian_covariance_within_standard_errors():
    n, d = 100_000, 4
    S = torch.tensor([[1.0, 0, 0, 0], [0.5, 2.0, 0, 0], [0, -1.0, 0.5, 0], [0.3, 0, 0, 1.5]],
                     dtype=F64)
    X = gaussian(n, d, generator=gen(2), dtype=F64, cov_sqrt=S)
    Sigma = S @ S.T
    C = X.T @ X / n
    # Var(x_i x_j) = Sigma_ii Sigma_jj + Sigma_ij^2 for a centred Gaussian.
    se = torch.sqrt((torch.outer(Sigma.diag(), Sigma.diag()) + Sigma**2) / n)
    assert ((C - Sigma).abs() <= 5 * se).all(), (C - Sigma) / se
    assert (X.mean(0).abs() <= 5 * Sigma.diag().sqrt() / math.sqrt(n)).all()


def test_hypercube_entries_and_radius():
    X = hypercube(5000, 9, generator=gen(3))
    assert set(X.unique().tolist()) == {-1.0, 1.0}
    assert_mean(X, 0.0, k=5)
    Y = hypercube(100, 9, radius=1.0, generator=gen(3), dtype=F64)
    assert torch.allclose(Y.abs(), torch.full_like(Y, 1 / 3), atol=1e-15)
    assert torch.allclose(Y.norm(dim=1), torch.ones(100, dtype=F64), atol=1e-12)


def test_anisotropic_sphere():
    d = 10
    X = anisotropic_sphere(40_000, d, kappa=1.0, radius=2.0, generator=gen(4), dtype=F64)
    assert torch.allclose(X.norm(dim=1), torch.full((len(X),), 2.0, dtype=F64), atol=1e-12)
    assert_mean(X[:, 0] ** 2, 4.0 / d)  # kappa = 1 is the uniform sphere
    # kappa -> infinity concentrates the mass on +-e_1 (after the rotation: on +-O e_1).
    Z = anisotropic_sphere(2000, d, kappa=1e8, rotate=True, generator=gen(5), dtype=F64)
    M = Z.T @ Z / len(Z)
    assert float(torch.linalg.eigvalsh(M)[-1]) > 0.95
    assert float(M[0, 0]) < 0.95  # rotated away from e_1


def test_projection_law_moments_match_beta_formula():
    # z = sqrt(d)(2B-1), B ~ Beta(a, a), a = (d-1)/2: E z^2 = 1 and E z^4 = 3d/(d+2).
    d = 7
    z = projection_law(100_000, d, generator=gen(6), dtype=F64)
    assert float(z.abs().max()) <= math.sqrt(d)
    assert_mean(z, 0.0)
    assert_mean(z**2, 1.0)
    assert_mean(z**4, 3 * d / (d + 2))


def test_hard_instance_inputs():
    X = hard_instance_inputs(50, 20, 8, background="zeros", generator=gen(7), dtype=F64)
    assert torch.allclose((math.sqrt(20) * X[:, :8]).abs(), torch.ones(50, 8, dtype=F64))
    assert (X[:, 8:] == 0).all()
    with pytest.raises(ValueError, match="d1"):
        hard_instance_inputs(5, 4, 6, generator=gen())


def test_samplers_deterministic_and_validate_inputs():
    a = sphere(10, 3, generator=gen(8))
    b = sphere(10, 3, generator=gen(8))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="radius"):
        sphere(3, 3, radius=-1.0, generator=gen())
    with pytest.raises(ValueError, match="n must"):
        gaussian(-1, 3, generator=gen())
    with pytest.raises(ValueError, match="cov_sqrt"):
        gaussian(3, 3, generator=gen(), cov_sqrt=torch.eye(2))
    with pytest.raises(ValueError, match="generator"):
        hypercube(3, 3, generator=None)


# ----------------------------------------------------------------------------- polynomials

def test_hermite_matches_numpy_hermite_e():
    u = np.linspace(-3, 3, 41)
    for k in range(8):
        coef = np.zeros(k + 1)
        coef[k] = 1.0
        np.testing.assert_allclose(hermite_e(k, u), np.polynomial.hermite_e.hermeval(u, coef),
                                   rtol=1e-12, atol=1e-9)


def test_hermite_orthogonality_monte_carlo():
    # E[He_j(z) He_k(z)] = k! delta_jk for z = beta.x ~ N(0, 1).
    d = 6
    X = gaussian(100_000, d, generator=gen(9), dtype=F64)
    beta = random_unit_vector(d, generator=gen(10))
    H = {k: Hermite(beta, k=k)(X) for k in range(5)}
    for j in range(5):
        for k in range(j, 5):
            assert_mean(H[j] * H[k], math.factorial(k) if j == k else 0.0, k=4.5)


def test_gegenbauer_q_matches_scipy():
    t_unit = np.linspace(-1, 1, 25)
    for d in (2, 3, 5, 30):
        alpha = (d - 2) / 2
        for l in range(7):
            if d == 2:  # C^(0) is degenerate in scipy; Q_l is the Chebyshev T_l.
                ref = np.cos(l * np.arccos(t_unit))
            else:
                ref = eval_gegenbauer(l, alpha, t_unit) / eval_gegenbauer(l, alpha, 1.0)
            np.testing.assert_allclose(gegenbauer_q(l, d, d * t_unit), ref, atol=1e-12)
    np.testing.assert_allclose(gegenbauer_q(4, 3, 3 * t_unit), eval_legendre(4, t_unit),
                               atol=1e-12)


def test_num_harmonics_identities():
    assert [num_harmonics(10, l) for l in range(5)] == [1, 10, 54, 210, 660]
    for d in (2, 3, 7, 30):
        for l in range(2, 7):
            # Harmonics = homogeneous degree l modulo |x|^2 * homogeneous degree l - 2.
            hom = math.comb(d + l - 1, l) - math.comb(d + l - 3, l - 2)
            assert num_harmonics(d, l) == hom
        for k in range(1, 5):
            assert dim_poly_leq(d, k) == math.comb(d + k - 1, k) + math.comb(d + k - 2, k - 1)


@pytest.mark.parametrize("d,k", [(5, 3), (12, 2), (20, 4)])
def test_gegenbauer_target_unit_norm_on_sphere(d, k):
    X = sphere(60_000, d, radius=math.sqrt(d), generator=gen(11), dtype=F64)
    f = Gegenbauer(random_unit_vector(d, generator=gen(12)), k=k)
    y = f(X)
    assert_mean(y**2, 1.0)
    assert_mean(y, 0.0)


def test_gegenbauer_cross_moments():
    # E[f_u f_v] = Q_k(d u.v) for equal degrees, 0 for different degrees.
    d = 8
    X = sphere(60_000, d, radius=math.sqrt(d), generator=gen(13), dtype=F64)
    u = random_unit_vector(d, generator=gen(14))
    v = (u + 0.8 * random_unit_vector(d, generator=gen(15)))
    v = v / v.norm()
    fu2, fv2, fu3 = Gegenbauer(u, k=2)(X), Gegenbauer(v, k=2)(X), Gegenbauer(u, k=3)(X)
    assert_mean(fu2 * fv2, float(gegenbauer_q(2, d, d * float(u @ v))))
    assert_mean(fu2 * fu3, 0.0)
    # Closed form of degree 2: ((u.x)^2 - 1) / sqrt(2(d-1)/(d+2)).
    ref = ((X @ u) ** 2 - 1) / math.sqrt(2 * (d - 1) / (d + 2))
    assert torch.allclose(fu2, ref, atol=1e-10)


# ----------------------------------------------------------------------------- targets

def test_target_algebra_and_xor_identity():
    X = hypercube(200, 6, generator=gen(16), dtype=F64)
    e = torch.eye(6, dtype=F64)
    # Bai & Lee: x1 x2 = ((e1+e2).x)^2/4 - ((e1-e2).x)^2/4.
    quad = 0.25 * Polynomial(e[0] + e[1], p=2) - 0.25 * Polynomial(e[0] - e[1], p=2)
    assert torch.allclose(quad(X), xor2()(X), atol=1e-12)
    beta = random_unit_vector(6, generator=gen(17))
    he3 = Hermite(beta, k=3)
    poly = Polynomial(beta, p=3) - 3 * Polynomial(beta, p=1)  # He_3 = z^3 - 3z
    assert torch.allclose(he3(X), poly(X), atol=1e-10)
    assert torch.allclose((he3 - he3)(X), torch.zeros(200, dtype=F64))
    assert "He_3" in he3.name and "+" in poly.name
    with pytest.raises(ValueError, match="columns"):
        he3(X[:, :3])


def test_arora_zarctan_series_and_examples():
    # z arctan(z/2) = sum_{j>=1} (-1)^{j-1} 2^{1-2j} z^{2j} / (2j-1) for |z| <= 1 (Ex. 6.4).
    beta = torch.tensor([1.0, 0.0], dtype=F64)
    z = torch.linspace(-1, 1, 21, dtype=F64)
    X = torch.stack([z, torch.zeros_like(z)], 1)
    series = sum((-1) ** (j - 1) * 2.0 ** (1 - 2 * j) * z ** (2 * j) / (2 * j - 1)
                 for j in range(1, 40))
    assert torch.allclose(arora_example("zarctan", beta)(X), series, atol=1e-12)
    assert torch.allclose(arora_example("cos", beta)(X), torch.cos(z) - 1, atol=1e-15)
    assert set(arora_example("sign", beta)(X).tolist()) == {-1.0, 1.0}
    with pytest.raises(ValueError, match="name must be"):
        arora_example("cube", beta)


@pytest.mark.parametrize("inputs", ["sphere", "gaussian"])
def test_dense_quadratic_is_centred_with_unit_variance(inputs):
    d = 9
    sampler = (lambda n: sphere(n, d, radius=3.0, generator=gen(18), dtype=F64)) \
        if inputs == "sphere" else (lambda n: gaussian(n, d, generator=gen(18), dtype=F64))
    f = dense_quadratic(d, generator=gen(19), inputs=inputs)
    y = f(sampler(100_000))
    assert_mean(y, 0.0)
    assert_mean(y**2, 1.0)


def test_dense_harmonic_unit_norm_and_degree():
    d = 6
    X = sphere(60_000, d, radius=math.sqrt(d), generator=gen(20), dtype=F64)
    h = DenseHarmonic.draw(d, 3, generator=gen(21))
    y = h(X)
    assert_mean(y**2, 1.0)
    g2 = Gegenbauer(random_unit_vector(d, generator=gen(22)), k=2)(X)
    assert_mean(y * g2, 0.0)  # degree 3 is orthogonal to degree 2


def test_nichani_targets():
    d = 20
    Xg = gaussian(60_000, d, generator=gen(23), dtype=F64)
    f1 = nichani_fig1_target(d, generator=gen(24))
    assert_mean(f1(Xg) ** 2, 1.0)  # (z + z^2 - 1)/sqrt(3) has unit variance for z ~ N(0,1)
    # On the sphere its degree-2 part (the NTK plateau) has squared norm 2(d-1)/(3(d+2)).
    Xs = sphere(60_000, d, radius=math.sqrt(d), generator=gen(25), dtype=F64)
    beta = f1.target.terms[0].beta
    c = float((f1(Xs) * Gegenbauer(beta, k=2)(Xs)).mean())
    se = float((f1(Xs) * Gegenbauer(beta, k=2)(Xs)).std()) / math.sqrt(len(Xs))
    assert abs(c - math.sqrt(2 * (d - 1) / (3 * (d + 2)))) < 4 * se
    f2 = nichani_fig2_target(d, generator=gen(26), variant="clean")
    y2 = f2(Xg)
    assert_mean(y2, 0.0)
    assert_mean(y2**2, 1.0)
    f2c = nichani_fig2_target(d, generator=gen(26), variant="code")
    assert_mean(f2c(Xg), 9 / math.sqrt(675))  # i > d/2 = 10 leaves 9 ones
    sp = random_sparse(d, 1, 3, generator=gen(27), kind="hermite")
    full = low_degree_plus_sparse(Polynomial(torch.eye(d, dtype=F64)[0], p=1), sp)
    assert torch.allclose(full(Xg[:50]), Xg[:50, 0] + sp(Xg[:50]))


def test_teacher_net():
    d, m = 5, 40
    X = gaussian(100, d, generator=gen(28), dtype=F64)
    lin = random_teacher(d, m, activation="linear", generator=gen(29))
    assert torch.allclose(lin(X), X @ (lin.W.T @ lin.a) / math.sqrt(m), atol=1e-12)
    relu = random_teacher(d, m, generator=gen(29), second_layer="sign")
    assert torch.allclose(relu(2.5 * X), 2.5 * relu(X), atol=1e-12)  # positive homogeneity
    assert set(relu.a.tolist()) <= {-1.0, 1.0}
    with pytest.raises(ValueError, match="activation"):
        random_teacher(d, m, activation="nope", generator=gen())


def test_allenzhu_targets():
    X = hypercube(20_000, 30, generator=gen(30), dtype=F64)
    H = HierarchicalParity(alpha=0.3, beta=1.0)
    Y = H(X)
    F = X[:, 0::2] * X[:, 1::2]
    # Predicting beta F leaves exactly k alpha^2 = 1.35 at every point (|G_i| = 1).
    assert torch.allclose(((Y - F) ** 2).sum(1), torch.full((len(X),), 1.35, dtype=F64))
    assert_mean((Y**2).sum(1), 15 * (1 + 0.09))  # Fourier orthogonality
    Xh = hard_instance_inputs(100, 12, 6, generator=gen(31), dtype=F64)
    T = HardInstance([1, 3, 4], alpha=0.5, d=12)
    Hh = T(Xh)
    prod = (math.sqrt(12) * Xh[:, [1, 3, 4]]).prod(1, keepdim=True)
    assert torch.allclose((Hh - 0.5 * prod).abs(), torch.ones(100, 3, dtype=F64))
    p6 = allenzhu_parity6(40, generator=gen(32))
    y6 = p6(hypercube(100, 40, radius=1.0, generator=gen(33), dtype=F64))
    assert torch.allclose(y6.abs(), torch.ones(100, dtype=F64), atol=1e-9)
    assert len(set(p6.indices)) == 6 and max(p6.indices) < 40


def test_quadratic_form_symmetrises():
    A = torch.tensor([[1.0, 2.0], [0.0, 3.0]], dtype=F64)
    X = torch.tensor([[1.0, 1.0], [2.0, -1.0]], dtype=F64)
    expected = torch.tensor([6.0, 4.0 - 4.0 + 3.0], dtype=F64)  # x'Ax with the original A
    assert torch.allclose(QuadraticForm(A)(X), expected)
    assert torch.allclose(Parity([0, 1], scale=2.0)(X), torch.tensor([2.0, -4.0], dtype=F64))


# ----------------------------------------------------------------------------- labels

def test_corrupt_labels_fraction_statistics():
    n, p = 20_000, 0.3
    y = torch.ones(n)
    out, mask = corrupt_labels(y, p, gen(34), return_mask=True)
    k = round(p * n)
    assert int(mask.sum()) == k
    assert torch.equal(out[~mask], y[~mask])
    assert set(out.unique().tolist()) <= {-1.0, 1.0}
    changed = int((out != y).sum())
    # Each chosen label is redrawn uniformly, so changed ~ Binomial(k, 1/2).
    assert abs(changed - k / 2) <= 4 * math.sqrt(k / 4)
    assert torch.equal(corrupt_labels(y, 0.0, gen(35)), y)
    _, full = corrupt_labels(y, 1.0, gen(35), return_mask=True)
    assert bool(full.all())
    assert torch.equal(corrupt_labels(y, p, gen(34)), out)  # deterministic in the generator
    with pytest.raises(ValueError, match="fraction"):
        corrupt_labels(y, 1.5, gen())


def test_flip_random_and_sign_labels():
    n, p = 20_000, 0.2
    y = random_labels(n, generator=gen(36))
    assert set(y.unique().tolist()) == {-1.0, 1.0}
    assert abs(float(y.sum())) <= 4 * math.sqrt(n)
    flipped = flip_labels(y, p, gen(37))
    nflip = int((flipped != y).sum())
    assert abs(nflip - p * n) <= 4 * math.sqrt(n * p * (1 - p))
    assert sign_labels(torch.tensor([-0.5, 0.0, 2.0])).tolist() == [-1.0, 1.0, 1.0]


def test_parity_random_and_validation():
    p = Parity.random(10, 4, generator=gen(38))
    assert len(p.indices) == 4 and len(set(p.indices)) == 4
    with pytest.raises(ValueError, match="distinct"):
        Parity([1, 1])
    with pytest.raises(ValueError, match="reads index"):
        Parity([0, 7])(torch.ones(2, 3))
