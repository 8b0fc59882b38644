"""Arora et al. (2019) theory (lazylab.theory.arora): the structural facts of spec C1, C2, C8
and the identities behind Theorem 4.1, Lemma 5.3, Eq. (10), Theorems 5.1 and 6.1."""

from __future__ import annotations

import math

import pytest
import torch

from lazylab.data import Polynomial, sphere
from lazylab.kernels import empirical_ntk
from lazylab.models import TwoLayerNet
from lazylab.solve import GramSolver, eigendecompose
from lazylab.theory.arora import (
    alignment_share,
    complexity_measure,
    corollary62_bound,
    corrupted_label_moments,
    default_learning_rate,
    h_infinity,
    lemma_c3_bound,
    predicted_distance,
    predicted_residual_norm,
    random_label_moments,
    theorem51_bound,
    theorem61_bound,
    worst_case_labels,
)
from lazylab.theory.arora_width import init_gram, width_spread

F64 = torch.float64


def _sphere(n: int, d: int, seed: int) -> torch.Tensor:
    return sphere(n, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.fixture(scope="module")
def X() -> torch.Tensor:
    return _sphere(60, 8, 0)


# ---------------------------------------------------------------------------- C1: closed form
def test_closed_form_matches_arccos_and_arcsin_forms(X):
    H = h_infinity(X)
    # unit-norm inputs: cosine exactly 1 on the diagonal (arccos is not Lipschitz at 1, so the
    # rounded X X^T there would be off by ~1e-8)
    K = (X @ X.T).clamp(-1, 1).fill_diagonal_(1.0)
    arccos_form = K * (math.pi - torch.arccos(K)) / (2 * math.pi)
    arcsin_form = K / 4 + K * torch.arcsin(K) / (2 * math.pi)  # App. E
    assert torch.allclose(H, arccos_form, atol=1e-13, rtol=0)
    assert torch.allclose(H, arcsin_form, atol=1e-13, rtol=0)


def test_blockwise_equals_single_block_and_is_symmetric(X):
    Z = _sphere(17, 8, 1)
    whole = h_infinity(X)
    blocks = h_infinity(X, block_rows=7)
    assert torch.equal(blocks, blocks.T)
    assert torch.allclose(blocks, whole, atol=1e-14, rtol=0)
    # |x|^2 / 2 exactly on the diagonal in the block path (arccos(1) = 0)
    assert torch.equal(blocks.diagonal(), 0.5 * X.square().sum(1))
    assert torch.allclose(h_infinity(X, Z, block_rows=5), h_infinity(X, Z), atol=1e-14, rtol=0)
    assert h_infinity(X.float()).dtype == F64
    with pytest.raises(ValueError, match="block_rows"):
        h_infinity(X, block_rows=0)


def test_monte_carlo_expectation_within_five_standard_errors():
    # H_ij = E_w[x_i.x_j 1{w.x_i >= 0} 1{w.x_j >= 0}]: an average of M Bernoulli(q_ij) times
    # x_i.x_j has standard error |x_i.x_j| sqrt(q (1 - q) / M), q_ij = (pi - theta_ij) / (2 pi).
    Xs = _sphere(20, 5, 2)
    M = 200_000
    W = torch.randn(M, 5, generator=torch.Generator().manual_seed(3), dtype=F64)
    A = (Xs @ W.T >= 0).to(F64)
    G = Xs @ Xs.T
    mc = G * (A @ A.T) / M
    q = (math.pi - torch.arccos(G.clamp(-1, 1))) / (2 * math.pi)
    se = G.abs() * (q * (1 - q) / M).sqrt()
    assert bool(((mc - h_infinity(Xs)).abs() <= 5 * se + 1e-12).all())


def test_psd_diagonal_and_trace(X):
    H = h_infinity(X)
    spec = eigendecompose(H)
    assert torch.allclose(H.diagonal(), torch.full((60,), 0.5, dtype=F64), atol=1e-14)
    assert math.isclose(float(spec.eigenvalues.sum()), 30.0, rel_tol=1e-12)
    assert spec.lambda_min > 0  # no two inputs parallel (Remark 5.1)
    assert bool((spec.eigenvalues[:-1] >= spec.eigenvalues[1:]).all())
    V = spec.eigenvectors
    assert torch.allclose(V @ torch.diag(spec.eigenvalues) @ V.T, H, atol=1e-12)


# ---------------------------------------------------------------------------- C8: structure
def test_loewner_lower_bounds_of_appendix_e(X):
    # H_inf >= K/4 and H_inf >= K^(o 2l) / (2 pi (2l - 1)^2): the two facts behind Thm 6.1.
    H = h_infinity(X)
    K = X @ X.T
    assert float(torch.linalg.eigvalsh(H - K / 4)[0]) >= -1e-10
    for ell in (1, 2, 3):
        low = K.pow(2 * ell) / (2 * math.pi * (2 * ell - 1) ** 2)
        assert float(torch.linalg.eigvalsh(H - low)[0]) >= -1e-10


def test_arcsin_power_series_converges_off_the_diagonal(X):
    # H = K/4 + (1/2pi) sum_l c_l K^(o 2l), c_l = (2l-3)!! / ((2l-2)!! (2l-1)) = 1, 1/6, 3/40...
    K = X @ X.T
    off = ~torch.eye(60, dtype=torch.bool)
    assert float(K[off].abs().max()) < 0.99
    series = K / 4
    coef = 1.0  # c_1
    for ell in range(1, 3000):
        series = series + coef * K.pow(2 * ell) / (2 * math.pi)
        # c_{l+1} / c_l = (2l - 1)^2 / (2l (2l + 1))
        coef *= (2 * ell - 1) ** 2 / (2 * ell * (2 * ell + 1))
    assert torch.allclose(series[off], h_infinity(X)[off], atol=1e-10, rtol=0)


def test_contraction_of_the_linear_dynamics(X):
    spec = eigendecompose(h_infinity(X))
    eta = default_learning_rate(spec)
    M = torch.eye(60, dtype=F64) - eta * h_infinity(X)
    assert float(torch.linalg.matrix_norm(M, 2)) <= 1 - eta * spec.lambda_min + 1e-12


# ---------------------------------------------------------------------------- C2: H(0)
def test_h0_concentrates_on_h_infinity_with_width():
    Xs = _sphere(30, 6, 4)
    H = h_infinity(Xs)
    errs = {}
    for m in (1000, 16000):
        net = TwoLayerNet(6, m, generator=torch.Generator().manual_seed(5), dtype=F64)
        errs[m] = float(torch.linalg.matrix_norm(empirical_ntk(net, Xs) - H))
        # Lemma C.3 (Hoeffding + union bound), with the entries' range [-1, 1] instead of the
        # paper's [0, 1] (spec Sec. 8, item 12), i.e. twice the paper's bound, at delta = 1e-3.
        assert errs[m] <= 2 * lemma_c3_bound(30, m, 1e-3)
    # the error shrinks like m^-1/2: a factor 4 from m = 1000 to 16000; its relative
    # fluctuation is ~30% for n = 30, so a factor > 2 is required.
    assert errs[1000] / errs[16000] > 2


def test_h0_is_invariant_to_kappa():
    # 1{w.x >= 0} is scale-invariant: with the same draws, kappa = 0.01 and kappa = 1 give the
    # same H(0) (hence E[H(0)] = H_inf for every kappa).
    Xs = _sphere(25, 6, 6)
    nets = [TwoLayerNet(6, 500, weight_std=k, generator=torch.Generator().manual_seed(7),
                        dtype=F64) for k in (0.01, 1.0)]
    assert torch.allclose(nets[0].W * 100, nets[1].W, rtol=1e-15, atol=0)
    assert torch.equal(empirical_ntk(nets[0], Xs), empirical_ntk(nets[1], Xs))


# ---------------------------------------------------------------------------- Thm 4.1, Lemma 5.3
def test_predicted_residual_is_the_power_iteration(X):
    H = h_infinity(X)
    spec = eigendecompose(H)
    y = torch.sign(X[:, 0])
    eta = 0.8 / spec.lambda_max
    ks = [0, 1, 7, 40]
    pred = predicted_residual_norm(spec, y, eta=eta, steps=ks)
    r, out, M = y.clone(), [], torch.eye(60, dtype=F64) - eta * H
    for k in range(41):
        if k in ks:
            out.append(float(r.norm()))
        r = M @ r
    assert torch.allclose(pred, torch.tensor(out, dtype=F64), rtol=1e-11, atol=0)
    assert torch.allclose(predicted_residual_norm(spec, proj=spec.project(y), eta=eta, steps=ks),
                          pred, rtol=0, atol=0)
    with pytest.raises(ValueError, match="exactly one"):
        predicted_residual_norm(spec, y, eta=eta, steps=ks, proj=spec.project(y))


def test_predicted_distance_is_the_auxiliary_sequence_norm(X):
    # D(K)^2 = y^T T H T y with T = eta sum_{k<K} (I - eta H)^k (proof of Lemma 5.3).
    H = h_infinity(X)
    spec = eigendecompose(H)
    y = torch.sign(X[:, 1])
    eta, K = 0.9 / spec.lambda_max, 25
    M = torch.eye(60, dtype=F64) - eta * H
    T, P = torch.zeros_like(H), torch.eye(60, dtype=F64)
    for _ in range(K):
        T, P = T + eta * P, P @ M
    direct = math.sqrt(float(y @ T @ H @ T @ y))
    assert math.isclose(float(predicted_distance(spec, y, eta=eta, steps=K)[0]), direct,
                        rel_tol=1e-10)
    # increasing in K, up to sqrt(y^T H^-1 y)
    d = predicted_distance(spec, y, eta=eta, steps=[1, 10, 100, 10**9])
    assert bool((d[1:] >= d[:-1]).all())
    assert math.isclose(float(d[-1]), math.sqrt(GramSolver(H).quad(y)), rel_tol=1e-8)


# ---------------------------------------------------------------------------- Eq. (10), Thm 5.1
def test_gram_solver_against_dense_solve(X):
    H = h_infinity(X)
    y = torch.sign(X[:, 2])
    s = GramSolver(H)
    assert math.isclose(s.quad(y), float(y @ torch.linalg.solve(H, y)), rel_tol=1e-10)
    assert math.isclose(s.trace_inverse(), float(torch.linalg.inv(H).trace()), rel_tol=1e-10)
    # E[y^T H^-1 y] = tr(H^-1) >= n^2 / tr(H) = 2n for random signs (AM-HM)
    assert s.trace_inverse() >= 2 * 60


def test_complexity_measure_orthonormal_inputs():
    # Orthonormal inputs: H_inf = I/2, so y^T H^-1 y = 2 ||y||^2 = 2n and the measure is 2.
    X = torch.eye(10, dtype=F64)
    y = torch.tensor([1.0, -1.0] * 5, dtype=F64)
    assert math.isclose(complexity_measure(h_infinity(X), y), 2.0, rel_tol=1e-14)


def test_singular_gram_is_refused():
    X = _sphere(5, 3, 8)
    X = torch.cat([X, X[:1]])  # a duplicate input: lambda_min(H_inf) = 0
    with pytest.raises(ValueError, match="duplicate or parallel"):
        GramSolver(h_infinity(X))


def test_theorem51_bound_constants():
    n, lam0, delta, c = 400, 0.02, 0.1, 0.7
    grid = math.ceil(math.sqrt(n / lam0))
    expected = c + 5 / math.sqrt(n) + 3 * math.sqrt(math.log(6 * grid / delta) / (2 * n))
    assert math.isclose(theorem51_bound(c, n, lam0, delta), expected, rel_tol=1e-15)
    with pytest.raises(ValueError, match="delta"):
        theorem51_bound(c, n, lam0, 1.5)


# ---------------------------------------------------------------------------- Sec. 6
def test_theorem61_polynomials_within_tight_bound():
    Xs = _sphere(300, 6, 9)
    s = GramSolver(h_infinity(Xs))
    beta = torch.zeros(6, dtype=F64)
    beta[0], beta[1] = 0.6, 0.8
    values = {}
    for p in (1, 2, 4):
        y = Polynomial(beta, p=p, alpha=-1.5)(Xs)
        values[p] = math.sqrt(s.quad(y))
        assert values[p] <= theorem61_bound(p, -1.5, 1.0, tight=True) * (1 + 1e-9)
    assert theorem61_bound(1) == 3 and theorem61_bound(4, 2.0, 0.5) == 12 * 2 * 0.5**4
    assert math.isclose(theorem61_bound(2, tight=True), math.sqrt(2 * math.pi))
    with pytest.raises(ValueError, match="p must be 1 or an even"):
        theorem61_bound(3)
    # Corollary 6.2: the H^-1 norm is subadditive, bounded by the sum of the terms' bounds
    y12 = Polynomial(beta, p=1)(Xs) + Polynomial(beta, p=2, alpha=0.5)(Xs)
    both = math.sqrt(s.quad(y12))
    assert both <= values[1] / 1.5 + values[2] / 3 + 1e-12
    assert both <= corollary62_bound([(1.0, 1.0, 1), (0.5, 1.0, 2)], tight=True)


# ---------------------------------------------------------------------------- Fig. 1 labels
def test_worst_case_labels_and_alignment(X):
    H = h_infinity(X)
    spec = eigendecompose(H)
    y = worst_case_labels(spec)
    assert math.isclose(float(y.norm()), math.sqrt(60), rel_tol=1e-13)
    assert torch.allclose(H @ y, spec.lambda_min * y, atol=1e-11)
    assert float(y[int(y.abs().argmax())]) > 0
    share = alignment_share(spec, y)
    assert float(share[-2]) < 1e-20 and math.isclose(float(share[-1]), 1.0, rel_tol=1e-12)
    top = alignment_share(proj=spec.project(spec.eigenvectors[:, 0]))
    assert math.isclose(float(top[0]), 1.0, rel_tol=1e-12)
    assert bool((share[1:] >= share[:-1]).all())


# ---------------------------------------------------------------------------- finite width
def test_init_gram_is_unbiased_and_exact_for_one_neuron():
    Xs = _sphere(15, 4, 5)
    g = torch.Generator().manual_seed(6)
    # one neuron: H(0)_ij = x_i.x_j 1{w.x_i >= 0} 1{w.x_j >= 0}, rebuilt from the same w
    H1 = init_gram(Xs, 1, generator=torch.Generator().manual_seed(7))
    w = torch.randn(1, 4, generator=torch.Generator().manual_seed(7), dtype=F64)
    a = (Xs @ w.T >= 0).to(F64)
    assert torch.allclose(H1, (Xs @ Xs.T) * (a @ a.T), atol=1e-15)
    # M neurons: each entry a mean of M terms x_i.x_j Bernoulli(q_ij), within 5 SE of H_inf
    M = 40_000
    H0 = init_gram(Xs, M, generator=g, block=7000)
    G = Xs @ Xs.T
    q = (math.pi - torch.arccos(G.clamp(-1, 1))) / (2 * math.pi)
    se = G.abs() * (q * (1 - q) / M).sqrt()
    assert bool(((H0 - h_infinity(Xs)).abs() <= 5 * se + 1e-12).all())


def test_width_spread_shrinks_like_inverse_sqrt_width():
    Xs = _sphere(40, 6, 8)
    spec = eigendecompose(h_infinity(Xs))
    y = torch.sign(Xs[:, 0])
    out = {m: width_spread(Xs, spec, {"y": y}, eta=1 / spec.lambda_max, steps=[0, 5, 20],
                           independent=m, draws=24, generator=torch.Generator().manual_seed(m))
           for m in (500, 8000)}
    for sp in out.values():
        assert sp["y"].log_loss_sd[0] < 1e-12 and sp["y"].dist_ratio_mean[0] == 1.0
    # the spread is O(m^-1/2): 16x the width -> 4x smaller; with 24 draws the sample sd has a
    # relative error ~ 1/sqrt(2 * 23) = 0.15 each, so the ratio lies in 4 (1 +- 0.45)
    ratio = out[500]["y"].log_loss_sd[2] / out[8000]["y"].log_loss_sd[2]
    assert 2.2 < ratio < 5.8
    with pytest.raises(ValueError, match="draws"):
        width_spread(Xs, spec, {"y": y}, eta=0.1, steps=[1], independent=10, draws=1,
                     generator=torch.Generator())


def test_random_label_moments_match_monte_carlo():
    Xs = _sphere(30, 5, 9)
    s = GramSolver(h_infinity(Xs))
    mean, sd = random_label_moments(s.L)
    assert math.isclose(mean, s.trace_inverse(), rel_tol=1e-10)
    Y = torch.randint(0, 2, (20_000, 30), generator=torch.Generator().manual_seed(1)) * 2 - 1
    Z = torch.linalg.solve_triangular(s.L, Y.T.to(F64), upper=False)
    q = Z.square().sum(0)
    # sample mean within 5 SE, sample sd within 5 of its own SEs (kurtosis-free bound 2 sd^2/N)
    assert abs(float(q.mean()) - mean) <= 5 * sd / math.sqrt(20_000)
    assert abs(float(q.std()) - sd) <= 5 * sd * math.sqrt(2 / 20_000) + 0.05 * sd


def test_corrupted_label_moments_match_monte_carlo():
    from lazylab.data import corrupt_labels

    Xs = _sphere(40, 5, 10)
    H = h_infinity(Xs)
    A = torch.linalg.inv(H)
    y = torch.sign(Xs[:, 0] + 0.3)
    assert math.isclose(corrupted_label_moments(A, y, 0.0)[0], float(y @ A @ y), rel_tol=1e-12)
    assert corrupted_label_moments(A, y, 0.0)[1] == 0.0
    mean1, sd1 = corrupted_label_moments(A, y, 1.0)
    assert (mean1, sd1) == pytest.approx(random_label_moments(torch.linalg.cholesky(H)),
                                         rel=1e-9)
    g = torch.Generator().manual_seed(3)
    N = 4000
    for f in (0.3, 0.7):
        mean, sd = corrupted_label_moments(A, y, f)
        q = torch.tensor([float(z @ A @ z) for z in (corrupt_labels(y, f, g) for _ in range(N))],
                         dtype=F64)
        # the mean is exact: within 5 SE of the sample mean
        assert abs(float(q.mean()) - mean) <= 5 * float(q.std()) / math.sqrt(N)
        # the variance is the Bernoulli approximation: an upper bound up to sampling error
        assert 0.8 * sd <= float(q.std()) <= sd * (1 + 5 * math.sqrt(0.5 / N))
