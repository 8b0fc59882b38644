"""The Ray backend (``--backend ray [--address ADDR]``): one Ray task per work unit.

``pip install 'lazylab[ray]'``. The driver (this process) connects to the cluster at
``--address`` (or ``RAY_ADDRESS``; without either it starts a local one-node cluster and stops
it at the end), puts the :class:`~lazylab.runner.job.Job` (parameters, execution policy and the
``prepare`` output) into the object store once, so each node fetches it once, and submits one
task per pending group of units with the experiment's resource hints (``ray_resources`` class
attribute, default one CPU, and one GPU when the device is CUDA). Each task applies the run's
execution policy, so results are the same as with the serial backend. The driver commits each
finished unit to the store as it arrives; a task whose worker dies is retried by Ray
(``max_retries``), and an interrupted run finishes with ``--resume``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from lazylab.errors import InputError, LazylabError
from lazylab.runner.job import Clock, Done, Job, Result, call_group, failure, group_done
from lazylab.runner.spec import WorkGroup

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

__all__ = ["MAX_RETRIES", "RayBackend", "resources_for"]

#: Times Ray re-runs a task whose worker process or node died.
MAX_RETRIES = 3


def _ray_group(job: Job, label: str | None, members: list[tuple[dict[str, Any], int]],
               seed: int) -> Result:
    return call_group(job.exp_cls(), job, label, members, seed)


def resources_for(exp: Experiment, device: str) -> dict[str, float]:
    """Ray resource hints of one unit: the experiment's ``ray_resources`` or the default
    ``{"num_cpus": 1, "num_gpus": 1 if CUDA else 0}`` (fractions allowed, e.g. 0.25 GPU)."""
    hints = dict(getattr(exp, "ray_resources", None) or {})
    hints.setdefault("num_cpus", 1)
    hints.setdefault("num_gpus", 1 if device == "cuda" else 0)
    return hints


class RayBackend:
    """Run units as Ray tasks on the cluster at ``address`` (None: RAY_ADDRESS or local)."""

    name = "ray"

    def __init__(self, address: str | None = None):
        self.address = address

    def run(self, exp: Experiment, job: Job, pending: Sequence[WorkGroup],
            clock: Clock | None = None) -> Iterator[Done]:
        try:
            import ray
        except ImportError:
            raise InputError("--backend ray needs Ray, an optional dependency: "
                             "pip install 'lazylab[ray]'") from None
        started = not ray.is_initialized()
        if started:
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except ConnectionError as e:
                raise InputError(f"--address {self.address}: cannot connect to a Ray cluster "
                                 f"({e})") from None
        try:
            yield from self._run(ray, exp, job, pending, clock or Clock(None))
        finally:
            if started:
                ray.shutdown()

    def _run(self, ray: Any, exp: Experiment, job: Job, pending: Sequence[WorkGroup],
             clock: Clock) -> Iterator[Done]:
        import time

        task = ray.remote(max_retries=MAX_RETRIES, **resources_for(exp, job.device))(_ray_group)
        job_ref = ray.put(job)
        clock = clock or Clock(None)
        queue = list(pending)
        # Without a deadline every group is submitted at once (the cluster schedules them);
        # with one, as many as the cluster has CPUs, so the deadline can stop the scheduling.
        window = len(queue) if clock.deadline is None else max(1, int(
            ray.cluster_resources().get("CPU", 1)))
        refs: dict[Any, tuple[WorkGroup, float]] = {}
        fail: LazylabError | None = None

        def submit() -> None:
            while queue and len(refs) < window and clock.fits(queue[0]):
                g = queue.pop(0)
                refs[task.remote(job_ref, g.label, g.members, g.seed)] = (g, time.monotonic())

        try:
            submit()
            while refs and fail is None:
                done, _ = ray.wait(list(refs), num_returns=1)
                (g, t0), res = refs.pop(done[0]), ray.get(done[0])
                if res[0] == "ok":
                    clock.seen(g, time.monotonic() - t0)
                    yield from group_done(g, res)
                    submit()
                else:
                    fail = failure(job.exp_id, g, res)
        finally:  # after a failure or an interrupt, nothing more is scheduled
            for r in refs:
                ray.cancel(r, force=True)
        if fail is not None:
            raise fail
