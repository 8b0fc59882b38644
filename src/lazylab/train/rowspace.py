"""A quadratic network wider than its input trains exactly as a network of d hidden units.

For the quadratic network f(x) = sum_i a_i (w_i . x)^2 + c with its second layer a fixed
(Ghorbani et al. 2019, Sec. 2.3 and Eq. (1) with sigma(u) = u^2), one SGD step on the loss
mean_b (f(x_b) - y_b)^2 moves the rows W_g (n_g, d) that share one value v of a_i by a right
multiplication:

    W_g <- W_g - eta (4/B) v W_g S = W_g (I - eta (4/B) v S),   S = sum_b r_b x_b x_b^T,

with r_b = f(x_b) - y_b. Write W_g = Q_g R_g (thin QR: Q_g (n_g, d) with orthonormal columns,
R_g (d, d)). Then W_g(t) = Q_g R_g(t) for every t, where R_g(t) follows the same SGD steps
from R_g, and f depends on W_g only through W_g^T W_g = R_g^T R_g = sum over the d rows of R_g.
So a group of n_g > d rows trains as its d rows R_g: in exact arithmetic every batch loss,
residual and update of c is the same number, and W_g(t) = Q_g R_g(t) at any time; in floating
point they agree to rounding (float64: 1e-10 after hundreds of steps, tests/test_rowspace.py).

The neural tangent model f(x) = 2 sum_i (w_i . x)(u_i . x) + c (Sec. 2.2, W fixed, U trained
from U = 0) reduces the same way: its step U <- U - eta (4/B) W S keeps U = W A(t) for a
(d, d) matrix A(t), so with W = Q R the model trains as the first layer R and the direction
R A(t), and U(t) = Q (R A(t)).

At the width grids' paper shapes (d = 450, N from 45 to 4500) the hidden units of the NN grid
fall from sum_N N to sum_N min(N, d) (63,756 to 18,564 with four step sizes): 3.4x less
arithmetic a step. A trained second layer (the mixture experiments) breaks the reduction:
there each row's a_i moves on its own.

Example
-------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> W = torch.randn(7, 3, generator=g, dtype=torch.float64)
>>> space = reduce_rows([W], [torch.ones(7, dtype=torch.float64)], trained_first=True)
>>> [tuple(t.shape) for t in space.first]  # 7 rows act as 3
[(3, 3)]
>>> W1, a1 = space.expand(0, space.first[0], space.second[0])
>>> bool(torch.allclose(W1, W, atol=1e-12))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class _Group:
    """Rows of one member that move together: their indices in the member and, where the
    group was reduced, Q (n_g, d) float64 of its thin QR factorization (None: kept as is)."""

    rows: torch.Tensor
    basis: torch.Tensor | None


@dataclass
class RowSpace:
    """Every member's reduced parameters (``first``, ``second``, what the pack trains) and
    what it takes to give the member its full width back (:meth:`expand`).

    ``trained_first``: the NN layout (``first`` = W trained, ``second`` = a fixed) or the NT
    layout (``first`` = W fixed, ``second`` = U trained); the fixed tensors come back as
    given."""

    first: list[torch.Tensor]
    second: list[torch.Tensor]
    groups: list[list[_Group]]
    fixed: list[torch.Tensor]
    trained_first: bool

    def expand(self, j: int, first: torch.Tensor, second: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Member j's full-width (first, second) from its reduced ones (module docstring:
        W_g = Q_g R_g)."""
        moving = first if self.trained_first else second
        full = self._lift(j, moving)
        return (full, self.fixed[j]) if self.trained_first else (self.fixed[j], full)

    def _lift(self, j: int, reduced: torch.Tensor) -> torch.Tensor:
        groups = self.groups[j]
        if len(groups) == 1 and groups[0].basis is None:  # kept whole, in its order
            return reduced
        n = sum(len(g.rows) for g in groups)
        out = torch.empty(n, reduced.shape[1], dtype=reduced.dtype, device=reduced.device)
        start = 0
        for g in groups:
            k = len(g.rows) if g.basis is None else g.basis.shape[1]
            part = reduced[start:start + k]
            start += k
            out[g.rows] = part if g.basis is None else (g.basis @ part.double()).to(out.dtype)
        return out


def reduce_rows(W: list[torch.Tensor], other: list[torch.Tensor], *, trained_first: bool
                ) -> RowSpace:
    """Reduce every member whose rows outnumber d (module docstring).

    NN (``trained_first``): ``W[j]`` (N_j, d) trained, ``other[j]`` = a_j (N_j,) fixed; rows
    are grouped by their value of a_j. NT: ``W[j]`` fixed, ``other[j]`` = U_j (N_j, d), which
    must be 0 (the NT model's start); all rows form one group.
    """
    first, second, groups = [], [], []
    for w, o in zip(W, other, strict=True):
        if not trained_first and bool(o.any()):
            raise ValueError("the NT reduction needs U = 0 at the start")
        parts: list[_Group] = []
        f_parts, s_parts = [], []
        keys, reducible = _row_groups(w, o if trained_first else None)
        if not reducible or all(len(k) <= w.shape[1] for k in keys):
            keys, reducible = [torch.arange(len(w), device=w.device)], False  # kept in order
        for rows in keys:
            block, basis = w[rows], None
            if reducible and len(rows) > w.shape[1]:
                Q, R = torch.linalg.qr(block.double(), mode="reduced")
                block, basis = R.to(w.dtype), Q
            parts.append(_Group(rows, basis))
            f_parts.append(block)
            if not trained_first:
                s_parts.append(torch.zeros_like(block))
            else:
                s_parts.append(o[rows] if basis is None else o[rows[:1]].expand(len(block)))
        groups.append(parts)
        first.append(torch.cat(f_parts))
        second.append(torch.cat(s_parts).clone())
    fixed = list(other) if trained_first else list(W)
    return RowSpace(first, second, groups, fixed, trained_first)


def _row_groups(w: torch.Tensor, a: torch.Tensor | None
                ) -> tuple[list[torch.Tensor], bool]:
    """Indices of the rows that move together (one group per value of a; NT: all rows) and
    whether they may be reduced: not when a is not finite (NaN equals no value)."""
    every = [torch.arange(len(w), device=w.device)]
    if a is None:
        return every, True
    if not bool(torch.isfinite(a).all()):
        return every, False
    _, inverse, counts = torch.unique(a, return_inverse=True, return_counts=True)
    # rows sorted by their value of a (stable: each group keeps its rows in order), split
    return list(torch.split(torch.argsort(inverse, stable=True), counts.tolist())), True
