"""Padding and window sums over the spatial dimensions of kernel blocks.

A convolution with an all-ones window acts on a covariance K[p, p'] by summing the window's
offsets jointly over p and p' (the same filter tap multiplies both), and an average pool
sums them separately over p and over p'. Both windows are products over the spatial axes,
so each axis (or pair of axes) is summed on its own: k strided slice-adds per axis, not
k^nd.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

#: Per spatial axis: fill ("zeros" or "circular"), pad before, pad after.
Padding = tuple[str, tuple[tuple[int, int], ...]]

_NAMED = ("same", "valid", "circular")
_MODES = ("zeros", "circular")


def _tuple(v: int | Sequence[int], nd: int, name: str) -> tuple[int, ...]:
    out = (int(v),) * nd if isinstance(v, int) else tuple(int(x) for x in v)
    if len(out) != nd or min(out) < 0:
        raise ValueError(f"{name} must be a non-negative int or {nd} of them; got {v!r}")
    return out


def out_size(n: int, k: int, s: int, lo: int, hi: int) -> int:
    """Output length of a window k, stride s over n inputs padded by (lo, hi)."""
    return (n + lo + hi - k) // s + 1


def resolve_padding(padding: str | int | Sequence[int], padding_mode: str,
                    kernel: Sequence[int], strides: Sequence[int], spatial: Sequence[int]
                    ) -> Padding:
    """The fill and per-axis pads of ``padding``.

    ``"valid"``: none. ``"same"`` (zeros) and ``"circular"`` (periodic): neural-tangents' and
    XLA's SAME amounts, total = max((ceil(n/s) - 1) s + k - n, 0), lo = total // 2, the rest
    after. An int or tuple: that many on both sides (PyTorch's ``padding=``), filled per
    ``padding_mode``.
    """
    nd = len(kernel)
    if padding_mode not in _MODES:
        raise ValueError(f"padding_mode must be one of {', '.join(_MODES)}; got "
                         f"{padding_mode!r}")
    if isinstance(padding, str):
        key = padding.lower()
        if key not in _NAMED:
            raise ValueError(f"padding must be one of {', '.join(_NAMED)} or ints; got "
                             f"{padding!r}")
        if key == "valid":
            return "zeros", ((0, 0),) * nd
        pads = []
        for n, k, s in zip(spatial, kernel, strides, strict=True):
            total = max((math.ceil(n / s) - 1) * s + k - n, 0)
            pads.append((total // 2, total - total // 2))
        return ("circular" if key == "circular" else padding_mode), tuple(pads)
    return padding_mode, tuple((p, p) for p in _tuple(padding, nd, "padding"))


def pad_dim(t: torch.Tensor, dim: int, lo: int, hi: int, mode: str) -> torch.Tensor:
    """``t`` padded along ``dim`` by lo before and hi after, with zeros or periodically."""
    if lo == 0 and hi == 0:
        return t
    if mode == "circular":
        n = t.shape[dim]
        idx = torch.arange(-lo, n + hi, device=t.device) % n
        return t.index_select(dim, idx)
    j = t.ndim - 1 - dim
    pad = [0] * (2 * (j + 1))
    pad[2 * j], pad[2 * j + 1] = lo, hi
    return F.pad(t, pad)


def pad_dims(t: torch.Tensor, pads: dict[int, tuple[int, int]], mode: str) -> torch.Tensor:
    """``t`` padded along several axes ({dim: (lo, hi)}); zeros in one copy."""
    if mode == "circular" or not any(lo or hi for lo, hi in pads.values()):
        for dim, (lo, hi) in pads.items():
            t = pad_dim(t, dim, lo, hi, mode)
        return t
    flat = [0] * (2 * t.ndim)
    for dim, (lo, hi) in pads.items():
        j = t.ndim - 1 - dim
        flat[2 * j], flat[2 * j + 1] = lo, hi
    last = max(i for i, v in enumerate(flat) if v) + 1
    return F.pad(t, flat[:last + (last % 2)])


def window_sum(t: torch.Tensor, dims: Sequence[int], k: int, s: int, out: int
               ) -> torch.Tensor:
    """sum_{d < k} t[..., d + s i, ...] over the axes ``dims`` jointly (the same offset d on
    each), i < out; ``t`` is already padded."""
    acc: torch.Tensor | None = None
    stop = s * (out - 1) + 1
    for d in range(k):
        idx: list[slice] = [slice(None)] * t.ndim
        for dim in dims:
            idx[dim] = slice(d, d + stop, s)
        view = t[tuple(idx)]
        acc = view.clone() if acc is None else acc.add_(view)
    assert acc is not None
    return acc
