"""The finite network of a layer description, for checking the closed forms.

:func:`ntk_parametrize` builds an ``nn.Module`` in which each affine layer computes
W_std / sqrt(fan_in) * W h + b_std * b with W, b ~ N(0, 1) (NTK parametrization, Jacot et al.
2018), or, for a layer described with ``parameterization="standard"``, W h + b with
W ~ N(0, W_std^2 / fan_in), b ~ N(0, b_std^2). Hidden affine layers get ``width`` outputs
(or their own ``width=``), the last one ``out_dim``. As the width grows the network's NNGP
(output covariance over draws) and empirical NTK tend to :class:`~.kernel.DeepKernel`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from lazylab.kernels.deep._spatial import pad_dim
from lazylab.kernels.deep.activations import ABRelu, Activation, Elementwise, Erf, Gelu, Sin
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
    Shape,
)


class _Affine(nn.Module):
    """Dense or Conv with NTK- or standard-parametrized weights."""

    def __init__(self, layer: Dense | Conv, shape: Shape, out: int,
                 gen: torch.Generator, dtype: torch.dtype) -> None:
        super().__init__()
        self.layer = layer
        self.shape = shape
        kernel = layer.filter_shape if isinstance(layer, Conv) else ()
        fan_in = shape[0] * math.prod(kernel)
        w = torch.randn((out, shape[0]) + tuple(kernel), generator=gen, dtype=dtype)
        self.ntk = layer.parameterization == "ntk"
        self.w_scale = layer.W_std / math.sqrt(fan_in)
        self.weight = nn.Parameter(w if self.ntk else w * self.w_scale)
        self.bias = None
        if layer.b_std is not None:
            b = torch.randn(out, generator=gen, dtype=dtype)
            self.bias = nn.Parameter(b if self.ntk else b * layer.b_std)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        w = self.weight * self.w_scale if self.ntk else self.weight
        if isinstance(self.layer, Conv):
            strides, mode, pads, _ = self.layer._geometry(h.shape[2:])
            for i, (lo, hi) in enumerate(pads):
                h = pad_dim(h, 2 + i, lo, hi, mode)
            conv = F.conv1d if h.ndim == 3 else F.conv2d
            out = conv(h, w, stride=strides)
        else:
            out = torch.einsum("oc,nc...->no...", w, h)
        if self.bias is not None:
            b = self.bias * self.layer.b_std if self.ntk else self.bias  # type: ignore[operator]
            out = out + b.reshape((1, -1) + (1,) * (out.ndim - 2))
        return out


class _Map(nn.Module):
    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fn(h)


class _Sum(nn.Module):
    """FanOut, the branches, FanInSum (``product=False``) or FanInProd (``product=True``)."""

    def __init__(self, branches: list[nn.Module], product: bool = False) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)
        self.product = product

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        out = self.branches[0](h)
        for b in self.branches[1:]:
            out = out * b(h) if self.product else out + b(h)
        return out


def _activation(layer: Activation) -> Callable[[torch.Tensor], torch.Tensor]:
    if isinstance(layer, ABRelu):
        return lambda h: layer.a * h.clamp(max=0) + layer.b * h.clamp(min=0)
    if isinstance(layer, Erf):
        return lambda h: layer.a * torch.erf(layer.b * h) + layer.c0
    if isinstance(layer, Sin):
        return lambda h: layer.a * torch.sin(layer.b * h + layer.c0)
    if isinstance(layer, Gelu):
        return F.gelu
    if isinstance(layer, Elementwise):
        return layer.fn
    raise TypeError(f"no finite form for {layer!r}")


def _avg_pool(layer: AvgPool) -> Callable[[torch.Tensor], torch.Tensor]:
    def pool(h: torch.Tensor) -> torch.Tensor:
        strides, mode, pads, _ = layer._geometry(h.shape[2:])
        for i, (lo, hi) in enumerate(pads):
            h = pad_dim(h, 2 + i, lo, hi, mode)
        fn = F.avg_pool1d if h.ndim == 3 else F.avg_pool2d
        return fn(h, layer.window, strides)

    return pool


def _layer_norm(layer: LayerNorm) -> Callable[[torch.Tensor], torch.Tensor]:
    def norm(h: torch.Tensor) -> torch.Tensor:
        dims = (1,) if layer.axis == "channels" else tuple(range(1, h.ndim))
        h = h - h.mean(dim=dims, keepdim=True)
        return h * (h.pow(2).mean(dim=dims, keepdim=True) + layer.eps).rsqrt()

    return norm


def _build(layers: tuple[Layer, ...], shape: Shape, width: int, out_dim: int | None,
           gen: torch.Generator, dtype: torch.dtype) -> tuple[list[nn.Module], Shape]:
    mods: list[nn.Module] = []
    last = max((i for i, l in enumerate(layers) if isinstance(l, (Dense, Conv))), default=-1)
    for i, layer in enumerate(layers):
        if isinstance(layer, (Dense, Conv)):
            out = out_dim if (i == last and out_dim is not None) else (layer.width or width)
            mods.append(_Affine(layer, shape, out, gen, dtype))
            shape = (out,) + layer.out_shape(shape)[1:]
            continue
        if isinstance(layer, (Residual, Product)):
            branches: list[nn.Module] = []
            for b in layer.branches:
                sub, _ = _build(b.layers, shape, width, None, gen, dtype)
                branches.append(nn.Sequential(*sub))
            mods.append(_Sum(branches, product=isinstance(layer, Product)))
        elif isinstance(layer, Activation):
            mods.append(_Map(_activation(layer)))
        elif isinstance(layer, AvgPool):
            mods.append(_Map(_avg_pool(layer)))
        elif isinstance(layer, GlobalAvgPool):
            mods.append(_Map(lambda h: h.flatten(2).mean(2) if h.ndim > 2 else h))
        elif isinstance(layer, Flatten):
            mods.append(nn.Flatten())
        elif isinstance(layer, LayerNorm):
            mods.append(_Map(_layer_norm(layer)))
        else:
            raise TypeError(f"no finite form for {layer!r}")
        shape = layer.out_shape(shape)
    return mods, shape


def ntk_parametrize(net: Layer, input_shape: Shape, width: int, *, out_dim: int = 1,
                    seed: int = 0, dtype: torch.dtype = torch.float64) -> nn.Module:
    """The finite network of ``net`` for inputs of (channels, *spatial) ``input_shape``.

    ``width``: outputs of each hidden affine layer without its own ``width=``; the last
    affine layer has ``out_dim``. Residual and Product branches keep the channel count of
    their input where they end (their last affine layer gets ``width``, so keep it equal to
    the input's channels for a skip connection). Parameters are drawn from ``seed``.
    """
    if int(width) < 1:
        raise ValueError(f"width must be a positive int; got {width!r}")
    gen = torch.Generator().manual_seed(int(seed))
    layers = net.layers if isinstance(net, Serial) else (net,)
    mods, _ = _build(tuple(layers), tuple(input_shape), int(width), out_dim, gen, dtype)
    model = nn.Sequential(*mods)
    return model
