"""The kernel state that layers map to the next layer's state, and the input kernel.

For inputs x, z the state holds, at one layer of an infinitely wide network,

* ``cross``: the NNGP covariance K(x, z) and the NTK Theta(x, z) of every pair (x, z) of a
  tile, one entry per pair of spatial positions (p, p') ("full") or only for p = p' ("diag");
* ``self1``/``self2``: the covariances K(x, x) and K(z, z) of the tile's rows and columns,
  which the activations need for the variances K(x, x)[p, p] (and pooling for the rest).

Layouts (``a`` rows, ``b`` columns, P the spatial shape, e.g. (H, W), empty for dense data):

* cross block, full: (a, b, *P, *P); diag: (a, b, *P); dense: (a, b);
* paired block (x with itself), full: (a, *P, *P); diag: (a, *P); dense: (a,).

This is neural-tangents' ``Kernel`` (Novak et al. 2020, "Neural Tangents: fast and easy
infinite neural networks in Python") with ``cov1``/``cov2`` as paired blocks, laid out
channels-first for PyTorch. The input kernel averages over channels,
K_0(x, z)[p, p'] = sum_c x[c, p] z[c, p'] / C, as neural-tangents does, so a first layer with
weight variance W_std^2 / fan_in sees W_std^2 K_0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch


@dataclass
class Block:
    """NNGP (and optionally NTK) covariances of a set of input pairs.

    ``batch`` is 2 for a cross block (every row against every column) and 1 for a paired
    block (each input against itself).
    """

    nngp: torch.Tensor
    ntk: torch.Tensor | None
    batch: int

    def map(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> Block:
        """The block with ``fn(tensor, batch)`` applied to both covariances."""
        ntk = None if self.ntk is None else fn(self.ntk, self.batch)
        return Block(fn(self.nngp, self.batch), ntk, self.batch)


@dataclass
class KernelState:
    """A layer's kernel state (see the module docstring for the layouts).

    ``nd`` is the number of spatial dimensions, ``full`` whether off-diagonal spatial pairs
    are tracked, ``width`` the channel count of the finite layer (the fan-in of the next
    affine layer, used only by the standard parametrization), ``spatial`` the shape P.
    ``self2`` is None when the columns are the rows (a symmetric diagonal tile).
    """

    cross: Block
    self1: Block
    self2: Block | None
    nd: int
    full: bool
    width: int
    spatial: tuple[int, ...]

    def blocks(self) -> list[Block]:
        """The distinct blocks, cross first."""
        return [self.cross, self.self1] + ([] if self.self2 is None else [self.self2])

    def with_blocks(self, blocks: list[Block], **changes: Any) -> KernelState:
        """A copy with the blocks of :meth:`blocks` replaced, in the same order."""
        self2 = None if self.self2 is None else blocks[2]
        return replace(self, cross=blocks[0], self1=blocks[1], self2=self2, **changes)


def _input_block(x: torch.Tensor, z: torch.Tensor | None, nd: int, full: bool,
                 ntk: bool) -> Block:
    """K_0 = <x[:, p], z[:, p']> / C for x (a, C, *P), z (b, C, *P) (z None: paired)."""
    C = x.shape[1]
    a = x.shape[0]
    xf = x.reshape(a, C, -1)
    if z is None:
        if full:
            k = torch.einsum("acp,acq->apq", xf, xf)
        else:
            k = (xf * xf).sum(1)
        batch = 1
    else:
        zf = z.reshape(z.shape[0], C, -1)
        if full:
            k = torch.einsum("acp,bcq->abpq", xf, zf)
        elif nd == 0:
            k = xf[:, :, 0] @ zf[:, :, 0].T
        else:
            k = torch.einsum("acp,bcp->abp", xf, zf)
        batch = 2
    k = k / C
    P = tuple(x.shape[2:])
    lead = tuple(k.shape[:batch])
    k = k.reshape(lead + (P + P if full else P)) if nd else k.reshape(lead)
    return Block(k, torch.zeros_like(k) if ntk else None, batch)


def input_state(x: torch.Tensor, z: torch.Tensor | None, *, full: bool, ntk: bool = True
                ) -> KernelState:
    """The state of the inputs: x (a, d) or (a, C, *P); z likewise or None (then z = x,
    the diagonal tile of a symmetric kernel). The NTK of the inputs is 0."""
    nd = x.ndim - 2
    full = full and nd > 0
    if x.ndim == 2:
        x = x[:, :, None]
        z = None if z is None else z[:, :, None]
    cross = _input_block(x, x if z is None else z, nd, full, ntk)
    self1 = _input_block(x, None, nd, full, False)
    self2 = None if z is None else _input_block(z, None, nd, full, False)
    return KernelState(cross, self1, self2, nd, full, int(x.shape[1]),
                       tuple(x.shape[2:]) if nd else ())


def paired_state(x: torch.Tensor, *, full: bool, ntk: bool = True) -> KernelState:
    """The state of the pairs (x_i, x_i) alone: its cross block is paired (batch 1), for
    the diagonal of a kernel in O(n)."""
    nd = x.ndim - 2
    full = full and nd > 0
    if x.ndim == 2:
        x = x[:, :, None]
    self1 = _input_block(x, None, nd, full, False)
    cross = Block(self1.nngp.clone(), torch.zeros_like(self1.nngp) if ntk else None, 1)
    return KernelState(cross, self1, None, nd, full, int(x.shape[1]),
                       tuple(x.shape[2:]) if nd else ())


def _diagonal(t: torch.Tensor, batch: int, nd: int) -> torch.Tensor:
    """(lead, *P, *P) -> (lead, *P): the entries with p = p'."""
    lead = t.shape[:batch]
    P = t.shape[batch:batch + nd]
    S = 1
    for s in P:
        S *= s
    return t.reshape(lead + (S, S)).diagonal(dim1=-2, dim2=-1).reshape(lead + P)


def to_diag_block(block: Block, nd: int) -> Block:
    """A full block reduced to its spatial diagonal (exact for the layers that follow when
    none of them pools)."""
    return block.map(lambda t, batch: _diagonal(t, batch, nd))


def variances(state: KernelState, block: Block) -> tuple[torch.Tensor, torch.Tensor]:
    """K(x, x)[p, p] and K(z, z)[p', p'], broadcastable against ``block.nngp``.

    For the cross block these come from ``self1``/``self2``; for a paired block from the
    block itself (its own diagonal).
    """
    nd, full = state.nd, state.full
    if block.batch == 2:
        s2 = state.self1 if state.self2 is None else state.self2
        v1, v2 = _paired_var(state.self1, nd, full), _paired_var(s2, nd, full)
        v1 = v1.reshape((v1.shape[0], 1) + v1.shape[1:] + (1,) * (nd if full else 0))
        v2 = v2.reshape((1, v2.shape[0]) + (1,) * (nd if full else 0) + v2.shape[1:])
        return v1, v2
    v = _paired_var(block, nd, full)
    if not full:
        return v, v
    ones = (1,) * nd
    return (v.reshape(v.shape + ones),
            v.reshape((v.shape[0],) + ones + v.shape[1:]))


def _paired_var(block: Block, nd: int, full: bool) -> torch.Tensor:
    return _diagonal(block.nngp, 1, nd) if full else block.nngp
