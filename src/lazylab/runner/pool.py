"""The process-pool backend (``--workers N``): ``spawn`` workers on this machine.

Each worker receives the :class:`~lazylab.runner.job.Job` once, through the pool initializer
(the ``prepare`` output included), applies the run's execution policy (the same thread count
as every other process: results do not depend on ``--workers``), ignores SIGINT (the main
process stops it) and dies with its parent: ``PR_SET_PDEATHSIG`` on Linux plus a watchdog
thread that exits when the parent process is gone, so a ``kill -9`` of the main process leaves
no orphaned worker.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from lazylab.errors import LazylabError, UnitFailed
from lazylab.runner.job import Clock, Done, Job, Result, call_group, failure, group_done
from lazylab.runner.spec import WorkGroup

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

# Worker state, set once per worker by _init.
_W: dict[str, Any] = {}


def _die_with_parent(parent: int) -> None:
    """Exit when ``parent`` dies: the kernel's parent-death signal and a polling watchdog."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before we got here
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="lazylab-parent-watch", daemon=True).start()


def _init(job: Job, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C
    _die_with_parent(parent)
    job.policy.apply()
    _W.update(exp=job.exp_cls(), job=job)


def _group(label: str | None, members: list[tuple[dict[str, Any], int]], seed: int) -> Result:
    return call_group(_W["exp"], _W["job"], label, members, seed)


def _died(exp_id: str, running: Sequence[WorkGroup]) -> UnitFailed:
    """A broken pool fails every group in flight, so the one whose worker died cannot be told
    apart: name them all, in key order."""
    keys = sorted({g.units[0].key_json for g in running})
    which = keys[0] if len(keys) == 1 else "one of " + ", ".join(keys)
    return UnitFailed(f"{exp_id}: a worker process died while running {which} (out of memory, "
                      "a crash, or the unit ended its process)")


class PoolBackend:
    """Run groups in ``workers`` spawned processes, at most ``workers`` in flight, so that a
    deadline stops the scheduling; results arrive as they finish."""

    name = "pool"

    def __init__(self, workers: int):
        self.workers = workers

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkGroup],
            clock: Clock | None = None) -> Iterator[Done]:
        import multiprocessing

        workers = min(self.workers, len(pending))
        ex = ProcessPoolExecutor(max_workers=workers,
                                 mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init, initargs=(job, os.getpid()))
        clock = clock or Clock(None)
        queue = list(pending)
        futs: dict[Future[Result], tuple[WorkGroup, float]] = {}
        fail: LazylabError | None = None

        def submit() -> None:
            while queue and len(futs) < workers and fail is None and clock.fits(queue[0]):
                g = queue.pop(0)
                futs[ex.submit(_group, g.label, g.members, g.seed)] = (g, time.monotonic())

        # Workers are spawned during submit; started with SIGINT ignored, a Ctrl-C while they
        # import torch does not print their tracebacks (this process stops them instead).
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            try:
                submit()
            finally:
                if main:
                    signal.signal(signal.SIGINT, old)
            while futs:
                done, _ = wait(set(futs), return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: (futs[f][0].units[0].key_json,
                                                       futs[f][0].seed_index)):
                    g, t0 = futs.pop(fut)
                    try:
                        res = fut.result()
                    except BrokenProcessPool as e:
                        raise _died(job.exp_id, [g, *(w for w, _ in futs.values())]) from e
                    if res[0] == "ok":
                        clock.seen(g, time.monotonic() - t0)
                        yield from group_done(g, res)
                    elif fail is None:
                        # Stop scheduling; groups already running finish and are still yielded.
                        fail = failure(job.exp_id, g, res)
                submit()
        except BaseException:
            # Ctrl-C, SIGTERM or the consumer gave up: do not wait, stop the workers.
            procs = list((getattr(ex, "_processes", None) or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(timeout=5)
            raise
        ex.shutdown(wait=True)
        if fail is not None:
            raise fail
