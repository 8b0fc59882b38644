"""The defaults of the kernel solvers and estimators work for any model, with nothing else
passed: a seeded default generator, the path chosen by size, a preconditioned matrix-free
solve, a default Gaussian bandwidth and a width-scaled positive random-features ridge."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lazylab.estimators import KernelRegressor, RandomFeaturesRegressor
from lazylab.kernels import NTKOperator, empirical_ntk
from lazylab.solve import kernel_regression, operator_regression
from lazylab.solve.kernel_solver import default_bandwidth

D = torch.float64


def _sphere(n: int, d: int, seed: int) -> torch.Tensor:
    X = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=D)
    return torch.nn.functional.normalize(X, dim=1)


def _mlp(d: int, m: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d, m), torch.nn.Tanh(), torch.nn.Linear(m, m),
                               torch.nn.Tanh(), torch.nn.Linear(m, 1)).double()


# --- kernel_regression: the call ---------------------------------------------------

def test_kernel_regression_defaults_run_and_are_deterministic():
    """kernel_regression(X, y, kernel="ntk", ridge=1e-3) needs no generator: the landmarks
    are drawn by one seeded with seed=0, so two calls agree bit for bit and equal the call
    with that generator passed explicitly."""
    X = _sphere(300, 5, 0)
    y = X[:, 0] * X[:, 1]
    a = kernel_regression(X, y, kernel="ntk", ridge=1e-3, rank=50)
    b = kernel_regression(X, y, kernel="ntk", ridge=1e-3, rank=50)
    c = kernel_regression(X, y, kernel="ntk", ridge=1e-3, rank=50,
                          generator=torch.Generator().manual_seed(0))
    assert a.info.converged and a.preconditioner_rank > 0
    assert torch.equal(a.alpha, b.alpha) and torch.equal(a.alpha, c.alpha)
    other = kernel_regression(X, y, kernel="ntk", ridge=1e-3, rank=50, seed=1)
    assert not torch.equal(other.alpha, a.alpha)  # the seed is the one that draws
    full = kernel_regression(X, y, kernel="ntk", ridge=1e-3)   # every default
    assert full.info.converged


def test_kernel_regression_refuses_a_bad_seed_or_generator():
    X = _sphere(20, 3, 1)
    with pytest.raises(ValueError, match=r"^seed must be an integer; got 0\.5$"):
        kernel_regression(X, X[:, 0], seed=0.5)
    with pytest.raises(ValueError, match=r"^generator must be a torch\.Generator or None; "
                                         r"got int$"):
        kernel_regression(X, X[:, 0], generator=3)


# --- default Gaussian bandwidth ----------------------------------------------------------

def test_default_bandwidth_is_sklearn_gamma_scale():
    """exp(-|x-z|^2 / (2 h^2)) with h = default_bandwidth(X) equals sklearn's rbf_kernel with
    gamma = 1 / (d Var X) (SVC's gamma="scale") to rounding."""
    from sklearn.metrics.pairwise import rbf_kernel

    from lazylab.kernels import gaussian_kernel

    X = torch.randn(40, 6, generator=torch.Generator().manual_seed(2), dtype=D) * 3.0 + 1.0
    h = default_bandwidth(X)
    ref = rbf_kernel(X.numpy(), gamma=1.0 / (6 * X.numpy().var()))
    np.testing.assert_allclose(gaussian_kernel(X, bandwidth=h).numpy(), ref, rtol=1e-12,
                               atol=1e-15)
    assert default_bandwidth(torch.ones(5, 4, dtype=D)) == pytest.approx(0.5 ** 0.5, rel=1e-15)


def test_kernel_regression_gaussian_without_bandwidth_uses_the_default():
    X = _sphere(80, 4, 3)
    y = X[:, 0]
    kw = dict(kernel="gaussian", ridge=1e-3, rank=0, tol=1e-10, max_iter=2000,
              block_dtype=D)
    a = kernel_regression(X, y, **kw)
    b = kernel_regression(X, y, bandwidth=default_bandwidth(X), **kw)
    assert torch.equal(a.alpha, b.alpha)
    with pytest.raises(ValueError, match="bandwidth must be a finite number > 0"):
        kernel_regression(X, y, kernel="gaussian", bandwidth=-1.0, rank=0)


# --- operator_regression: the path and the preconditioner --------------------------------

def test_operator_regression_auto_is_direct_at_small_n_and_equals_the_dense_solve():
    """At n = 60 the formed kernel fits: auto solves directly; alpha equals the float64 solve
    of (K + ridge I) alpha = y with K formed column by column from the operator's own
    products (independent of empirical_ntk) to 1e-8 relative."""
    X = torch.randn(60, 4, generator=torch.Generator().manual_seed(4), dtype=D)
    y = torch.stack([torch.sin(X[:, 0]), X[:, 1] * X[:, 2]], dim=1)
    op = NTKOperator(_mlp(4, 24, 5), X)
    fit = operator_regression(op, y, ridge=1e-3)
    assert fit.solver == "direct" and fit.info.iterations == 0 and fit.residuals == []
    K = op.matmul(torch.eye(60, dtype=D))
    ref = torch.linalg.solve(0.5 * (K + K.T) + 1e-3 * torch.eye(60, dtype=D), y)
    assert float((fit.alpha - ref).norm() / ref.norm()) < 1e-8
    Z = torch.randn(7, 4, generator=torch.Generator().manual_seed(6), dtype=D)
    torch.testing.assert_close(fit.predict(Z), op.cross(Z, ref), rtol=1e-8, atol=1e-10)


def test_operator_regression_path_follows_the_budget_and_the_iteration_cap():
    X = torch.randn(30, 3, generator=torch.Generator().manual_seed(7), dtype=D)
    op = NTKOperator(_mlp(3, 8, 8), X)
    y = X[:, 0]
    assert operator_regression(op, y, ridge=1e-2, memory_budget=8 * 30 * 30).solver == "direct"
    assert operator_regression(op, y, ridge=1e-2, memory_budget=8 * 30 * 30 - 1,
                               rank=5).solver == "cg"
    # forming K costs the flops of ~n/6 products: not worth it when max_iter < n / 6
    assert operator_regression(op, y, ridge=1e-2, max_iter=4, rank=5,
                               tol=1.0).solver == "cg"
    # the parameter count: two Jacobian rows (2 P float64 entries) must fit the budget too
    wide = NTKOperator(_mlp(3, 64, 8), X)
    P = sum(p.numel() for p in wide.net.parameters())
    assert 16 * P - 1 >= 8 * 30 * 30  # the budget below holds K but not two Jacobian rows
    assert operator_regression(wide, y, ridge=1e-2, rank=5, memory_budget=16 * P - 1,
                               ).solver == "cg"
    assert operator_regression(wide, y, ridge=1e-2, memory_budget=16 * P).solver == "direct"

    class ProductsOnly:
        n = 30

        def matmul(self, V):
            return op.matmul(V)

        def cross(self, Z, a):
            return op.cross(Z, a)

    assert operator_regression(ProductsOnly(), y, ridge=1e-2, rank=5).solver == "cg"
    with pytest.raises(ValueError, match=r"^solver='direct' needs an operator that can form "
                                         r"K .*ProductsOnly has only products"):
        operator_regression(ProductsOnly(), y, solver="direct")
    with pytest.raises(ValueError, match=r"^solver must be one of 'auto', 'direct', 'cg'; "
                                         r"got 'lu'$"):
        operator_regression(op, y, solver="lu")


def test_nystrom_sketch_preconditioner_cuts_cg_iterations():
    """A tanh MLP's empirical NTK has a few dominant eigenvalues: the rank-40 randomized
    Nystrom preconditioner (40 products) flattens them, so PCG needs a fraction of the plain
    CG iterations; both reach the formed-kernel solution to their tolerance (measured 214
    plain vs 40 preconditioned)."""
    X = torch.randn(120, 6, generator=torch.Generator().manual_seed(9), dtype=D)
    y = torch.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    op = NTKOperator(_mlp(6, 16, 10), X)
    kw = dict(ridge=1e-3, tol=1e-6, max_iter=2000, solver="cg")
    plain = operator_regression(op, y, rank=0, **kw)
    pre = operator_regression(op, y, rank=40, **kw)
    again = operator_regression(op, y, rank=40, **kw)
    assert plain.info.converged and pre.info.converged
    assert pre.preconditioner_rank == 40 and plain.preconditioner_rank == 0
    assert pre.info.iterations * 3 <= plain.info.iterations
    assert pre.info.iterations == again.info.iterations  # the default sketch is seeded
    K = empirical_ntk(op.net, X, trained="all")
    A = K + 1e-3 * torch.eye(120, dtype=D)
    bound = 1e-6 * float(y.norm()) / float(torch.linalg.eigvalsh(A)[0])
    ref = torch.linalg.solve(A, y)
    for fit in (plain, pre):
        assert float((fit.alpha - ref).norm()) <= 1.01 * bound


# --- estimator defaults on digits ------------------------------------------------------------

def _digits_fold():
    """Standardized-in-pipeline digits, labels 0..9 as regression targets, fold 2 of
    KFold(5, shuffle=True, random_state=0): the fold where the old random-features defaults
    gave R^2 -0.133."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import KFold

    X, y = load_digits(return_X_y=True)
    tr, te = list(KFold(5, shuffle=True, random_state=0).split(X))[2]
    return X[tr], y[tr].astype(float), X[te], y[te].astype(float)


def _r2(est, fold) -> float:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, ytr, Xte, yte = fold
    return float(make_pipeline(StandardScaler(), est).fit(Xtr, ytr).score(Xte, yte))


def test_gaussian_default_bandwidth_is_kernel_ridge_with_gamma_scale_on_digits():
    """KernelRegressor(kernel="gaussian", ridge=1) with no bandwidth is sklearn KernelRidge
    (rbf, alpha=1) with gamma = 1 / (d Var X): the same predictions to rounding."""
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.preprocessing import StandardScaler

    Xtr, ytr, Xte, _ = _digits_fold()
    sc = StandardScaler().fit(Xtr)
    A, B = sc.transform(Xtr), sc.transform(Xte)
    est = KernelRegressor(kernel="gaussian", ridge=1.0).fit(A, ytr)
    gamma = 1.0 / (A.shape[1] * A.var())
    assert est.bandwidth_ == pytest.approx((0.5 / gamma) ** 0.5, rel=1e-12)
    ref = KernelRidge(kernel="rbf", alpha=1.0, gamma=gamma).fit(A, ytr).predict(B)
    np.testing.assert_allclose(est.predict(B), ref, rtol=1e-8, atol=1e-8)


def test_estimator_defaults_score_on_a_digits_fold():
    """With nothing but the estimator's defaults, R^2 on the fixed digits fold is within 0.05
    of a scikit-learn reference at its own defaults: KernelRidge(kernel="rbf") (R^2 0.843)
    for the kernel regressors (measured: Gaussian 0.919, NTK 0.907), linear Ridge() (0.539)
    for the width-100 random features (0.584). The old random-features defaults (ridge 0, no
    offset, weight_std 1) scored below the mean's 0 there."""
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.linear_model import Ridge

    fold = _digits_fold()
    kernel_ref, linear_ref = _r2(KernelRidge(kernel="rbf"), fold), _r2(Ridge(), fold)
    assert _r2(KernelRegressor(kernel="gaussian"), fold) >= kernel_ref - 0.05
    assert _r2(KernelRegressor(), fold) >= kernel_ref - 0.05
    assert _r2(RandomFeaturesRegressor(), fold) >= linear_ref - 0.05
    old = RandomFeaturesRegressor(ridge=0.0, fit_intercept=False, weight_std=1.0)
    assert _r2(old, fold) < 0.0


def test_random_features_ridge_is_in_kernel_units():
    """The penalty on ||a||^2 is m s_m^2 ridge, so the fitted values are kernel ridge on
    K_m = F F^T / (m s_m^2) with ``ridge``, at any width and feature scaling."""
    g = torch.Generator().manual_seed(11)
    X = torch.randn(50, 3, generator=g, dtype=D)
    y = torch.sin(X[:, 0])
    for width, scaling in ((20, "none"), (80, "none"), (80, "ntk"), (80, "mf")):
        est = RandomFeaturesRegressor(width, ridge=0.3, scaling=scaling,
                                      fit_intercept=False).fit(X, y)
        F = est.model_.features(X)
        Km = F @ F.T / (width * est.model_.scale ** 2)
        fitted = Km @ torch.linalg.solve(Km + 0.3 * torch.eye(50, dtype=D), y)
        torch.testing.assert_close(est.predict(X), fitted, rtol=1e-9, atol=1e-10)
        assert est.penalty_ == pytest.approx(0.3 * width * est.model_.scale ** 2, rel=1e-15)


# --- a first-layer bias in the NTK / NNGP ------------------------------------------------------

@pytest.mark.parametrize("kernel,kind", [("ntk", "ntk"), ("nngp", "nngp")])
def test_kernel_regressor_bias_is_the_neural_tangents_kernel_with_b_std(kernel, kind):
    """bias=b is the kernel of Dense(W_std=sqrt(d), b_std=b) -> Relu -> Dense(W_std=1) in
    neural-tangents' NTK parametrization (lazylab.kernels.deep, checked against
    neural-tangents): the predictions equal kernel ridge on that kernel to rounding."""
    from lazylab.kernels.deep import DeepKernel, Dense, Relu, Serial

    g = torch.Generator().manual_seed(12)
    X, Z = torch.randn(40, 3, generator=g, dtype=D), torch.randn(9, 3, generator=g, dtype=D)
    y = torch.sin(X[:, 0]) + 1.0
    net = Serial(Dense(W_std=3 ** 0.5, b_std=0.7), Relu(), Dense(W_std=1.0))
    dk = DeepKernel(net, kind=kind)
    alpha = torch.linalg.solve(dk(X) + 0.1 * torch.eye(40, dtype=D), y)
    est = KernelRegressor(kernel=kernel, trained="both", bias=0.7, ridge=0.1).fit(X, y)
    torch.testing.assert_close(est.predict(Z), dk(Z, X) @ alpha, rtol=1e-9, atol=1e-10)
    with pytest.raises(ValueError, match=r"^The 'bias' parameter of KernelRegressor must be a "
                                         r"float in the range \[0\.0, inf\)\. Got -1\.0 "):
        KernelRegressor(bias=-1.0).fit(X, y)


def test_ntk_bias_lifts_friedman1():
    """Friedman #1 (offsets the bias-free NTK, homogeneous of degree 1, cannot represent):
    on a fixed split, bias=1 raises R^2 from 0.708 to 0.868 (measured; sklearn's RBF
    KernelRidge at its defaults: 0.620)."""
    from sklearn.datasets import make_friedman1
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_friedman1(n_samples=600, noise=1.0, random_state=0)
    a, b, c, d = train_test_split(X, y, test_size=200, random_state=0)

    def r2(est) -> float:
        return float(make_pipeline(StandardScaler(), est).fit(a, c).score(b, d))

    plain, biased = r2(KernelRegressor(ridge=1.0)), r2(KernelRegressor(ridge=1.0, bias=1.0))
    assert biased >= plain + 0.1 and biased >= 0.8
