"""Layers of the kernel calculus: each maps a :class:`KernelState` to the next layer's.

Conventions follow neural-tangents' ``stax`` (Novak et al. 2020), so the numbers match it:

* NTK parametrization (``"ntk"``, Jacot et al. 2018): a layer computes
  W_std / sqrt(fan_in) * W h + b_std * b with W, b ~ N(0, 1). Then (Lee et al. 2018 for the
  NNGP, Jacot et al. 2018 and Arora et al. 2019, Eq. (7)-(8), for the NTK)

      K'     = W_std^2 K + b_std^2,
      Theta' = K' + W_std^2 Theta.

* standard parametrization (``"standard"``): W ~ N(0, W_std^2 / fan_in), b ~ N(0, b_std^2)
  are the trained parameters, and the NTK picks up the layer's finite fan-in
  (neural-tangents' ``Dense``/``Conv`` with ``s = (1, 1)``):

      Theta' = fan_in K + W_std^2 Theta (+ 1 when the layer has a bias).

* ``b_std=None`` means no bias (neural-tangents' default); ``b_std=0.0`` is a bias
  initialised at zero, which still adds 1 to the standard-parametrization NTK.
* A convolution with filter F and stride s averages the covariance over its window jointly in
  p and p' (Novak et al. 2019, "Bayesian deep convolutional networks with many channels are
  Gaussian processes"; Arora et al. 2019, Sec. 4, the CNTK), K' = W_std^2 mean_F K + b_std^2,
  with fan_in = C |F|. A ``Dense`` layer on spatial data is a 1x1 convolution.
* Average pooling averages separately over p and p'; global average pooling over all (p, p')
  (so it needs the full spatial covariance); ``Flatten`` averages the diagonal p = p' (a dense
  layer after it has fan-in C |P|), so only the diagonal is ever needed before it.
* ``LayerNorm`` divides by the variance over channels at each position (or over channels and
  positions): K'[p, p'] = K[p, p'] / sqrt((K_xx[p, p] + eps)(K_zz[p', p'] + eps)), and the
  NTK alike (neural-tangents' ``LayerNorm``; the mean over channels of an infinitely wide
  layer is 0).
* ``Residual`` is FanOut, branches in parallel, FanInSum: K and Theta add, exact when the
  branches are independent centred processes, i.e. every branch but one ends in an affine
  layer (possibly followed by pooling or flatten), which the constructor checks.
* ``Product`` is FanOut, branches in parallel, FanInProd (neural-tangents' ``FanInProd``):
  K = prod_i K_i and Theta = sum_i Theta_i prod_{j != i} K_j (two branches:
  K_1 Theta_2 + Theta_1 K_2), exact when the branches are independent, i.e. every branch but
  one holds an affine layer, which the constructor checks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from lazylab.kernels.deep._spatial import (
    out_size,
    pad_dims,
    resolve_padding,
    window_sum,
)
from lazylab.kernels.deep.state import Block, KernelState, to_diag_block, variances

#: strides, padding fill, per-axis pads, output spatial shape
Geometry = tuple[tuple[int, ...], str, tuple[tuple[int, int], ...], tuple[int, ...]]
#: (channels, *spatial) of a layer's finite output.
Shape = tuple[int, ...]
_PARAMS = ("ntk", "standard")
#: Measured peaks (resident memory of a CNN with global pooling, budgets 16-256 MiB) reached
#: 1.3-1.7x the live copies counted per layer (allocator slack, temporaries inside torch
#: ops): the estimate doubles the count so a tile stays within its budget.
_SLACK = 2


@dataclass(frozen=True)
class Trace:
    """One leaf layer's place in a network: its name, output shape, whether it works on
    the full spatial covariance, and the elements it holds per input pair (an estimate of
    its working memory, in units of one kernel entry)."""

    name: str
    shape: Shape
    full: bool
    elems: int


def _elems(shape: Shape, full: bool) -> int:
    n = math.prod(shape[1:]) if len(shape) > 1 else 1
    return n * n if full else n


class Layer:
    """A layer of the calculus. Subclasses define :meth:`apply` and :meth:`out_shape`."""

    #: working copies of the output a layer holds at once (its memory estimate's factor)
    cost_factor: int = 4

    def need_in(self, need_out: bool) -> bool:
        """Whether this layer needs the full spatial covariance of its input, given whether
        its output's is needed (most layers pass the requirement through)."""
        return need_out

    def out_shape(self, shape: Shape) -> Shape:
        """The (channels, *spatial) of the output for an input of ``shape``."""
        return shape

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        """The next state. ``state`` is consumed: its tensors may be overwritten in place
        (a :class:`Residual` hands each branch but the last its own copy)."""
        raise NotImplementedError

    def trace(self, shape: Shape, full: bool, need_out: bool) -> tuple[Shape, bool,
                                                                      list[Trace]]:
        """(output shape, output fullness, [this layer's :class:`Trace`])."""
        full = full and self.need_in(need_out) and len(shape) > 1
        out = self.out_shape(shape)
        full_out = full and len(out) > 1
        cost = _SLACK * (self.cost_factor * _elems(out, full_out) + 2 * _elems(shape, full))
        return out, full_out, [Trace(repr(self), out, full_out, cost)]


def _check_param(parameterization: str) -> None:
    if parameterization not in _PARAMS:
        raise ValueError(f"parameterization must be one of {', '.join(_PARAMS)}; got "
                         f"{parameterization!r}")


def _affine(state: KernelState, unscaled: Callable[[torch.Tensor, int], torch.Tensor],
            W_std: float, b_std: float | None, fan_in: float, parameterization: str
            ) -> list[Block]:
    """The blocks after an affine layer whose weight-free part is ``unscaled`` (which may
    return its argument: the state's tensors are overwritten, see :meth:`Layer.apply`)."""
    W2, b2 = W_std * W_std, (0.0 if b_std is None else b_std * b_std)
    out = []
    for block in state.blocks():
        k = unscaled(block.nngp, block.batch)
        ntk = None
        if block.ntk is not None:
            ntk = unscaled(block.ntk, block.batch).mul_(W2)
            if parameterization == "standard":
                # the weights' gradient: the unscaled input covariance times the fan-in
                ntk.add_(k, alpha=fan_in)
                if b_std is not None:
                    ntk.add_(1.0)
        k.mul_(W2)
        if b2:
            k.add_(b2)
        if ntk is not None and parameterization == "ntk":
            ntk.add_(k)
        out.append(Block(k, ntk, block.batch))
    return out


@dataclass(frozen=True)
class Dense(Layer):
    """Fully connected layer (a 1x1 convolution on spatial data); ``width`` is its output
    size, used by the standard parametrization and by the finite network."""

    W_std: float = 1.0
    b_std: float | None = None
    parameterization: str = "ntk"
    width: int | None = None

    def __post_init__(self) -> None:
        _check_param(self.parameterization)

    def out_shape(self, shape: Shape) -> Shape:
        return (self.width or shape[0],) + shape[1:]

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        blocks = _affine(state, lambda t, b: t, self.W_std, self.b_std, state.width,
                         self.parameterization)
        return state.with_blocks(blocks, width=self.width or state.width)


def _tup(v: int | Sequence[int], nd: int) -> tuple[int, ...]:
    return (int(v),) * nd if isinstance(v, int) else tuple(int(x) for x in v)


@dataclass(frozen=True)
class Conv(Layer):
    """Convolution with an nd-dimensional filter (nd = 1 or 2), strides and padding
    ``"valid"``, ``"same"`` (zeros), ``"circular"`` or explicit ints (PyTorch's, filled per
    ``padding_mode``). Input layout (n, C, *P)."""

    filter_shape: tuple[int, ...] = (3, 3)
    strides: tuple[int, ...] | None = None
    padding: str | int | tuple[int, ...] = "valid"
    W_std: float = 1.0
    b_std: float | None = None
    parameterization: str = "ntk"
    width: int | None = None
    padding_mode: str = "zeros"

    def __post_init__(self) -> None:
        _check_param(self.parameterization)
        if not self.filter_shape or min(self.filter_shape) < 1:
            raise ValueError(f"filter_shape must be positive ints; got {self.filter_shape!r}")

    def _geometry(self, spatial: Sequence[int]) -> Geometry:
        nd = len(self.filter_shape)
        if len(spatial) != nd:
            raise ValueError(f"{self!r} needs inputs with {nd} spatial dimensions; got "
                             f"{len(spatial)}")
        strides = _tup(self.strides or 1, nd)
        mode, pads = resolve_padding(self.padding, self.padding_mode, self.filter_shape,
                                     strides, spatial)
        outs = tuple(out_size(n, k, s, lo, hi) for n, k, s, (lo, hi)
                     in zip(spatial, self.filter_shape, strides, pads, strict=True))
        if min(outs) < 1:
            raise ValueError(f"{self!r} leaves no output positions for spatial size "
                             f"{tuple(spatial)}")
        return strides, mode, pads, outs

    def out_shape(self, shape: Shape) -> Shape:
        return (self.width or shape[0],) + self._geometry(shape[1:])[3]

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        strides, mode, pads, outs = self._geometry(state.spatial)
        nd, size = len(outs), math.prod(self.filter_shape)

        def unscaled(t: torch.Tensor, batch: int) -> torch.Tensor:
            groups = [(batch + i, batch + nd + i) if state.full else (batch + i,)
                      for i in range(nd)]
            t = pad_dims(t, {d: pads[i] for i, g in enumerate(groups) for d in g}, mode)
            for i, dims in enumerate(groups):
                t = window_sum(t, dims, self.filter_shape[i], strides[i], outs[i])
            return t.div_(size)

        blocks = _affine(state, unscaled, self.W_std, self.b_std, state.width * size,
                         self.parameterization)
        return state.with_blocks(blocks, width=self.width or state.width, spatial=outs)


@dataclass(frozen=True)
class AvgPool(Layer):
    """Average pooling (window, strides defaulting to the window as in PyTorch, padding as
    :class:`Conv`; padded positions count as zeros, PyTorch's ``count_include_pad``)."""

    window: tuple[int, ...] = (2, 2)
    strides: tuple[int, ...] | None = None
    padding: str | int | tuple[int, ...] = "valid"

    def need_in(self, need_out: bool) -> bool:
        return True

    def _geometry(self, spatial: Sequence[int]) -> Geometry:
        return Conv(self.window, self.strides or self.window, self.padding)._geometry(spatial)

    def out_shape(self, shape: Shape) -> Shape:
        return (shape[0],) + self._geometry(shape[1:])[3]

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        if not state.full:
            raise RuntimeError("AvgPool needs the full spatial covariance")
        strides, mode, pads, outs = self._geometry(state.spatial)
        nd, size = len(outs), math.prod(self.window)

        def pool(t: torch.Tensor, batch: int) -> torch.Tensor:
            dims = [(batch + i, i) for i in range(nd)] + [(batch + nd + i, i)
                                                          for i in range(nd)]
            t = pad_dims(t, {d: pads[i] for d, i in dims}, mode)
            for d, i in dims:
                t = window_sum(t, (d,), self.window[i], strides[i], outs[i])
            return t.div_(size * size)

        return state.with_blocks([b.map(pool) for b in state.blocks()], spatial=outs)


@dataclass(frozen=True)
class GlobalAvgPool(Layer):
    """Mean over all positions: K'(x, z) = mean_{p, p'} K(x, z)[p, p']."""

    def need_in(self, need_out: bool) -> bool:
        return True

    def out_shape(self, shape: Shape) -> Shape:
        return (shape[0],)

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        if state.nd == 0:
            return state
        if not state.full:
            raise RuntimeError("GlobalAvgPool needs the full spatial covariance")

        def mean(t: torch.Tensor, batch: int) -> torch.Tensor:
            return t.mean(dim=tuple(range(batch, t.ndim)))

        return state.with_blocks([b.map(mean) for b in state.blocks()], nd=0, full=False,
                                 spatial=())


@dataclass(frozen=True)
class Flatten(Layer):
    """Flatten (n, C, *P) to (n, C |P|): K'(x, z) = mean_p K(x, z)[p, p]."""

    def need_in(self, need_out: bool) -> bool:
        return False

    def out_shape(self, shape: Shape) -> Shape:
        return (math.prod(shape),)

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        if state.nd == 0:
            return state
        blocks = state.blocks()
        if state.full:
            blocks = [to_diag_block(b, state.nd) for b in blocks]

        def mean(t: torch.Tensor, batch: int) -> torch.Tensor:
            return t.mean(dim=tuple(range(batch, t.ndim)))

        return state.with_blocks([b.map(mean) for b in blocks], nd=0, full=False,
                                 spatial=(), width=state.width * math.prod(state.spatial))


_AXES = ("channels", "all")


@dataclass(frozen=True)
class LayerNorm(Layer):
    """Per-example normalisation over the channels at each position (``axis="channels"``,
    PyTorch's ``nn.LayerNorm(C)`` on channels-last data) or over channels and positions
    (``"all"``, ``nn.LayerNorm((C, *P))``), without a learned affine map."""

    eps: float = 1e-12
    axis: str = "channels"

    def __post_init__(self) -> None:
        if self.axis not in _AXES:
            raise ValueError(f"axis must be one of {', '.join(_AXES)}; got {self.axis!r}")

    def _scale(self, v: torch.Tensor, batch: int) -> torch.Tensor:
        if self.axis == "all" and v.ndim > batch:
            # v broadcasts against the block; its spatial axes are those after the batch
            v = v.mean(dim=tuple(range(batch, v.ndim)), keepdim=True)
        return (v + self.eps).rsqrt()

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        out = []
        for block in state.blocks():
            v1, v2 = variances(state, block)
            scale = self._scale(v1, block.batch) * self._scale(v2, block.batch)
            ntk = None if block.ntk is None else block.ntk * scale
            out.append(Block(block.nngp * scale, ntk, block.batch))
        return state.with_blocks(out)


def _as_layers(items: Sequence[Layer] | Layer) -> tuple[Layer, ...]:
    return (items,) if isinstance(items, Layer) else tuple(items)


@dataclass(frozen=True, init=False)
class Serial(Layer):
    """Layers in sequence; an empty ``Serial()`` is the identity."""

    layers: tuple[Layer, ...] = field(default=())

    def __init__(self, *layers: Layer) -> None:
        flat: list[Layer] = []
        for layer in layers:
            if not isinstance(layer, Layer):
                raise TypeError(f"Serial takes layers; got {type(layer).__name__}")
            flat.extend(layer.layers if isinstance(layer, Serial) else (layer,))
        object.__setattr__(self, "layers", tuple(flat))

    def needs(self, need_out: bool) -> list[bool]:
        """For each layer, whether its input must be the full spatial covariance."""
        needs = []
        for layer in reversed(self.layers):
            need_out = layer.need_in(need_out)
            needs.append(need_out)
        return needs[::-1]

    def need_in(self, need_out: bool) -> bool:
        return self.needs(need_out)[0] if self.layers else need_out

    def out_shape(self, shape: Shape) -> Shape:
        for layer in self.layers:
            shape = layer.out_shape(shape)
        return shape

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        needs = self.needs(need_out)
        for i, (layer, need) in enumerate(zip(self.layers, needs, strict=True)):
            if state.full and not need:
                state = _to_diag(state)
            after = needs[i + 1] if i + 1 < len(needs) else need_out
            state = layer.apply(state, after)
        return state

    def trace(self, shape: Shape, full: bool, need_out: bool) -> tuple[Shape, bool,
                                                                      list[Trace]]:
        needs = self.needs(need_out)
        out: list[Trace] = []
        for i, layer in enumerate(self.layers):
            full = full and needs[i]
            after = needs[i + 1] if i + 1 < len(needs) else need_out
            shape, full, rec = layer.trace(shape, full, after)
            out.extend(rec)
        return shape, full, out


def _to_diag(state: KernelState) -> KernelState:
    blocks = [to_diag_block(b, state.nd) for b in state.blocks()]
    return state.with_blocks(blocks, full=False)


def _copy(state: KernelState) -> KernelState:
    return state.with_blocks([b.map(lambda t, batch: t.clone()) for b in state.blocks()])


_LINEAR_TAIL = (AvgPool, GlobalAvgPool, Flatten)


def _ends_affine(branch: Serial) -> bool:
    for layer in reversed(branch.layers):
        if isinstance(layer, (Dense, Conv)):
            return True
        if not isinstance(layer, _LINEAR_TAIL):
            return False
    return False


def _has_weights(layer: Layer) -> bool:
    """Whether ``layer`` (or a layer inside it) is affine, i.e. has weights of its own."""
    if isinstance(layer, (Dense, Conv)):
        return True
    if isinstance(layer, Serial):
        return any(_has_weights(sub) for sub in layer.layers)
    if isinstance(layer, FanIn):
        return any(_has_weights(b) for b in layer.branches)
    return False


@dataclass(frozen=True, init=False)
class FanIn(Layer):
    """FanOut, the branches in parallel, then a fan-in of their outputs (:meth:`combine`).

    Each branch is a layer or a sequence of layers (``()`` or ``Serial()`` is the identity).
    """

    branches: tuple[Serial, ...] = field(default=())

    def __init__(self, *branches: Layer | Sequence[Layer]) -> None:
        name = type(self).__name__
        if len(branches) < 2:
            raise ValueError(f"{name} needs at least 2 branches; got {len(branches)}")
        serial = tuple(b if isinstance(b, Serial) else Serial(*_as_layers(b))
                       for b in branches)
        self._check(serial)
        object.__setattr__(self, "branches", serial)

    def _check(self, branches: tuple[Serial, ...]) -> None:
        """Raise ValueError when the fan-in's kernel rule is not exact for ``branches``."""

    def combine(self, nngps: list[torch.Tensor], ntks: list[torch.Tensor] | None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The fan-in of the branches' (NNGP, NTK) of one block (the inputs may be reused)."""
        raise NotImplementedError

    def need_in(self, need_out: bool) -> bool:
        return any(b.need_in(need_out) for b in self.branches)

    def out_shape(self, shape: Shape) -> Shape:
        shapes = {b.out_shape(shape) for b in self.branches}
        if len(shapes) != 1:
            raise ValueError(f"{type(self).__name__} branches give different shapes "
                             f"{sorted(shapes)}")
        return shapes.pop()

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        last = len(self.branches) - 1
        outs = [b.apply(state if i == last else _copy(state), need_out)
                for i, b in enumerate(self.branches)]
        if any(o.full for o in outs) and not all(o.full for o in outs):
            outs = [_to_diag(o) if o.full else o for o in outs]
        first = outs[0]
        combined = []
        for i, block in enumerate(first.blocks()):
            parts = [o.blocks()[i] for o in outs]
            ntks = None if block.ntk is None else [p.ntk for p in parts]
            k, ntk = self.combine([p.nngp for p in parts], ntks)  # type: ignore[arg-type]
            combined.append(Block(k, ntk, block.batch))
        return first.with_blocks(combined)

    def trace(self, shape: Shape, full: bool, need_out: bool) -> tuple[Shape, bool,
                                                                      list[Trace]]:
        full = full and self.need_in(need_out)
        out: list[Trace] = []
        fulls = []
        for b in self.branches:
            s, f, rec = b.trace(shape, full, need_out)
            fulls.append(f)
            # the input state stays alive while each branch runs
            out.extend(Trace(r.name, r.shape, r.full,
                             r.elems + _SLACK * 2 * _elems(shape, full))
                       for r in rec)
        return self.out_shape(shape), all(fulls), out


@dataclass(frozen=True, init=False)
class Residual(FanIn):
    """FanOut, the branches in parallel, FanInSum: K = sum of the branches' K, Theta alike.

    Each branch is a layer or a sequence of layers (``()`` or ``Serial()`` is the skip
    connection). All branches but at most one must end in an affine layer, so that the
    branches are independent centred processes and the kernels of the sum add exactly.
    """

    def _check(self, branches: tuple[Serial, ...]) -> None:
        loose = sum(not _ends_affine(b) for b in branches)
        if loose > 1:
            raise ValueError(f"Residual: {loose} branches do not end in Dense or Conv; at "
                             "most one may (the others' outputs would be correlated and the "
                             "kernels of their sum would not add)")

    def combine(self, nngps: list[torch.Tensor], ntks: list[torch.Tensor] | None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        k = nngps[0] + nngps[1]
        for t in nngps[2:]:
            k.add_(t)
        ntk = None
        if ntks is not None:
            ntk = ntks[0] + ntks[1]
            for t in ntks[2:]:
                ntk.add_(t)
        return k, ntk


@dataclass(frozen=True, init=False)
class Product(FanIn):
    """FanOut, the branches in parallel, FanInProd: the elementwise product of the outputs.

    For independent branches f_1, ..., f_B (neural-tangents' ``stax.FanInProd``; Novak et al.
    2020) the NNGP of the product is the product of the NNGPs and the NTK follows the product
    rule,

        K = prod_i K_i,    Theta = sum_i Theta_i prod_{j != i} K_j,

    (two branches: K = K_1 K_2, Theta = K_1 Theta_2 + Theta_1 K_2), entrywise, per pair of
    spatial positions. Each branch is a layer or a sequence of layers (``()`` is the identity).
    Independence in the infinite-width limit needs every branch but at most one to hold an
    affine layer of its own (branches with their own weights are independent given their
    input, and a branch's channel is asymptotically independent of the same channel of the
    input); the constructor checks it. No centring is needed: unlike a sum, a product of
    independent factors has the product of their second moments. The cross terms of the NTK,
    E[f_2(x) f_1(z)] <grad f_1(x), grad f_2(z)>, vanish at infinite width (the branches'
    gradients with respect to shared layers meet only through independent centred weights).
    """

    def _check(self, branches: tuple[Serial, ...]) -> None:
        free = sum(not _has_weights(b) for b in branches)
        if free > 1:
            raise ValueError(f"Product: {free} branches have no Dense or Conv layer; at most "
                             "one may (the others' outputs would be correlated and the NNGP "
                             "of their product would not factor)")

    def combine(self, nngps: list[torch.Tensor], ntks: list[torch.Tensor] | None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        ntk = None
        if ntks is not None:
            terms = []
            for i, t in enumerate(ntks):
                term = t.clone()
                for j, k in enumerate(nngps):
                    if j != i:
                        term.mul_(k)
                terms.append(term)
            ntk = terms[0]
            for term in terms[1:]:
                ntk.add_(term)
        k = nngps[0] * nngps[1]
        for t in nngps[2:]:
            k.mul_(t)
        return k, ntk
