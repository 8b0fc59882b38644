"""Kernels: closed-form infinite-width NNGP/NTK of two-layer and deep networks, and the
empirical NTK of any module.

* :func:`ntk`, :func:`nngp`, :func:`derivative_kernel`: infinite-width kernels of
  f(x) = m^-1/2 sum_r a_r sigma(w_r . x), w_r ~ N(0, I), for any activation and any norms.
* :class:`DeepKernel` (:mod:`lazylab.kernels.deep`): the NNGP/NTK of deep, convolutional and
  residual networks composed from layers or lifted from an ``nn.Module``.
* :class:`Kernel`: the protocol every kernel object follows (``K(X, Z=None)``, ``K.diag(X)``,
  ``K.device``, ``K.dtype``); :func:`kernel_object` builds the named closed forms as such
  objects, which ``KernelRegressor`` and ``lazylab.solve`` accept.
* :func:`gaussian_kernel`: the RBF kernel exp(-|x - z|^2 / (2 h^2)) (a regression baseline).
* :func:`empirical_ntk`: the finite-width tangent kernel of a :class:`TwoLayerNet` (a few
  matrix products) or of any ``torch.nn.Module`` (Jacobian contraction, NTK-vector products
  or structured derivatives; :class:`EntkInfo` reports the choice); :class:`EmpiricalKernel`,
  the same as a kernel object that the estimators and ``lazylab.solve`` take.
* Building blocks: :func:`relu_power_nngp`, :func:`relu_power_ntk` (arc-cosine kernels),
  :func:`poly_dual`, :func:`erf_dual`, :func:`sin_dual`, :func:`gaussian_moment` (exact
  Gaussian expectations), :func:`gaussian_expectation` (2-D quadrature for any f, g).
"""

from lazylab.duals import (
    arccos_j,
    erf_dual,
    gaussian_moment,
    poly_dual,
    relu_power_nngp,
    relu_power_ntk,
    sin_dual,
)
from lazylab.kernels.closed_form import derivative_kernel, nngp, ntk
from lazylab.kernels.deep import DeepKernel
from lazylab.kernels.empirical import (
    coactivation_path,
    empirical_ntk,
    set_coactivation_path,
    trained_names,
)
from lazylab.kernels.empirical_kernel import EmpiricalKernel
from lazylab.kernels.entk_methods import EntkInfo
from lazylab.kernels.gaussian import gaussian_kernel
from lazylab.kernels.implicit import NTKOperator
from lazylab.kernels.protocol import ClosedFormKernel, Kernel, kernel_object
from lazylab.kernels.quadrature import gaussian_expectation

__all__ = [
    # infinite-width kernels of two-layer networks
    "derivative_kernel", "nngp", "ntk",
    # deep, convolutional and residual networks
    "DeepKernel",
    # the kernel protocol and the closed forms as kernel objects
    "ClosedFormKernel", "Kernel", "kernel_object",
    # the RBF baseline
    "gaussian_kernel",
    # finite-width (empirical) tangent kernels
    "EmpiricalKernel", "EntkInfo", "NTKOperator", "empirical_ntk", "trained_names",
    "coactivation_path", "set_coactivation_path",
    # building blocks: dual kernels (from lazylab.duals) and Gaussian quadrature
    "arccos_j", "erf_dual", "gaussian_expectation", "gaussian_moment", "poly_dual",
    "relu_power_nngp", "relu_power_ntk", "sin_dual",
]
