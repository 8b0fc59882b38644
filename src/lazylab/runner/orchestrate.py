"""One experiment, end to end: lock, check, prepare, compute pending units, store, assemble.

A run of experiment ``E`` with resolved parameters ``p`` is the grid
``E.units(p) x range(seeds)``. Work unit ``(key, s)`` is computed by
``E.run_unit(p, key, derive_seed(E.id, key, s), device)`` under the run's execution policy, so
its numbers depend only on the experiment id, the unit key, the seed index, the device and the
policy: never on the order in which units finish, the number of workers, the backend, or
whether the run was interrupted and resumed. Workers only compute and return rows; this
process commits each finished unit to the store (:mod:`lazylab.store`) in its own transaction,
then assembles the outputs (:mod:`lazylab.runner.assemble`).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lazylab.errors import (
    DataNotFound,
    InputError,
    LazylabError,
    OutOfTime,
    StoreFault,
    UnitFailed,
)
from lazylab.runner.assemble import assemble, non_finite_summary, theory_rows
from lazylab.runner.backends import check_backend, execute
from lazylab.runner.gpu_share import for_run as gpu_reservation
from lazylab.runner.job import Clock
from lazylab.runner.lock import RunLock
from lazylab.runner.outputs import OUTPUT_FILES, write_json
from lazylab.runner.provenance import environment, policy_flags
from lazylab.runner.spec import RunSpec, WorkGroup, WorkUnit, plan_groups, plan_units

if TYPE_CHECKING:
    from lazylab.experiments.base import Claim
    from lazylab.store import Store

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
    #: The assembled results table (simulation rows with ``seed``, then theory rows).
    rows: list[dict[str, Any]] = field(default_factory=list)


_WHY = {"versions": "package versions changed", "policy": "the execution policy changed",
        "device": "another device type", "scale": "another scale",
        "data": "the data files read differ (another folder or other contents)"}


def describe_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two unit identities, e.g. ``torch 2.12.0 -> 2.13.0``.

    >>> describe_changes({"params": {"d": 3}, "code": {"lazylab": {"toolkit.py": "a"}}},
    ...                  {"params": {"d": 4}, "code": {"lazylab": {"toolkit.py": "b"}}})
    ['lazylab source changed (toolkit.py)', 'd 3 -> 4']
    """
    from lazylab.experiments.code_identity import describe_code_change

    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if a == b:
            continue
        if k == "code":
            out += describe_code_change(a, b)
        elif k == "code_version":
            continue  # the summary hash an older lazylab stored; "code" names the change
        elif isinstance(a, dict) and isinstance(b, dict):
            for s in sorted(set(a) | set(b)):
                if a.get(s) != b.get(s):
                    out.append(f"{s} {_short(a.get(s))} -> {_short(b.get(s))}")
        elif k in _WHY:
            out.append(f"{k} ({_WHY[k]})")
        else:
            out.append(f"{k} {_short(a)} -> {_short(b)}")
    return out


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 40 else s[:37] + "..."


def check_resume(store: Store, spec: RunSpec, out_dir: Path) -> None:
    """Refuse to resume onto stored units of a different identity (InputError naming what
    changed: parameters, edited source files, package versions, policy). When only the execution
    policy differs, the message gives the options that recreate the stored one."""
    if store.config_hash(spec.exp.id) in (None, spec.config_hash):
        return
    import shlex

    old = store.config(spec.exp.id) or {}
    changed = describe_changes(old, spec.identity)
    only_policy = {k for k in set(old) | set(spec.identity)
                   if old.get(k) != spec.identity.get(k)} == {"policy"}
    flags = policy_flags(old.get("policy") or {})
    advice = (f"pass {shlex.join(flags)} (the stored run's options) to resume it, --fresh to "
              "discard it, or a new --out DIR" if only_policy and flags else
              "use --fresh to discard them or a new --out DIR")
    raise InputError(
        f"{spec.exp.id}: --resume: {out_dir} holds results of a different configuration "
        f"(changed: {', '.join(changed) or 'unknown'}); {advice}")


def check_start(store: Store, spec: RunSpec, out_dir: Path, *, resume: bool,
                fresh: bool) -> None:
    """Before anything is deleted or computed: a run without ``--resume`` over finished units
    is refused unless ``--fresh`` says to discard them; ``--resume`` needs the same identity."""
    if resume and fresh:
        raise InputError("--resume and --fresh exclude each other")
    if resume:
        check_resume(store, spec, out_dir)
        store.units(spec.exp.id, spec.config_hash)  # verifies every stored unit's checksum
    elif not fresh:
        n = store.count(spec.exp.id)
        if n:
            raise InputError(
                f"{spec.exp.id}: {out_dir} already holds {n} finished unit(s) of this "
                "experiment; pass --resume to keep them and compute only the missing ones, or "
                "--fresh to discard them")


def run_experiment(spec: RunSpec, out_dir: Path, store: Store, *, resume: bool = False,
                   fresh: bool = False, workers: int = 1, backend: str = "local",
                   address: str | None = None, command: str = "",
                   progress: ProgressSink | None = None,
                   deadline: float | None = None) -> RunOutcome:
    """Run (or resume) one experiment into ``out_dir/ID`` and assemble its outputs.

    Holds the experiment's lock in ``out_dir`` throughout. Without ``resume`` the store must
    hold no unit of this experiment unless ``fresh`` (then they are discarded); with it only
    the groups with a unit missing from the store are computed (a whole group, so its numbers
    are those of an uninterrupted run), and only the missing units are stored. Each finished
    unit is committed at once. With ``deadline`` (a ``time.monotonic()`` value) no group
    starts that is not expected to end before it; if units remain, the run stops with
    :class:`~lazylab.errors.OutOfTime` (status "stopped" in config.json) and ``--resume``
    carries on.

    The steps: lock, check (:func:`check_start`), begin (store and config.json,
    :func:`_begin`), prepare and compute the pending units, storing each (:func:`_compute`),
    assemble (:func:`_assemble`).
    """
    check_backend(backend, workers)
    with RunLock(out_dir, spec.exp.id):
        check_start(store, spec, out_dir, resume=resume, fresh=fresh)
        run = _begin(spec, out_dir, store, resume=resume, command=command, workers=workers,
                     backend=backend)
        if progress is not None:
            progress.started(spec, run.n_missing, len(run.plan))
        prep = _compute(run, workers=workers, backend=backend, address=address,
                        progress=progress, deadline=deadline)
        _assemble(run, prep)
        run.save("complete")
        return run.out


@dataclass
class _Run:
    """One experiment's run in progress: its plan, the units the store held at the start, the
    groups still to compute, the outcome so far and the config.json it keeps up to date."""

    spec: RunSpec
    store: Store
    out: RunOutcome
    plan: list[WorkUnit]
    stored: set[tuple[str, int]]
    pending: list[WorkGroup]
    config: dict[str, Any]
    t0: float = field(default_factory=time.perf_counter)

    @property
    def n_missing(self) -> int:
        """Units of the plan the store did not hold at the start."""
        return len(self.plan) - self.out.reused

    def save(self, status: str) -> None:
        """Write config.json with ``status`` and the timing so far."""
        out, spec = self.out, self.spec
        out.wall_seconds = time.perf_counter() - self.t0
        self.config["status"] = status
        self.config["timing"].update(
            finished_at=_now(), wall_seconds=out.wall_seconds,
            units_computed=out.computed, units_reused=out.reused,
            compute_seconds=self.store.seconds(spec.exp.id, spec.config_hash))
        write_json(out.exp_dir / "config.json", self.config)


def _begin(spec: RunSpec, out_dir: Path, store: Store, *, resume: bool, command: str,
           workers: int, backend: str) -> _Run:
    """Plan the grid (:func:`plan_units`), open the run in the store (discarding its units
    unless ``resume``), clear a fresh run's old output files, find the groups with a unit the
    store lacks, and write config.json with status "running"."""
    exp = spec.exp
    plan = plan_units(spec)  # refuses a grid that repeats a unit key, before the store changes
    store.begin(exp.id, spec.config_hash, spec.identity, fresh=not resume)
    exp_dir = out_dir / exp.id
    exp_dir.mkdir(parents=True, exist_ok=True)
    if not resume:
        for name in OUTPUT_FILES:
            (exp_dir / name.format(id=exp.id)).unlink(missing_ok=True)
    stored = store.done(exp.id, spec.config_hash)
    pending = [g for g in plan_groups(spec, plan)
               if any((u.key_json, u.seed_index) not in stored for u in g.units)]
    n_missing = sum((u.key_json, u.seed_index) not in stored for u in plan)
    run = _Run(spec, store, RunOutcome(spec, exp_dir, reused=len(plan) - n_missing), plan,
               stored, pending, _config(spec, command, workers, backend, len(plan)))
    run.config["timing"]["started_at"] = _now()
    run.save("running")
    return run


def _compute(run: _Run, *, workers: int, backend: str, address: str | None,
             progress: ProgressSink | None, deadline: float | None) -> Any:
    """Apply the policy, reserve the GPU memory the cost model names, prepare, and compute the
    pending groups, committing each finished unit; returns ``prepare``'s output. config.json
    says "failed", "interrupted" or (:class:`~lazylab.errors.OutOfTime`) "stopped" when the
    run ends early."""
    spec, store, exp = run.spec, run.store, run.spec.exp
    try:
        spec.policy.apply()
        with gpu_reservation(spec.device, spec.seed_cost[1], workers):
            prep = _prepare(spec)
            for unit, rows, secs in execute(spec, run.pending, workers=workers,
                                            backend=backend, address=address, prep=prep,
                                            clock=clock_for(spec, deadline, len(run.plan))):
                if (unit.key_json, unit.seed_index) in run.stored:
                    continue  # a member of a recomputed group that the store holds
                store.put_unit(exp.id, spec.config_hash, unit.key_json, unit.seed_index,
                               rows, seconds=secs)
                run.out.computed += 1
                if progress is not None:
                    progress.unit_done(spec, unit)
    except LazylabError:
        run.save("failed")
        raise
    except SystemExit as e:  # experiment code calling sys.exit: a failure, never success
        run.save("failed")
        raise _exited(exp.id, "the run", e) from e
    except BaseException:
        run.save("interrupted")
        raise
    left, n = run.n_missing - run.out.computed, len(run.plan)
    if left > 0:
        run.save("stopped")
        raise OutOfTime(f"{exp.id}: --max-time reached with {left} of {n} unit(s) left "
                        f"({n - left} stored); run the same command with --resume to carry on")
    return prep


def _assemble(run: _Run, prep: Any) -> None:
    """The theory rows (stored with the units), then results.csv, claims.json and the figure
    from the stored units; config.json notes non-finite values, or says "failed"."""
    spec, store, exp = run.spec, run.store, run.spec.exp
    try:
        theory = theory_rows(exp, spec.params, prep)
        store.put_theory(exp.id, spec.config_hash, theory)
        done = assemble(exp, spec.params, spec.seeds, store.units(exp.id, spec.config_hash),
                        lambda: theory, run.out.exp_dir, keys=spec.unit_keys)
        if done.missing:  # only if the store was changed under us
            raise RuntimeError(f"{done.missing} unit(s) vanished from the store during the run")
        run.out.claims, run.out.rows = done.claims, done.rows
        flagged = non_finite_summary(done.rows)
        if flagged is not None:  # kept in results.csv, and said so in config.json
            run.config["non_finite_values"] = flagged
    except StoreFault:
        run.save("failed")
        raise
    except SystemExit as e:
        run.save("failed")
        raise _exited(exp.id, "assembling the results", e) from e
    except Exception as e:
        run.save("failed")
        if isinstance(e, FileNotFoundError):
            raise DataNotFound(f"{exp.id}: {e}", traceback.format_exc()) from e
        raise UnitFailed(f"{exp.id}: assembling the results failed: "
                         f"{type(e).__name__}: {e}", traceback.format_exc()) from e


def clock_for(spec: RunSpec, deadline: float | None, n_units: int) -> Clock | None:
    """The run's ``--max-time`` clock, its prior the cost model's seconds per unit
    (:attr:`RunSpec.seed_cost`; 0 where the model cannot price the parameters)."""
    if deadline is None:
        return None
    try:
        per_unit = spec.seed_cost[0] * spec.seeds / max(1, n_units)
    except Exception:  # a cost model that cannot price these parameters: measure instead
        per_unit = 0.0
    return Clock(deadline, per_unit)


def _prepare(spec: RunSpec) -> Any:
    """The experiment's shared preparation, computed once per run (None by default)."""
    try:
        return spec.exp.prepare(spec.params, spec.device)
    except LazylabError:
        raise
    except FileNotFoundError as e:
        raise DataNotFound(f"{spec.exp.id}: {e}", traceback.format_exc()) from e
    except Exception as e:
        raise UnitFailed(f"{spec.exp.id}: prepare failed: {type(e).__name__}: {e}",
                         traceback.format_exc()) from e
    except SystemExit as e:
        raise _exited(spec.exp.id, "prepare", e) from e


def _exited(exp_id: str, where: str, e: SystemExit) -> UnitFailed:
    """The failure for experiment code that raised SystemExit (``sys.exit``) in ``where``:
    the run must not end with the exit status the experiment chose (0 would read as success
    with nothing computed)."""
    return UnitFailed(f"{exp_id}: {where} tried to end the process (SystemExit({e.code!r})); "
                      "finished units are stored", traceback.format_exc())


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
        "data": spec.data_fingerprints,
        "versions": env["versions"], "git_revision": env["git_revision"],
        "code_version": exp.code_version(), "policy": spec.policy.identity(),
        "command": command, "workers": workers, "backend": backend,
        "timing": {},
    }

