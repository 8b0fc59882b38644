"""The cost guard: estimate before starting, refuse what cannot fit.

``reproduce`` prints each experiment's estimated time and peak memory (from
:meth:`Experiment.cost`, scaled by the seed count), refuses a run whose peak memory exceeds the
machine's (exit 2), and asks for ``--yes`` when the estimated total exceeds an hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lazylab.errors import InputError
from lazylab.runner.policy import machine_memory
from lazylab.runner.spec import RunSpec

__all__ = ["CONFIRM_SECONDS", "PROCESS_BYTES", "Estimate", "check_cost", "device_bytes",
           "estimate"]

#: Runs estimated longer than this need ``--yes``.
CONFIRM_SECONDS = 3600.0


@dataclass(frozen=True)
class Estimate:
    """Estimated wall seconds (all seeds, one worker) and peak bytes (None: unknown)."""

    exp_id: str
    seconds: float
    peak_bytes: float | None


#: Resident memory of a process that has imported lazylab with torch, numpy and scipy and
#: built the registry (measured: 0.31 GiB on Linux x86-64, torch 2.13 CPU); every worker
#: process pays it on top of what the experiment's model counts.
PROCESS_BYTES = 0.32 * 2**30


def estimate(spec: RunSpec) -> Estimate:
    """The experiment's cost model at the spec's parameters, times its seed count; the peak
    memory is the model's arrays plus :data:`PROCESS_BYTES` (None where the experiment has no
    memory model)."""
    secs, peak = spec.exp.cost(spec.params, spec.scale)
    return Estimate(spec.exp.id, float(secs) * spec.seeds,
                    None if peak is None else float(peak) + PROCESS_BYTES)


def device_bytes(spec: RunSpec) -> float | None:
    """The model's own arrays (what a GPU holds), without the process's resident memory."""
    return spec.exp.cost(spec.params, spec.scale)[1]


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
