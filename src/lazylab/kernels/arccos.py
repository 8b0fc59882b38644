"""The arc-cosine kernels of the ReLU powers (defined in :mod:`lazylab.duals.arccos`)."""

from lazylab.duals.arccos import arccos_j, relu_power_nngp, relu_power_ntk

__all__ = ["arccos_j", "relu_power_nngp", "relu_power_ntk"]
