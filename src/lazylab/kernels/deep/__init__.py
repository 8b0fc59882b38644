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
* :class:`KernelState` (of :class:`Block` covariances, from :func:`input_state`): the state a
  layer maps to the next layer's, for writing a layer;
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
    FanIn,
    Flatten,
    GlobalAvgPool,
    Layer,
    LayerNorm,
    Product,
    Residual,
    Serial,
    Shape,
    Trace,
)
from lazylab.kernels.deep.lift import (
    SUPPORTED,
    UnsupportedLayer,
    kernel_from_module,
    layers_from_module,
)
from lazylab.kernels.deep.spec import from_spec, layer_from_spec
from lazylab.kernels.deep.state import (
    Block,
    KernelState,
    input_state,
    paired_state,
    to_diag_block,
    variances,
)

__all__ = [
    # a network's kernel matrix, in tiles within a memory budget
    "DeepKernel", "parse_bytes",
    # layers (neural-tangents' stax.Dense, Conv, AvgPool, GlobalAvgPool, Flatten, LayerNorm,
    # serial; FanOut + FanInSum / FanInProd)
    "Layer", "Dense", "Conv", "AvgPool", "GlobalAvgPool", "Flatten", "LayerNorm", "Serial",
    "FanIn", "Residual", "Product",
    # activations: closed-form duals, or Gaussian quadrature for any other function
    "Activation", "ABRelu", "Relu", "LeakyRelu", "Abs", "Erf", "Gelu", "Sin", "Elementwise",
    # the kernel state a layer maps to the next layer's (for writing a layer)
    "KernelState", "Block", "input_state", "paired_state", "variances", "to_diag_block",
    "Shape", "Trace",
    # from a PyTorch model, from JSON-able specs, and the finite network of a description
    "kernel_from_module", "layers_from_module", "SUPPORTED", "UnsupportedLayer",
    "from_spec", "layer_from_spec", "ntk_parametrize",
]
