"""Infinite-width NNGP and NTK of deep, convolutional and residual networks.

A compositional kernel calculus in PyTorch, with neural-tangents' ``stax`` conventions
(Novak et al. 2020), so its numbers match: layers (:mod:`.layers`, :mod:`.activations`) map a
kernel state (NNGP covariance, NTK, variances; spatial covariances for convolutions) to the
next layer's, and :class:`DeepKernel` evaluates a network's kernel matrix in tiles within a
memory budget, on any device and dtype.

* layers: :class:`Dense`, :class:`Conv`, :class:`AvgPool`, :class:`GlobalAvgPool`,
  :class:`Flatten`, :class:`LayerNorm`, :class:`Serial`, :class:`Residual` (fan-in sum),
  :class:`Product` (fan-in product);
* activations in closed form: :func:`Relu`, :func:`LeakyRelu`, :func:`Abs` (all
  :class:`ABRelu`), :class:`Erf`, :class:`Gelu`, :class:`Sin`; any other by quadrature,
  :class:`Elementwise`;
* :func:`kernel_from_module` / :func:`layers_from_module`: the kernel of a PyTorch model;
* :func:`ntk_parametrize`: the finite network of a description;
* :func:`from_spec`: a description from JSON-able specs (neural-tangents' layer names).

Example
-------
>>> import math, torch
>>> net = Serial(Dense(W_std=math.sqrt(3)), Relu(), Dense(W_std=math.sqrt(2)), Relu(),
...              Dense(W_std=math.sqrt(2)))
>>> X = torch.eye(3, dtype=torch.float64)
>>> K = DeepKernel(net)(X)      # Arora et al.: the NTK diagonal is L + 1 for L = 2 layers
>>> [round(v, 12) for v in K.diagonal().tolist()]
[3.0, 3.0, 3.0]
"""

from lazylab.kernels.deep.activations import (
    ABRelu,
    Abs,
    Activation,
    Elementwise,
    Erf,
    Gelu,
    LeakyRelu,
    Relu,
    Sin,
)
from lazylab.kernels.deep.finite import ntk_parametrize
from lazylab.kernels.deep.kernel import DeepKernel, parse_bytes
from lazylab.kernels.deep.layers import (
    AvgPool,
    Conv,
    Dense,
    Flatten,
    GlobalAvgPool,
    Layer,
    LayerNorm,
    Product,
    Residual,
    Serial,
)
from lazylab.kernels.deep.lift import (
    SUPPORTED,
    UnsupportedLayer,
    kernel_from_module,
    layers_from_module,
)
from lazylab.kernels.deep.spec import from_spec, layer_from_spec

__all__ = [
    "ABRelu", "Abs", "Activation", "AvgPool", "Conv", "DeepKernel", "Dense", "Elementwise",
    "Erf", "Flatten", "Gelu", "GlobalAvgPool", "Layer", "LayerNorm", "LeakyRelu", "Product",
    "Relu", "Residual", "SUPPORTED", "Serial", "Sin", "UnsupportedLayer", "from_spec",
    "kernel_from_module", "layer_from_spec", "layers_from_module", "ntk_parametrize",
    "parse_bytes",
]
