"""Spectral linear algebra of symmetric matrices: eigendecompositions, Cholesky solves and
orthogonal complements (moved here from ``lazylab.theory`` so every paper can use them).

* :func:`eigendecompose` -> :class:`Spectrum` (descending eigenvalues lambda_i, vectors v_i);
* :class:`GramSolver`: y^T H^-1 y by one Cholesky factorization (no explicit inverse);
* :func:`span_complement`: an orthonormal basis of span(W)^perp.

Example
-------
>>> import torch
>>> H = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
>>> s = eigendecompose(H)
>>> [round(float(v), 12) for v in s.eigenvalues]
[3.0, 1.0]
>>> round(GramSolver(H).quad(torch.tensor([1.0, 1.0])), 12)     # y^T H^-1 y = 2/3
0.666666666667
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Spectrum:
    """H_inf = sum_i lambda_i v_i v_i^T with lambda_1 >= ... >= lambda_n (the paper's Sec. 4,
    ordered for Fig. 1's "eigenvalue index").

    Attributes
    ----------
    eigenvalues : (n,) float64, descending.
    eigenvectors : (n, n) float64, column i is v_i (orthonormal).
    """

    eigenvalues: torch.Tensor
    eigenvectors: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.eigenvalues.shape[0])

    @property
    def lambda_max(self) -> float:
        return float(self.eigenvalues[0])

    @property
    def lambda_min(self) -> float:
        """lambda_0 = lambda_min(H_inf) of the paper."""
        return float(self.eigenvalues[-1])

    def project(self, y: torch.Tensor) -> torch.Tensor:
        """The coefficients v_i.y (i = 1..n), in float64."""
        y = _labels(y, self.n)
        return self.eigenvectors.T @ y.to(self.eigenvectors.device)


def eigendecompose(H: torch.Tensor) -> Spectrum:
    """Eigendecomposition of a symmetric (n, n) H, in float64 with descending eigenvalues."""
    if not isinstance(H, torch.Tensor) or H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be a square 2-D tensor; got "
                         f"{getattr(H, 'shape', type(H).__name__)}")
    lam, V = torch.linalg.eigh(H.to(torch.float64))
    return Spectrum(lam.flip(0), V.flip(1))


def _labels(y: torch.Tensor, n: int) -> torch.Tensor:
    if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be a 1-D tensor of {n} labels; got "
                         f"{getattr(y, 'shape', type(y).__name__)}")
    return y.to(torch.float64)



class GramSolver:
    """Solves with a symmetric positive definite H by one Cholesky factorization H = L L^T.

    ``quad(y)`` = y^T H^-1 y = ||L^-1 y||^2 (never an explicit inverse), the squared RKHS norm
    of the labels that drives Theorem 5.1 and Sec. 6 of Arora et al. (2019). No ridge is added:
    a silent ridge would change the measure.

    Raises
    ------
    ValueError
        If H is not numerically positive definite (duplicate or parallel inputs make H_inf
        singular, Remark 5.1).
    """

    def __init__(self, H: torch.Tensor):
        if not isinstance(H, torch.Tensor) or H.ndim != 2 or H.shape[0] != H.shape[1]:
            raise ValueError(f"H must be a square 2-D tensor; got "
                             f"{getattr(H, 'shape', type(H).__name__)}")
        H = H.to(torch.float64)
        L, info = torch.linalg.cholesky_ex(H)
        # A singular H can still factor in floating point (a pivot of rounding size ~1e-16):
        # pivots below n eps max(H_ii), the usual numerical-rank threshold, count as zero.
        n = H.shape[0]
        tiny = n * torch.finfo(torch.float64).eps * float(H.diagonal().abs().max()) if n else 0
        if int(info) != 0 or (n and float(L.diagonal().square().min()) <= tiny):
            raise ValueError("H is not positive definite (a Cholesky pivot is zero or "
                             "negative): the inputs contain duplicate or parallel points, so "
                             "lambda_min(H_inf) = 0; remove them")
        self.L = L
        self.n = int(H.shape[0])

    def whiten(self, y: torch.Tensor) -> torch.Tensor:
        """L^-1 y for (n,) or (n, k) y."""
        if not isinstance(y, torch.Tensor) or y.shape[0] != self.n or y.ndim not in (1, 2):
            raise ValueError(f"y must be a tensor with {self.n} rows; got "
                             f"{getattr(y, 'shape', type(y).__name__)}")
        Y = y.to(torch.float64).to(self.L.device)
        col = Y.ndim == 1
        Y = Y[:, None] if col else Y
        out = torch.linalg.solve_triangular(self.L, Y, upper=False)
        return out[:, 0] if col else out

    def quad(self, y: torch.Tensor) -> float:
        """y^T H^-1 y."""
        return float(self.whiten(y).square().sum())

    def trace_inverse(self) -> float:
        """tr(H^-1) = ||L^-1||_F^2: E[y^T H^-1 y] for i.i.d. uniform +-1 labels independent of
        X, which is >= n^2 / tr(H) = 2n for H_inf (AM-HM)."""
        eye = torch.eye(self.n, dtype=torch.float64, device=self.L.device)
        return float(torch.linalg.solve_triangular(self.L, eye, upper=False).square().sum())


def span_complement(W) -> np.ndarray:
    """Orthonormal basis (d, d - r) of span(W)^perp for W of shape (d, N), r = rank W
    (numerical rank with numpy's default tolerance max(d, N) eps s_max)."""
    A = np.asarray(W.detach().cpu().double().numpy() if hasattr(W, "detach") else W,
                   dtype=np.float64)
    if A.ndim != 2 or not np.all(np.isfinite(A)):
        raise ValueError(f"W must be a finite 2-D matrix; got shape {A.shape}")
    d, N = A.shape
    if N == 0:
        return np.eye(d)
    U, s, _ = np.linalg.svd(A, full_matrices=True)
    r = int(np.sum(s > max(d, N) * np.finfo(np.float64).eps * s[0])) if s[0] > 0 else 0
    return U[:, r:]
