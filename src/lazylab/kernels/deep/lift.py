"""From a PyTorch model to a layer description, and from a description to a finite network.

* :func:`layers_from_module` / :func:`kernel_from_module`: an ``nn.Sequential`` or any
  ``torch.fx``-traceable model built from ``nn.Linear``, ``nn.Conv1d``/``nn.Conv2d``,
  supported activations, ``nn.AvgPool1d``/``nn.AvgPool2d``, ``nn.AdaptiveAvgPool1d(1)``/
  ``nn.AdaptiveAvgPool2d(1)``, ``nn.Flatten``, ``nn.LayerNorm``, residual sums
  (``x + block(x)``, ``a(x) + b(x)``: :class:`~.layers.Residual`) and products of branches
  (``a(x) * b(x)``: :class:`~.layers.Product`) becomes a :class:`~.layers.Serial`. The
  module gives the architecture (layer types, widths, strides, padding, whether a layer has a
  bias); the weight and bias scales come from the arguments, since the infinite-width kernel
  is a property of the initial distribution, not of one draw (the module's own weights are
  not read). LayerNorm's affine parameters are taken as fixed at their initial values
  (weight 1, bias 0).
  A layer without an infinite-width rule (BatchNorm, MaxPool, attention, ...) is refused with
  one line naming it and the supported layers.
* :func:`ntk_parametrize`: the finite network of a description, W, b ~ N(0, 1) scaled in the
  forward pass by W_std / sqrt(fan_in) and b_std (NTK parametrization; standard-parametrized
  layers draw W ~ N(0, W_std^2 / fan_in) instead). Its empirical NTK tends to the closed form
  as the width grows, with fluctuations of order width^-1/2 (Jacot et al. 2018; Arora et al.
  2019, Theorem 3.1).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import fx, nn

from lazylab.kernels.deep.activations import (
    ABRelu,
    Elementwise,
    Erf,
    Gelu,
    Sin,
)
from lazylab.kernels.deep.kernel import DeepKernel
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

#: The module types (and functions) that lift, as named in the refusal message.
SUPPORTED = ("Linear", "Conv1d", "Conv2d", "ReLU", "LeakyReLU", "GELU", "Tanh", "Sigmoid",
             "Softplus", "SiLU", "ELU", "Identity", "AvgPool1d", "AvgPool2d",
             "AdaptiveAvgPool1d(1)", "AdaptiveAvgPool2d(1)", "Flatten", "LayerNorm",
             "residual sums", "products of branches")

_QUADRATURE = (nn.Tanh, nn.Sigmoid, nn.Softplus, nn.SiLU, nn.ELU)
_FUNCTIONS: dict[object, Callable[[], Layer]] = {
    F.relu: lambda: ABRelu(0.0, 1.0), torch.relu: lambda: ABRelu(0.0, 1.0),
    F.gelu: Gelu, torch.tanh: lambda: Elementwise(torch.tanh, name="tanh"),
    torch.sigmoid: lambda: Elementwise(torch.sigmoid, name="sigmoid"),
    torch.erf: Erf, torch.sin: Sin,
}


_FAN_IN = (operator.add, torch.add, operator.mul, torch.mul)


class UnsupportedLayer(ValueError):
    """A module layer without an infinite-width rule."""


def _refuse(what: str) -> UnsupportedLayer:
    return UnsupportedLayer(f"kernel_from_module: {what} has no infinite-width rule; "
                            f"supported: {', '.join(SUPPORTED)}")


def _conv(m: nn.Conv1d | nn.Conv2d, W_std: float, b_std: float,
          parameterization: str) -> Conv:
    if m.groups != 1 or any(d != 1 for d in m.dilation) or m.padding_mode not in (
            "zeros", "circular"):
        raise _refuse(f"{type(m).__name__} with groups={m.groups}, dilation={m.dilation}, "
                      f"padding_mode={m.padding_mode!r}")
    padding = m.padding if isinstance(m.padding, str) else tuple(m.padding)
    if padding == "same" and m.padding_mode == "circular":
        padding = "circular"
    return Conv(tuple(m.kernel_size), tuple(m.stride), padding, W_std,
                b_std if m.bias is not None else None, parameterization, m.out_channels,
                m.padding_mode)


def _from_module(m: nn.Module, W_std: float, b_std: float, parameterization: str
                 ) -> Layer | None:
    """The layer of one leaf module (None: the identity)."""
    if isinstance(m, nn.Linear):
        return Dense(W_std, b_std if m.bias is not None else None, parameterization,
                     m.out_features)
    if isinstance(m, (nn.Conv1d, nn.Conv2d)):
        return _conv(m, W_std, b_std, parameterization)
    if isinstance(m, nn.ReLU):
        return ABRelu(0.0, 1.0)
    if isinstance(m, nn.LeakyReLU):
        return ABRelu(float(m.negative_slope), 1.0)
    if isinstance(m, nn.GELU):
        return Gelu() if m.approximate == "none" else Elementwise(m, name="gelu_tanh")
    if isinstance(m, _QUADRATURE):
        return Elementwise(m, name=type(m).__name__.lower())
    if isinstance(m, (nn.Identity, nn.Dropout)):
        return None
    if isinstance(m, (nn.AvgPool1d, nn.AvgPool2d)):
        if m.ceil_mode or not m.count_include_pad:
            raise _refuse(f"{type(m).__name__} with ceil_mode=True or count_include_pad=False")
        return AvgPool(_pair(m.kernel_size, m), _pair(m.stride, m), _pair(m.padding, m))
    if isinstance(m, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d)):
        size = m.output_size if isinstance(m.output_size, tuple) else (m.output_size,)
        if any(s != 1 for s in size):
            raise _refuse(f"{type(m).__name__}({m.output_size}) (only output size 1 lifts)")
        return GlobalAvgPool()
    if isinstance(m, nn.Flatten):
        if m.start_dim != 1 or m.end_dim != -1:
            raise _refuse("Flatten other than Flatten(1, -1)")
        return Flatten()
    if isinstance(m, nn.LayerNorm):
        return LayerNorm(float(m.eps), "channels" if len(m.normalized_shape) == 1 else "all")
    raise _refuse(type(m).__name__)


def _pair(v: int | Sequence[int], m: nn.Module) -> tuple[int, ...]:
    nd = 1 if isinstance(m, nn.AvgPool1d) else 2
    return (int(v),) * nd if isinstance(v, int) else tuple(int(x) for x in v)


Path = tuple[Layer, ...]


def _add(a: Path, b: Path, product: bool = False) -> Path:
    """The path of a(x) + b(x) (or a(x) * b(x)): the common prefix, then a residual (or a
    product) of the two suffixes."""
    i = 0
    while i < min(len(a), len(b)) and a[i] is b[i]:
        i += 1
    fan_in = Product if product else Residual
    return a[:i] + (fan_in(Serial(*a[i:]), Serial(*b[i:])),)


def _node_layer(node: fx.Node, gm: fx.GraphModule, W_std: float, b_std: float,
                parameterization: str) -> Layer | None:
    if node.op == "call_module":
        return _from_module(gm.get_submodule(str(node.target)), W_std, b_std,
                            parameterization)
    if node.op == "call_function" and node.target in _FUNCTIONS:
        return _FUNCTIONS[node.target]()
    is_flatten = (node.op == "call_function" and node.target is torch.flatten) or (
        node.op == "call_method" and node.target == "flatten")
    if is_flatten:
        start = node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)
        if start != 1 or len(node.args) > 2 or "end_dim" in node.kwargs:
            raise _refuse(f"flatten(start_dim={start}) (only flatten(x, 1) lifts)")
        return Flatten()
    if node.op == "call_method" and node.target == "relu":
        return ABRelu(0.0, 1.0)
    raise _refuse(f"{node.op} {getattr(node.target, '__name__', node.target)!s}")


def layers_from_module(module: nn.Module, *, W_std: float = 1.0, b_std: float = 1.0,
                       parameterization: str = "ntk") -> Serial:
    """The layer description of ``module`` (see the module docstring).

    ``W_std``, ``b_std``: the scales of every affine layer (``b_std`` only where the module
    layer has a bias); ``parameterization``: ``"ntk"`` or ``"standard"`` (the standard one
    uses the module's widths).
    """
    try:
        gm = fx.symbolic_trace(module)
    except Exception as exc:  # fx raises many types; say what failed in one line
        raise ValueError(f"kernel_from_module: the module is not torch.fx-traceable "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    paths: dict[fx.Node, Path] = {}
    result: Path | None = None
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if paths:
                raise ValueError("kernel_from_module: the module must take one input")
            paths[node] = ()
        elif node.op == "output":
            result = paths[node.args[0]]
        elif node.op == "call_function" and node.target in _FAN_IN:
            a, b = node.args[:2]
            product = node.target in (operator.mul, torch.mul)
            if not (isinstance(a, fx.Node) and isinstance(b, fx.Node)) or len(node.args) > 2:
                what = "a product" if product else "an addition"
                raise _refuse(f"{what} of a non-layer value")
            paths[node] = _add(paths[a], paths[b], product)
        else:
            src = node.args[0] if node.args else None
            if not isinstance(src, fx.Node) or src not in paths:
                raise _refuse(f"{node.op} {node.target!s} on a non-layer value")
            layer = _node_layer(node, gm, W_std, b_std, parameterization)
            paths[node] = paths[src] + (() if layer is None else (layer,))
    assert result is not None
    return Serial(*result)


def kernel_from_module(module: nn.Module, *, kind: str = "ntk", W_std: float = 1.0,
                       b_std: float = 1.0, parameterization: str = "ntk",
                       memory_budget: int | float | str | None = None,
                       device: torch.device | str | None = None,
                       dtype: torch.dtype | None = None) -> DeepKernel:
    """The infinite-width kernel (:class:`DeepKernel`) of ``module``'s architecture."""
    layers = layers_from_module(module, W_std=W_std, b_std=b_std,
                                parameterization=parameterization)
    return DeepKernel(layers, kind=kind, memory_budget=memory_budget, device=device,
                      dtype=dtype)
