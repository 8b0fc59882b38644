"""Several experiments in one command: each run in turn into one output folder, and the summary
a front end renders (the outcomes, the failures, the experiments ``--max-time`` stopped, and the
exit code they add up to).

The exit-code policy (:meth:`RunSummary.exit_status`): a failed experiment's code (1 for a
failing unit, 2 for missing data); else, when ``--max-time`` stopped an experiment, 3, or 2
when the command computed nothing at all (repeating it would stop again without progress);
``strict`` raises the code to at least 1 when a claim failed. One experiment's failure or stop
never keeps the next from running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lazylab.errors import DataNotFound, InputError, LazylabError, OutOfTime, UnitFailed
from lazylab.runner.orchestrate import ProgressSink, RunOutcome, run_experiment
from lazylab.runner.spec import RunSpec, WorkUnit

if TYPE_CHECKING:
    from lazylab.store import Store

@dataclass
class RunSummary:
    """What :func:`run_many` produced, in the order the experiments ran."""

    #: The experiments that finished (assembled, with their claims).
    outcomes: list[RunOutcome] = field(default_factory=list)
    #: One error per experiment whose unit failed or whose data is missing.
    failures: list[LazylabError] = field(default_factory=list)
    #: One :class:`~lazylab.errors.OutOfTime` per experiment ``--max-time`` stopped.
    stopped: list[OutOfTime] = field(default_factory=list)
    #: Units computed by this call, over every experiment (stopped ones included).
    computed: int = 0

    def exit_status(self, *, strict: bool = False,
                    max_time: str | None = None) -> tuple[int, list[str]]:
        """``(exit code, closing error lines)`` by the module's policy; 0 and no lines when
        every experiment finished (and, with ``strict``, every claim held).

        >>> code, lines = RunSummary(stopped=[OutOfTime("x")], computed=4).exit_status()
        >>> code, lines[0].split(";")[0]
        (3, '--max-time: 1 experiment(s) not finished')
        >>> RunSummary(stopped=[OutOfTime("x")]).exit_status(max_time="10s")[0]  # no progress
        2
        """
        code = max((e.exit_code for e in self.failures), default=0)
        lines: list[str] = []
        if self.stopped and not code:
            if not self.outcomes and not self.computed:
                return InputError.exit_code, [
                    f"--max-time {max_time}: no unit fitted in the time left after start-up, "
                    "so this command would stop without progress every time; raise --max-time"]
            lines.append(f"--max-time: {len(self.stopped)} experiment(s) not finished; rerun "
                         "the same command with --resume to carry on")
            code = OutOfTime.exit_code
        if strict and any(c.failed for o in self.outcomes for c in o.claims):
            lines.append("--strict: at least one claim failed")
            code = max(code, 1)
        return code, lines


class _Counting:
    """A progress sink that counts the units computed and passes every event on."""

    def __init__(self, inner: ProgressSink | None):
        self.inner = inner
        self.computed = 0

    def started(self, spec: RunSpec, pending: int, total: int) -> None:
        if self.inner is not None:
            self.inner.started(spec, pending, total)

    def unit_done(self, spec: RunSpec, unit: WorkUnit) -> None:
        self.computed += 1
        if self.inner is not None:
            self.inner.unit_done(spec, unit)


#: Called after each experiment with its spec and its outcome, or the error that ended it.
OnDone = Callable[[RunSpec, RunOutcome | LazylabError], None]


def run_many(specs: Sequence[RunSpec], out_dir: Path, store: Store, *, resume: bool = False,
             fresh: bool = False, workers: int = 1, backend: str = "local",
             address: str | None = None, command: str = "",
             progress: ProgressSink | None = None, deadline: float | None = None,
             on_done: OnDone | None = None) -> RunSummary:
    """Run each spec in turn into ``out_dir`` and ``store`` (:func:`run_experiment`, with the
    same options) and sum them up.

    A failing unit, missing data (:class:`~lazylab.errors.UnitFailed`,
    :class:`~lazylab.errors.DataNotFound`) or ``deadline`` reached
    (:class:`~lazylab.errors.OutOfTime`) ends that experiment only: it is recorded in the
    summary and the next one runs. Any other error (bad input, a faulty store, an interrupt)
    propagates. ``on_done`` hears of each experiment as it ends.
    """
    counter = _Counting(progress)
    summary = RunSummary()
    for spec in specs:
        result: RunOutcome | LazylabError
        try:
            result = run_experiment(spec, out_dir, store, resume=resume, fresh=fresh,
                                    workers=workers, backend=backend, address=address,
                                    command=command, progress=counter, deadline=deadline)
        except OutOfTime as e:
            summary.stopped.append(e)
            result = e
        except (UnitFailed, DataNotFound) as e:
            summary.failures.append(e)
            result = e
        else:
            summary.outcomes.append(result)
        if on_done is not None:
            on_done(spec, result)
    summary.computed = counter.computed
    return summary
