"""What would stop a run after it started, checked before any unit computes: an output path
taken by a folder or a file of the wrong kind, a grid that repeats a unit key, another
writer's lock, finished units without
``--resume`` or ``--fresh``, and a resume under another identity (naming, where only the
execution policy differs, each option to pass or leave out). Each refusal is one
:class:`~lazylab.errors.InputError` (exit 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lazylab.errors import InputError
from lazylab.runner.lock import RunLock
from lazylab.runner.orchestrate import check_start
from lazylab.runner.outputs import OUTPUT_FILES
from lazylab.runner.provenance import resume_policy_advice
from lazylab.runner.spec import RunSpec, plan_units

if TYPE_CHECKING:
    from lazylab.store import Store

def check_can_start(store: Store, specs: Sequence[RunSpec], out: Path, *, resume: bool,
                    fresh: bool) -> None:
    """The output paths of every experiment (:func:`check_output_paths`), then for each its
    grid (a repeated unit key, :func:`~lazylab.runner.plan_units`), its lock (held by another
    run?), a resume's execution policy (:func:`check_resume_policy`) and
    :func:`~lazylab.runner.check_start`."""
    check_output_paths(out, [s.exp.id for s in specs])
    for spec in specs:
        plan_units(spec)
        RunLock.probe(out, spec.exp.id)
        if resume:
            check_resume_policy(store, spec, out)
        check_start(store, spec, out, resume=resume, fresh=fresh)


def check_output_paths(out: Path, exp_ids: Sequence[str],
                       names: Sequence[str] | None = None) -> None:
    """InputError (exit 2) when a path a run writes is taken by something it cannot replace:
    ``OUT/ID`` that is not a folder, or an output file (``names`` in ``OUT/ID``, ``{id}``
    replaced; default ``results.csv``, ``claims.json``, the figures and ``config.json``; and
    ``OUT/report.md``, ``report.html``) that is a folder or another non-file. Checked before
    anything is computed, instead of failing after the compute."""
    names = (*OUTPUT_FILES, "config.json") if names is None else names

    def refuse(path: Path, what: str) -> InputError:
        return InputError(f"{path} exists and is {what}; lazylab writes its results there: "
                          "move it away or choose another --out")

    for name in ("report.md", "report.html"):
        if (out / name).exists() and not (out / name).is_file():
            raise refuse(out / name, "not a regular file")
    for exp_id in exp_ids:
        d = out / exp_id
        if not d.exists():
            continue
        if not d.is_dir():
            raise refuse(d, "not a folder")
        for name in names:
            f = d / name.format(id=exp_id)
            if f.exists() and not f.is_file():
                raise refuse(f, "a folder" if f.is_dir() else "not a regular file")


def check_resume_policy(store: Store, spec: RunSpec, out: Path) -> None:
    """When only the execution policy differs from the stored run's, name each option that
    differs and what to pass (or leave out) to resume
    (:func:`~lazylab.runner.provenance.resume_policy_advice`); other differences are named by
    :func:`~lazylab.runner.check_resume`."""
    old = store.config(spec.exp.id)
    if not old or store.config_hash(spec.exp.id) == spec.config_hash:
        return
    new = spec.identity
    if {k for k in set(old) | set(new) if old.get(k) != new.get(k)} != {"policy"}:
        return
    advice = resume_policy_advice(old.get("policy") or {}, new.get("policy") or {})
    raise InputError(f"{spec.exp.id}: --resume: {out} holds units computed with other "
                     f"execution options: {advice}; or use --fresh to discard them, or a new "
                     "--out DIR")
