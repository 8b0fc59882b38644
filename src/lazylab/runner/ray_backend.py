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

Before anything runs, :func:`preflight` checks what Ray would otherwise find out slowly or
not at all: the address's form, that something answers on the head node's port (a TCP probe
of at most :data:`PROBE_SECONDS`; Ray itself retries an unreachable address for minutes), and
for a local cluster that Ray's temporary folder can be written. Connecting to a cluster is
bounded by :data:`CONNECT_SECONDS`, and SIGTERM keeps the command line's handler throughout
(``ray.init`` installs its own, which only exits once Ray's retry loop returns).
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lazylab.errors import InputError, LazylabError
from lazylab.runner.address import check_address
from lazylab.runner.job import Clock, Done, Job, Result, call_group, failure, group_done
from lazylab.runner.spec import WorkGroup

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

#: Times Ray re-runs a task whose worker process or node died.
MAX_RETRIES = 3

#: Seconds the TCP probe of the head node waits for an answer: a live head node on a reachable
#: network accepts a connection within milliseconds; a dropped packet waits this long.
PROBE_SECONDS = 5.0

#: Seconds ``ray.init`` may take to join an existing cluster (Ray retries a GCS that does not
#: answer in 30-second rounds, for many minutes). Python runs the timeout's handler when Ray
#: returns from its current round, so the wait ends within about 30 s after this bound.
CONNECT_SECONDS = 30.0


def _shown(address: str | None) -> str:
    return f"--address {address}" if address is not None else \
        f"RAY_ADDRESS {os.environ.get('RAY_ADDRESS', '')}"


def _starts_local(address: str | None) -> bool:
    """True when ``ray.init`` would start a one-node cluster here instead of joining one."""
    addr = address if address is not None else os.environ.get("RAY_ADDRESS") or None
    return addr is None or addr.strip() == "local"


def _ray_temp_dir() -> str:
    """The folder a local Ray cluster writes its sockets and logs to: ``RAY_TMPDIR``, else
    ``TMPDIR`` (Linux), else ``/tmp``, then ``ray`` (Ray's own rule, read from Ray)."""
    try:
        from ray._common.utils import get_default_ray_temp_dir
        return str(get_default_ray_temp_dir())
    except (ImportError, AttributeError):  # another Ray version: its documented rule
        base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        return os.path.join(base, "ray")


def check_temp_dir() -> None:
    """InputError unless a file can be created in Ray's temporary folder (created if absent):
    a read-only ``TMPDIR`` otherwise fails deep inside Ray's start-up."""
    where = _ray_temp_dir()
    try:
        os.makedirs(where, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=where, prefix=".lazylab-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise InputError(f"--backend ray: cannot write Ray's temporary folder {where} "
                         f"({e.strerror or e}); set RAY_TMPDIR (or TMPDIR) to a writable "
                         "folder") from None


def _targets(host: str, port: int) -> list[tuple[str, int]]:
    """Where Ray would connect: it rewrites 127.0.0.1 and localhost to this node's address."""
    out = [(host, port)]
    try:
        from ray._private.services import resolve_ip_for_localhost
        out.append((str(resolve_ip_for_localhost(host)), port))
    except Exception:  # noqa: BLE001 (a private Ray function: absent or failing, probe as given)
        pass
    return list(dict.fromkeys(out))


def probe(address: str | None, host: str, port: int) -> None:
    """InputError unless something accepts a TCP connection at ``host:port`` (or where Ray
    would rewrite it to) within :data:`PROBE_SECONDS`."""
    why = ""
    for target in _targets(host, port):
        try:
            with socket.create_connection(target, timeout=PROBE_SECONDS):
                return
        except TimeoutError:
            why = f"no answer within {PROBE_SECONDS:.0f} s"
        except OSError as e:
            why = e.strerror or str(e)
    raise InputError(f"{_shown(address)}: no Ray cluster answers at {host}:{port} ({why}); "
                     "start one with `ray start --head` or check the address")


def preflight(address: str | None) -> None:
    """Every check of a Ray run that can fail fast, before anything is computed: the address's
    form (:func:`~lazylab.runner.address.check_address`), a TCP probe of the head node, or
    for a local cluster its temporary folder."""
    target = check_address(address)
    if target is not None:
        probe(address, *target)
    elif _starts_local(address):
        check_temp_dir()


class _ConnectTimeout(BaseException):
    """Raised by the alarm inside ``ray.init`` (a BaseException, as KeyboardInterrupt, so no
    ``except Exception`` in Ray's retry loop swallows it)."""


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`_ConnectTimeout` in the main thread after ``seconds`` (None: no limit;
    other threads cannot take signals and run unbounded)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise _ConnectTimeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def _keep_sigterm() -> Iterator[None]:
    """Keep this process's SIGTERM handler across ``ray.init``, which replaces it with
    ``sys.exit``: a SIGTERM that arrived meanwhile goes to the kept handler (the command line
    raises its ``Terminated``), so the run stops the way it would without Ray."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept: Callable[..., Any] | int | None = signal.getsignal(signal.SIGTERM)
    try:
        yield
    except SystemExit as e:
        signal.signal(signal.SIGTERM, kept)
        if e.code == signal.SIGTERM and callable(kept):
            kept(signal.SIGTERM, None)
        raise
    finally:
        signal.signal(signal.SIGTERM, kept)


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
            self._connect(ray)
        try:
            yield from self._run(ray, exp, job, pending, clock or Clock(None))
        finally:
            if started:
                ray.shutdown()

    def _connect(self, ray: Any) -> None:
        """``ray.init``: join the cluster at the address (within :data:`CONNECT_SECONDS`) or
        start a local one; InputError (one line) when Ray cannot."""
        preflight(self.address)
        local = _starts_local(self.address)
        if not local:  # Ray's own retry warnings (C++ source paths) would repeat ours
            os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
        try:
            with _keep_sigterm(), _time_limit(None if local else CONNECT_SECONDS):
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        except _ConnectTimeout:
            _quiet_shutdown(ray)
            raise InputError(f"{_shown(self.address)}: the Ray cluster did not accept this "
                             f"driver within {CONNECT_SECONDS:.0f} s (is it a Ray head node, and "
                             "of the same Ray version?)") from None
        except ConnectionError as e:
            raise InputError(f"{_shown(self.address)}: cannot connect to a Ray cluster "
                             f"({' '.join(str(e).split())})") from None
        except Exception as e:
            _quiet_shutdown(ray)
            what = "start a local Ray cluster" if local else \
                f"join the Ray cluster at {_shown(self.address)}"
            raise InputError(f"--backend ray: could not {what}: {type(e).__name__}: "
                             f"{' '.join(str(e).split())[:300]}", traceback.format_exc()) from None

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


def _quiet_shutdown(ray: Any) -> None:
    """``ray.shutdown()`` after a failed ``ray.init``, whatever state it left."""
    try:
        ray.shutdown()
    except Exception:  # noqa: BLE001 (best effort: the error being reported matters more)
        pass
