"""Cost estimate and progress lines for long conjugate-gradient kernel solves.

A CG kernel solve over tiles (:class:`lazylab.solve.kernel_solver.BlockedKernel`) costs, per
iteration, one product K v: with n rows and tiles of side b that is T (T + 1) / 2 tile
evaluations, T = ceil(n / b) (only the tiles on and above the diagonal are evaluated). The
Nystrom preconditioner of rank r evaluates n r kernel entries once, about n r / b^2 tiles.
:func:`estimate_cg_cost` times one tile on the solve's own device and dtype and multiplies:

    seconds ~ t_tile (T (T + 1) / 2 (max_iter + 1) + n r / b^2),

the +1 for the final true-residual product. The estimate is an upper bound on the iterations
(CG stops at its tolerance) and ignores the O(n r) preconditioner applications, which are
small against a product at the n where the estimate matters.

Example
-------
>>> est = CGCostEstimate(n=200_000, tile=4729, max_iter=500, rank=200,
...                      seconds_per_tile=0.1)
>>> est.tiles_per_product, round(est.seconds_per_iteration, 1)
(946, 94.6)
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch


def format_seconds(s: float) -> str:
    """Seconds as a short human duration: ``42 s``, ``7.5 min``, ``3.1 h``.

    >>> format_seconds(42), format_seconds(450), format_seconds(11160)
    ('42 s', '7.5 min', '3.1 h')
    """
    if s < 60:
        return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


@dataclass(frozen=True)
class CGCostEstimate:
    """The predicted time of a tiled CG kernel solve (module docstring).

    Attributes
    ----------
    n : rows; tile : tile side b; max_iter : the CG cap; rank : the Nystrom rank r.
    seconds_per_tile : measured time of one b x b tile evaluation and its product.
    """

    n: int
    tile: int
    max_iter: int
    rank: int
    seconds_per_tile: float

    @property
    def tiles_per_product(self) -> int:
        """T (T + 1) / 2 with T = ceil(n / b): the tiles one product K v evaluates."""
        t = -(-self.n // self.tile)
        return t * (t + 1) // 2

    @property
    def seconds_per_iteration(self) -> float:
        return self.tiles_per_product * self.seconds_per_tile

    @property
    def setup_seconds(self) -> float:
        """The Nystrom columns K[:, S]: n r entries, in tile-sized units."""
        return self.n * self.rank / self.tile ** 2 * self.seconds_per_tile

    @property
    def total_seconds(self) -> float:
        return self.seconds_per_iteration * (self.max_iter + 1) + self.setup_seconds

    def describe(self, device: Any) -> str:
        """One sentence: the total and how it is made up."""
        return (f"about {format_seconds(self.total_seconds)} at most (n = {self.n}: "
                f"{format_seconds(self.seconds_per_iteration)} per CG iteration on {device}, "
                f"{self.tiles_per_product} kernel tile{'s' * (self.tiles_per_product != 1)} "
                f"of side {self.tile} at "
                f"{format_seconds(self.seconds_per_tile)} each, x max_iter = {self.max_iter}; "
                f"plus {format_seconds(self.setup_seconds)} for the rank-{self.rank} Nystrom "
                "preconditioner)")


def estimate_cg_cost(op: Any, *, max_iter: int, rank: int, columns: int = 1,
                     seconds_per_tile: float | None = None) -> CGCostEstimate:
    """Time one tile of ``op`` (a :class:`BlockedKernel`) and scale it to the whole solve.

    The timed tile is the first diagonal tile k(X_0, X_0) times a (b, ``columns``) block, as
    each product evaluates it; ``seconds_per_tile`` skips the timing (tests, or a known rate).
    The tile evaluation goes through ``op.kernel`` directly, so ``op.tiles_evaluated`` counts
    only the solve's own tiles.
    """
    b = int(op.tile)
    if seconds_per_tile is None:
        V = torch.ones(b, max(1, int(columns)), dtype=op.block_dtype, device=op.device)
        t0 = time.perf_counter()
        T = op.kernel(op.X[:b], None)
        (T @ V).sum().item()  # .item() waits for an asynchronous device
        seconds_per_tile = time.perf_counter() - t0
        del T
    return CGCostEstimate(n=int(op.n), tile=b, max_iter=int(max_iter), rank=int(rank),
                          seconds_per_tile=float(seconds_per_tile))


class ProgressLog:
    """A CG callback that writes one line to stderr at iteration 1, every ``every``
    iterations after it, and at ``max_iter``: iteration, relative residual, time since
    :meth:`restart` (or construction) and the time left at the measured rate. Lines are plain
    text (no terminal control), so they read the same in a log file.
    """

    def __init__(self, max_iter: int, every: int, *, label: str = "kernel_regression"):
        self.max_iter, self.every, self.label = int(max_iter), max(1, int(every)), label
        self.start = time.perf_counter()
        self.lines = 0

    def restart(self) -> None:
        """Start the clock now (call it as the iterations start, after any set-up, so that
        the rate, and the time left, count iterations only)."""
        self.start = time.perf_counter()

    @classmethod
    def for_estimate(cls, est: CGCostEstimate, *, seconds: float = 30.0,
                     label: str = "kernel_regression") -> ProgressLog:
        """About one line per ``seconds`` of predicted time (at least one per iteration)."""
        every = math.ceil(seconds / est.seconds_per_iteration) \
            if est.seconds_per_iteration > 0 else est.max_iter
        return cls(est.max_iter, every, label=label)

    def __call__(self, it: int, rel: float) -> None:
        if it != 1 and it % self.every and it != self.max_iter:
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed / it * (self.max_iter - it)
        print(f"{self.label}: CG iteration {it}/{self.max_iter}, relative residual {rel:.3g}, "
              f"{format_seconds(elapsed)} in CG, at most {format_seconds(left)} left",
              file=sys.stderr, flush=True)
        self.lines += 1
