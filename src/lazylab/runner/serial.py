"""The serial backend: groups one after another in this process (``--workers 1``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from lazylab.runner.job import Clock, Done, Job, call_group, failure, group_done
from lazylab.runner.spec import WorkGroup

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

class SerialBackend:
    """Run each group in this process, in canonical order, while the deadline allows."""

    name = "serial"

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkGroup],
            clock: Clock | None = None) -> Iterator[Done]:
        clock = clock or Clock(None)
        for g in pending:
            if not clock.fits(g):
                return
            t0 = time.monotonic()
            res = call_group(exp, job, g.label, g.members, g.seed)
            if res[0] != "ok":
                raise failure(job.exp_id, g, res)
            clock.seen(g, time.monotonic() - t0)
            yield from group_done(g, res)
