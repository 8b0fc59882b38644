"""The cost model of a run: estimated seconds and peak memory, and the guard that refuses
what cannot fit.

One place for every cost rule:

* an experiment's :meth:`~lazylab.experiments.base.Experiment.cost` hook returns ``(seconds,
  peak bytes or None)`` of one seed at parameters ``p``; its default is :func:`scaled_cost`
  with the experiment's ``cost_sizes`` and its :meth:`peak_bytes` model;
* :func:`unit_count_seconds` and :func:`anchor` are what size-based models scale from;
* :func:`estimate` multiplies by the seed count and adds the interpreter's resident memory;
  :func:`check_cost` refuses a run above the machine's memory (exit 2) or above an hour
  without ``--yes``; ``reproduce`` and ``robustness`` print the estimates first.

The size rule: ``--set steps=1000000`` or ``--set m=1000000`` (accepted values) would be
estimated at the quick run's time by the unit count alone, so :func:`scaled_cost` multiplies
it by the growth of each named size,

    seconds(p) = unit_count_seconds(p) x prod_k (size_k(p) / size_k(scale))^e_k

where ``size_k`` is the parameter's value (the largest item for a list) and ``e_k`` its stated
exponent (1 for GD steps, widths and sample counts that multiply the work; the products are a
lower bound where the true growth is faster, e.g. a kernel solve in n).

>>> size_of([10, 40, 20]), size_of(7), size_of(None)
(40.0, 7.0, None)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lazylab.errors import InputError
from lazylab.machine import machine_memory

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment, ExperimentParams

#: Runs estimated longer than this need ``--yes``.
CONFIRM_SECONDS = 3600.0

#: Resident memory of a process that has imported lazylab with torch, numpy and scipy and
#: built the registry (measured: 0.31 GiB on Linux x86-64, torch 2.13 CPU); every worker
#: process pays it on top of what the experiment's model counts.
PROCESS_BYTES = 0.32 * 2**30


#: The grid a run has computed already, ``(parameters, unit keys)``, while its cost is priced.
_KNOWN_GRID: ContextVar[tuple[object, list[dict[str, Any]]] | None] = ContextVar(
    "lazylab_known_grid", default=None)


@contextmanager
def known_grid(p: ExperimentParams, keys: list[dict[str, Any]]) -> Iterator[None]:
    """Within the block, :func:`grid_of` answers ``keys`` for these very parameters ``p``
    (the run's :attr:`~lazylab.runner.RunSpec.unit_keys`), so a cost model does not compute
    the grid a second time."""
    token = _KNOWN_GRID.set((p, keys))
    try:
        yield
    finally:
        _KNOWN_GRID.reset(token)


def grid_of(exp: Experiment, p: ExperimentParams) -> list[dict[str, Any]]:
    """``exp.units(p)``, or the grid :func:`known_grid` holds for this ``p`` object."""
    known = _KNOWN_GRID.get()
    if known is not None and known[0] is p:
        return known[1]
    return list(exp.units(p))


class Priced(Protocol):
    """What the estimate needs of a resolved run (a :class:`lazylab.runner.RunSpec`, which
    also prices itself once, :attr:`~lazylab.runner.RunSpec.seed_cost`)."""

    @property
    def exp(self) -> Experiment: ...
    @property
    def params(self) -> ExperimentParams: ...
    @property
    def scale(self) -> str: ...
    @property
    def seeds(self) -> int: ...


@dataclass(frozen=True)
class Estimate:
    """Estimated wall seconds (all seeds, one worker) and peak bytes (None: unknown)."""

    exp_id: str
    seconds: float
    peak_bytes: float | None


def size_of(v: Any) -> float | None:
    """A parameter value as a size: a number, or the largest item of a list (None otherwise)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list | tuple) and v and all(isinstance(x, int | float) for x in v):
        return float(max(v))
    return None


def anchor(exp: Experiment, scale: str) -> tuple[ExperimentParams, float]:
    """``(parameters, seconds per seed)`` a size-based cost model scales from: the scale's own
    defaults and ``est_seconds[scale] / default_seeds[scale]`` (quick's for a scale without an
    estimate), so the estimate at a scale's defaults is its ``est_seconds``."""
    ref = scale if scale in exp.est_seconds else "quick"
    return exp.resolve(ref), exp.est_seconds[ref] / max(1, exp.default_seeds.get(ref, 1))


def unit_count_seconds(exp: Experiment, p: ExperimentParams, scale: str = "quick") -> float:
    """``est_seconds[scale]`` (which covers ``default_seeds[scale]`` seeds) divided by those
    seeds and scaled by the ratio of the number of work units at ``p`` to the number at the
    scale's own parameters."""
    try:
        ref, per_seed = anchor(exp, scale)
        base = len(exp.units(ref))
    except (ValueError, KeyError):
        per_seed, base = float(exp.est_seconds.get(scale, 60.0)), 0
    n = len(grid_of(exp, p))
    return per_seed * (n / base if base else 1.0)


def scaled_cost(exp: Experiment, p: ExperimentParams, scale: str,
                sizes: Mapping[str, float],
                peak: Callable[[ExperimentParams], float | None] | None = None,
                ) -> tuple[float, float | None]:
    """``(seconds, peak bytes or None)`` of one seed: the unit-count rule scaled by sizes.

    Parameters
    ----------
    exp, p, scale
        The experiment, the resolved parameters and the scale whose ``est_seconds`` anchor it.
    sizes
        Parameter name -> exponent ``e_k`` of the work in that size.
    peak
        Optional rule for the peak bytes at ``p``.
    """
    secs = unit_count_seconds(exp, p, scale)
    ref = exp.resolve(scale if scale in exp.scales else "quick")
    for name, e in sizes.items():
        now, then = size_of(getattr(p, name, None)), size_of(getattr(ref, name, None))
        if now and then and now > 0 and then > 0:
            secs *= (now / then) ** e
    return secs, (peak(p) if peak is not None else None)


def estimate(run: Priced) -> Estimate:
    """The experiment's cost model at the run's parameters, times its seed count; the peak
    memory is the model's arrays plus :data:`PROCESS_BYTES` (None where the experiment has no
    memory model)."""
    secs, peak = seed_cost(run)
    return Estimate(run.exp.id, float(secs) * run.seeds,
                    None if peak is None else float(peak) + PROCESS_BYTES)


def device_bytes(run: Priced) -> float | None:
    """The model's own arrays (what a GPU holds), without the process's resident memory."""
    return seed_cost(run)[1]


def seed_cost(run: Priced) -> tuple[float, float | None]:
    """``exp.cost(params, scale)`` of a run: the value a :class:`~lazylab.runner.RunSpec`
    computed once (``seed_cost``), else the cost model's answer."""
    cached = getattr(run, "seed_cost", None)
    if cached is not None:
        return cached
    return run.exp.cost(run.params, run.scale)


def check_cost(estimates: Sequence[Estimate], *, yes: bool, workers: int = 1,
               memory: int | None = None) -> None:
    """InputError above the machine's memory, or above an hour without ``yes``."""
    memory = machine_memory() if memory is None else memory
    for e in estimates:
        if e.peak_bytes is not None and memory is not None and e.peak_bytes * workers > memory:
            raise InputError(
                f"{e.exp_id}: estimated peak memory {e.peak_bytes * workers / 2**30:.1f} GiB "
                f"exceeds this machine's {memory / 2**30:.1f} GiB; reduce the sizes (--set) or "
                "--workers, or run on a larger machine")
    total = sum(e.seconds for e in estimates) / max(1, workers)
    if total > CONFIRM_SECONDS and not yes:
        raise InputError(f"estimated time {total / 3600:.1f} h exceeds 1 h; pass --yes to run "
                         "it anyway, or reduce the sizes (--set), --seeds or --scale")
