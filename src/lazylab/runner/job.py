"""What a backend ships to wherever units compute, and how a group of units is called.

A :class:`Job` is the picklable part of a run: the experiment class, its parameters, the
device type, the execution policy and the output of ``prepare`` (computed once per run).
:func:`call_group` applies the policy, runs one group (a unit alone, or the members of a
batched group) and captures a failure as data (exceptions may not pickle), so every backend
calls units the same way.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from lazylab.errors import DataNotFound, LazylabError, UnitFailed
from lazylab.runner.policy import ExecutionPolicy
from lazylab.runner.rows import tidy_rows
from lazylab.runner.spec import WorkGroup, WorkUnit

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment, ExperimentParams

#: (status, payload, seconds, detail): status "ok" with rows, "missing" (a data file was not
#: found) or "error" with a message; detail is the traceback text.
Result = tuple[str, Any, float, str | None]

#: A finished unit as a backend yields it: (unit, rows, compute seconds).
Done = tuple[WorkUnit, list[dict[str, Any]], float]


@dataclass(frozen=True)
class Job:
    """The picklable part of a run that every worker needs."""

    exp_id: str
    exp_cls: type
    params: ExperimentParams
    device: str
    policy: ExecutionPolicy
    prep: Any = None


def call_group(exp: Experiment, job: Job, label: str | None,
               members: Sequence[tuple[dict[str, Any], int]], group_seed: int) -> Result:
    """Run one group (``label`` None: a single unit through ``run_unit``) under the job's
    policy; the payload is one list of tidy rows per member. A failure comes back as data:
    any exception, and ``SystemExit`` too (a unit calling ``sys.exit``); KeyboardInterrupt
    (Ctrl-C, SIGTERM) still propagates and stops the run."""
    import torch

    job.policy.apply()
    t0 = time.perf_counter()
    dev = torch.device(job.device)
    try:
        with _exit_raises():
            raw = _compute(exp, job, label, members, group_seed, dev)
        rows = [tidy_rows(r, kind="simulation", where=f"{exp.id}.run_unit") for r in raw]
    except FileNotFoundError as e:
        return "missing", str(e), time.perf_counter() - t0, traceback.format_exc()
    except Exception as e:
        return ("error", f"{type(e).__name__}: {e}", time.perf_counter() - t0,
                traceback.format_exc())
    except SystemExit as e:
        # sys.exit() inside a unit would end the run as if it had finished (exit status 0
        # from a worker or from this process): it is a failed unit like any other exception.
        return ("error", f"the unit tried to end the process (SystemExit({e.code!r}))",
                time.perf_counter() - t0, traceback.format_exc())
    return "ok", rows, time.perf_counter() - t0, None


def _compute(exp: Experiment, job: Job, label: str | None,
             members: Sequence[tuple[dict[str, Any], int]], group_seed: int,
             dev: Any) -> list[Any]:
    """The raw row lists of one group (one list per member)."""
    if label is None:
        (key, seed), = members
        return [exp.run_unit(job.params, key, seed, dev, prep=job.prep)]
    raw = exp.run_group(job.params, list(members), group_seed, dev, prep=job.prep)
    if len(raw) != len(members):
        raise ValueError(f"run_group returned {len(raw)} row lists for {len(members)} members")
    return list(raw)


@contextmanager
def _exit_raises() -> Iterator[None]:
    """``os._exit`` raises SystemExit while experiment code runs: it would end this process
    with the status it is given (0 from a serial run, a false success) without a word; as
    SystemExit it is a failed unit like ``sys.exit``."""
    real = os._exit

    def refuse(code: int) -> NoReturn:
        raise SystemExit(f"os._exit({code})")

    os._exit = refuse
    try:
        yield
    finally:
        os._exit = real


def group_done(group: WorkGroup, res: Result) -> list[Done]:
    """A finished group as per-unit results, the seconds shared equally by its members."""
    secs = res[2] / len(group.units)
    return [(u, rows, secs) for u, rows in zip(group.units, res[1], strict=True)]


def failure(exp_id: str, unit: WorkUnit | WorkGroup, res: Result) -> LazylabError:
    """The error to raise for a failed unit or group."""
    status, msg, _, detail = res
    if status == "missing":
        return DataNotFound(f"{exp_id}: {msg}", detail)
    if isinstance(unit, WorkGroup):
        u = unit.units[0]
        what = (f"unit {u.key_json}" if unit.label is None else
                f"group {unit.label!r} ({len(unit.units)} units)")
        return UnitFailed(f"{exp_id}: {what} (seed index {unit.seed_index}) failed: {msg}",
                          detail)
    return UnitFailed(f"{exp_id}: unit {unit.key_json} (seed index {unit.seed_index}) "
                      f"failed: {msg}", detail)


class Backend(Protocol):
    """Computes groups of units, yielding ``(unit, rows, seconds)`` for each unit of a
    finished group.

    Groups are started in the given order while the :class:`Clock` (None: no limit) says
    they fit. On the first failing group no new
    group is started; groups already running are still yielded (so the driver can store
    them), then UnitFailed or DataNotFound is raised. On an interrupt (KeyboardInterrupt) the
    backend stops its workers before re-raising.
    """

    name: str

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkGroup],
            clock: Clock | None = None) -> Iterator[Done]:
        """Compute ``pending`` groups of ``exp`` (the driver's instance) under ``job``."""
        ...


class Clock:
    """Decides whether the next group fits before ``deadline`` (a ``time.monotonic()``
    value; None: always): a group of k units is expected to take k times the slowest seconds
    per unit measured so far in this run, or ``prior`` (the cost model's) before any."""

    def __init__(self, deadline: float | None, prior: float = 0.0):
        self.deadline = deadline
        self.unit_seconds = max(0.0, prior)
        self._measured = False

    def seen(self, group: WorkGroup, wall: float) -> None:
        """Record a finished group's wall time."""
        rate = wall / len(group.units)
        self.unit_seconds = max(self.unit_seconds, rate) if self._measured else rate
        self._measured = True

    def fits(self, group: WorkGroup) -> bool:
        """True when ``group`` is expected to finish before the deadline."""
        if self.deadline is None:
            return True
        left = self.deadline - time.monotonic()
        return left > 0 and self.unit_seconds * len(group.units) <= left
