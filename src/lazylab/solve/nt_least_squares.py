"""Least squares for the neural-tangent (NT) model of a quadratic-activation network, by CG with
implicit products over streamed samples (never forming the n x (N d) feature matrix).

The NT class of Ghorbani et al. (2019), Eq. (3), for sigma(u) = u^2 and a fixed random first
layer W (N x d) is

    f(x; U, c) = c + sum_i 2 (w_i . x)(u_i . x) = c + 2 x^T W^T U x,   U in R^{N x d}.

f depends on U only through W^T U. With the thin SVD W = P diag(s) Q (Q: k x d, orthonormal
rows, k = rank W) write W^T U = Q^T G, G = diag(s) P^T U in R^{k x d}: the same function class,
parameterised by G with features phi(x) = 2 (Q x) x^T. Working in G removes W's conditioning
(the spread of its singular values). Fitting an intercept is the same as centring features and
targets by their sample means (phi_bar = 2 Q S, S = X^T X / n), which removes the other large
eigenvalue (E[x^T A x] = Tr A couples the trace direction to the intercept). For isotropic x
the centred population Gram operator is then G -> 2 (sym part) with eigenvalues in [1, 2]
(E[(x^T A x - Tr A)(x^T B x - Tr B)] = 2 Tr(AB) for x ~ N(0, I)), so conjugate gradients on
the normal equations

    (1/n) Phi~^T Phi~ G = (1/n) Phi~^T (y - y_bar)

converge in a few tens of iterations. Each iteration is one pass over the samples with three
(b x d) x (d x k) products per chunk of b samples (float32 on the data's device) accumulated
into the (k x d) gradient in float64. Samples are regenerated for every pass from per-chunk
seeds (or kept when they fit the cache budget), so memory is O(b d + k d). CG from G = 0 gives
the minimum-norm least-squares solution, whose fitted function is the unique least-squares fit
over the NT class (the same function as the explicit lstsq on the N d features).

The result is f(x) = c + x^T M x with M = Q^T G + G^T Q and c = y_bar - Tr(M S).

Example
-------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> W = torch.randn(3, 6, generator=g, dtype=torch.float64) / 6 ** 0.5
>>> def sampler(n, gen):
...     X = torch.randn(n, 6, generator=gen, dtype=torch.float64)
...     return X, (X[:, 0] * X[:, 1])
>>> fit = nt_least_squares(W, sampler, 4000, seed=1, dtype=torch.float64, tol=1e-10)
>>> fit.info.converged, fit.info.iterations < 40
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from lazylab.solve.cg import CGInfo

Sampler = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class NTLeastSquares:
    """The fitted NT model as f(x) = c + x^T M x (and in the network's parameters U, c).

    Attributes
    ----------
    M : (d, d) symmetric float64 (CPU) matrix; c : the intercept.
    U : (N, d) float64 NT direction with W^T U = Q^T G, so f = c + 2 x^T W^T U x.
    info : CG outcome (iterations, relative residual of the normal equations, converged).
    train_mse : mean squared training error (1/n) sum (y_i - f(x_i))^2.
    residuals : relative normal-equation residual after every iteration.
    """

    M: torch.Tensor
    c: float
    U: torch.Tensor
    info: CGInfo
    train_mse: float
    residuals: list[float]


def _chunk_seed(seed: int, j: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(j)]).generate_state(1, np.uint64)[0]
               % (2**63 - 1))


class _Stream:
    """The n samples as chunks, each drawn from its own seeded generator (identical on every
    pass), optionally cached."""

    def __init__(self, sampler: Sampler, n: int, chunk: int, seed: int, device: torch.device,
                 dtype: torch.dtype, cache: bool):
        self.sampler, self.n, self.chunk, self.seed = sampler, n, chunk, seed
        self.device, self.dtype, self.cache = device, dtype, cache
        self._store: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def _draw(self, j: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator(device=self.device).manual_seed(_chunk_seed(self.seed, j))
        X, y = self.sampler(size, gen)
        if X.shape != (size, X.shape[1]) or y.shape[0] != size:
            raise ValueError(f"sampler must return X (n, d) and y (n,) for n = {size}; got "
                             f"{tuple(X.shape)} and {tuple(y.shape)}")
        return X.to(self.device, self.dtype), y.to(self.device, torch.float64).reshape(-1)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        if self._store is not None:
            yield from self._store
            return
        keep: list[tuple[torch.Tensor, torch.Tensor]] = []
        for j, i0 in enumerate(range(0, self.n, self.chunk)):
            item = self._draw(j, min(self.chunk, self.n - i0))
            if self.cache:
                keep.append(item)
            yield item
        if self.cache:
            self._store = keep


def _check_args(W: torch.Tensor, n: int, chunk: int, tol: float) -> None:
    """ValueError naming the first argument of :func:`nt_least_squares` out of range."""
    if not isinstance(W, torch.Tensor) or W.dim() != 2:
        raise ValueError("W must be a 2-D torch.Tensor (N, d)")
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer >= 2; got {n!r}")
    if int(chunk) != chunk or chunk < 1:
        raise ValueError(f"chunk must be a positive integer; got {chunk!r}")
    if not tol > 0:
        raise ValueError(f"tol must be > 0; got {tol!r}")


@dataclass
class _Moments:
    """Pass 0 over the samples: S = X^T X / n, y_bar, Var y, and
    rhs = (1/n) Phi~^T (y - y_bar) in the G parameterisation."""

    S: torch.Tensor
    ybar: float
    var_y: float
    rhs: torch.Tensor


def _moments(stream: _Stream, Q: torch.Tensor, Q64: torch.Tensor, n: int,
             dtype: torch.dtype, dev: torch.device) -> _Moments:
    """S, y_bar, sum y^2 and sum_i y_i 2 (Q x_i) x_i^T in one pass (float64 accumulation)."""
    k, d = Q.shape
    S = torch.zeros(d, d, dtype=torch.float64, device=dev)
    Ty = torch.zeros(k, d, dtype=torch.float64, device=dev)
    ysum = y2sum = 0.0
    for X, y in stream:
        S += (X.T @ X).double()
        A = X @ Q.T
        Ty += (2 * (A * y.to(dtype)[:, None]).T @ X).double()
        ysum += float(y.sum())
        y2sum += float((y * y).sum())
    S /= n
    ybar = ysum / n
    var_y = y2sum / n - ybar * ybar
    rhs = Ty / n - 2 * ybar * (Q64 @ S)
    return _Moments(S, ybar, var_y, rhs)


def _normal_operator(stream: _Stream, Q: torch.Tensor, QS: torch.Tensor, n: int,
                     dtype: torch.dtype, dev: torch.device
                     ) -> Callable[[torch.Tensor], torch.Tensor]:
    """G -> (1/n) Phi~^T Phi~ G, one pass over the samples (QS = Q S = phi_bar / 2)."""
    k, d = Q.shape

    def normal(G: torch.Tensor) -> torch.Tensor:
        Gc = G.to(dtype)
        shift = 2 * float((QS * G).sum())
        acc = torch.zeros(k, d, dtype=torch.float64, device=dev)
        fsum = 0.0
        for X, _ in stream:
            A = X @ Q.T
            f = 2 * (A * (X @ Gc.T)).sum(1) - shift
            acc += (2 * (A * f[:, None]).T @ X).double()
            fsum += float(f.sum(dtype=torch.float64))
        return acc / n - 2 * (fsum / n) * QS

    return normal


def _cg(normal: Callable[[torch.Tensor], torch.Tensor], rhs: torch.Tensor, tol: float,
        max_iter: int, callback: Callable[[int, float], None] | None
        ) -> tuple[torch.Tensor, torch.Tensor, int, float, list[float]]:
    """Plain CG on normal(G) = rhs from G = 0 (so the minimum-norm solution); returns
    (G, final residual R, iterations, relative residual, relative residual per iteration)."""
    G = torch.zeros_like(rhs)
    R = rhs.clone()
    Pd = R.clone()
    rr = float((R * R).sum())
    bnorm = math.sqrt(float((rhs * rhs).sum())) or 1.0
    rel = math.sqrt(rr) / bnorm
    residuals: list[float] = []
    it = 0
    while rel > tol and it < max_iter:
        AP = normal(Pd)
        pap = float((Pd * AP).sum())
        if not pap > 0:
            break
        a = rr / pap
        G += a * Pd
        R -= a * AP
        rr_new = float((R * R).sum())
        Pd = R + (rr_new / rr) * Pd
        rr = rr_new
        it += 1
        rel = math.sqrt(rr) / bnorm
        residuals.append(rel)
        if callback is not None:
            callback(it, rel)
    return G, R, it, rel, residuals


def nt_least_squares(W: torch.Tensor, sampler: Sampler, n: int, *, seed: int,
                     chunk: int = 65_536, tol: float = 1e-5, max_iter: int = 200,
                     device: torch.device | str | None = None,
                     dtype: torch.dtype = torch.float32, cache_bytes: int | None = None,
                     rank_rtol: float = 1e-10,
                     callback: Callable[[int, float], None] | None = None) -> NTLeastSquares:
    """Least-squares fit of f(x) = c + 2 x^T W^T U x on n samples, by CG (see module docstring).

    Parameters
    ----------
    W : (N, d) first-layer weights (any dtype; the SVD is taken in float64).
    sampler : (m, generator) -> (X (m, d), y (m,)), drawing on the generator's device.
    n : number of training samples; seed : their seed (chunk j uses seed (seed, j)).
    chunk : samples per chunk.
    tol : stop when ||rhs - N G|| <= tol ||rhs|| for the normal equations N G = rhs; float32
        products resolve about 1e-6, so use float64 for tighter tolerances.
    max_iter : CG iteration cap.
    device : where chunks are drawn and multiplied (default W's device).
    dtype : dtype of the chunk products (float32 by default; accumulation is float64).
    cache_bytes : keep the samples in memory when n d itemsize fits in this many bytes
        (default: 1/4 of the GPU's memory on CUDA, 1 GiB on CPU); else they are redrawn each pass.
    rank_rtol : singular values of W below rank_rtol * s_max count as zero.
    callback : callback(iteration, relative residual) after every CG iteration.
    """
    _check_args(W, n, chunk, tol)
    dev = torch.device(device) if device is not None else W.device
    d = W.shape[1]
    P, s, Vh = torch.linalg.svd(W.to(dev, torch.float64), full_matrices=False)
    k = int((s > rank_rtol * s[0]).sum())
    Q64 = Vh[:k]                                   # (k, d) orthonormal rows
    Q = Q64.to(dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if cache_bytes is None:
        cache_bytes = (torch.cuda.get_device_properties(dev).total_memory // 4
                       if dev.type == "cuda" else 1 << 30)
    stream = _Stream(sampler, int(n), int(chunk), int(seed), dev, dtype,
                     cache=int(n) * d * itemsize <= cache_bytes)
    mom = _moments(stream, Q, Q64, n, dtype, dev)
    normal = _normal_operator(stream, Q, Q64 @ mom.S, n, dtype, dev)
    G, R, it, rel, residuals = _cg(normal, mom.rhs, tol, max_iter, callback)
    train_mse = mom.var_y - float((G * mom.rhs).sum()) - float((G * R).sum())
    QtG = Q64.T @ G
    M = (QtG + QtG.T).cpu()
    c = mom.ybar - float((M * mom.S.cpu()).sum())
    U = (P[:, :k] / s[:k]) @ G                     # W^T U = Q^T G
    return NTLeastSquares(M, c, U.cpu(), CGInfo(it, rel, rel <= tol), train_mse, residuals)
