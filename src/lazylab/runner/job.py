"""What a backend ships to wherever units compute, and how one unit is called.

A :class:`Job` is the picklable part of a run: the experiment class, its parameters, the
device type, the execution policy and the output of ``prepare`` (computed once per run).
:func:`call_unit` applies the policy, runs one unit and captures a failure as data (exceptions
may not pickle), so every backend calls units the same way.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lazylab.errors import DataNotFound, LazylabError, UnitFailed
from lazylab.runner.policy import ExecutionPolicy
from lazylab.runner.spec import WorkUnit

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment, ExperimentParams

__all__ = ["Backend", "Done", "Job", "Result", "call_unit", "failure", "uses_prepare"]

#: (status, payload, seconds, detail): status "ok" with rows, "missing" (a data file was not
#: found) or "error" with a message; detail is the traceback text.
Result = tuple[str, Any, float, str | None]

#: A finished unit as a backend yields it: (unit, rows, compute seconds).
Done = tuple[WorkUnit, list[dict[str, Any]], float]


def uses_prepare(exp: Experiment) -> bool:
    """True when the experiment overrides ``prepare`` (then ``prep=`` is passed)."""
    from lazylab.experiments.base import Experiment

    return type(exp).prepare is not Experiment.prepare


@dataclass(frozen=True)
class Job:
    """The picklable part of a run that every worker needs."""

    exp_id: str
    exp_cls: type
    params: ExperimentParams
    device: str
    policy: ExecutionPolicy
    prep: Any = None
    with_prep: bool = False


def call_unit(exp: Experiment, job: Job, key: dict[str, Any], seed: int) -> Result:
    """Run one unit under the job's policy; a failure comes back as data."""
    import torch

    from lazylab.report import tidy_rows

    job.policy.apply()
    t0 = time.perf_counter()
    try:
        kw = {"prep": job.prep} if job.with_prep else {}
        rows = tidy_rows(exp.run_unit(job.params, key, seed, torch.device(job.device), **kw),
                         kind="simulation", where=f"{exp.id}.run_unit")
    except FileNotFoundError as e:
        return "missing", str(e), time.perf_counter() - t0, traceback.format_exc()
    except Exception as e:
        return ("error", f"{type(e).__name__}: {e}", time.perf_counter() - t0,
                traceback.format_exc())
    return "ok", rows, time.perf_counter() - t0, None


def failure(exp_id: str, unit: WorkUnit, res: Result) -> LazylabError:
    """The error to raise for a failed unit."""
    status, msg, _, detail = res
    if status == "missing":
        return DataNotFound(f"{exp_id}: {msg}", detail)
    return UnitFailed(f"{exp_id}: unit {unit.key_json} (seed index {unit.seed_index}) "
                      f"failed: {msg}", detail)


class Backend(Protocol):
    """Computes units, yielding ``(unit, rows, seconds)`` as each finishes.

    On the first failing unit no new unit is started; units already running are still yielded
    (so the driver can store them), then UnitFailed or DataNotFound is raised. On an interrupt
    (KeyboardInterrupt) the backend stops its workers before re-raising.
    """

    name: str

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkUnit]) -> Iterator[Done]:
        """Compute ``pending`` units of ``exp`` (the driver's instance) under ``job``."""
        ...
