"""Direct (factorisation-based) least squares and kernel ridge regression.

Least squares with ridge (Tikhonov) regularisation,

    c_hat = argmin_c ||F c - y||^2 + ridge ||c||^2
          = (F^T F + ridge I)^{-1} F^T y          (primal, used when n >= p)
          = F^T (F F^T + ridge I)^{-1} y          (dual, used when n < p; push-through identity),

is what random-features and NTK-features regression need (Ghorbani et al. 2019, Sec. 4: "RF is
fitted directly by solving KKT conditions"; Arora et al. 2019's kernel predictor), and kernel
ridge regression solves (K + ridge I) alpha = y with predictor f(x) = K(x, X) alpha.

With ridge = 0 and a rank-deficient system, both return the minimum-norm solution F^+ y
(resp. K^+ y), the limit ridge -> 0+ of the ridge solution and the point gradient descent from
zero converges to.

Everything runs on the device and in the dtype of the inputs; use float64 for identity checks.

Example
-------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> F = torch.randn(50, 5, generator=g, dtype=torch.float64)
>>> c = torch.arange(5.0, dtype=torch.float64)
>>> bool(torch.allclose(lstsq(F, F @ c), c))
True
"""

from __future__ import annotations

import torch

from lazylab.solve._linalg import (
    as_matrix,
    check_ridge,
    cholesky_solve_checked,
    eigh_solve,
    svd_solve,
)


def _check_matrix(M: torch.Tensor, name: str) -> None:
    if not isinstance(M, torch.Tensor) or M.dim() != 2:
        shape = tuple(M.shape) if isinstance(M, torch.Tensor) else type(M).__name__
        raise ValueError(f"{name} must be a 2-D torch.Tensor; got {shape}")
    if not M.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor; got dtype {M.dtype}")


def lstsq(F: torch.Tensor, y: torch.Tensor, *, ridge: float = 0.0,
          rtol: float | None = None) -> torch.Tensor:
    """Ridge least squares: argmin_c ||F c - y||^2 + ridge ||c||^2.

    Solved by Cholesky on the normal equations (F^T F + ridge I) c = F^T y when n >= p, or on
    the dual system (F F^T + ridge I) alpha = y, c = F^T alpha, when n < p (same solution,
    a smaller matrix). The Cholesky factor's pivot ratio estimates cond(F^T F + ridge I); when it
    exceeds eps^{-1/2} (normal equations would lose more than half the digits) or the
    factorisation fails, the solve falls back to the SVD of F, which with ridge = 0 returns the
    minimum-norm least-squares solution F^+ y (the answer of numpy.linalg.lstsq).

    Parameters
    ----------
    F : (n, p) design matrix.
    y : (n,) or (n, k) targets.
    ridge : ridge penalty >= 0 on the un-normalised sum of squares.
    rtol : relative singular-value cutoff of the SVD fallback with ridge = 0
        (default max(n, p) * eps, numpy's rcond).

    Returns
    -------
    coef : (p,) or (p, k), matching y.
    """
    _check_matrix(F, "F")
    ridge = check_ridge(ridge)
    n, p = F.shape
    Y, vec = as_matrix(y, n)
    Y = Y.to(F.dtype)
    max_cond = torch.finfo(F.dtype).eps ** -0.5
    if n >= p:
        coef = cholesky_solve_checked(F.T @ F, F.T @ Y, ridge=ridge, max_cond=max_cond,
                                      jitter=False)
    else:
        alpha = cholesky_solve_checked(F @ F.T, Y, ridge=ridge, max_cond=max_cond, jitter=False)
        coef = None if alpha is None else F.T @ alpha
    if coef is None:
        coef = svd_solve(F, Y, ridge=ridge, rtol=rtol)
    return coef.squeeze(1) if vec else coef


def kernel_ridge(K: torch.Tensor, y: torch.Tensor, *, ridge: float = 0.0,
                 rtol: float | None = None) -> torch.Tensor:
    """Kernel ridge regression weights: solve (K + ridge I) alpha = y.

    The predictor is f(x) = K(x, X) alpha; the RKHS norm of the interpolant is
    sqrt(y^T K^{-1} y) (Arora et al. 2019, Thm 5.1). K must be symmetric positive semi-definite.
    Cholesky first; with ridge > 0 a failed factorisation (rounding made K + ridge I slightly
    indefinite) is retried with jitters eps * mean(diag K) * 10^j, j = 1..6. A numerically
    singular K (pivot ratio^2 above 1 / (10 n eps)) or a final failure falls back to an
    eigendecomposition, which with ridge = 0 gives the minimum-norm solution K^+ y (for a
    symmetric PSD K this is what a least-squares solver returns).

    Parameters
    ----------
    K : (n, n) symmetric PSD kernel (Gram) matrix.
    y : (n,) or (n, k) targets.
    ridge : ridge >= 0 added to the diagonal.
    rtol : relative eigenvalue cutoff of the fallback with ridge = 0 (default 10 n eps).

    Returns
    -------
    alpha : (n,) or (n, k), matching y.
    """
    _check_matrix(K, "K")
    n = K.shape[0]
    if K.shape[1] != n:
        raise ValueError(f"K must be square; got shape {tuple(K.shape)}")
    ridge = check_ridge(ridge)
    Y, vec = as_matrix(y, n)
    Y = Y.to(K.dtype)
    max_cond = 1.0 / (10.0 * n * torch.finfo(K.dtype).eps)
    alpha = cholesky_solve_checked(K, Y, ridge=ridge, max_cond=max_cond, jitter=ridge > 0)
    if alpha is None:
        alpha = eigh_solve(K, Y, ridge=ridge, rtol=rtol)
    return alpha.squeeze(1) if vec else alpha
