"""Kernel ridge(less) regression at large n without forming the n x n kernel matrix.

Solves (K + ridge I) alpha = y, K_ij = k(x_i, x_j), and predicts f(x) = sum_i alpha_i k(x, x_i),
for the closed-form NTK / NNGP of :mod:`lazylab.kernels`, the Gaussian kernel (by name, from
the registry :data:`lazylab.kernels.protocol.KERNEL_REGISTRY`), any kernel object of the
:class:`lazylab.kernels.protocol.Kernel` protocol (e.g. a
:class:`lazylab.kernels.deep.DeepKernel`), or any callable (X, Z) -> K(X, Z).
Memory O(n (d + r + k)) instead of O(n^2):

* **Matvec by tiles.** K v is computed tile by tile, K_IJ = k(X_I, X_J) for J >= I only, each
  tile used twice (out_I += K_IJ v_J, out_J += K_IJ^T v_I): half the kernel evaluations, and
  the implicit matrix is exactly symmetric, which CG assumes. Tiles are float32 (their
  side from :func:`lazylab.device.block_elems`); each tile's product is taken in float32 and
  summed into float64 accumulators, so the result has the accuracy of the float32 kernel
  entries (relative ~1e-7) whatever n.
* **Nystrom preconditioner** (Frangella, Tropp & Udell 2023, "Randomized Nystrom
  preconditioning", SIAM J. Matrix Anal. Appl. 44(2), Eq. (5.3)), built from r landmark
  columns C = K[:, S] (uniformly drawn S, an explicit generator): K ~ F F^T with
  F = C chol(K_SS + nu I)^-T = U diag(sqrt(lam)) V^T, and

      P^-1 = (lam_r + mu) U (diag(lam) + mu I)^-1 U^T + (I - U U^T),    mu = ridge,

  which maps the top r eigendirections of K + mu I to eigenvalue ~ lam_r + mu; PCG then
  converges at the rate of the remaining spectrum, (lam_{r+1} + mu) / (lam_min + mu).
* **PCG** (:func:`lazylab.solve.kernel_ridge_cg`) in float64 on all columns of y at once,
  stopping at ||y - (K + ridge I) alpha|| <= tol ||y|| per column (the true residual,
  recomputed at the end), with a progress callback.

Ridgeless (ridge = 0) needs K positive definite (the relu NTK is, for distinct inputs that
are not parallel); the preconditioner then uses mu = 0.

Example
-------
>>> import torch
>>> from lazylab.solve import kernel_regression
>>> g = torch.Generator().manual_seed(0)
>>> X = torch.nn.functional.normalize(torch.randn(300, 5, generator=g, dtype=torch.float64), dim=1)
>>> y = X[:, 0] * X[:, 1]
>>> fit = kernel_regression(X, y, kernel="ntk", ridge=1e-3, rank=50, tol=1e-6, generator=g)
>>> fit.info.converged, fit.info.iterations < 60
(True, True)

Without a generator the landmarks are drawn by one seeded with ``seed`` (default 0), so
``kernel_regression(X, y, kernel="ntk", ridge=1e-3)`` works and gives the same fit every run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from lazylab.device import block_elems, check_device
from lazylab.kernels.protocol import KERNEL_REGISTRY, kernel_object
from lazylab.solve._linalg import as_matrix, check_ridge
from lazylab.solve.cg import CGInfo, kernel_ridge_cg
from lazylab.solve.progress import ProgressLog, estimate_cg_cost

KernelFn = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]
#: The kernel names (the keys of :data:`lazylab.kernels.protocol.KERNEL_REGISTRY`).
KERNELS = tuple(KERNEL_REGISTRY)
#: A solve estimated to take longer than this many seconds warns before it starts and prints
#: progress (:func:`kernel_regression`'s ``warn_seconds`` default).
WARN_SECONDS = 60.0


def default_bandwidth(X: torch.Tensor) -> float:
    """The Gaussian bandwidth h = sqrt(d Var(X) / 2): scikit-learn's ``gamma="scale"``.

    exp(-|x - z|^2 / (2 h^2)) = exp(-gamma |x - z|^2) with gamma = 1 / (d Var(X)), the
    variance over all entries of X (n, d), as ``sklearn.svm.SVC(gamma="scale")``; on
    standardized X (Var = 1) that is gamma = 1 / d, ``sklearn.kernel_ridge.KernelRidge``'s
    default for ``kernel="rbf"``. X with zero variance gets gamma = 1 (h^2 = 1/2), as in
    scikit-learn.

    >>> default_bandwidth(torch.tensor([[1.0, -1.0], [-1.0, 1.0]]))
    1.0
    """
    if not isinstance(X, torch.Tensor) or X.dim() != 2 or X.shape[0] < 1:
        raise ValueError("X must be a 2-D torch.Tensor (n, d) with at least one row")
    var = float(X.double().var(unbiased=False))
    gamma = 1.0 / (X.shape[1] * var) if var > 0 else 1.0
    return math.sqrt(0.5 / gamma)


def seeded_generator(generator: torch.Generator | None, seed: int) -> torch.Generator:
    """``generator`` when given, else a CPU generator seeded with ``seed`` (so that a solve
    without an explicit generator is still reproducible)."""
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator or None; got "
                             f"{type(generator).__name__}")
        return generator
    if isinstance(seed, bool) or int(seed) != seed:
        raise ValueError(f"seed must be an integer; got {seed!r}")
    return torch.Generator().manual_seed(int(seed))


def make_kernel(kernel: str | KernelFn, *, activation: str = "relu", trained: str = "first",
                bandwidth: float | None = None) -> KernelFn:
    """A kernel function (X, Z or None) -> K(X, Z) from a name, a kernel object or a callable.

    A name is looked up in :data:`lazylab.kernels.protocol.KERNEL_REGISTRY`
    (:func:`lazylab.kernels.protocol.kernel_object`): ``"ntk"`` / ``"nngp"`` are
    :func:`lazylab.kernels.ntk` (with ``activation``, ``trained``) /
    :func:`lazylab.kernels.nngp` as :class:`lazylab.kernels.protocol.ClosedFormKernel`
    objects, ``"gaussian"`` is :func:`lazylab.kernels.gaussian_kernel` with ``bandwidth``
    (required). A kernel object (:class:`lazylab.kernels.protocol.Kernel`) or any other
    callable is returned as is.
    """
    if callable(kernel):
        return kernel
    return kernel_object(kernel, activation=activation, trained=trained,
                         bandwidth=bandwidth)


def check_kernel_finite(kernel: KernelFn, X: torch.Tensor, *, dtype: torch.dtype,
                        name: str = "X", probe: int = 8) -> None:
    """Refuse inputs whose kernel is not finite in ``dtype``, before any solve.

    X itself must be finite in ``dtype`` (1e39 overflows float32). The kernel is then
    evaluated on the ``probe`` rows of largest and of smallest norm: the closed-form kernels
    grow with the norms (k(x, x) = |x|^2 k(e, e) for the relu NTK; the Gaussian kernel forms
    |x|^2 + |z|^2 - 2 x.z), so an overflow shows there first; for a PSD kernel,
    |k(x, z)| <= sqrt(k(x, x) k(z, z)) bounds every other entry by these diagonals.
    """
    Xd = X.to(dtype)
    if not bool(torch.isfinite(Xd).all()):
        raise ValueError(f"{name} must be finite in {dtype}; its largest entry "
                         f"{float(X.abs().max()):.3g} overflows it (max "
                         f"{torch.finfo(dtype).max:.3g}); rescale {name}, e.g. with sklearn's "
                         "StandardScaler")
    # norms of X / max|X|, so that the ranking and the reported norm do not overflow
    scale = float(X.abs().max()) if X.numel() else 1.0
    norms = torch.linalg.vector_norm(X.double() / (scale or 1.0), dim=1) * (scale or 1.0)
    k = min(int(probe), len(norms))
    idx = torch.cat([norms.topk(k).indices, norms.topk(k, largest=False).indices]).unique()
    if not bool(torch.isfinite(kernel(Xd[idx], None)).all()):
        raise ValueError(f"{name} is too large for this kernel: k(x, x) overflows {dtype} at "
                         f"its rows of largest norm ({float(norms.max()):.3g}); rescale {name}, "
                         "e.g. with sklearn's StandardScaler")


def _tile_side(device: torch.device, budget_bytes: int | None, scratch: int = 3) -> int:
    """Side b of a b x b float32 tile whose evaluation (about ``scratch`` tile-sized float32
    temporaries) fits in one block of the memory budget."""
    return max(64, math.isqrt(block_elems(device, budget_bytes, itemsize=4) // scratch))


class BlockedKernel:
    """The implicit matrix K = k(X, X) (n x n), never stored: products by float32 tiles.

    Parameters
    ----------
    kernel : (X_I, X_J or None) -> K(X_I, X_J); None means X_J = X_I (symmetric tile).
    X : (n, d) inputs; kept on ``device`` in ``block_dtype``.
    block_dtype : dtype of the kernel tiles (float32 by default; float64 for exact checks).
    tile : tile side (default from :func:`lazylab.device.block_elems`).
    budget_bytes : memory budget of one tile evaluation (default: the device's).
    device : where tiles are computed (default: X's device).
    """

    def __init__(self, kernel: KernelFn, X: torch.Tensor, *,
                 block_dtype: torch.dtype = torch.float32, tile: int | None = None,
                 budget_bytes: int | None = None, device: torch.device | str | None = None):
        if not isinstance(X, torch.Tensor) or X.dim() != 2 or not X.is_floating_point():
            raise ValueError("X must be a 2-D floating-point torch.Tensor (n, d)")
        self.device = check_device(device) if device is not None else X.device
        self.kernel = kernel
        self.X = X.to(device=self.device, dtype=block_dtype)
        self.n = X.shape[0]
        self.block_dtype = block_dtype
        b = _tile_side(self.device, budget_bytes) if tile is None else int(tile)
        if b < 1:
            raise ValueError(f"tile must be a positive integer; got {tile!r}")
        self.tile = min(b, self.n)
        self.tiles_evaluated = 0

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def _eval(self, A: torch.Tensor, B: torch.Tensor | None) -> torch.Tensor:
        """k(A, B) on ``device`` in ``block_dtype``: the named kernels already are (``.to``
        returns the same tensor); a kernel object with its own device or dtype
        (e.g. ``DeepKernel(dtype=torch.float64)``) is brought back for the products."""
        return self.kernel(A, B).to(device=self.device, dtype=self.block_dtype)

    def _slices(self) -> list[slice]:
        return [slice(i, min(self.n, i + self.tile)) for i in range(0, self.n, self.tile)]

    def matmul(self, V: torch.Tensor) -> torch.Tensor:
        """K V for V (n, k) (or (n,)), returned in float64 on V's device."""
        V2, vec = as_matrix(V, self.n, "V")
        out_dev = V2.device
        Vb = V2.to(device=self.device, dtype=self.block_dtype)
        acc = torch.zeros(V2.shape, dtype=torch.float64, device=self.device)
        sl = self._slices()
        for a, I in enumerate(sl):
            for J in sl[a:]:
                if I == J:
                    T = self._eval(self.X[I], None)
                    acc[I] += (T @ Vb[I]).double()
                else:
                    T = self._eval(self.X[I], self.X[J])
                    acc[I] += (T @ Vb[J]).double()
                    acc[J] += (T.T @ Vb[I]).double()
                self.tiles_evaluated += 1
                del T
        out = acc.to(out_dev)
        return out.squeeze(1) if vec else out

    __call__ = matmul

    def columns(self, idx: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """K[:, idx] (n, len(idx)) in ``dtype``, by row blocks."""
        Xs = self.X[idx.to(self.device)]
        rows = max(1, block_elems(self.device, itemsize=4) // (3 * max(1, len(idx))))
        # filled in place: a list of blocks joined by torch.cat would hold the (n, r) result
        # twice (at n = 10^5, r = 2000 that was 0.8 GB of a 2.4 GB peak)
        out = torch.empty(self.n, len(idx), dtype=dtype, device=self.device)
        for i in range(0, self.n, rows):
            out[i:i + rows] = self.kernel(self.X[i:i + rows], Xs)
        return out

    def row_slices(self, cols: int, temporaries: int = 1) -> list[slice]:
        """Row blocks such that ``temporaries`` (rows, cols) float64 arrays together fit in
        one memory block."""
        rows = max(1, block_elems(self.device) // (max(1, cols) * max(1, temporaries)))
        return [slice(i, min(self.n, i + rows)) for i in range(0, self.n, rows)]

    def cross(self, Xnew: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """k(Xnew, X) V (m, k) in float64, by row blocks of Xnew and column tiles of X."""
        Xn = Xnew.to(device=self.device, dtype=self.block_dtype)
        V2, vec = as_matrix(V, self.n, "V")
        Vb = V2.to(device=self.device, dtype=self.block_dtype)
        out = torch.zeros(Xn.shape[0], V2.shape[1], dtype=torch.float64, device=self.device)
        for i in range(0, Xn.shape[0], self.tile):
            for J in self._slices():
                out[i:i + self.tile] += (self._eval(Xn[i:i + self.tile], self.X[J])
                                         @ Vb[J]).double()
        out = out.to(V2.device)
        return out.squeeze(1) if vec else out


@dataclass
class NystromPreconditioner:
    """P^-1 r = r + U ((lam_r + mu) / (lam + mu) - 1) U^T r (Frangella et al. 2023, Eq. (5.3)).

    Attributes
    ----------
    U : (n, r') orthonormal columns (float32 storage), r' <= r the numerically kept rank.
    lam : (r',) Nystrom eigenvalues (descending, float64).
    mu : the ridge.
    """

    U: torch.Tensor
    lam: torch.Tensor
    mu: float

    @classmethod
    def build(cls, K: BlockedKernel, rank: int, *, ridge: float,
              generator: torch.Generator) -> NystromPreconditioner:
        """Landmark Nystrom of rank ``rank`` with landmarks drawn uniformly by ``generator``.

        Memory: one (n, r) float32 buffer (C, then F = C L^-T, then U, all in place) plus
        row-block temporaries within one memory block, and r x r matrices.
        """
        n = K.n
        r = min(int(rank), n)
        idx = torch.randperm(n, generator=generator, device=generator.device)[:r].cpu()
        C = K.columns(idx, torch.float32)                    # (n, r) float32
        # r x r float64 matrices are freed as soon as they are used: at r = 2000 each is 32 MB
        W = C[idx.to(C.device)].double()
        W += W.T.clone()
        W *= 0.5
        nu = max(float(W.diagonal().sum()), 1e-300) * 1e-7 / r  # relative shift for chol
        W.diagonal().add_(nu)
        L = torch.linalg.cholesky(W)
        del W
        LinvT = torch.linalg.solve_triangular(
            L, torch.eye(r, dtype=L.dtype, device=L.device), upper=False).T
        del L
        FtF = torch.zeros(r, r, dtype=torch.float64, device=C.device)
        # a block's C[sl].double(), its product and the float32 copy back (2.5 float64
        # blocks) fit in half a memory block; at one memory block per temporary they added
        # ~0.6 GB to the peak at n = 10^5, r = 2000 on CPU (2.34 GB measured, target < 2 GB)
        blocks = K.row_slices(r, temporaries=6)
        for sl in blocks:                                    # F = C L^-T, in place
            Fb = C[sl].double() @ LinvT
            FtF += Fb.T @ Fb
            C[sl] = Fb.to(torch.float32)
        # thin SVD of F through F^T F = V diag(s^2) V^T
        del LinvT
        evals, V = torch.linalg.eigh(FtF)
        del FtF
        evals, V = evals.flip(0), V.flip(1)
        lam = evals - nu
        keep = (evals > evals[0] * 1e-10) & (lam > 0)
        s2, V, lam = evals[keep], V[:, keep], lam[keep]
        T = V / s2.sqrt()
        q = int(keep.sum())
        for sl in blocks:                                    # U = F V diag(s)^-1, in place
            C[sl, :q] = (C[sl].double() @ T).to(torch.float32)
        U = C[:, :q]  # a view: a contiguous copy would hold (n, r) twice for a moment
        return cls(U, lam, float(ridge))

    @classmethod
    def from_sketch(cls, matmul: Callable[[torch.Tensor], torch.Tensor], n: int, rank: int, *,
                    ridge: float, generator: torch.Generator,
                    device: torch.device | str | None = None) -> NystromPreconditioner:
        """Randomized Nystrom of rank ``rank`` from ``rank`` products with K only (Frangella,
        Tropp & Udell 2023, Alg. 2.1), for a K known only through ``matmul`` (V -> K V).

        Omega = qr(G) (G n x r Gaussian, drawn by ``generator``), Y = K Omega, a shift
        nu = sqrt(n) eps ||Y||_2 (eps of Y's dtype: the accuracy of the products), then
        Y_nu = Y + nu Omega, L L^T = Omega^T Y_nu, B = Y_nu L^-T = U diag(s) V^T and
        lam = max(s^2 - nu, 0): K_nys = U diag(lam) U^T. U is stored in float64.
        """
        r = min(int(rank), int(n))
        G = torch.randn(n, r, generator=generator, device=generator.device,
                        dtype=torch.float64)
        Omega = torch.linalg.qr(G.to(device)).Q
        Y = matmul(Omega)
        eps = torch.finfo(Y.dtype).eps
        Y = Y.to(torch.float64)
        nu = math.sqrt(n) * eps * max(float(torch.linalg.matrix_norm(Y, 2)), 1e-300)
        for _ in range(8):  # rounding can leave Omega^T Y_nu indefinite: a larger shift then
            Ynu = Y + nu * Omega
            M = Omega.T @ Ynu
            L, info = torch.linalg.cholesky_ex(0.5 * (M + M.T))
            if int(info) == 0:
                break
            nu *= 10.0
        else:
            raise ValueError("the Nystrom sketch Omega^T K Omega is not positive definite: "
                             "the operator's K must be symmetric positive semi-definite")
        B = torch.linalg.solve_triangular(L, Ynu.T, upper=False).T    # Y_nu L^-T
        U, s, _ = torch.linalg.svd(B, full_matrices=False)
        lam = s.square() - nu
        keep = lam > 0
        return cls(U[:, keep], lam[keep], float(ridge))

    @property
    def rank(self) -> int:
        return int(self.lam.numel())

    def __call__(self, R: torch.Tensor) -> torch.Tensor:
        if self.rank == 0:
            return R
        lam_r = float(self.lam[-1])
        scale = (lam_r + self.mu) / (self.lam + self.mu) - 1.0   # (r',)
        U = self.U.to(R.device)
        # products in U's dtype: float32 for the landmark build (U stored in float32), float64
        # for the sketch
        coef = (U.T @ R.to(U.dtype)).double() * scale[:, None].to(R.device)
        return R + (U @ coef.to(U.dtype)).double()


@dataclass
class KernelRegression:
    """A fitted kernel regressor f(x) = k(x, X) alpha.

    Attributes
    ----------
    alpha : (n,) or (n, k) float64 coefficients.
    info : :class:`lazylab.solve.CGInfo` (iterations, relative residual, converged; a direct
        solve has 0 iterations and the residual of its solution).
    operator : the :class:`BlockedKernel` (kernel and training inputs), or the operator of
        :func:`lazylab.solve.operator_regression`.
    preconditioner_rank : the Nystrom rank kept.
    residuals : the max relative residual after each iteration.
    solver : ``"cg"`` or ``"direct"`` (the formed kernel, :func:`operator_regression`).

    See Also
    --------
    kernel_regression : the CG fit over kernel tiles that returns one.

    lazylab.solve.operator_regression : the same for an implicit kernel (formed or by CG).

    lazylab.estimators.KernelRegressor : the scikit-learn estimator on top of both.

    Examples
    --------
    >>> import torch
    >>> from lazylab.solve import kernel_regression
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(200, 3, generator=g, dtype=torch.float64)
    >>> fit = kernel_regression(X, torch.sin(X[:, 0]), ridge=1e-2, rank=50, tol=1e-5)
    >>> fit.info.converged, fit.solver, fit.alpha.shape
    (True, 'cg', torch.Size([200]))
    >>> fit.predict(X[:3]).shape  # k(Xnew, X) alpha
    torch.Size([3])
    """

    alpha: torch.Tensor
    info: CGInfo
    operator: BlockedKernel | Any
    preconditioner_rank: int
    residuals: list[float]
    solver: str = "cg"

    def predict(self, Xnew: torch.Tensor) -> torch.Tensor:
        """k(Xnew, X) alpha, float64."""
        return self.operator.cross(Xnew, self.alpha)


def kernel_regression(X: torch.Tensor, y: torch.Tensor, *, kernel: str | KernelFn = "ntk",
                      ridge: float = 0.0, tol: float = 1e-3, rank: int = 500,
                      max_iter: int = 500, activation: str = "relu", trained: str = "first",
                      bandwidth: float | None = None, block_dtype: torch.dtype = torch.float32,
                      tile: int | None = None, budget_bytes: int | None = None,
                      generator: torch.Generator | None = None, seed: int = 0,
                      device: torch.device | str | None = None,
                      callback: Callable[[int, float], None] | None = None,
                      warn_seconds: float | None = None,
                      progress: bool | None = None) -> KernelRegression:
    """Kernel ridge(less) regression by Nystrom-preconditioned CG over kernel tiles.

    Parameters
    ----------
    X : (n, d) training inputs; y : (n,) or (n, k) targets (k columns solved together).
    kernel : ``"ntk"``, ``"nngp"``, ``"gaussian"``, a kernel object (:class:`lazylab.kernels.
        protocol.Kernel`, e.g. a :class:`lazylab.kernels.deep.DeepKernel`) or a callable
        (X, Z or None) -> K (see :func:`make_kernel`; ``activation``, ``trained``,
        ``bandwidth`` configure names; the Gaussian's ``bandwidth=None`` is
        :func:`default_bandwidth` of X, sklearn's ``gamma="scale"``).
    ridge : >= 0 added to the diagonal (0: ridgeless, K must be positive definite).
    tol : relative residual ||y - (K + ridge I) alpha|| / ||y|| to reach (per column).
    rank : Nystrom preconditioner rank r (0: plain CG); memory n r float32.
    max_iter : CG iteration cap (a RuntimeWarning if tol is not met).
    block_dtype : dtype of the kernel tiles (float64 matches a direct solve to rounding).
    tile, budget_bytes : tile side, or the memory budget it is derived from.
    generator : draws the Nystrom landmarks; None (default): a CPU generator seeded with
        ``seed`` (default 0), so the fit is the same on every call.
    seed : the seed of that default generator (ignored when ``generator`` is given).
    device : where tiles are evaluated (default X's device).
    callback : callback(iteration, relative residual) after every CG iteration.
    warn_seconds : before the solve, one tile is timed and the whole solve estimated
        (:func:`lazylab.solve.progress.estimate_cg_cost`); above ``warn_seconds`` (default
        :data:`WARN_SECONDS`, a minute; 0: always) a RuntimeWarning gives the estimate.
    progress : print a progress line to stderr about every 30 s of predicted time (None:
        when the estimate is above ``warn_seconds``; :class:`~lazylab.solve.progress.ProgressLog`).

    Inputs whose kernel overflows ``block_dtype`` are refused (:func:`check_kernel_finite`).
    The pieces: the kernel (:func:`_kernel_of`), its tiles (:class:`BlockedKernel`), the
    estimate (:func:`_announce`), the preconditioner, CG (residuals: :class:`_Residuals`).

    Returns
    -------
    :class:`KernelRegression`; ``.predict(Xnew)``.
    """
    ridge = check_ridge(ridge)
    kfn = _kernel_of(kernel, X, activation=activation, trained=trained, bandwidth=bandwidth)
    _check_rank(rank)
    gen = seeded_generator(generator, seed)
    op = BlockedKernel(kfn, X, block_dtype=block_dtype, tile=tile, budget_bytes=budget_bytes,
                       device=device)
    Y = _targets(y, op)
    check_kernel_finite(kfn, X, dtype=block_dtype)
    log = _announce(op, max_iter=max_iter, rank=rank, columns=Y.numel() // max(1, op.n),
                    warn_seconds=warn_seconds, progress=progress)
    pre = NystromPreconditioner.build(op, rank, ridge=ridge, generator=gen) if rank > 0 else None
    cb = _Residuals(log, callback)  # after the preconditioner: its clock counts CG only
    alpha, info = kernel_ridge_cg(op.matmul, Y, ridge=ridge, tol=tol, max_iter=max_iter,
                                  preconditioner=pre, return_info=True, callback=cb)
    return KernelRegression(alpha, info, op, pre.rank if pre is not None else 0, cb.values)


def _kernel_of(kernel: str | KernelFn, X: torch.Tensor, *, activation: str, trained: str,
               bandwidth: float | None) -> KernelFn:
    """:func:`make_kernel` of ``kernel``, the Gaussian's ``bandwidth=None`` taken as
    :func:`default_bandwidth` of X (when X is a non-empty (n, d) tensor)."""
    if isinstance(kernel, str) and kernel == "gaussian" and bandwidth is None \
            and isinstance(X, torch.Tensor) and X.dim() == 2 and X.shape[0] > 0:
        bandwidth = default_bandwidth(X)
    return make_kernel(kernel, activation=activation, trained=trained, bandwidth=bandwidth)


def _check_rank(rank: int) -> None:
    if isinstance(rank, bool) or int(rank) != rank or rank < 0:
        raise ValueError(f"rank must be a non-negative integer; got {rank!r}")


def _targets(y: torch.Tensor, op: BlockedKernel) -> torch.Tensor:
    """y as float64 on the tiles' device, once it is a tensor with one row per row of X."""
    if not isinstance(y, torch.Tensor) or y.shape[0] != op.n:
        raise ValueError(f"y must be a tensor with {op.n} rows (one per row of X)")
    return y.to(device=op.device, dtype=torch.float64)


class _Residuals:
    """The CG callback of :func:`kernel_regression`: records each relative residual, then
    passes it to the progress log and to the user's callback. Made once the preconditioner
    is built, it restarts the log's clock there (the rate counts CG iterations, not the
    preconditioner set-up)."""

    def __init__(self, log: ProgressLog | None, callback: Callable[[int, float], None] | None):
        self.values: list[float] = []
        self.log, self.callback = log, callback
        if log is not None:
            log.restart()

    def __call__(self, it: int, rel: float) -> None:
        self.values.append(rel)
        if self.log is not None:
            self.log(it, rel)
        if self.callback is not None:
            self.callback(it, rel)


def _announce(op: BlockedKernel, *, max_iter: int, rank: int, columns: int,
              warn_seconds: float | None, progress: bool | None) -> ProgressLog | None:
    """Estimate the solve, warn when it passes ``warn_seconds``, and return the progress
    log to attach (None: no progress lines)."""
    limit = WARN_SECONDS if warn_seconds is None else float(warn_seconds)
    if not limit >= 0:
        raise ValueError(f"warn_seconds must be a number >= 0 or None; got {warn_seconds!r}")
    est = estimate_cg_cost(op, max_iter=max_iter, rank=rank, columns=columns)
    long = est.total_seconds >= limit  # warn_seconds = 0 always warns
    if long:
        # stacklevel 3: the caller of kernel_regression
        warnings.warn(f"kernel_regression: this solve is estimated at "
                      f"{est.describe(op.device)}; progress is printed to stderr. A smaller "
                      "max_iter, a looser tol, a larger ridge or rank, or a GPU shortens it",
                      RuntimeWarning, stacklevel=3)
    if progress if progress is not None else long:
        return ProgressLog.for_estimate(est)
    return None

