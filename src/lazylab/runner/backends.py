"""The backends behind one protocol (:class:`~lazylab.runner.job.Backend`), by name.

``serial`` (this process), ``pool`` (``--workers N`` spawned processes on this machine) and
``ray`` (a Ray cluster). ``local`` is the command line's name for serial-or-pool: one worker
runs serially, more use the pool.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Sequence

from lazylab.errors import InputError
from lazylab.runner.job import Backend, Clock, Done, Job
from lazylab.runner.spec import RunSpec, WorkGroup

#: A backend's factory: (workers, Ray address, number of pending groups or None) -> Backend.
Factory = Callable[[int, str | None, int | None], Backend]


def _serial(workers: int, address: str | None, n_pending: int | None) -> Backend:
    from lazylab.runner.serial import SerialBackend
    return SerialBackend()


def _pool(workers: int, address: str | None, n_pending: int | None) -> Backend:
    from lazylab.runner.pool import PoolBackend
    return PoolBackend(workers)


def _local(workers: int, address: str | None, n_pending: int | None) -> Backend:
    # One worker, or one group to run, gains nothing from spawning processes.
    many = workers > 1 and (n_pending or 2) > 1
    return _pool(workers, address, n_pending) if many else _serial(workers, address, n_pending)


def _ray(workers: int, address: str | None, n_pending: int | None) -> Backend:
    from lazylab.runner.ray_backend import RayBackend
    return RayBackend(address)


_FACTORIES: dict[str, Factory] = {"local": _local, "serial": _serial, "pool": _pool,
                                  "ray": _ray}


def backend_names() -> tuple[str, ...]:
    """The names ``--backend`` accepts now: the built-ins, then any added by
    :func:`register_backend`, in registration order (read at call time, so never stale)."""
    return tuple(_FACTORIES)


def register_backend(name: str, factory: Factory) -> None:
    """Make ``--backend NAME`` build its backend with ``factory(workers, address,
    n_pending)`` (a :class:`~lazylab.runner.job.Backend`); a known name is replaced."""
    _FACTORIES[name] = factory


#: The most worker processes a run starts (``--workers``).
MAX_WORKERS = 256


def check_backend(backend: str, workers: int = 1) -> None:
    """InputError unless the backend exists (and, for Ray, is installed) and
    ``1 <= workers <= MAX_WORKERS``."""
    if backend not in _FACTORIES:
        raise InputError(f"--backend must be one of {', '.join(backend_names())}; "
                         f"got {backend!r}")
    if workers < 1:
        raise InputError(f"--workers must be >= 1; got {workers}")
    if workers > MAX_WORKERS:
        raise InputError(f"--workers must be between 1 and {MAX_WORKERS}; got {workers}")
    if backend == "serial" and workers > 1:
        raise InputError(f"--backend serial runs one unit at a time in this process; got "
                         f"--workers {workers} (use --backend local or pool for workers)")
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        raise InputError("--backend ray needs Ray, an optional dependency: "
                         "pip install 'lazylab[ray]'")


def make_backend(backend: str, workers: int = 1, address: str | None = None,
                 n_pending: int | None = None) -> Backend:
    """The backend object for a name (``local``: serial for one worker or one group)."""
    check_backend(backend, workers)
    return _FACTORIES[backend](workers, address, n_pending)


def make_job(spec: RunSpec, prep: object = None) -> Job:
    """The picklable job of a run (``prep``: the output of ``prepare``)."""
    return Job(spec.exp.id, type(spec.exp), spec.params, spec.device.type, spec.policy, prep)


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
