"""The kernel object: NNGP or NTK of a layer description, built in tiles within a budget.

``DeepKernel(layers)`` follows the kernel protocol of lazylab: ``K(X, Z=None)`` is the
(n, n') kernel matrix (Z = X when omitted, then exactly symmetric), ``K.diag(X)`` its
diagonal in O(n), and ``K.device``/``K.dtype`` say where it computes (None: the inputs').

Tiling: the matrix is built in tiles of rows of X by rows of Z. A tile of a x b pairs holds,
at the costliest layer, about ``elems`` kernel entries per pair (the spatial size of that
layer's covariance, squared where the full spatial covariance is tracked, times the working
copies) plus a and b paired blocks; the largest square tile that fits ``memory_budget`` is
used, and the last tiles are whatever rows remain (n need not divide by the tile). When even a
1 x 1 tile does not fit, evaluation refuses before computing anything and names the costliest
layer. The output matrix itself is outside the budget.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch

from lazylab.kernels.deep.layers import Layer, Serial, Shape, Trace
from lazylab.kernels.deep.state import input_state, paired_state

_KINDS = ("ntk", "nngp")
#: Tile working memory without a ``memory_budget``: on a CPU small enough that a tile's
#: elementwise passes run from cache (a depth-5 relu MLP at n = 2000 took 1.8 s as one tile,
#: 0.75-0.77 s in 4-16 MiB tiles); on a GPU large, for few launches.
_DEFAULT_BUDGET = {"cpu": 16 * 2**20, "cuda": 2**30}
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10,
          "mib": 2**20, "gib": 2**30, "tb": 10**12, "tib": 2**40}


def parse_bytes(value: int | float | str) -> int:
    """A byte count from an int/float or a string such as ``"512MiB"``, ``"2 GB"``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value <= 0 or not math.isfinite(value):
            raise ValueError(f"memory_budget must be a positive byte count; got {value!r}")
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(value))
    if not m or m.group(2).lower() not in _UNITS or float(m.group(1)) <= 0:
        raise ValueError(f"memory_budget must be a positive byte count such as 2GiB or "
                         f"512MB (units {', '.join(u for u in _UNITS if u)}); got {value!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class DeepKernel:
    """Infinite-width NNGP or NTK of a network given as layers (see :mod:`.layers`).

    Parameters
    ----------
    layers : a :class:`Layer` (e.g. :class:`Serial`) or a sequence of layers.
    kind : ``"ntk"`` (default) or ``"nngp"``.
    memory_budget : bytes (int, or a string like ``"1GiB"``) for one tile's working memory;
        a budget too small for a 1 x 1 tile is refused. None: 16 MiB tiles on a CPU (cache
        sized), 1 GiB on a GPU, and at least one pair per tile whatever it costs.
    device, dtype : where and in which precision to compute (None: those of the inputs);
        ``dtype=torch.float64`` for double precision on float32 inputs.
    """

    def __init__(self, layers: Layer | Sequence[Layer], *, kind: str = "ntk",
                 memory_budget: int | float | str | None = None,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> None:
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {', '.join(_KINDS)}; got {kind!r}")
        self.net = layers if isinstance(layers, Serial) else (
            Serial(layers) if isinstance(layers, Layer) else Serial(*layers))
        self.kind = kind
        self.memory_budget = None if memory_budget is None else parse_bytes(memory_budget)
        self.device = None if device is None else torch.device(device)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"DeepKernel({self.net!r}, kind={self.kind!r})"

    # -- planning -------------------------------------------------------------------------
    def plan(self, shape: Shape) -> list[Trace]:
        """Each leaf layer's output shape, spatial mode and per-pair cost, for inputs of
        (channels, *spatial) ``shape``; raises when the output is not one number per pair."""
        need = self.net.need_in(False)
        out, _, traces = self.net.trace(tuple(shape), need, False)
        if len(out) != 1:
            raise ValueError(f"the network's output has spatial shape {out[1:]}; end it in "
                             "Flatten or GlobalAvgPool for an (n, n') kernel")
        return traces

    def tile_size(self, shape: Shape, itemsize: int, device: torch.device | None = None
                  ) -> int:
        """Rows per tile side under the budget (without one: the default tile of
        ``device``'s type)."""
        traces = self.plan(shape)
        budget = self.memory_budget
        if budget is None:
            where = device or self.device
            budget = _DEFAULT_BUDGET["cuda" if where and where.type == "cuda" else "cpu"]
        worst = max(traces, key=lambda t: t.elems) if traces else Trace("input", shape,
                                                                         False, 1)
        per = max(worst.elems, 1) * itemsize
        # t^2 pairs plus 2t paired blocks: t^2 + 2t <= budget / per
        room = budget / per
        t = int(math.isqrt(int(room) + 1)) - 1
        if t < 1 and self.memory_budget is None:
            return 1
        if t < 1:
            raise MemoryError(
                f"memory_budget={self.memory_budget} bytes cannot hold one 1x1 tile: layer "
                f"{worst.name} (output {worst.shape}, {'full' if worst.full else 'diagonal'} "
                f"spatial covariance) needs about {3 * per} bytes")
        return t

    # -- evaluation -----------------------------------------------------------------------
    def _prepare(self, X: torch.Tensor) -> torch.Tensor:
        if not isinstance(X, torch.Tensor) or not X.is_floating_point() or X.ndim < 2:
            raise ValueError("X must be a floating tensor of shape (n, d) or (n, C, *spatial)"
                             f"; got {type(X).__name__} {getattr(X, 'shape', '')}")
        return X.to(device=self.device or X.device, dtype=self.dtype or X.dtype)

    def _tile(self, x: torch.Tensor, z: torch.Tensor | None, ntk: bool
              ) -> tuple[torch.Tensor, torch.Tensor]:
        state = input_state(x, z, full=self.net.need_in(False), ntk=ntk)
        state = self.net.apply(state, False)
        nngp = state.cross.nngp
        return nngp, (state.cross.ntk if ntk else nngp)  # type: ignore[return-value]

    def both(self, X: torch.Tensor, Z: torch.Tensor | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """(NNGP, NTK), each (n, n')."""
        return self._evaluate(X, Z, ntk=True)

    def __call__(self, X: torch.Tensor, Z: torch.Tensor | None = None) -> torch.Tensor:
        nngp, ntk = self._evaluate(X, Z, ntk=self.kind == "ntk")
        return ntk if self.kind == "ntk" else nngp

    def _evaluate(self, X: torch.Tensor, Z: torch.Tensor | None, ntk: bool
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        X = self._prepare(X)
        if Z is not None:
            Z = self._prepare(Z)
            if Z.shape[1:] != X.shape[1:]:
                raise ValueError(f"Z must have X's shape past the first axis {tuple(X.shape[1:])}"
                                 f"; got {tuple(Z.shape[1:])}")
        shape = (X.shape[1],) + tuple(X.shape[2:])
        t = self.tile_size(shape, X.element_size(), X.device)
        n, m = X.shape[0], (X if Z is None else Z).shape[0]
        K = X.new_empty(n, m)
        T = X.new_empty(n, m) if ntk else K
        for i0 in range(0, n, t):
            i1 = min(n, i0 + t)
            for j0 in range(0 if Z is not None else i0, m, t):
                j1 = min(m, j0 + t)
                same = Z is None and i0 == j0
                z = None if same else (X if Z is None else Z)[j0:j1]
                k, th = self._tile(X[i0:i1], z, ntk)
                self._store(K, k, i0, j0, same, Z is None)
                if ntk:
                    self._store(T, th, i0, j0, same, Z is None)
        return K, T

    @staticmethod
    def _store(out: torch.Tensor, tile: torch.Tensor, i0: int, j0: int, same: bool,
               symmetric: bool) -> None:
        a, b = tile.shape
        if same:
            # the diagonal tile of a symmetric kernel: exactly symmetric
            tile = (tile + tile.T) / 2
        out[i0:i0 + a, j0:j0 + b] = tile
        if symmetric and not same:
            out[j0:j0 + b, i0:i0 + a] = tile.T

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        """The diagonal K(x_i, x_i), (n,), without the n x n matrix."""
        X = self._prepare(X)
        shape = (X.shape[1],) + tuple(X.shape[2:])
        t = self.tile_size(shape, X.element_size(), X.device)
        n = X.shape[0]
        t = max(1, t * t)
        out = X.new_empty(n)
        for i0 in range(0, n, t):
            out[i0:i0 + t] = self._paired(X[i0:i0 + t])
        return out

    def _paired(self, x: torch.Tensor) -> torch.Tensor:
        ntk = self.kind == "ntk"
        state = paired_state(x, full=self.net.need_in(False), ntk=ntk)
        out = self.net.apply(state, False).cross
        return out.ntk if ntk else out.nngp  # type: ignore[return-value]
