"""Shared dense building blocks of the solvers: PSD solves with a conditioning guard.

Every solver reduces to one of two systems:

    (A + ridge I) c = b,     A symmetric positive semi-definite (a Gram or kernel matrix),
    min_c ||F c - y||^2 + ridge ||c||^2,  F a design matrix.

The fast path is a Cholesky factorisation A + ridge I = L L^T. Its diagonal gives a cheap lower
bound on the condition number, cond(A + ridge I) >= (max_i L_ii / min_i L_ii)^2, which tells us when
the factorisation is numerically meaningless (rank deficiency shows up as a pivot of the order of
sqrt(eps) * max pivot). Then the solvers fall back to a spectral (eigh or SVD) solve, which with
ridge = 0 returns the minimum-norm solution, as numpy.linalg.lstsq does.
"""

from __future__ import annotations

import torch

# Relative jitters tried, in units of eps * mean(diag A), when Cholesky fails with ridge > 0.
_JITTER_EXPONENTS = (1, 2, 3, 4, 5, 6)


def check_ridge(ridge: float) -> float:
    """Validate a ridge parameter (a finite float >= 0)."""
    r = float(ridge)
    if not r >= 0.0 or r == float("inf"):
        raise ValueError(f"ridge must be a finite number >= 0; got {ridge!r}")
    return r


def as_matrix(y: torch.Tensor, n: int, name: str = "y") -> tuple[torch.Tensor, bool]:
    """Return y as an (n, k) matrix and whether it was a vector."""
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor; got {type(y).__name__}")
    if y.dim() == 1:
        y2, vec = y.unsqueeze(1), True
    elif y.dim() == 2:
        y2, vec = y, False
    else:
        raise ValueError(f"{name} must have shape (n,) or (n, k); got {tuple(y.shape)}")
    if y2.shape[0] != n:
        raise ValueError(f"{name} must have {n} rows to match the matrix; got {y2.shape[0]}")
    return y2, vec


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def cholesky_solve_checked(A: torch.Tensor, B: torch.Tensor, *, ridge: float,
                           max_cond: float, jitter: bool) -> torch.Tensor | None:
    """Solve (A + ridge I) X = B by Cholesky, or return None when that is unreliable.

    A is symmetrised first. When the factorisation fails and ``jitter`` is true (used when
    ridge > 0, where the exact answer is well defined and the failure is rounding), jitters
    eps * mean(diag A) * 10^j, j = 1..6, are added in turn. A factor whose pivot ratio
    (max L_ii / min L_ii)^2 exceeds ``max_cond`` is rejected (returns None).
    """
    p = A.shape[0]
    A = 0.5 * (A + A.T)
    eye = torch.eye(p, dtype=A.dtype, device=A.device)
    M = A + ridge * eye if ridge > 0 else A
    L, info = torch.linalg.cholesky_ex(M)
    if int(info) != 0 and jitter:
        scale = float(A.diagonal().abs().mean()) * _eps(A.dtype)
        for j in _JITTER_EXPONENTS:
            L, info = torch.linalg.cholesky_ex(M + scale * 10.0**j * eye)
            if int(info) == 0:
                break
    if int(info) != 0:
        return None
    d = L.diagonal()
    dmin, dmax = float(d.min()), float(d.max())
    if not (dmin > 0 and (dmax / dmin) ** 2 <= max_cond):
        return None
    return torch.cholesky_solve(B, L)


def eigh_solve(A: torch.Tensor, B: torch.Tensor, *, ridge: float,
               rtol: float | None = None) -> torch.Tensor:
    """(A + ridge I)^+ B through an eigendecomposition of the symmetric PSD matrix A.

    With ridge = 0, eigenvalues below rtol * lambda_max (default p * eps * 10) are treated as
    zero, so the result is the minimum-norm solution; rounding can make small eigenvalues of a
    PSD matrix negative, those are clipped at 0 first.
    """
    p = A.shape[0]
    lam, V = torch.linalg.eigh(0.5 * (A + A.T))
    lam = lam.clamp_min(0.0)
    if rtol is None:
        rtol = 10.0 * p * _eps(A.dtype)
    lam_max = lam.max().clamp_min(torch.finfo(A.dtype).tiny)
    shifted = lam + ridge
    keep = shifted > rtol * (lam_max + ridge) if ridge == 0 else shifted > 0
    inv = torch.where(keep, 1.0 / torch.where(keep, shifted, torch.ones_like(shifted)),
                      torch.zeros_like(shifted))
    return V @ (inv.unsqueeze(1) * (V.T @ B))


def svd_solve(F: torch.Tensor, Y: torch.Tensor, *, ridge: float,
              rtol: float | None = None) -> torch.Tensor:
    """argmin ||F c - Y||^2 + ridge ||c||^2 through the thin SVD F = U S V^T.

    c = V diag(s / (s^2 + ridge)) U^T Y; with ridge = 0, singular values below
    rtol * s_max (default max(n, p) * eps, numpy.linalg.lstsq's rcond) are dropped, which gives
    the minimum-norm least-squares solution.
    """
    n, p = F.shape
    U, s, Vh = torch.linalg.svd(F, full_matrices=False)
    if ridge > 0:
        filt = s / (s * s + ridge)
    else:
        if rtol is None:
            rtol = max(n, p) * _eps(F.dtype)
        smax = s.max() if s.numel() else torch.zeros((), dtype=F.dtype, device=F.device)
        keep = s > rtol * smax
        filt = torch.where(keep, 1.0 / torch.where(keep, s, torch.ones_like(s)),
                           torch.zeros_like(s))
    return Vh.T @ (filt.unsqueeze(1) * (U.T @ Y))
