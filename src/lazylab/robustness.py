"""Robustness of every claim: re-check an experiment's claims across settings and seeds, and
report where each one holds (measured for every experiment in the docs page robustness.md).

A *setting* is the experiment's parameters with some keys changed. By default the settings are
one-at-a-time variations along the experiment's declared ``robustness_axes``: the scale's own
parameters, then each axis value that differs from them with every other key at its default
(``--vary KEY=V1,V2`` replaces the axes; several ``--vary`` give the full grid of their values).

A *seed* (replicate) ``r`` of a setting is an independent rerun of the whole experiment: it uses
the unit seed indices ``r*k .. r*k + k - 1`` where ``k`` is the experiment's default seed count
at that scale, so replicate 0 is exactly ``lazylab reproduce``'s run and replicates never share
a random draw. Every setting is one runner call with ``R*k`` seeds into its own folder
``DIR/ID/robustness/sNN/`` (its own store: ``--resume`` and ``--workers``/``--backend`` work
as for ``reproduce``); the claims are then evaluated per replicate from the stored rows.

Outputs in ``DIR/ID/``: ``robustness.csv`` (setting, seed, claim, status, measured, expected,
tolerance, ratio), ``robustness.png``/``.svg`` (claims down, settings across, each cell coloured
by the share of seeds where the claim held, the median |measured - expected| / tolerance written
in it) and ``robustness.json`` (the settings and a one-line summary per claim).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazylab.errors import InputError

if TYPE_CHECKING:
    from lazylab.experiments.base import Claim, Experiment, ExperimentParams

#: Default robustness runs of one experiment aim at this wall time: a 15-minute budget, within
#: which the seed rule fits as many seeds per setting as the experiment's estimate allows.
_BUDGET_SECONDS = 900.0
#: Default number of seeds (replicates) per setting, before the budget cut.
_DEFAULT_REPLICATES = 5

COLUMNS = ("setting", "seed", "claim", "status", "measured", "expected", "tolerance", "ratio")


@dataclass(frozen=True)
class Setting:
    """One point of the robustness grid: a label and the ``--set`` strings it changes."""

    index: int
    changes: dict[str, str]

    @property
    def label(self) -> str:
        """``default`` or ``d=20, m=1000``."""
        return ", ".join(f"{k}={v}" for k, v in self.changes.items()) or "default"


def _text(v: Any) -> str:
    if isinstance(v, list | tuple):
        return ",".join(_text(x) for x in v)
    if isinstance(v, bool):
        return str(v).lower()
    return "none" if v is None else str(v)


def plan_settings(exp: Experiment, scale: str, vary: dict[str, list[str]] | None = None,
                  ) -> list[Setting]:
    """The settings to run: ``vary`` (full grid) or one-at-a-time along the declared axes."""
    base = exp.resolve(scale).model_dump(mode="json")
    if vary:
        for k in vary:
            if k not in base:
                raise InputError(f"--vary {k}: no parameter of that name in {exp.id}; "
                                 f"`lazylab show {exp.id}` lists the keys")
        for k, values in vary.items():
            seen = [_text(v) for v in values]
            dup = next((v for i, v in enumerate(seen) if v in seen[:i]), None)
            if dup is not None:
                raise InputError(f"--vary {k}: the value {dup} is listed twice; each setting "
                                 "runs once")
        keys = list(vary)
        return [Setting(i, dict(zip(keys, combo, strict=True)))
                for i, combo in enumerate(itertools.product(*(vary[k] for k in keys)))]
    axes = dict(exp.robustness_axes)
    if not axes:
        raise InputError(f"{exp.id} declares no robustness axes; pass --vary KEY=V1,V2,...")
    out = [Setting(0, {})]
    for k, values in axes.items():
        for v in values:
            if _text(v) != _text(base.get(k)):
                out.append(Setting(len(out), {k: _text(v)}))
    return out


def default_replicates(cost_per_replicate: float, n_settings: int) -> int:
    """Seeds per setting: 5, fewer if the whole robustness run would exceed 15 minutes."""
    if cost_per_replicate <= 0:
        return _DEFAULT_REPLICATES
    fit = int(_BUDGET_SECONDS // (cost_per_replicate * max(1, n_settings)))
    return max(1, min(_DEFAULT_REPLICATES, fit))


def replicate_claims(exp: Experiment, p: ExperimentParams, rows: Sequence[dict[str, Any]],
                     k: int, replicates: int) -> list[list[Claim]]:
    """Claims of each replicate ``r``: simulation rows of seed indices ``r*k .. r*k+k-1``
    (renumbered from 0, as in a plain run) plus the theory rows."""
    from lazylab.experiments.base import Results

    theory = [r for r in rows if r.get("kind") == "theory"]
    out = []
    for r in range(replicates):
        sim = [{**row, "seed": row["seed"] - r * k} for row in rows
               if row.get("kind") != "theory" and r * k <= row["seed"] < (r + 1) * k]
        out.append(list(exp.claims(p, Results(sim + theory))))
    return out


def _ratio(c: Claim) -> float:
    return c.ratio


def summarize(settings: Sequence[Setting], table: dict[int, list[list[Claim]]],
              ) -> dict[str, str]:
    """One line per claim: ``holds at 14/15 settings; fails at d=20 with 2/5 seeds``.

    A claim holds at a setting when it held for a majority of the seeds that tested it
    (not-applicable seeds are left out).
    """
    claim_ids: list[str] = []
    for reps in table.values():
        for claims in reps:
            for c in claims:
                if c.id not in claim_ids:
                    claim_ids.append(c.id)
    lines = {}
    for cid in claim_ids:
        held_at, tested, fails = 0, 0, []
        for s in settings:
            states = [c.status for claims in table[s.index] for c in claims if c.id == cid]
            tried = [x for x in states if x != "not_applicable"]
            if not tried:
                continue
            tested += 1
            h = sum(x == "held" for x in tried)
            if 2 * h > len(tried):
                held_at += 1
            else:
                fails.append(f"{s.label} with {h}/{len(tried)} seeds")
        text = f"holds at {held_at}/{tested} settings"
        if fails:
            text += "; fails at " + "; ".join(fails)
        lines[cid] = text if tested else "not applicable at any setting"
    return lines


def write_outputs(exp: Experiment, exp_dir: Path, settings: Sequence[Setting],
                  table: dict[int, list[list[Claim]]]) -> dict[str, str]:
    """Write robustness.csv, robustness.json and the figure; return the summary lines."""
    from lazylab.runner.outputs import atomic_write, write_json

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for s in settings:
        for r, claims in enumerate(table[s.index]):
            for c in claims:
                w.writerow([s.label, r, c.id, c.status, repr(c.measured), repr(c.expected),
                            repr(c.tolerance), repr(c.ratio)])
    exp_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(exp_dir / "robustness.csv", buf.getvalue())
    summary = summarize(settings, table)
    write_json(exp_dir / "robustness.json", {
        "experiment": exp.id, "settings": [s.label for s in settings],
        "seeds": max((len(v) for v in table.values()), default=0), "summary": summary})
    _plot(exp, exp_dir, settings, table)
    return summary


def _plot(exp: Experiment, exp_dir: Path, settings: Sequence[Setting],
          table: dict[int, list[list[Claim]]]) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    from lazylab.runner.outputs import save_figure

    ids: list[str] = []
    for s in settings:
        for claims in table[s.index]:
            for c in claims:
                if c.id not in ids:
                    ids.append(c.id)
    share = np.full((len(ids), len(settings)), np.nan)
    ratio = np.full_like(share, np.nan)
    for j, s in enumerate(settings):
        for i, cid in enumerate(ids):
            cs = [c for claims in table[s.index] for c in claims if c.id == cid
                  and c.status != "not_applicable"]
            if cs:
                share[i, j] = sum(c.held for c in cs) / len(cs)
                rs = [c.ratio for c in cs if math.isfinite(c.ratio)]
                ratio[i, j] = float(np.median(rs)) if rs else np.nan
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(settings), 1.0 + 0.45 * len(ids)))
    im = ax.imshow(share, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    for i in range(len(ids)):
        for j in range(len(settings)):
            text = "n/a" if np.isnan(share[i, j]) else (
                "-" if np.isnan(ratio[i, j]) else f"{ratio[i, j]:.2g}")
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(settings)), [s.label for s in settings], rotation=35, ha="right",
                  fontsize=8)
    ax.set_yticks(range(len(ids)), ids, fontsize=8)
    ax.set_xlabel("setting")
    ax.set_ylabel("claim")
    ax.set_title(f"{exp.id}: share of seeds where each claim held\n"
                 "(cell text: median |measured - expected| / tolerance)", fontsize=9)
    fig.colorbar(im, ax=ax, label="share of seeds held")
    try:
        save_figure(fig, exp_dir, "robustness", dpi=120)
    finally:
        plt.close(fig)


def load_summary(exp_dir: Path) -> dict[str, Any] | None:
    """``robustness.json`` of an experiment folder (None if absent or unreadable)."""
    path = exp_dir / "robustness.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


def run_robustness(exp: Experiment, scale: str, out_dir: Path, *, device: Any,
                   vary: dict[str, list[str]] | None = None, seeds: int | None = None,
                   workers: int = 1, backend: str = "local", address: str | None = None,
                   resume: bool = False, fresh: bool = False, policy: Any = None,
                   precision: str = "auto", progress: Any = None,
                   ) -> tuple[list[Setting], dict[int, list[list[Claim]]], dict[str, str]]:
    """Run every setting (each resumable in its own store), evaluate the claims per seed,
    write the outputs; returns ``(settings, claims per setting and seed, summary lines)``."""
    from lazylab.runner import resolve_spec, run_experiment
    from lazylab.store import STORE_NAME, Store

    settings = plan_settings(exp, scale, vary)
    k = exp.default_seeds.get(scale, 1)
    specs = [resolve_spec(exp, scale, s.changes, k, device, policy, precision)
             for s in settings]
    if seeds is None:
        from lazylab.experiments.cost import estimate

        seeds = default_replicates(max(estimate(sp).seconds for sp in specs), len(settings))
    table: dict[int, list[list[Claim]]] = {}
    for s in settings:
        spec = resolve_spec(exp, scale, s.changes, k * seeds, device, policy, precision)
        sdir = out_dir / exp.id / "robustness" / f"s{s.index:02d}"
        sdir.mkdir(parents=True, exist_ok=True)
        with Store(sdir / STORE_NAME) as store:
            again = resume and store.count(exp.id) > 0
            o = run_experiment(spec, sdir, store, resume=again, fresh=fresh, workers=workers,
                               backend=backend, address=address,
                               command=f"lazylab robustness {exp.id} ({s.label})",
                               progress=progress)
        table[s.index] = replicate_claims(exp, spec.params, o.rows, k, seeds)
    summary = write_outputs(exp, out_dir / exp.id, settings, table)
    return settings, table, summary


def estimate_seconds(exp: Experiment, scale: str, device: Any,
                     vary: dict[str, list[str]] | None, seeds: int | None,
                     policy: Any = None, precision: str = "auto") -> tuple[int, int, float]:
    """``(settings, seeds per setting, estimated seconds)`` of a robustness run."""
    from lazylab.experiments.cost import estimate
    from lazylab.runner import resolve_spec

    settings = plan_settings(exp, scale, vary)
    k = exp.default_seeds.get(scale, 1)
    costs = [estimate(resolve_spec(exp, scale, s.changes, k, device, policy, precision)).seconds
             for s in settings]
    r = seeds or default_replicates(max(costs), len(settings))
    return len(settings), r, sum(costs) * r
