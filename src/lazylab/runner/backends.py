"""The backends behind one protocol (:class:`~lazylab.runner.job.Backend`), by name.

``serial`` (this process), ``pool`` (``--workers N`` spawned processes on this machine) and
``ray`` (a Ray cluster). ``local`` is the command line's name for serial-or-pool: one worker
runs serially, more use the pool.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from lazylab.errors import InputError
from lazylab.runner.job import Backend, Clock, Done, Job, uses_prepare
from lazylab.runner.spec import RunSpec, WorkGroup

if TYPE_CHECKING:
    pass

__all__ = ["BACKENDS", "check_backend", "execute", "make_backend", "make_job"]

BACKENDS = ("local", "serial", "pool", "ray")


def check_backend(backend: str, workers: int = 1) -> None:
    """InputError unless the backend exists (and, for Ray, is installed) and workers >= 1."""
    if backend not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if workers < 1:
        raise InputError(f"--workers must be >= 1; got {workers}")
    if backend == "serial" and workers > 1:
        raise InputError(f"--backend serial runs one unit at a time in this process; got "
                         f"--workers {workers} (use --backend local or pool for workers)")
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        raise InputError("--backend ray needs Ray, an optional dependency: "
                         "pip install 'lazylab[ray]'")


def make_backend(backend: str, workers: int = 1, address: str | None = None,
                 n_pending: int | None = None) -> Backend:
    """The backend object for a name (``local``: serial for one worker or one unit)."""
    from lazylab.runner.pool import PoolBackend
    from lazylab.runner.ray_backend import RayBackend
    from lazylab.runner.serial import SerialBackend

    check_backend(backend, workers)
    if backend == "ray":
        return RayBackend(address)
    if backend == "pool" or (backend == "local" and workers > 1 and (n_pending or 2) > 1):
        return PoolBackend(workers)
    return SerialBackend()


def make_job(spec: RunSpec, prep: object = None) -> Job:
    """The picklable job of a run (``prep``: the output of ``prepare``, if overridden)."""
    return Job(spec.exp.id, type(spec.exp), spec.params, spec.device.type, spec.policy, prep,
               uses_prepare(spec.exp))


def execute(spec: RunSpec, pending: Sequence[WorkGroup], *, workers: int = 1,
            backend: str = "local", address: str | None = None,
            prep: object = None, clock: Clock | None = None) -> Iterator[Done]:
    """Compute ``pending`` groups, yielding ``(unit, rows, seconds)`` for each unit as its
    group finishes; no group is started that ``clock`` does not expect to end before its
    deadline (None: no limit).

    On the first failing group no new group is started; groups already running are still
    yielded (so they can be stored), then UnitFailed or DataNotFound is raised.
    """
    be = make_backend(backend, workers, address, len(pending))
    if not pending:
        return
    spec.policy.apply()
    yield from be.run(spec.exp, make_job(spec, prep), pending, clock)
