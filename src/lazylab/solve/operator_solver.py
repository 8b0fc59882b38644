"""Kernel ridge(less) regression on an implicit kernel: direct when K can be formed, else
Nystrom-preconditioned conjugate gradients on its products.

The operator is any object with ``n``, ``matmul(V)`` (K V) and ``cross(Z, alpha)``
(K(Z, X) alpha), such as :class:`lazylab.kernels.NTKOperator` (the empirical NTK of any
module by NTK-vector products, K v = J (J^T v)).

**The path** (``solver="auto"``). K can be formed when the operator is an
:class:`~lazylab.kernels.NTKOperator` (by :func:`lazylab.kernels.empirical_ntk`, which picks
its method and blocks within the memory budget) or has a ``dense()`` method. Forming it costs
about n^2 P multiply-adds for P parameters (the Jacobian contraction, at matrix-product speed);
one NTK-vector product costs about 3 passes over the n inputs, ~6 n P, at autodiff speed, so
forming K costs the flops of about n / 6 products and P cancels from the comparison. The
direct path is taken when the n x n float64 kernel fits ``memory_budget`` (as
:class:`lazylab.estimators.KernelRegressor` chooses; 256 MiB on a CPU: n <= 5792),
n <= 6 max_iter (forming costs no more flops than the CG's iteration cap), and the Jacobian
rows of one example pair, 2 P entries of the net's dtype, fit it too (the least
:func:`~lazylab.kernels.empirical_ntk` needs; it blocks the rest within the budget).

**The matrix-free path** preconditions CG with a randomized Nystrom approximation of rank r
built from r products K Omega (Frangella, Tropp & Udell 2023, Alg. 2.1 and Eq. (5.3);
:meth:`lazylab.solve.kernel_solver.NystromPreconditioner.from_sketch`): the top r
eigendirections of K + ridge I are mapped to ~lam_r + ridge, so PCG converges at the rate of
the rest of the spectrum. The sketch is drawn by ``generator`` or, without one, by a CPU
generator seeded with ``seed`` (default 0): the same fit every call.

Example
-------
>>> import torch
>>> from lazylab.kernels import NTKOperator
>>> g = torch.Generator().manual_seed(0)
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(),
...                           torch.nn.Linear(16, 1)).double()
>>> X = torch.randn(40, 3, generator=g, dtype=torch.float64)
>>> fit = operator_regression(NTKOperator(net, X), X[:, 0], ridge=1e-3)
>>> fit.solver
'direct'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from lazylab.device import memory_budget as device_budget
from lazylab.solve._linalg import check_ridge
from lazylab.solve.cg import CGInfo, kernel_ridge_cg
from lazylab.solve.direct import kernel_ridge
from lazylab.solve.kernel_solver import KernelRegression, NystromPreconditioner, seeded_generator

#: Default rank of the Nystrom preconditioner of the matrix-free path (r products up front).
_OPERATOR_RANK = 50
_SOLVERS = ("auto", "direct", "cg")


def dense_kernel(op: Any, budget_bytes: int | None = None) -> torch.Tensor | None:
    """K formed (float64), or None when ``op`` cannot form it: an
    :class:`~lazylab.kernels.NTKOperator` by :func:`~lazylab.kernels.empirical_ntk` over the
    same parameters, or ``op.dense()``."""
    from lazylab.kernels import NTKOperator, empirical_ntk

    if isinstance(op, NTKOperator):
        K = empirical_ntk(op.net, op.X, trained=list(op.names), max_bytes=budget_bytes)
        assert isinstance(K, torch.Tensor)  # return_info=False
        return K.to(torch.float64)
    dense = getattr(op, "dense", None)
    return dense().to(torch.float64) if callable(dense) else None


def _formable(op: Any) -> bool:
    from lazylab.kernels import NTKOperator

    return isinstance(op, NTKOperator) or callable(getattr(op, "dense", None))


def _jacobian_row_bytes(op: Any) -> int:
    """Bytes of two Jacobian rows (2 P entries) of an NTKOperator's trained tensors; 0 for
    other operators."""
    from lazylab.kernels import NTKOperator

    if not isinstance(op, NTKOperator):
        return 0
    tensors = dict(op.net.named_parameters()) | dict(op.net.named_buffers())
    P = sum(tensors[k].numel() for k in op.names)
    return 2 * P * op.X.element_size()


def choose_operator_solver(op: Any, solver: str, *, max_iter: int,
                           memory_budget: int | None) -> str:
    """``"direct"`` or ``"cg"`` for ``solver`` (module docstring: the path)."""
    if solver not in _SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(map(repr, _SOLVERS))}; "
                         f"got {solver!r}")
    if solver == "direct" and not _formable(op):
        raise ValueError(f"solver='direct' needs an operator that can form K (an NTKOperator, "
                         f"or one with a dense() method); {type(op).__name__} has only "
                         "products: use solver='cg'")
    if solver != "auto":
        return solver
    n = int(op.n)
    dev = getattr(op, "device", "cpu")
    budget = device_budget(dev) if memory_budget is None else int(memory_budget)
    fits = 8 * n * n <= budget and n <= 6 * int(max_iter) and _jacobian_row_bytes(op) <= budget
    return "direct" if fits and _formable(op) else "cg"


def _direct(op: Any, Y: torch.Tensor, ridge: float, budget: int | None) -> KernelRegression:
    K = dense_kernel(op, budget)
    assert K is not None  # choose_operator_solver checked that op can form K
    K = K.to(Y.device)
    alpha = kernel_ridge(K, Y, ridge=ridge)
    R = Y - (K @ alpha + ridge * alpha)
    ynorm = torch.linalg.vector_norm(Y.reshape(len(Y), -1), dim=0).clamp_min(1e-300)
    rel = float((torch.linalg.vector_norm(R.reshape(len(R), -1), dim=0) / ynorm).max())
    return KernelRegression(alpha, CGInfo(iterations=0, relative_residual=rel, converged=True),
                            op, 0, [], solver="direct")


def operator_regression(op: Any, y: torch.Tensor, *, ridge: float = 0.0, tol: float = 1e-4,
                        max_iter: int = 500, solver: str = "auto", rank: int = _OPERATOR_RANK,
                        memory_budget: int | None = None,
                        generator: torch.Generator | None = None, seed: int = 0,
                        callback: Callable[[int, float], None] | None = None,
                        ) -> KernelRegression:
    """Kernel ridge(less) regression on an implicit kernel: solve (K + ridge I) alpha = y.

    Parameters
    ----------
    op : an object with ``n``, ``matmul(V)`` and ``cross(Z, alpha)`` (module docstring).
    y : (n,) or (n, k) targets (moved to ``op.device`` when the operator has one).
    ridge : >= 0 added to the diagonal.
    tol, max_iter : the CG stopping residual ||y - (K + ridge I) alpha|| / ||y|| and cap.
    solver : ``"auto"`` (module docstring), ``"direct"`` (form K; an NTKOperator or an
        operator with ``dense()``) or ``"cg"``.
    rank : Nystrom preconditioner rank of the CG path (0: plain CG; r products up front).
    memory_budget : bytes the formed float64 kernel may take (default: the device's).
    generator, seed : draw the Nystrom sketch (default: a CPU generator seeded with ``seed``).
    callback : callback(iteration, relative residual) after every CG iteration.

    Returns
    -------
    :class:`lazylab.solve.KernelRegression` (``.solver`` says which path); predicts with
    ``op.cross``.
    """
    ridge = check_ridge(ridge)
    if not isinstance(y, torch.Tensor) or y.shape[0] != op.n:
        raise ValueError(f"y must be a tensor with {op.n} rows (one per input)")
    if isinstance(rank, bool) or int(rank) != rank or rank < 0:
        raise ValueError(f"rank must be a non-negative integer; got {rank!r}")
    gen = seeded_generator(generator, seed)
    # on the operator's device (an NTKOperator's net's), where its products are computed
    Y = y.to(device=getattr(op, "device", y.device), dtype=torch.float64)
    if choose_operator_solver(op, solver, max_iter=max_iter,
                              memory_budget=memory_budget) == "direct":
        return _direct(op, Y, ridge, memory_budget)
    pre = NystromPreconditioner.from_sketch(op.matmul, int(op.n), int(rank), ridge=ridge,
                                            generator=gen, device=Y.device) if rank > 0 else None
    residuals: list[float] = []

    def cb(it: int, rel: float) -> None:
        residuals.append(rel)
        if callback is not None:
            callback(it, rel)

    alpha, info = kernel_ridge_cg(op.matmul, Y, ridge=ridge, tol=tol, max_iter=max_iter,
                                  preconditioner=pre, return_info=True, callback=cb)
    return KernelRegression(alpha, info, op, pre.rank if pre is not None else 0, residuals)
