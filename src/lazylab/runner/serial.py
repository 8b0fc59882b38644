"""The serial backend: units one after another in this process (``--workers 1``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from lazylab.runner.job import Done, Job, call_unit, failure
from lazylab.runner.spec import WorkUnit

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

__all__ = ["SerialBackend"]


class SerialBackend:
    """Run each unit in this process, in canonical order."""

    name = "serial"

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkUnit]) -> Iterator[Done]:
        for u in pending:
            res = call_unit(exp, job, u.key, u.seed)
            if res[0] != "ok":
                raise failure(job.exp_id, u, res)
            yield u, res[1], res[2]
