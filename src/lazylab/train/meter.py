"""Capped training loops, for measuring what a paper-scale run will cost.

Every training loop of lazylab asks :func:`loop_steps` how many of its ``requested`` steps (or
epochs) to run. Outside :func:`capped` the answer is ``requested`` and nothing is recorded.
Inside ``with capped(k) as meter:`` each loop runs at most ``k`` steps, and ``meter.loops``
records one :class:`Segment` per loop: the steps requested and run, and the readings of
``meter.probe`` (e.g. wall seconds, CPU seconds, an operation or flop counter) when the loop
started. A segment lasts until the next loop starts or :meth:`StepMeter.close`.

Running a unit twice, capped at ``k`` and ``2 k``, gives each loop's cost per step as the
difference of its segments over the difference of their steps (what a segment pays once, its
set-up and final evaluation, cancels), and the full run's cost as

    cost(k) + sum_i (requested_i - run_i(k)) * per_step_i,

which :func:`extrapolate` computes (``bench/bench_paper_scale.py`` uses it for all 22
experiments). A capped run's numbers are not results: it is for measuring only.

A loop that evaluates at log-spaced steps (dense early: 1, 2, 3, ...) would charge its early
evaluations to every step. Such a loop declares how many evaluations the whole run makes
(``loop_steps(steps, evaluations=n)``) and wraps each in :func:`evaluation`; their cost is
kept apart, taken out of the per-step difference, and extrapolated per evaluation:

    cost(k) + sum_i [(requested_i - run_i(k)) * per_step_i
                     + (evaluations_i - evaluated_i(k)) * per_evaluation_i].

An evaluation over a large data set in row blocks (a full-data loss, a model's test
predictions) can cost more to measure than every step: it iterates its blocks through
:func:`sampled_blocks`. Inside ``capped(k, blocks=b)`` an evaluation then runs only its first
``b`` blocks and charges the n - b it skipped as (n / b - 1) times the measured cost of those
``b`` (``Segment.evaluation_extra``), a small over-estimate where the last block is partial:

    per_evaluation_i = (measured_i + extra_i) / evaluated_i.

>>> with capped(3) as m:
...     n = loop_steps(1000)
>>> n, m.loops[0].requested, m.loops[0].run
(3, 1000, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

@dataclass
class Segment:
    """One training loop of a capped run: steps requested and run, probe readings at its start
    (``start``) and at the start of whatever followed it (``end``)."""

    requested: int
    run: int
    start: tuple[float, ...]
    end: tuple[float, ...] = ()
    #: evaluations the uncapped loop makes, evaluations made here and their summed readings
    evaluations: int = 0
    evaluated: int = 0
    evaluation_cost: list[float] = field(default_factory=list)
    #: the extrapolated readings of the row blocks its evaluations skipped (:func:`sampled_blocks`)
    evaluation_extra: list[float] = field(default_factory=list)
    #: whether its steps replay from a CUDA graph where the device captures
    #: (:mod:`lazylab.train.capture`): launched without the host, views free
    replayed: bool = False


def _add(acc: list[float], cost: Sequence[float]) -> list[float]:
    return [x + c for x, c in zip(acc or [0.0] * len(cost), cost, strict=True)]


@dataclass
class StepMeter:
    """The loops seen inside :func:`capped` (module docstring)."""

    cap: int
    probe: Callable[[], tuple[float, ...]]
    loops: list[Segment] = field(default_factory=list)
    begin: tuple[float, ...] = ()
    finish: tuple[float, ...] = ()
    #: row blocks an evaluation runs (:func:`sampled_blocks`); None: all of them
    blocks: int | None = None
    #: nesting depth of :func:`evaluation` blocks now open
    evaluating: int = 0

    def enter(self, requested: int, evaluations: int = 0, replayed: bool = False) -> int:
        now = self.probe()
        if self.loops:
            self.loops[-1].end = now
        run = min(int(requested), self.cap)
        self.loops.append(Segment(int(requested), run, now, evaluations=int(evaluations),
                                  replayed=bool(replayed)))
        return run

    def close(self) -> tuple[float, ...]:
        """Ends the run (the last segment with it) at the first call; returns the probe
        reading at the end, the same at every later call (a wall clock read later would
        charge the run for whatever ran since)."""
        if not self.finish:
            self.finish = self.probe()
            if self.loops and not self.loops[-1].end:
                self.loops[-1].end = self.finish
        return self.finish

    def total(self) -> list[float]:
        """The probe's readings over the whole run: end minus begin."""
        return [e - s for e, s in zip(self.close(), self.begin, strict=True)]


_METER: ContextVar[StepMeter | None] = ContextVar("lazylab_step_meter", default=None)


def loop_steps(requested: int, evaluations: int = 0, replayed: bool = False) -> int:
    """The number of steps a training loop of ``requested`` steps runs: ``requested``, or at
    most the cap inside :func:`capped` (recorded there). ``evaluations``: how many
    :func:`evaluation` blocks the uncapped loop runs (module docstring); ``replayed``: its
    steps replay from a CUDA graph on a device whose capture probe passes (recorded, so that
    a cost model can price them as replayed)."""
    meter = _METER.get()
    return int(requested) if meter is None else meter.enter(requested, evaluations, replayed)


@contextmanager
def evaluation(counted: bool = True) -> Iterator[None]:
    """Marks a loop's periodic evaluation (logging a test loss, say) inside :func:`capped`:
    its probe readings go to the current loop's evaluation cost (module docstring). Outside
    :func:`capped`, or before any loop, it does nothing. ``counted=False``: the second part of
    an evaluation already counted (work on both sides of a logged step): its cost is added
    to the evaluations' without counting another one."""
    meter = _METER.get()
    if meter is None or not meter.loops:
        yield
        return
    seg, before = meter.loops[-1], meter.probe()
    meter.evaluating += 1
    try:
        yield
    finally:
        meter.evaluating -= 1
        after = meter.probe()
        seg.evaluation_cost = _add(seg.evaluation_cost,
                                   [b - a for a, b in zip(before, after, strict=True)])
        seg.evaluated += int(counted)


def sampled_blocks(items: Sequence[T]) -> Iterator[T]:
    """The row blocks (e.g. their start rows) of one pass over a data set, in order: all of
    them, except inside an :func:`evaluation` of ``capped(k, blocks=b)``, where only the first
    ``b`` are yielded and the rest are charged to the loop's ``evaluation_extra`` (module
    docstring). The results of such a pass are not results, like everything capped.

    >>> list(sampled_blocks(range(0, 10, 4)))
    [0, 4, 8]
    """
    meter = _METER.get()
    b = None if meter is None or not meter.evaluating else meter.blocks
    if b is None or len(items) <= b:
        yield from items
        return
    before = meter.probe()
    yield from items[:b]
    after = meter.probe()  # reached when the consumer asks for the next block
    scale = len(items) / b - 1
    seg = meter.loops[-1]
    seg.evaluation_extra = _add(seg.evaluation_extra,
                                [scale * (y - x) for x, y in zip(before, after, strict=True)])


@contextmanager
def capped(cap: int, probe: Callable[[], tuple[float, ...]] = lambda: (),
           blocks: int | None = None) -> Iterator[StepMeter]:
    """Cap every training loop inside the block at ``cap`` steps and record them; with
    ``blocks``, every evaluation pass at that many row blocks (:func:`sampled_blocks`)."""
    if int(cap) < 1:
        raise ValueError(f"cap must be an integer >= 1; got {cap!r}")
    if blocks is not None and int(blocks) < 1:
        raise ValueError(f"blocks must be an integer >= 1 or None; got {blocks!r}")
    meter = StepMeter(int(cap), probe, blocks=None if blocks is None else int(blocks))
    meter.begin = probe()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)
        meter.close()


def extrapolate(short: StepMeter, long: StepMeter, total_short: Sequence[float]
                ) -> list[float]:
    """The uncapped cost of a run measured capped twice (module docstring).

    ``short`` and ``long`` are the meters of the same run capped at k and at a larger cap;
    ``total_short`` the probe's totals of the short run (end minus begin). Each probe
    component is extrapolated separately. Raises ValueError when the two runs did not see
    the same sequence of loops (a data-dependent loop count)."""
    if [s.requested for s in short.loops] != [s.requested for s in long.loops]:
        raise ValueError("the two capped runs saw different loops: "
                         f"{[s.requested for s in short.loops]} vs "
                         f"{[s.requested for s in long.loops]}")
    out = list(total_short)
    for i, a in enumerate(short.loops):
        extra = a.requested - a.run
        if extra > 0:
            out = [o + extra * c for o, c in zip(out, per_step(short, long, i), strict=True)]
        if a.evaluation_extra:  # the blocks its own evaluations skipped
            out = _add(out, a.evaluation_extra)
        more = a.evaluations - a.evaluated
        if more > 0 and a.evaluated:
            out = [o + more * c for o, c in zip(out, per_evaluation(a), strict=True)]
    return out


def per_evaluation(seg: Segment) -> list[float]:
    """A loop's probe readings per evaluation, the blocks it skipped included (zeros where
    it made none)."""
    if not seg.evaluated:
        return [0.0] * len(seg.start)
    cost = _add(seg.evaluation_cost, seg.evaluation_extra or [0.0] * len(seg.evaluation_cost))
    return [c / seg.evaluated for c in cost]


def per_step(short: StepMeter, long: StepMeter, i: int) -> list[float]:
    """Loop i's probe readings per step (clipped at 0): the difference of its segments in the
    two capped runs over the difference of their steps; zeros for a loop under both caps."""
    a, b = short.loops[i], long.loops[i]
    if b.run == a.run:
        return [0.0] * len(a.start)
    ea, eb = (s.evaluation_cost or [0.0] * len(a.start) for s in (a, b))
    return [max(((b.end[j] - b.start[j] - eb[j]) - (a.end[j] - a.start[j] - ea[j]))
                / (b.run - a.run), 0.0) for j in range(len(a.start))]
