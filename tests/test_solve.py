"""Solvers: ridge least squares, kernel ridge (direct and CG), chunked normal equations.

Tolerances: float64 direct solves of well-conditioned random problems (cond(F) <~ 10) agree
with numpy/LAPACK to ~cond^2 * eps ~ 1e-14; we assert 1e-10 relative. CG errors are bounded by
||alpha_cg - alpha|| <= tol ||y|| / lambda_min(K + ridge I) (residual bound), asserted with the
computed lambda_min.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lazylab.solve import NormalEquations, kernel_ridge, kernel_ridge_cg, lstsq

D = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rel(a: torch.Tensor | np.ndarray, b: torch.Tensor | np.ndarray) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def _rank_deficient(n: int, p: int, r: int, g: torch.Generator) -> torch.Tensor:
    return torch.randn(n, r, generator=g, dtype=D) @ torch.randn(r, p, generator=g, dtype=D)


@pytest.mark.parametrize("n,p", [(200, 30), (30, 200), (64, 64)])
@pytest.mark.parametrize("k", [None, 3])
def test_lstsq_matches_numpy(n: int, p: int, k: int | None) -> None:
    g = _gen(n * 1000 + p)
    F = torch.randn(n, p, generator=g, dtype=D)
    y = torch.randn(n, generator=g, dtype=D) if k is None else torch.randn(n, k, generator=g,
                                                                           dtype=D)
    c = lstsq(F, y)
    assert c.shape == ((p,) if k is None else (p, k))
    ref = np.linalg.lstsq(F.numpy(), y.numpy(), rcond=None)[0]
    # The square case has cond(F) ~ 100 (smallest singular value of a square Gaussian matrix
    # ~ 1/sqrt(n)), so 1e-10 still leaves a 1e4 margin on cond^2 * eps.
    assert _rel(c, ref) < 1e-10


@pytest.mark.parametrize("n,p", [(150, 40), (40, 150)])
def test_ridge_solution_zeroes_the_gradient(n: int, p: int) -> None:
    g = _gen(7 + n)
    F = torch.randn(n, p, generator=g, dtype=D)
    y = torch.randn(n, 2, generator=g, dtype=D)
    ridge = 0.37
    c = lstsq(F, y, ridge=ridge)
    # d/dc [||Fc - y||^2 + ridge ||c||^2] / 2 = F^T (F c - y) + ridge c = 0
    grad = F.T @ (F @ c - y) + ridge * c
    assert float(grad.abs().max()) < 1e-10 * float((F.T @ y).abs().max())
    ref = np.linalg.solve(F.numpy().T @ F.numpy() + ridge * np.eye(p), F.numpy().T @ y.numpy())
    assert _rel(c, ref) < 1e-10


@pytest.mark.parametrize("n,p", [(80, 30), (20, 60)])
def test_lstsq_rank_deficient_gives_minimum_norm(n: int, p: int) -> None:
    g = _gen(3 * n + p)
    F = _rank_deficient(n, p, 6, g)
    y = torch.randn(n, generator=g, dtype=D)
    c = lstsq(F, y)
    ref = np.linalg.lstsq(F.numpy(), y.numpy(), rcond=None)[0]
    assert _rel(c, ref) < 1e-10
    # Minimum norm <=> c is orthogonal to the null space of F (it lies in the row space).
    _, s, Vh = np.linalg.svd(F.numpy())
    null = Vh[6:]
    assert np.linalg.norm(null @ c.numpy()) < 1e-10 * np.linalg.norm(c.numpy())
    # A small ridge approaches it (ridge -> 0+ limit): error ~ ridge / s_min^2 ~ 1e-7 here.
    c_r = lstsq(F, y, ridge=1e-4)
    assert _rel(c_r, ref) < 1e-5


def test_lstsq_keeps_dtype_and_validates() -> None:
    g = _gen(0)
    F = torch.randn(40, 5, generator=g)
    assert lstsq(F, torch.randn(40, generator=g)).dtype == torch.float32
    with pytest.raises(ValueError, match="ridge"):
        lstsq(F, torch.zeros(40), ridge=-1.0)
    with pytest.raises(ValueError, match="rows"):
        lstsq(F, torch.zeros(39))
    with pytest.raises(ValueError, match="F must be a 2-D"):
        lstsq(torch.zeros(3), torch.zeros(3))


@pytest.mark.parametrize("k", [None, 2])
def test_normal_equations_chunked_equals_one_shot(k: int | None) -> None:
    g = _gen(11)
    n, p = 1000, 25
    F = torch.randn(n, p, generator=g, dtype=D)
    y = torch.randn(n, generator=g, dtype=D) if k is None else torch.randn(n, k, generator=g,
                                                                           dtype=D)
    ne = NormalEquations(p)
    for lo, hi in [(0, 1), (1, 333), (333, 334), (334, 1000)]:  # uneven chunks
        ne.add(F[lo:hi], y[lo:hi])
    assert ne.n == n
    for ridge in (0.0, 2.5):
        assert _rel(ne.solve(ridge), lstsq(F, y, ridge=ridge)) < 1e-10
    c = ne.solve()
    mse = ((F @ c - y) ** 2).mean(0)
    assert _rel(ne.residual(c), mse) < 1e-10
    # Two accumulators merged == one accumulator over all rows.
    a, b = NormalEquations(p), NormalEquations(p)
    a.add(F[:400], y[:400])
    b.add(F[400:], y[400:])
    assert _rel(a.merge(b).solve(), c) < 1e-10


def test_normal_equations_upcasts_and_handles_rank_deficiency() -> None:
    g = _gen(5)
    F = _rank_deficient(300, 20, 4, g)
    y = torch.randn(300, generator=g, dtype=D)
    ne = NormalEquations(20, dtype=D)
    ne.add(F[:150], y[:150]).add(F[150:], y[150:])
    ref = np.linalg.lstsq(F.numpy(), y.numpy(), rcond=None)[0]
    # The eigen-fallback works on F^T F, whose null-space eigenvalues carry eps * ||F||^2
    # noise: accuracy ~ sqrt(eps) relative in the worst case; observed ~1e-12.
    assert _rel(ne.solve(), ref) < 1e-8
    ne32 = NormalEquations(20)
    ne32.add(F.float(), y.float())
    assert ne32.FtF.dtype == D
    with pytest.raises(ValueError, match="same shape"):
        ne.add(F[:3], y[:3].unsqueeze(1))
    with pytest.raises(ValueError, match="at least one add"):
        NormalEquations(3).solve()


def test_kernel_ridge_direct() -> None:
    g = _gen(21)
    X = torch.randn(120, 4, generator=g, dtype=D)
    K = torch.exp(-torch.cdist(X, X) ** 2 / 4)
    y = torch.randn(120, 3, generator=g, dtype=D)
    for ridge in (1e-3, 1.0):
        a = kernel_ridge(K, y, ridge=ridge)
        ref = np.linalg.solve(K.numpy() + ridge * np.eye(120), y.numpy())
        assert _rel(a, ref) < 1e-8  # cond(K + 1e-3 I) <= 1.2e5, so error <= 1e5 * eps * const
    # Singular K (rank 5), ridge 0: minimum-norm solution K^+ y.
    Z = _rank_deficient(40, 5, 5, g)
    Ks = Z @ Z.T
    ys = torch.randn(40, generator=g, dtype=D)
    ref = np.linalg.lstsq(Ks.numpy(), ys.numpy(), rcond=None)[0]
    assert _rel(kernel_ridge(Ks, ys), ref) < 1e-8
    with pytest.raises(ValueError, match="square"):
        kernel_ridge(torch.zeros(3, 4, dtype=D), torch.zeros(3, dtype=D))


@pytest.mark.parametrize("pre", [None, "jacobi", "block", "matvec"])
def test_kernel_ridge_cg_agrees_with_direct(pre: str | None) -> None:
    g = _gen(31)
    n = 300
    X = torch.randn(n, 6, generator=g, dtype=D)
    K = torch.exp(-torch.cdist(X, X) ** 2 / 12)
    y = torch.randn(n, 2, generator=g, dtype=D)
    ridge, tol = 0.05, 1e-9
    direct = kernel_ridge(K, y, ridge=ridge)
    if pre == "matvec":
        alpha, info = kernel_ridge_cg(lambda v: K @ v, y, ridge=ridge, tol=tol,
                                      diag=K.diagonal(), return_info=True)
    else:
        alpha, info = kernel_ridge_cg(K, y, ridge=ridge, tol=tol, preconditioner=pre,
                                      block_size=64, return_info=True)
    assert info.converged and info.iterations <= 10 * n
    resid = torch.linalg.vector_norm(y - (K @ alpha + ridge * alpha), dim=0)
    assert bool((resid <= tol * torch.linalg.vector_norm(y, dim=0) * (1 + 1e-6)).all())
    lam_min = float(torch.linalg.eigvalsh(K)[0]) + ridge
    bound = tol * torch.linalg.vector_norm(y, dim=0) / lam_min
    err = torch.linalg.vector_norm(alpha - direct, dim=0)
    # + 1e-9 relative slack for the rounding error of the direct solve itself.
    assert bool((err <= bound + 1e-9 * torch.linalg.vector_norm(direct, dim=0)).all())


def test_kernel_ridge_cg_block_preconditioner_exact_on_block_diagonal() -> None:
    g = _gen(41)
    blocks = []
    for _ in range(4):
        A = torch.randn(30, 30, generator=g, dtype=D)
        blocks.append(A @ A.T + 0.5 * torch.eye(30, dtype=D))
    K = torch.block_diag(*blocks)[:110, :110]  # last block truncated: the tail path
    y = torch.randn(110, generator=g, dtype=D)
    alpha, info = kernel_ridge_cg(K, y, tol=1e-10, preconditioner="block", block_size=30,
                                  return_info=True)
    # M = K exactly, so one PCG step solves the system.
    assert info.iterations == 1
    assert _rel(alpha, torch.linalg.solve(K, y)) < 1e-10


def test_kernel_ridge_cg_warns_when_not_converged() -> None:
    g = _gen(51)
    A = torch.randn(50, 50, generator=g, dtype=D)
    K = A @ A.T
    with pytest.warns(RuntimeWarning, match="did not reach"):
        _, info = kernel_ridge_cg(K, torch.randn(50, generator=g, dtype=D), tol=1e-12,
                                  max_iter=3, preconditioner=None, return_info=True)
    assert not info.converged
    with pytest.raises(ValueError, match="diag"):
        kernel_ridge_cg(lambda v: K @ v, torch.ones(50, dtype=D), preconditioner="jacobi")


# ------------------------------------------------- kernel regression without the n x n matrix


def _sphere(n: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=torch.float64),
                                         dim=1)


def test_blocked_kernel_matmul_is_the_dense_product() -> None:
    from lazylab.kernels import ntk
    from lazylab.solve import BlockedKernel

    X = _sphere(203, 7, 50)
    V = torch.randn(203, 3, generator=torch.Generator().manual_seed(51), dtype=torch.float64)
    op = BlockedKernel(lambda A, B: ntk(A, B), X, block_dtype=torch.float64, tile=40)
    K = ntk(X)
    torch.testing.assert_close(op.matmul(V), K @ V, rtol=1e-12, atol=1e-12)
    assert op.tiles_evaluated == 6 * 7 // 2  # 6 tiles per side, upper triangle only
    torch.testing.assert_close(op.columns(torch.tensor([3, 100])), K[:, [3, 100]],
                               rtol=1e-12, atol=1e-12)
    # float32 tiles: the accuracy of float32 kernel entries (~1e-7 relative), not worse
    op32 = BlockedKernel(lambda A, B: ntk(A, B), X, tile=40)
    err = float((op32.matmul(V) - K @ V).abs().max() / (K @ V).abs().max())
    assert err < 1e-5


@pytest.mark.parametrize("kernel,ridge", [("ntk", 0.0), ("ntk", 1e-2), ("nngp", 1e-2),
                                          ("gaussian", 1e-3)])
def test_kernel_regression_matches_the_direct_solver(kernel: str, ridge: float) -> None:
    """CG stops at ||r|| <= tol ||y||, so ||alpha - alpha*|| <= tol ||y|| / lambda_min(A):
    with float64 tiles that bound holds (rounding ~1e-13 is far below); predictions then
    differ by at most ||K(X*, X)|| ||alpha - alpha*||."""
    from lazylab.kernels import gaussian_kernel, nngp, ntk
    from lazylab.solve import kernel_regression

    X = _sphere(160, 6, 60)
    y = torch.stack([X[:, 0] * X[:, 1], torch.sign(X[:, 2])], dim=1)
    dense = {"ntk": ntk, "nngp": nngp,
             "gaussian": lambda A, B=None: gaussian_kernel(A, B, bandwidth=0.7)}[kernel]
    K = dense(X)
    A = K + ridge * torch.eye(160, dtype=torch.float64)
    alpha_star = torch.linalg.solve(A, y)
    tol = 1e-8
    fit = kernel_regression(X, y, kernel=kernel, ridge=ridge, tol=tol, rank=40,
                            bandwidth=0.7, block_dtype=torch.float64, tile=100,
                            generator=torch.Generator().manual_seed(61), max_iter=2000)
    assert fit.info.converged
    lam_min = float(torch.linalg.eigvalsh(A)[0])
    for j in range(2):
        bound = tol * float(y[:, j].norm()) / lam_min
        assert float((fit.alpha[:, j] - alpha_star[:, j]).norm()) <= 1.01 * bound
    Xt = _sphere(50, 6, 62)
    Kt = dense(Xt, X)
    pred_err = float((fit.predict(Xt) - Kt @ alpha_star).norm())
    assert pred_err <= 1.01 * float(torch.linalg.matrix_norm(Kt, 2)) * tol * float(
        y.norm()) / lam_min


def test_nystrom_preconditioner_cuts_iterations() -> None:
    """The relu NTK on the sphere has a fast-decaying spectrum: a rank-60 Nystrom
    preconditioner flattens its top, so PCG needs far fewer iterations than plain CG (d = 5:
    the spectrum decays with the harmonic degree)."""
    from lazylab.solve import kernel_regression

    X = _sphere(400, 5, 70)
    y = torch.sign(X[:, 0] * X[:, 1])
    kw = dict(kernel="ntk", ridge=1e-4, tol=1e-6, block_dtype=torch.float64, max_iter=3000)
    plain = kernel_regression(X, y, rank=0, **kw)
    pre = kernel_regression(X, y, rank=60, generator=torch.Generator().manual_seed(71), **kw)
    assert plain.info.converged and pre.info.converged
    assert pre.info.iterations * 2.5 <= plain.info.iterations  # measured 33 vs 98
    assert len(pre.residuals) == pre.info.iterations


def test_kernel_regression_bad_input() -> None:
    from lazylab.solve import kernel_regression

    X = _sphere(20, 3, 80)
    y = X[:, 0]
    with pytest.raises(ValueError, match="kernel"):
        kernel_regression(X, y, kernel="laplace")
    with pytest.raises(ValueError, match="bandwidth"):
        kernel_regression(X, y, kernel="gaussian", bandwidth=0.0, rank=0)
    with pytest.raises(ValueError, match="generator"):
        kernel_regression(X, y, rank=5, generator=0)
    with pytest.raises(ValueError, match="ridge"):
        kernel_regression(X, y, ridge=-1.0, rank=0)
    with pytest.raises(ValueError, match="y"):
        kernel_regression(X, y[:5], rank=0)


# ------------------------------------------------------ NT least squares by streamed CG


@pytest.mark.parametrize("N", [3, 12])
def test_nt_least_squares_equals_explicit_lstsq(N: int) -> None:
    """CG on the centred normal equations in G-coordinates gives the same fitted function as
    least squares on the explicit N d features 2 (w_i.x) x_j plus a constant (float64, to
    ~1e-9), for N < d (a proper subspace of quadratics) and N > d (all quadratics)."""
    from lazylab.solve import nt_least_squares

    d, n = 8, 3000
    g = torch.Generator().manual_seed(90)
    W = torch.randn(N, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    B = torch.diag(torch.linspace(0.2, 1.5, d, dtype=torch.float64))
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def sampler(m: int, gen: torch.Generator):
        X = torch.randn(m, d, generator=gen, dtype=torch.float64) * 1.3 + 0.2
        y = ((X @ B) * X).sum(1) + torch.sin(X[:, 0])   # not in the NT class
        if sum(len(x) for x, _ in seen) < n:
            seen.append((X, y))
        return X, y

    fit = nt_least_squares(W, sampler, n, seed=5, chunk=700, dtype=torch.float64, tol=1e-12,
                           max_iter=500)
    assert fit.info.converged and fit.info.iterations < 200
    X = torch.cat([x for x, _ in seen])
    y = torch.cat([t for _, t in seen])
    assert X.shape == (n, d)
    F = torch.cat([(2 * (X @ W.T)[:, :, None] * X[:, None, :]).reshape(n, -1),
                   torch.ones(n, 1, dtype=torch.float64)], dim=1)
    coef = torch.linalg.lstsq(F, y, driver="gelsd").solution
    Xt = torch.randn(200, d, generator=g, dtype=torch.float64)
    Ft = torch.cat([(2 * (Xt @ W.T)[:, :, None] * Xt[:, None, :]).reshape(200, -1),
                    torch.ones(200, 1, dtype=torch.float64)], dim=1)
    ours = fit.c + ((Xt @ fit.M) * Xt).sum(1)
    ref = Ft @ coef
    assert float((ours - ref).abs().max() / ref.abs().max()) < 1e-8
    assert math.isclose(fit.train_mse, float(((F @ coef - y) ** 2).mean()), rel_tol=1e-8)
    WU = W.T @ fit.U
    torch.testing.assert_close(WU + WU.T, fit.M, rtol=1e-9, atol=1e-9)


def test_nt_least_squares_float32_and_bad_input() -> None:
    from lazylab.solve import nt_least_squares

    d = 10
    W = torch.randn(5, d, generator=torch.Generator().manual_seed(91)) / math.sqrt(d)

    def sampler(m: int, gen: torch.Generator):
        X = torch.randn(m, d, generator=gen)
        return X, X[:, 0] ** 2 + X[:, 1] * X[:, 2]

    a = nt_least_squares(W, sampler, 5000, seed=3, chunk=1024, tol=1e-5)
    b = nt_least_squares(W, sampler, 5000, seed=3, chunk=1024, tol=1e-5, cache_bytes=0)
    assert a.info.converged and a.info.iterations <= 40   # centred, whitened: well conditioned
    assert torch.equal(a.M, b.M)                          # redrawn chunks are the same samples
    with pytest.raises(ValueError, match="n must"):
        nt_least_squares(W, sampler, 1, seed=0)
    with pytest.raises(ValueError, match="chunk"):
        nt_least_squares(W, sampler, 100, seed=0, chunk=0)
