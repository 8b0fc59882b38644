"""The process-pool backend (``--workers N``): ``spawn`` workers on this machine.

Each worker receives the :class:`~lazylab.runner.job.Job` once, through the pool initializer
(the ``prepare`` output included), applies the run's execution policy (the same thread count
as every other process: results do not depend on ``--workers``), ignores SIGINT (the main
process stops it) and dies with its parent: ``PR_SET_PDEATHSIG`` on Linux plus a watchdog
thread that exits when the parent process is gone, so a ``kill -9`` of the main process leaves
no orphaned worker (lazylab issue 12, item 2).
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
from lazylab.runner.job import Done, Job, Result, call_unit, failure
from lazylab.runner.spec import WorkUnit

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

__all__ = ["PoolBackend"]

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


def _unit(key: dict[str, Any], seed: int) -> Result:
    return call_unit(_W["exp"], _W["job"], key, seed)


class PoolBackend:
    """Run units in ``workers`` spawned processes; results arrive as they finish."""

    name = "pool"

    def __init__(self, workers: int):
        self.workers = workers

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkUnit]) -> Iterator[Done]:
        import multiprocessing

        workers = min(self.workers, len(pending))
        ex = ProcessPoolExecutor(max_workers=workers,
                                 mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_init, initargs=(job, os.getpid()))
        fail: LazylabError | None = None
        # Workers are spawned during submit; started with SIGINT ignored, a Ctrl-C while they
        # import torch does not print their tracebacks (this process stops them instead).
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            try:
                futs: dict[Future[Result], WorkUnit] = {
                    ex.submit(_unit, u.key, u.seed): u for u in pending}
            finally:
                if main:
                    signal.signal(signal.SIGINT, old)
            todo = set(futs)
            while todo:
                done, todo = wait(todo, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: (futs[f].key_json, futs[f].seed_index)):
                    if fut.cancelled():
                        continue
                    u = futs[fut]
                    try:
                        res = fut.result()
                    except BrokenProcessPool as e:
                        raise UnitFailed(f"{job.exp_id}: a worker process died while running "
                                         f"unit {u.key_json} (out of memory?)") from e
                    if res[0] == "ok":
                        yield u, res[1], res[2]
                    elif fail is None:
                        # Stop scheduling; units already running finish and are still yielded.
                        fail = failure(job.exp_id, u, res)
                        for f in todo:
                            f.cancel()
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
