"""Preconditioned conjugate gradients for kernel ridge regression at large n.

Solves (K + ridge I) alpha = y for a symmetric positive (semi-)definite K given either as a
matrix or as a matvec v -> K v, so that K need never be stored (e.g. an NTK evaluated block by
block). Standard PCG (Hestenes & Stiefel 1952; Saad, *Iterative Methods*, Alg. 9.1), run on all
columns of y at once with per-column step sizes:

    r_0 = y - A x_0,  z_0 = M^{-1} r_0,  p_0 = z_0
    a_j = <r_j, z_j> / <p_j, A p_j>
    x_{j+1} = x_j + a_j p_j,  r_{j+1} = r_j - a_j A p_j
    z_{j+1} = M^{-1} r_{j+1},  b_j = <r_{j+1}, z_{j+1}> / <r_j, z_j>,  p_{j+1} = z_{j+1} + b_j p_j

stopping when ||r_j|| <= tol * ||y|| for every column. Since alpha - alpha* = A^{-1} r, the
error then obeys ||alpha - alpha*|| <= tol ||y|| / lambda_min(K + ridge I).

Preconditioners M: ``"jacobi"`` (the diagonal of K + ridge I), ``"block"`` (block-Jacobi: the
Cholesky factors of the diagonal blocks of size ``block_size``, needs K as a matrix), or any
callable r -> M^{-1} r.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from lazylab.solve._linalg import as_matrix, check_ridge

Matvec = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class CGInfo:
    """Outcome of a CG solve: iterations used, final max relative residual, whether tol was met."""

    iterations: int
    relative_residual: float
    converged: bool


def _block_jacobi(K: torch.Tensor, ridge: float, block_size: int) -> Matvec:
    """M^{-1} r with M the block-diagonal part of K + ridge I (batched Cholesky of the blocks)."""
    n = K.shape[0]
    nb = n // block_size
    eye = torch.eye(block_size, dtype=K.dtype, device=K.device)
    full = nb * block_size
    blocks = torch.stack([K[i * block_size:(i + 1) * block_size,
                            i * block_size:(i + 1) * block_size] for i in range(nb)])
    L_full, info = torch.linalg.cholesky_ex(blocks + ridge * eye)
    if bool((info != 0).any()):
        raise ValueError("preconditioner 'block' failed: a diagonal block of K + ridge I is not "
                         "positive definite; use preconditioner='jacobi' or a ridge > 0")
    tail = None
    if full < n:
        T = K[full:, full:] + ridge * torch.eye(n - full, dtype=K.dtype, device=K.device)
        tail, info_t = torch.linalg.cholesky_ex(T)
        if int(info_t) != 0:
            raise ValueError("preconditioner 'block' failed: the last diagonal block of "
                             "K + ridge I is not positive definite; use preconditioner='jacobi'")

    def apply(r: torch.Tensor) -> torch.Tensor:
        k = r.shape[1]
        head = r[:full].reshape(nb, block_size, k)
        out = torch.cholesky_solve(head, L_full).reshape(full, k)
        if tail is not None:
            out = torch.cat([out, torch.cholesky_solve(r[full:], tail)])
        return out

    return apply


def _preconditioner(pre: str | Matvec | None, K: torch.Tensor | None, diag: torch.Tensor | None,
                    ridge: float, block_size: int, n: int) -> Matvec | None:
    if pre is None:
        return None
    if callable(pre):
        return pre
    if pre == "jacobi":
        if diag is None:
            if K is None:
                raise ValueError("preconditioner='jacobi' with a matvec needs diag= (the "
                                 "diagonal of K)")
            diag = K.diagonal()
        d = diag.reshape(n, 1) + ridge
        if bool((d <= 0).any()):
            raise ValueError("preconditioner='jacobi' needs a positive diagonal of K + ridge I")
        inv = 1.0 / d
        return lambda r: inv * r
    if pre == "block":
        if K is None:
            raise ValueError("preconditioner='block' needs K as a matrix, not a matvec")
        if int(block_size) != block_size or block_size < 1:
            raise ValueError(f"block_size must be a positive integer; got {block_size!r}")
        return _block_jacobi(K, ridge, min(int(block_size), n))
    raise ValueError(f"preconditioner must be None, 'jacobi', 'block' or a callable; got {pre!r}")


def _check_tol(tol: float) -> float:
    """tol as a float, ValueError unless it is > 0."""
    tol = float(tol)
    if not tol > 0:
        raise ValueError(f"tol must be > 0; got {tol!r}")
    return tol


def _check_max_iter(max_iter: int | None, n: int) -> int:
    """The iteration cap (default 10 n), ValueError unless a non-negative integer."""
    if max_iter is None:
        max_iter = 10 * n
    if int(max_iter) != max_iter or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative integer; got {max_iter!r}")
    return max_iter


def _start(A: Matvec, Y: torch.Tensor, x0: torch.Tensor | None
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(column norms of Y with zeros read as 1, starting point X, its residual Y - A X)."""
    ynorm = torch.linalg.vector_norm(Y, dim=0)
    ynorm = torch.where(ynorm > 0, ynorm, torch.ones_like(ynorm))
    if x0 is None:
        return ynorm, torch.zeros_like(Y), Y.clone()
    X = as_matrix(x0, Y.shape[0], "x0")[0].to(Y.dtype).clone()
    return ynorm, X, Y - A(X)


def _operator(K: torch.Tensor | Matvec, y: torch.Tensor
              ) -> tuple[torch.Tensor | None, Matvec, torch.Tensor, bool]:
    """Check K and y: (K as a matrix or None, its matvec, y as an (n, k) matrix in K's dtype,
    whether y was a vector)."""
    if isinstance(K, torch.Tensor):
        if K.dim() != 2 or K.shape[0] != K.shape[1]:
            raise ValueError(f"K must be a square matrix or a callable; got {tuple(K.shape)}")
        Kmat: torch.Tensor | None = K
        matvec: Matvec = K.__matmul__
    elif callable(K):
        Kmat, matvec = None, K
    else:
        raise ValueError(f"K must be a torch.Tensor or a callable; got {type(K).__name__}")
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"y must be a torch.Tensor; got {type(y).__name__}")
    n = y.shape[0]
    if Kmat is not None and Kmat.shape[0] != n:
        raise ValueError(f"y must have {Kmat.shape[0]} rows to match K; got {n}")
    Y, vec = as_matrix(y, n)
    if Kmat is not None:
        Y = Y.to(Kmat.dtype)
    return Kmat, matvec, Y, vec


def _max_rel(R: torch.Tensor, ynorm: torch.Tensor) -> float:
    """The largest column-wise relative residual ||r|| / ||y||."""
    return float((torch.linalg.vector_norm(R, dim=0) / ynorm).max())


def _pcg(A: Matvec, precond: Matvec | None, Y: torch.Tensor, X: torch.Tensor,
         R: torch.Tensor, ynorm: torch.Tensor, tol: float, max_iter: int,
         callback: Callable[[int, float], None] | None) -> tuple[int, float]:
    """The PCG recurrence of the module docstring, updating X in place from residual R = Y - A X;
    returns (iterations, last max relative residual)."""
    Z = precond(R) if precond is not None else R
    P = Z.clone()
    rz = (R * Z).sum(0)
    it, rel = 0, _max_rel(R, ynorm)
    tiny = torch.finfo(Y.dtype).tiny
    while it < max_iter and math.isfinite(rel):
        if rel <= tol:
            # The recurrence residual drifts from y - A x in finite precision; accept only
            # when the true residual meets tol, otherwise restart from it.
            R = Y - A(X)
            rel = _max_rel(R, ynorm)
            if rel <= tol:
                break
            Z = precond(R) if precond is not None else R
            P = Z.clone()
            rz = (R * Z).sum(0)
        AP = A(P)
        pAp = (P * AP).sum(0)
        # A finished column (rz = 0) must not produce 0/0.
        ok = pAp.abs() > tiny
        step = torch.where(ok, rz / torch.where(ok, pAp, 1.0), 0.0)
        X.add_(P * step)
        R.sub_(AP * step)
        Z = precond(R) if precond is not None else R
        rz_new = (R * Z).sum(0)
        ok = rz.abs() > tiny
        beta = torch.where(ok, rz_new / torch.where(ok, rz, 1.0), 0.0)
        P = Z + P * beta
        rz = rz_new
        it += 1
        rel = _max_rel(R, ynorm)
        if callback is not None:
            callback(it, rel)
    return it, rel


def kernel_ridge_cg(K: torch.Tensor | Matvec, y: torch.Tensor, *, ridge: float = 0.0,
                    tol: float = 1e-8, max_iter: int | None = None,
                    preconditioner: str | Matvec | None = "jacobi",
                    diag: torch.Tensor | None = None, block_size: int = 256,
                    x0: torch.Tensor | None = None, return_info: bool = False,
                    callback: Callable[[int, float], None] | None = None,
                    ) -> torch.Tensor | tuple[torch.Tensor, CGInfo]:
    """Solve (K + ridge I) alpha = y by preconditioned conjugate gradients.

    Parameters
    ----------
    K : (n, n) symmetric PSD matrix, or a callable v -> K v acting on (n, k) blocks.
    y : (n,) or (n, k) right-hand sides (all columns are solved together).
    ridge : ridge >= 0 added to the diagonal (needed when K is singular).
    tol : stop when ||r|| <= tol ||y|| for every column (r the residual of the full system).
    max_iter : iteration cap (default 10 n; exact arithmetic needs at most n).
    preconditioner : "jacobi" (default; with a callable K it needs ``diag``), "block"
        (block-Jacobi, K a matrix), None, or a callable r -> M^{-1} r.
    diag : the diagonal of K, for "jacobi" with a matvec.
    block_size : block size of the "block" preconditioner.
    x0 : optional (n,) or (n, k) starting point.
    return_info : also return a :class:`CGInfo`.
    callback : called as callback(iteration, max relative residual) after every iteration
        (e.g. to drive a progress bar).

    Returns
    -------
    alpha : (n,) or (n, k), matching y; with ``return_info`` the pair (alpha, info).
    A RuntimeWarning is issued when tol was not met within max_iter.
    """
    tol = _check_tol(tol)
    ridge = check_ridge(ridge)
    Kmat, matvec, Y, vec = _operator(K, y)
    n = Y.shape[0]
    max_iter = _check_max_iter(max_iter, n)
    precond = _preconditioner(preconditioner, Kmat, diag, ridge, block_size, n)

    def A(v: torch.Tensor) -> torch.Tensor:
        out = matvec(v)
        return out + ridge * v if ridge > 0 else out

    ynorm, X, R = _start(A, Y, x0)
    it, rel = _pcg(A, precond, Y, X, R, ynorm, tol, max_iter, callback)
    if not math.isfinite(rel):
        raise ValueError("kernel_ridge_cg produced a non-finite residual: K + ridge I must be "
                         "symmetric positive definite")
    converged = rel <= tol
    if converged and it == max_iter:
        rel = _max_rel(Y - A(X), ynorm)
        converged = rel <= tol
    if not converged:
        advice = ("raise max_iter or ridge" if precond is not None
                  else "raise max_iter or ridge, or use a preconditioner")
        warnings.warn(f"kernel_ridge_cg did not reach tol={tol:g} in {max_iter} iterations "
                      f"(relative residual {rel:.3g}); {advice}", RuntimeWarning, stacklevel=2)
    out = X.squeeze(1) if vec else X
    if return_info:
        return out, CGInfo(iterations=it, relative_residual=rel, converged=converged)
    return out
