"""Closed-form dual kernels of single activations, below :mod:`lazylab.activations`.

The dual of an activation sigma is E[sigma(w.x) sigma(w.z)] for w ~ N(0, I): the arc-cosine
kernels of the ReLU powers (Cho & Saul 2009), the exact Gaussian moments of polynomials, and the
erf (Williams 1998) and sine duals. :mod:`lazylab.activations` attaches them to its activations
and :mod:`lazylab.kernels` builds the NNGP and NTK kernels of networks from them, so they live
in a package that imports neither (re-exported from :mod:`lazylab.kernels`).
"""

from lazylab.duals.arccos import arccos_j, relu_power_nngp, relu_power_ntk
from lazylab.duals.dual import erf_dual, gaussian_moment, poly_derivative, poly_dual, sin_dual

__all__ = [
    # arc-cosine kernels of the ReLU powers (Cho & Saul 2009)
    "arccos_j", "relu_power_nngp", "relu_power_ntk",
    # exact Gaussian moments of polynomials, and the erf and sine duals
    "erf_dual", "gaussian_moment", "poly_derivative", "poly_dual", "sin_dual",
]
