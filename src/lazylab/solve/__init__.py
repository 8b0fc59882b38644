"""Linear solvers: ridge least squares, kernel ridge regression (direct and conjugate
gradients), chunked normal equations for designs too large to store, and spectral helpers
(eigendecomposition, Cholesky Gram solver, orthogonal complement).

At scale: :func:`kernel_regression` (Nystrom-preconditioned CG over kernel tiles computed on
the fly, never the n x n matrix), :func:`operator_regression` (an implicit kernel such as a
module's empirical NTK: formed and solved directly while it fits, else CG preconditioned by a
randomized Nystrom sketch of its products) and :func:`nt_least_squares` (the NT model of a
quadratic network by CG over streamed samples, never the n x N d features).

All functions work on the device and in the dtype of their tensor inputs.
"""

from lazylab.solve.cg import CGInfo, kernel_ridge_cg
from lazylab.solve.direct import kernel_ridge, lstsq
from lazylab.solve.kernel_solver import (
    KERNELS,
    WARN_SECONDS,
    BlockedKernel,
    KernelRegression,
    NystromPreconditioner,
    check_kernel_finite,
    default_bandwidth,
    kernel_regression,
    make_kernel,
    seeded_generator,
)
from lazylab.solve.normal_equations import NormalEquations
from lazylab.solve.nt_least_squares import NTLeastSquares, nt_least_squares
from lazylab.solve.operator_solver import operator_regression
from lazylab.solve.spectral import GramSolver, Spectrum, eigendecompose, span_complement

__all__ = [
    # direct least squares and kernel ridge regression
    "lstsq", "kernel_ridge",
    # conjugate gradients
    "kernel_ridge_cg", "CGInfo",
    # at scale: kernels and operators never stored, streamed normal equations
    "kernel_regression", "KernelRegression", "BlockedKernel", "operator_regression",
    "nt_least_squares", "NTLeastSquares", "NormalEquations",
    # the kernels and preconditioner behind kernel_regression
    "KERNELS", "make_kernel", "default_bandwidth", "check_kernel_finite", "NystromPreconditioner",
    "seeded_generator", "WARN_SECONDS",
    # spectral helpers
    "GramSolver", "Spectrum", "eigendecompose", "span_complement",
]
