"""Scheduling: run an experiment's grid of work units, store each as it finishes, assemble.

A run of experiment ``E`` with resolved parameters ``p`` is the grid
``E.units(p) x range(seeds)``. Work unit ``(key, s)`` is computed by
``E.run_unit(p, key, derive_seed(E.id, key, s), device)``, so its numbers depend only on the
experiment id, the unit key, the seed index and the device: never on the order in which units
finish, the number of workers, or whether the run was interrupted and resumed.

:func:`resolve_spec` turns ``--set KEY=VALUE`` strings into validated parameters (lists split on
commas, errors naming the parameter and what is allowed).

Backends: ``local`` with ``workers=1`` runs in this process; ``local`` with ``workers>1`` uses a
process pool (``spawn``), each worker limited to ``max(1, cores // workers)`` torch threads;
``ray`` runs one Ray task per unit on the cluster ``ray.init()`` connects to (``RAY_ADDRESS``),
with a GPU per task when the device is CUDA (``pip install 'lazylab[ray]'``). Workers only
compute and return rows; the main process commits each finished unit to the store
(:mod:`lazylab.store`) in its own transaction, then assembles the outputs (:mod:`lazylab.report`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import threading
import time
import traceback
import typing
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import UnionType
from typing import Any, Protocol

import torch
from pydantic import ValidationError

from lazylab.experiments.base import Claim, Experiment, ExperimentParams
from lazylab.report import (
    OUTPUT_FILES,
    collect_rows,
    environment,
    finish_experiment,
    tidy_rows,
    write_json,
)
from lazylab.seeding import canonical_key, derive_seed
from lazylab.store import Store

__all__ = [
    "BACKENDS", "DataNotFound", "InputError", "LazylabError", "ProgressSink", "RunOutcome",
    "RunSpec", "UnitFailed", "WorkUnit", "check_backend", "check_resume",
    "describe_validation_error", "execute", "plan_units", "resolve_spec", "run_experiment",
]

BACKENDS = ("local", "ray")


# ---- errors ---------------------------------------------------------------------------------
class LazylabError(Exception):
    """An error the CLI reports in one line (no traceback) with ``exit_code``."""

    exit_code = 1

    def __init__(self, message: str, detail: str | None = None):
        super().__init__(message)
        #: A traceback or other detail, shown only when LAZYLAB_DEBUG is set.
        self.detail = detail


class InputError(LazylabError):
    """Bad input from the user (unknown id or key, value out of range, ...): exit code 2."""

    exit_code = 2


class DataNotFound(InputError):
    """A data set an experiment needs is not where it looked (exit code 2)."""


class UnitFailed(LazylabError):
    """A work unit raised (e.g. training diverged); finished units stay stored."""


# ---- what to run ----------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """One experiment with fully resolved parameters, scale, seed count and device."""

    exp: Experiment
    params: ExperimentParams
    scale: str
    seeds: int
    device: torch.device

    @property
    def identity(self) -> dict[str, Any]:
        """What the stored units depend on: experiment, parameters, scale, device type.

        The seed count is not part of it: unit ``(key, s)`` does not depend on how many seeds
        run, so resuming with more seeds computes only the new ones.
        """
        return {"experiment": self.exp.id, "params": self.params.model_dump(mode="json"),
                "scale": self.scale, "device": self.device.type}

    @property
    def config_hash(self) -> str:
        text = json.dumps(self.identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _coerce(ann: Any, raw: str) -> Any:
    """A ``--set`` string shaped for pydantic: lists split on commas, Literal choices matched,
    ``none`` for optional fields; pydantic then validates and converts the rest."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return _coerce(typing.get_args(ann)[0], raw)
    if origin in (typing.Union, UnionType):
        args = typing.get_args(ann)
        if type(None) in args and raw.lower() in ("none", "null"):
            return None
        rest = [a for a in args if a is not type(None)]
        return _coerce(rest[0], raw) if len(rest) == 1 else raw
    if origin in (list, tuple, set, frozenset):
        if raw == "":
            return []
        item = (typing.get_args(ann) or (str,))[0]
        return [_coerce(item, s.strip()) for s in raw.split(",")]
    if origin is typing.Literal:
        for choice in typing.get_args(ann):
            if str(choice) == raw:
                return choice
    return raw


_MESSAGES = {
    "greater_than_equal": "must be >= {ge}", "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}", "less_than": "must be < {lt}",
    "literal_error": "must be {expected}", "int_parsing": "must be an integer",
    "int_from_float": "must be an integer", "float_parsing": "must be a number",
    "bool_parsing": "must be true or false", "too_short": "must have at least {min_length} "
    "item(s)", "too_long": "must have at most {max_length} item(s)",
    "string_type": "must be a string", "list_type": "must be a comma-separated list",
}


def describe_validation_error(exp: Experiment, err: ValidationError,
                              assignments: dict[str, str], scale: str) -> str:
    """One line naming each bad parameter, what is allowed, and where the value came from."""
    allowed = {r["name"]: r["allowed"] for r in exp.param_table()}
    parts = []
    for e in err.errors():
        loc = [str(x) for x in e["loc"]]
        name = loc[0] if loc else ""
        shown = name + "".join(f"[{x}]" for x in loc[1:])
        tmpl = _MESSAGES.get(e["type"])
        try:
            what = tmpl.format(**e.get("ctx", {})) if tmpl else e["msg"]
        except KeyError:
            what = e["msg"]
        if tmpl is None or e["type"].endswith("_parsing"):
            if allowed.get(name, "any") != "any":
                what += f" (allowed: {allowed[name]})"
        if name in assignments:
            parts.append(f"--set {name}={assignments[name]}: {shown} {what} ({exp.id})")
        elif name:
            parts.append(f"{exp.id}: parameter {shown} {what} (scale {scale})")
        else:
            parts.append(f"{exp.id}: invalid parameters: {e['msg']}")
    return "; ".join(parts)


def resolve_spec(exp: Experiment, scale: str, assignments: dict[str, str], seeds: int | None,
                 device: torch.device) -> RunSpec:
    """A validated :class:`RunSpec`: the scale's values, then ``assignments`` (``--set``
    strings) for the keys this experiment has; InputError naming the parameter otherwise."""
    fields = exp.Params.model_fields
    overrides = {k: _coerce(fields[k].annotation, v) for k, v in assignments.items()
                 if k in fields}
    try:
        p = exp.resolve(scale, overrides)
    except ValidationError as e:
        raise InputError(describe_validation_error(exp, e, assignments, scale)) from None
    except ValueError as e:
        raise InputError(f"{exp.id}: {e}") from None
    try:
        n = len(exp.units(p))
    except ValueError as e:
        raise InputError(f"{exp.id}: {e}") from None
    if n == 0:
        raise InputError(f"{exp.id}: these parameters give an empty grid of work units")
    return RunSpec(exp, p, scale, seeds or exp.default_seeds.get(scale, 1), device)


@dataclass(frozen=True)
class WorkUnit:
    """One cell of the grid: a unit key, a seed index and the seed derived from them."""

    key: dict[str, Any]
    key_json: str
    seed_index: int
    seed: int


def plan_units(spec: RunSpec) -> list[WorkUnit]:
    """The grid in canonical order: ``units(p)`` order, then seed index."""
    out = []
    for key in spec.exp.units(spec.params):
        kj = canonical_key(key)
        for s in range(spec.seeds):
            out.append(WorkUnit(key, kj, s, derive_seed(spec.exp.id, key, s)))
    return out


class ProgressSink(Protocol):
    """Receives progress events (the CLI draws a progress bar from them)."""

    def started(self, spec: RunSpec, pending: int, total: int) -> None: ...

    def unit_done(self, spec: RunSpec, unit: WorkUnit) -> None: ...


@dataclass
class RunOutcome:
    """What one experiment's run produced."""

    spec: RunSpec
    exp_dir: Path
    claims: list[Claim] = field(default_factory=list)
    computed: int = 0
    reused: int = 0
    wall_seconds: float = 0.0


# ---- executing units ------------------------------------------------------------------------
#: (status, payload, seconds, detail): status "ok" with rows, "missing" (a data file was not
#: found) or "error" with a message; detail is the traceback text.
_Result = tuple[str, Any, float, str | None]


def _call_unit(exp: Experiment, p: ExperimentParams, key: dict[str, Any], seed: int,
               device: torch.device) -> _Result:
    """Run one unit and capture its failure as data (exceptions may not pickle)."""
    t0 = time.perf_counter()
    try:
        rows = tidy_rows(exp.run_unit(p, key, seed, device), kind="simulation",
                         where=f"{exp.id}.run_unit")
    except FileNotFoundError as e:
        return "missing", str(e), time.perf_counter() - t0, traceback.format_exc()
    except Exception as e:
        return ("error", f"{type(e).__name__}: {e}", time.perf_counter() - t0,
                traceback.format_exc())
    return "ok", rows, time.perf_counter() - t0, None


def _failure(spec: RunSpec, unit: WorkUnit, res: _Result) -> LazylabError:
    status, msg, _, detail = res
    if status == "missing":
        return DataNotFound(f"{spec.exp.id}: {msg}", detail)
    return UnitFailed(f"{spec.exp.id}: unit {unit.key_json} (seed index {unit.seed_index}) "
                      f"failed: {msg}", detail)


# Process-pool worker state, set once per worker by _pool_init.
_W: dict[str, Any] = {}


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _pool_init(exp_cls: type[Experiment], params: ExperimentParams, device: str,
               threads: int) -> None:
    # Ctrl-C is handled by the main process, which stops the workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)
    _W.update(exp=exp_cls(), params=params, device=torch.device(device))


def _pool_unit(key: dict[str, Any], seed: int) -> _Result:
    return _call_unit(_W["exp"], _W["params"], key, seed, _W["device"])


def _ray_unit(exp_cls: type[Experiment], params: ExperimentParams, key: dict[str, Any],
              seed: int, device: str) -> _Result:
    return _call_unit(exp_cls(), params, key, seed, torch.device(device))


Done = tuple[WorkUnit, list[dict[str, Any]], float]


def check_backend(backend: str, workers: int = 1) -> None:
    """InputError unless the backend exists (and, for Ray, is installed) and workers >= 1."""
    if backend not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if workers < 1:
        raise InputError(f"--workers must be >= 1; got {workers}")
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        raise InputError("--backend ray needs Ray, an optional dependency: "
                         "pip install 'lazylab[ray]'")


def execute(spec: RunSpec, pending: Sequence[WorkUnit], *, workers: int = 1,
            backend: str = "local") -> Iterator[Done]:
    """Compute ``pending`` units, yielding ``(unit, rows, seconds)`` as each finishes.

    On the first failing unit no new unit is started; units already running are still yielded
    (so they can be stored), then :class:`UnitFailed` or :class:`DataNotFound` is raised.
    """
    check_backend(backend, workers)
    if not pending:
        return
    if backend == "ray":
        yield from _execute_ray(spec, pending)
    elif workers == 1 or len(pending) == 1:
        for u in pending:
            res = _call_unit(spec.exp, spec.params, u.key, u.seed, spec.device)
            if res[0] != "ok":
                raise _failure(spec, u, res)
            yield u, res[1], res[2]
    else:
        yield from _execute_pool(spec, pending, min(workers, len(pending)))


def _execute_pool(spec: RunSpec, pending: Sequence[WorkUnit], workers: int) -> Iterator[Done]:
    import multiprocessing

    ex = ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=_pool_init,
        initargs=(type(spec.exp), spec.params, spec.device.type, max(1, _cores() // workers)))
    failure: LazylabError | None = None
    # Workers are spawned during submit; started with SIGINT ignored, a Ctrl-C while they
    # import torch does not print their tracebacks (this process stops them instead).
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        try:
            futs: dict[Future[_Result], WorkUnit] = {
                ex.submit(_pool_unit, u.key, u.seed): u for u in pending}
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
                    raise UnitFailed(f"{spec.exp.id}: a worker process died while running unit "
                                     f"{u.key_json} (out of memory?)") from e
                if res[0] == "ok":
                    yield u, res[1], res[2]
                elif failure is None:
                    # Stop scheduling; units already running finish and are still yielded.
                    failure = _failure(spec, u, res)
                    for f in todo:
                        f.cancel()
    except BaseException:
        # Ctrl-C or the consumer gave up: do not wait for running units, stop the workers.
        procs = list((getattr(ex, "_processes", None) or {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.terminate()
        raise
    ex.shutdown(wait=True)
    if failure is not None:
        raise failure


def _execute_ray(spec: RunSpec, pending: Sequence[WorkUnit]) -> Iterator[Done]:
    import ray

    if not ray.is_initialized():
        # Connects to the cluster named by RAY_ADDRESS, or starts a local one.
        ray.init(ignore_reinit_error=True, log_to_driver=False)
    gpus = 1 if spec.device.type == "cuda" else 0
    task = ray.remote(num_cpus=1, num_gpus=gpus)(_ray_unit)
    cls_ref, p_ref = ray.put(type(spec.exp)), ray.put(spec.params)
    refs = {task.remote(cls_ref, p_ref, u.key, u.seed, spec.device.type): u for u in pending}
    todo = list(refs)
    failure: LazylabError | None = None
    try:
        while todo and failure is None:
            done, todo = ray.wait(todo, num_returns=1)
            u, res = refs[done[0]], ray.get(done[0])
            if res[0] == "ok":
                yield u, res[1], res[2]
            else:
                failure = _failure(spec, u, res)
    finally:  # after a failure or an interrupt, nothing more is scheduled
        for r in todo:
            ray.cancel(r)
    if failure is not None:
        raise failure


# ---- one experiment, end to end -------------------------------------------------------------
def check_resume(store: Store, spec: RunSpec, out_dir: Path) -> None:
    """Refuse to resume onto stored units of a different configuration (InputError)."""
    if store.config_hash(spec.exp.id) in (None, spec.config_hash):
        return
    changed = store.changes(spec.exp.id, spec.identity)
    raise InputError(
        f"{spec.exp.id}: --resume: {out_dir} holds results of a different configuration "
        f"(changed: {', '.join(changed) or 'unknown'}); use a new --out DIR or drop --resume "
        "to start afresh")


def run_experiment(spec: RunSpec, out_dir: Path, store: Store, *, resume: bool = False,
                   workers: int = 1, backend: str = "local", command: str = "",
                   progress: ProgressSink | None = None) -> RunOutcome:
    """Run (or resume) one experiment into ``out_dir/ID`` and assemble its outputs.

    Without ``resume`` stored units of this experiment are discarded first; with it only the
    units missing from the store are computed. Each finished unit is committed at once.
    """
    exp = spec.exp
    exp_dir = out_dir / exp.id
    check_backend(backend, workers)
    if resume:
        check_resume(store, spec, out_dir)
    store.begin(exp.id, spec.config_hash, spec.identity, fresh=not resume)
    exp_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        for name in OUTPUT_FILES:
            (exp_dir / name.format(id=exp.id)).unlink(missing_ok=True)
    plan = plan_units(spec)
    stored = store.done(exp.id, spec.config_hash)
    pending = [u for u in plan if (u.key_json, u.seed_index) not in stored]
    out = RunOutcome(spec, exp_dir, reused=len(plan) - len(pending))
    config = _config(spec, command, workers, backend, len(plan))
    t0 = time.perf_counter()
    config["timing"]["started_at"] = _now()

    def save(status: str) -> None:
        out.wall_seconds = time.perf_counter() - t0
        config["status"] = status
        config["timing"].update(
            finished_at=_now(), wall_seconds=out.wall_seconds, units_computed=out.computed,
            units_reused=out.reused, compute_seconds=store.seconds(exp.id, spec.config_hash))
        write_json(exp_dir / "config.json", config)

    save("running")
    if progress is not None:
        progress.started(spec, len(pending), len(plan))
    try:
        for unit, rows, secs in execute(spec, pending, workers=workers, backend=backend):
            store.put_unit(exp.id, spec.config_hash, unit.key_json, unit.seed_index, rows,
                           seconds=secs)
            out.computed += 1
            if progress is not None:
                progress.unit_done(spec, unit)
    except LazylabError:
        save("failed")
        raise
    except BaseException:
        save("interrupted")
        raise
    try:
        rows, missing = collect_rows(exp, spec.params, spec.seeds,
                                     store.units(exp.id, spec.config_hash))
        if missing:  # only if the store was changed under us
            raise RuntimeError(f"{missing} unit(s) vanished from the store during the run")
        out.claims = finish_experiment(exp, spec.params, rows, exp_dir)
    except Exception as e:
        save("failed")
        if isinstance(e, FileNotFoundError):
            raise DataNotFound(f"{exp.id}: {e}", traceback.format_exc()) from e
        raise UnitFailed(f"{exp.id}: assembling the results failed: {type(e).__name__}: {e}",
                         traceback.format_exc()) from e
    save("complete")
    return out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _config(spec: RunSpec, command: str, workers: int, backend: str, n_units: int,
            ) -> dict[str, Any]:
    exp = spec.exp
    env = environment()
    return {
        "experiment": exp.id, "paper": exp.paper, "figure": exp.figure, "summary": exp.summary,
        "params": spec.params.model_dump(mode="json"), "scale": spec.scale,
        "seeds": spec.seeds, "device": str(spec.device), "config_hash": spec.config_hash,
        "seed_rule": "unit seed = lazylab.seeding.derive_seed(experiment id, unit key, "
                     "seed index)",
        "work_units": n_units, "status": "running",
        "versions": env["versions"], "git_revision": env["git_revision"],
        "command": command, "workers": workers, "backend": backend,
        "timing": {},
    }
