"""Quadratic regression target of Ghorbani, Mei, Misiakiewicz, Montanari (2019), model (qf).

    x ~ N(0, I_d),    y = f*(x) = b0 + x^T B x        (paper Eq. (8), noiseless)

with B symmetric.  The paper's experiments take B = diag(b_j), b_j iid Exp(1); the authors'
companion code also divides by sqrt(d) and centres the target (b0 = -Tr B, so E f* = 0, as
Theorems 1 and 2 require).  Normalised risks R/R0 do not depend on the 1/sqrt(d) scale; SGD
step sizes do.

Gaussian quadratic-form identities (x ~ N(0, I)):  E[x^T A x] = Tr A and
Var(x^T A x) = 2 ||A||_F^2 for symmetric A, hence

    E[(x^T A x + c)^2] = 2 ||A||_F^2 + (Tr A + c)^2.

They give the trivial-predictor risk R0 = E f*^2 = 2||B||_F^2 + (b0 + Tr B)^2 and the exact
population risk of any quadratic predictor c + x^T M x
(:meth:`QuadraticTarget.risk_of_quadratic`).

Example
-------
>>> import torch
>>> B = exponential_B(20, seed=0)
>>> target = QuadraticTarget(B)
>>> X, y = target.sample(5, torch.Generator().manual_seed(1), dtype=torch.float64)
>>> tuple(X.shape), tuple(y.shape)
((5, 20), (5,))
>>> target.risk_of_quadratic(B, target.b0)      # the target itself
0.0
>>> abs(target.risk_of_quadratic(0 * B, 0.0) - target.norm2()) < 1e-12
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from lazylab.seeding import numpy_rng

T = TypeVar("T")


def exponential_B(d: int, seed: int, *, scale: float | None = None) -> np.ndarray:
    """The paper's target matrix B = scale * diag(b_1, ..., b_d), b_j iid Exp(1).

    Parameters
    ----------
    d : input dimension (>= 1).
    seed : seed of the numpy Generator (``lazylab.seeding.numpy_rng``) the b_j come from.
    scale : multiplier of the diagonal; default 1/sqrt(d), as in the companion code
        (y = (sum_j b_j x_j^2 - sum_j b_j)/sqrt(d)), so that ||f*||^2 = 2 sum b_j^2/d ~ 4.

    Returns
    -------
    (d, d) float64 diagonal matrix.
    """
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")
    d = int(d)
    s = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if not np.isfinite(s) or s <= 0:
        raise ValueError(f"scale must be a positive finite number; got {scale!r}")
    b = numpy_rng(seed).exponential(1.0, size=d)
    return np.diag(b * s)


def as_matrix(name: str, M, d: int | None = None) -> np.ndarray:
    """M as a finite float64 (d, d) numpy array (``name`` is used in error messages)."""
    if isinstance(M, torch.Tensor):
        M = M.detach().cpu().double().numpy()
    A = np.asarray(M, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {A.shape}")
    if d is not None and A.shape[0] != d:
        raise ValueError(f"{name} must be ({d}, {d}); got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must have finite entries")
    return A


def per_device(owner: object, name: str, dtype: torch.dtype, device: torch.device,
               make: Callable[[], T]) -> T:
    """``make()``, made once per (dtype, device) and kept in ``owner``'s dict ``name``: a
    sampler draws a batch every SGD step, and a copy from the host each time would put the
    host in the loop (a host copy cannot be captured in a CUDA graph either)."""
    cache = owner.__dict__.setdefault(name, {})
    key = (dtype, str(device))
    if key not in cache:
        cache[key] = make()
    return cache[key]


def is_symmetric(A: np.ndarray) -> bool:
    """Symmetric up to float64 round-off relative to the largest entry."""
    return bool(np.allclose(A, A.T, rtol=0.0, atol=1e-12 * max(1.0, float(np.abs(A).max()))))


def sampling_device(generator: torch.Generator, device) -> torch.device:
    """The device to sample on: ``device`` if given (it must match the generator's), else the
    generator's device."""
    gdev = generator.device
    if device is None:
        return gdev
    dev = torch.device(device)
    if dev.type != gdev.type:
        raise ValueError(f"device {dev} does not match the generator's device {gdev}; "
                         "pass a generator created on the sampling device")
    return dev


class QuadraticTarget:
    """f*(x) = b0 + x^T B x with x ~ N(0, I_d) (Ghorbani et al. 2019, Eq. (8)).

    Parameters
    ----------
    B : (d, d) symmetric matrix (numpy or torch); stored as float64 numpy.
    b0 : offset; default -Tr B, the centred target E f* = 0 of Theorems 1-2.

    Attributes
    ----------
    B : (d, d) float64 numpy array.
    b0 : float.
    d : input dimension.
    """

    def __init__(self, B, b0: float | None = None) -> None:
        Bm = as_matrix("B", B)
        if not is_symmetric(Bm):
            raise ValueError("B must be a symmetric matrix")
        Bm = 0.5 * (Bm + Bm.T)
        self.B = Bm
        self.d = Bm.shape[0]
        self.b0 = -float(np.trace(Bm)) if b0 is None else float(b0)
        if not math.isfinite(self.b0):
            raise ValueError(f"b0 must be finite; got {b0!r}")
        diag = np.diag(Bm)
        self._diagonal = bool(np.array_equal(Bm, np.diag(diag)))

    def norm2(self) -> float:
        """R0 = E f*(x)^2 = 2 ||B||_F^2 + (b0 + Tr B)^2 (= 2||B||_F^2 when centred)."""
        return 2.0 * float(np.sum(self.B**2)) + (self.b0 + float(np.trace(self.B))) ** 2

    def risk_of_quadratic(self, M, c: float) -> float:
        """Exact population risk of the predictor f(x) = c + x^T M x (raw, not divided by R0):

            E[(f*(x) - f(x))^2] = 2 ||B - M||_F^2 + (Tr(B - M) + b0 - c)^2,

        from E[(x^T A x + a)^2] = 2||A||_F^2 + (Tr A + a)^2 with A = B - M (only the
        symmetric part of M matters, so M is symmetrised first).
        """
        Mm = as_matrix("M", M, self.d)
        A = self.B - 0.5 * (Mm + Mm.T)
        return 2.0 * float(np.sum(A**2)) + (float(np.trace(A)) + self.b0 - float(c)) ** 2

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """f*(X) row-wise for X of shape (n, d), in X's dtype and device."""
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must have shape (n, {self.d}); got {tuple(X.shape)}")
        Bt = self._matrix(X.dtype, X.device)
        q = (X * X) @ Bt if self._diagonal else ((X @ Bt) * X).sum(dim=1)
        return q + self.b0

    def _matrix(self, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """B (its diagonal when diagonal) as a tensor, once per (dtype, device)."""
        return per_device(self, "_matrix_cache", dtype, device, lambda: torch.as_tensor(
            np.diag(self.B).copy() if self._diagonal else self.B, dtype=dtype, device=device))

    def sample(self, n: int, generator: torch.Generator, *, device=None,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw n iid pairs: X ~ N(0, I_d) of shape (n, d) from ``generator``, y = f*(X) (n,).

        ``device`` defaults to the generator's device (they must agree).
        """
        if int(n) != n or n < 0:
            raise ValueError(f"n must be a non-negative integer; got {n!r}")
        dev = sampling_device(generator, device)
        X = torch.randn(int(n), self.d, generator=generator, device=dev, dtype=dtype)
        return X, self(X)

    def __repr__(self) -> str:
        return f"QuadraticTarget(d={self.d}, b0={self.b0:.4g}, norm2={self.norm2():.4g})"
