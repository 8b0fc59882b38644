"""Learning-rate schedules: callables step -> multiplier of the base learning rate.

The learning rate used for update t (t = 0, 1, ..., steps - 1; update t moves the parameters
from theta_t to theta_{t+1}) is lr * schedule(t). Schedules are frozen dataclasses, so they are
picklable (work units run in other processes) and print their parameters.

Example
-------
>>> s = ghorbani_paper(100_000, tail1=15_000, tail2=15_000)
>>> s(0), s(69_999), s(70_000), s(84_999), s(85_000)
(1.0, 1.0, 0.1, 0.1, 0.06666666666666667)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Schedule = Callable[[int], float]


def _check_int(value: int, name: str, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Constant:
    """multiplier(t) = 1."""

    def __call__(self, step: int) -> float:
        return 1.0


@dataclass(frozen=True)
class Piecewise:
    """multiplier(t) = factors[i] for boundaries[i-1] <= t < boundaries[i]."""

    boundaries: tuple[int, ...]
    factors: tuple[float, ...]

    def __call__(self, step: int) -> float:
        return self.factors[bisect.bisect_right(self.boundaries, step)]


@dataclass(frozen=True)
class StepDecay:
    """multiplier(t) = gamma ** (t // step_size)."""

    step_size: int
    gamma: float

    def __call__(self, step: int) -> float:
        return self.gamma ** (step // self.step_size)


@dataclass(frozen=True)
class Cosine:
    """multiplier(t) = m + (1 - m)(1 + cos(pi min(t, T) / T)) / 2, m = min_factor."""

    total_steps: int
    min_factor: float

    def __call__(self, step: int) -> float:
        frac = min(step, self.total_steps) / self.total_steps
        return self.min_factor + (1.0 - self.min_factor) * 0.5 * (1.0 + math.cos(math.pi * frac))


@dataclass(frozen=True)
class Warmup:
    """multiplier(t) = (t + 1) / W * after(t) for t < W, then after(t)."""

    warmup_steps: int
    after: Schedule = field(default_factory=Constant)

    def __call__(self, step: int) -> float:
        base = self.after(step)
        return base * (step + 1) / self.warmup_steps if step < self.warmup_steps else base


def constant() -> Schedule:
    """The constant multiplier 1 (a fixed learning rate)."""
    return Constant()


def piecewise(boundaries: Sequence[int], factors: Sequence[float]) -> Schedule:
    """Piecewise-constant multipliers: factors[0] before boundaries[0], factors[i] on
    [boundaries[i-1], boundaries[i]), factors[-1] from boundaries[-1] on.

    Parameters
    ----------
    boundaries : strictly increasing steps >= 1.
    factors : len(boundaries) + 1 finite multipliers >= 0.
    """
    b = tuple(_check_int(x, "boundaries entries", 1) for x in boundaries)
    if any(b2 <= b1 for b1, b2 in zip(b, b[1:], strict=False)):
        raise ValueError(f"boundaries must be strictly increasing; got {list(boundaries)}")
    f = tuple(float(x) for x in factors)
    if len(f) != len(b) + 1:
        raise ValueError(f"factors must have len(boundaries) + 1 = {len(b) + 1} entries; "
                         f"got {len(f)}")
    if any(not (math.isfinite(x) and x >= 0) for x in f):
        raise ValueError(f"factors must be finite and >= 0; got {list(factors)}")
    return Piecewise(b, f)


def ghorbani_paper(total_steps: int, tail1: int = 15_000, tail2: int = 15_000) -> Schedule:
    """The schedule of Ghorbani et al. (2019)'s companion code (github.com/bGhorbani/
    Lazy-Training-Neural-Nets; not stated in the paper).

    multiplier(t) = 1 for t < T - tail1 - tail2, 1/10 for the next tail1 steps, 1/15 for the
    last tail2 steps (T = total_steps). The NN script uses tail1 = tail2 = 15000, the NT script
    10000 and 10000.

    Parameters
    ----------
    total_steps : T, the number of updates of the run.
    tail1, tail2 : lengths of the lr/10 and lr/15 phases (integers >= 0 with
        tail1 + tail2 <= total_steps).
    """
    T = _check_int(total_steps, "total_steps", 1)
    t1 = _check_int(tail1, "tail1", 0)
    t2 = _check_int(tail2, "tail2", 0)
    if t1 + t2 > T:
        raise ValueError(f"tail1 + tail2 must be <= total_steps = {T}; got {t1} + {t2}; pass "
                         "smaller tails for short runs")
    phases = [(length, fac) for length, fac in ((T - t1 - t2, 1.0), (t1, 0.1), (t2, 1.0 / 15.0))
              if length > 0]
    bounds, facs, end = [], [], 0
    for length, fac in phases:
        if facs:
            bounds.append(end)
        facs.append(fac)
        end += length
    return Piecewise(tuple(bounds), tuple(facs))


def step_decay(step_size: int, gamma: float = 0.1) -> Schedule:
    """multiplier(t) = gamma ** floor(t / step_size) (e.g. lr/10 every step_size steps)."""
    s = _check_int(step_size, "step_size", 1)
    g = float(gamma)
    if not (math.isfinite(g) and g >= 0):
        raise ValueError(f"gamma must be finite and >= 0; got {gamma!r}")
    return StepDecay(s, g)


def cosine(total_steps: int, min_factor: float = 0.0) -> Schedule:
    """Cosine annealing from 1 at t = 0 to min_factor at t = total_steps (constant after)."""
    T = _check_int(total_steps, "total_steps", 1)
    m = float(min_factor)
    if not (0.0 <= m <= 1.0):
        raise ValueError(f"min_factor must be in [0, 1]; got {min_factor!r}")
    return Cosine(T, m)


def warmup(warmup_steps: int, after: Schedule | None = None) -> Schedule:
    """Linear warm-up over warmup_steps steps ((t + 1) / W), multiplying ``after`` (default
    constant)."""
    W = _check_int(warmup_steps, "warmup_steps", 1)
    if after is not None and not callable(after):
        raise ValueError(f"after must be a schedule (callable step -> multiplier); got {after!r}")
    return Warmup(W, after if after is not None else Constant())
