"""Assembly of a finished run: stored unit rows and theory rows -> results.csv, claims.json and
the figure of one experiment.

``results.csv`` lists the simulation rows in grid order (the order of ``Experiment.units``),
then by seed index, then the theory rows; the ``seed`` column holds the seed index (empty for
theory rows). Everything is assembled from stored units: nothing is recomputed except the
experiment's closed-form ``theory`` rows. :func:`assemble` is the one path from a store to the
outputs, shared by :func:`~lazylab.runner.run_experiment` (and so ``lazylab robustness``, which
runs each setting through it) and :func:`rebuild` (``lazylab report``).

Non-finite numbers (a diverged training run, an overflow) are kept and flagged, not refused:
``results.csv`` writes them as ``nan``, ``inf`` or ``-inf`` (what Python's ``float`` reads
back), :func:`non_finite_summary` counts them and names their series, the run records that in
``config.json`` (``non_finite_values``), and a claim whose measured value, expected value or
tolerance is non-finite does not hold (:class:`~lazylab.experiments.base.Claim`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazylab.errors import StoreFault
from lazylab.runner.outputs import experiment_dirs, save_figure, write_json, write_results_csv
from lazylab.runner.params import SEEDS_MAX
from lazylab.runner.rows import Rows, tidy_rows
from lazylab.seeding import canonical_key
from lazylab.store import STORE_NAME, Store

if TYPE_CHECKING:
    from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results

#: Series named in :func:`non_finite_summary` before the rest are only counted.
_SERIES_SHOWN = 10



def theory_rows(exp: Experiment, p: ExperimentParams, prep: Any = None) -> Rows:
    """The experiment's checked theory rows, ``theory(p, prep=prep)`` (``prep``: the run's
    ``prepare`` output)."""
    return tidy_rows(exp.theory(p, prep=prep), kind="theory", where=f"{exp.id}.theory")


def collect_rows(exp: Experiment, p: ExperimentParams, seeds: int,
                 stored: Mapping[tuple[str, int], Rows], theory: Rows,
                 keys: Sequence[dict[str, Any]] | None = None) -> tuple[Rows, int]:
    """The results table from stored unit rows: ``(rows, number of units missing)``.

    Simulation rows come in grid order (``keys``, the run's grid when it has computed it,
    else ``exp.units(p)``), then seed index (added as ``seed``); the ``theory`` rows
    (:func:`theory_rows`, or the ones the run stored) follow with ``seed=None``. Missing
    units are skipped and counted.
    """
    rows: Rows = []
    missing = 0
    for key in (exp.units(p) if keys is None else keys):
        kj = canonical_key(key)
        for s in range(seeds):
            unit_rows = stored.get((kj, s))
            if unit_rows is None:
                missing += 1
                continue
            rows.extend({**r, "seed": s} for r in unit_rows)
    rows.extend({**r, "seed": None} for r in theory)
    return rows, missing


def non_finite_summary(rows: Rows) -> dict[str, Any] | None:
    """``{"rows": count, "series": ["kind method/metric", ...]}`` of the rows whose ``x`` or
    ``value`` is NaN or infinite (at most 10 series named, sorted); None when every number is
    finite.

    >>> non_finite_summary([{"kind": "simulation", "method": "NN", "metric": "risk",
    ...                      "x": 1.0, "value": float("inf")}])
    {'rows': 1, 'series': ['simulation NN/risk']}
    """
    bad = [r for r in rows if not (math.isfinite(r["x"]) and math.isfinite(r["value"]))]
    if not bad:
        return None
    series = sorted({f"{r['kind']} {r['method']}/{r['metric']}" for r in bad})
    shown = series[:_SERIES_SHOWN]
    if len(series) > _SERIES_SHOWN:
        shown.append(f"and {len(series) - _SERIES_SHOWN} more")
    return {"rows": len(bad), "series": shown}


@dataclass
class Assembly:
    """What :func:`assemble` produced: the results table and the verdicts, or (``missing`` > 0)
    nothing because that many units are not stored."""

    rows: Rows = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    missing: int = 0


def assemble(exp: Experiment, p: ExperimentParams, seeds: int,
             stored: Mapping[tuple[str, int], Rows], theory: Callable[[], Rows], exp_dir: Path,
             *, warn: Callable[[str], None] | None = None,
             keys: Sequence[dict[str, Any]] | None = None) -> Assembly:
    """The outputs of one experiment from its stored units: results.csv, claims.json, figure.

    ``theory`` is called only once every unit is stored, so an incomplete experiment costs no
    theory computation and its existing files are left as they are. ``keys``: the grid, where
    the caller has it (:attr:`~lazylab.runner.RunSpec.unit_keys`; default ``exp.units(p)``).
    """
    rows, missing = collect_rows(exp, p, seeds, stored, theory=[], keys=keys)
    if missing:
        return Assembly(missing=missing)
    rows.extend({**r, "seed": None} for r in theory())
    return Assembly(rows, finish_experiment(exp, p, rows, exp_dir, warn=warn))


def finish_experiment(exp: Experiment, p: ExperimentParams, rows: Rows,
                      exp_dir: Path, warn: Callable[[str], None] | None = None) -> list[Claim]:
    """Write results.csv, claims.json (verdicts from ``exp.claims``) and the figure.

    A figure that cannot be drawn does not undo the rest: results and claims are written
    first, and the failure is reported through ``warn`` (default: a RuntimeWarning)."""
    from lazylab.experiments.base import Results

    exp_dir.mkdir(parents=True, exist_ok=True)
    write_results_csv(exp_dir / "results.csv", rows)
    results = Results(rows)
    claims = list(exp.claims(p, results))
    write_json(exp_dir / "claims.json", [c.to_dict() for c in claims])
    try:
        draw_figure(exp, p, results, exp_dir)
    except Exception as e:  # noqa: BLE001 - any plotting failure is reported, not fatal
        msg = (f"{exp.id}: the figure could not be drawn ({type(e).__name__}: {e}); "
               "results.csv and claims.json are written")
        if warn is not None:
            warn(msg)
        else:
            import warnings

            warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return claims


def draw_figure(exp: Experiment, p: ExperimentParams, results: Results, exp_dir: Path) -> None:
    """``exp.plot`` saved as ID.png and ID.svg (atomically, byte-stable SVG)."""
    fig = exp.plot(p, results)
    if fig is None or not hasattr(fig, "savefig"):
        raise TypeError(f"{exp.id}.plot must return a matplotlib Figure")
    import matplotlib.pyplot as plt

    try:
        save_figure(fig, exp_dir, exp.id, dpi=150)
    finally:
        plt.close(fig)


def rebuild(out_dir: Path, warn: Callable[[str], None] = lambda _msg: None, *,
            recompute_theory: bool = False,
            render: Callable[[Path], Any] = lambda _out: None) -> dict[str, list[Claim]]:
    """Re-assemble every experiment in ``out_dir`` from its stored units, then ``render`` the
    report (``lazylab.report.rebuild`` passes its ``write_report``).

    Nothing is recomputed: the theory rows are the ones the run stored. They are computed
    again (with the ``prepare`` step they may need) only with ``recompute_theory`` (after a
    change to an experiment's theory) or when the store has none (written by an older
    lazylab). An experiment
    whose units are incomplete, or whose id is no longer registered, keeps its existing files
    and is reported by ``warn``. A ``config.json`` that does not parse, a store fault or a unit
    failing its checksum raises :class:`StoreFault` (exit 2) naming the file. Returns the
    claims of the rebuilt experiments.
    """
    from lazylab.experiments import get_experiment

    store_path = out_dir / STORE_NAME
    if not store_path.is_file():
        warn(f"no store ({STORE_NAME}) in {out_dir}; keeping the existing results")
        render(out_dir)
        return {}
    rebuilt: dict[str, list[Claim]] = {}
    with Store.open_existing(store_path) as store:
        for exp_dir, config in experiment_dirs(out_dir, strict=True):
            exp_id = config.get("experiment", exp_dir.name)
            try:
                exp = get_experiment(exp_id)
            except KeyError:
                warn(f"{exp_id}: not a registered experiment; keeping its existing results")
                continue
            p, seeds, stored = _stored_run(store, exp, exp_id, config, exp_dir, out_dir)
            theory = functools.partial(_stored_theory, store, exp, exp_id, p,
                                       str(config["config_hash"]), recompute_theory, warn)
            done = assemble(exp, p, seeds, stored, theory, exp_dir, warn=warn)
            if done.missing:
                warn(f"{exp_id}: {done.missing} work unit(s) not stored; finish them with "
                     f"`lazylab reproduce {exp_id} --out {out_dir} --resume`")
                continue
            rebuilt[exp_id] = done.claims
    render(out_dir)
    return rebuilt


def _stored_run(store: Store, exp: Experiment, exp_id: str, config: dict[str, Any],
                exp_dir: Path, out_dir: Path,
                ) -> tuple[ExperimentParams, int, Mapping[tuple[str, int], Rows]]:
    """``(params, seeds, stored units)`` of the run a config.json records; StoreFault when the
    config is not usable (a crafted seed count must not hang the rebuild)."""
    try:
        p = exp.Params.model_validate(config["params"])
        seeds = int(config["seeds"])
        if not 1 <= seeds <= SEEDS_MAX:
            raise ValueError(f"seeds must be between 1 and {SEEDS_MAX}; got {seeds}")
        stored = store.units(exp_id, str(config["config_hash"]))
    except (KeyError, TypeError, ValueError) as e:
        raise StoreFault(f"{exp_dir / 'config.json'} is not usable ({e}); rerun "
                         f"`lazylab reproduce {exp_id} --out {out_dir} --resume`") from None
    return p, seeds, stored


def _stored_theory(store: Store, exp: Experiment, exp_id: str, p: ExperimentParams,
                   config_hash: str, recompute: bool, warn: Callable[[str], None]) -> Rows:
    """The theory rows the run stored; computed again on the CPU (after ``prepare`` where the
    experiment needs it) when ``recompute`` or none is stored, and stored if the store allows."""
    theory = None if recompute else store.theory(exp_id, config_hash)
    if theory is not None:
        return theory
    import torch

    theory = theory_rows(exp, p, exp.prepare(p, torch.device("cpu")))
    try:
        store.put_theory(exp_id, config_hash, theory)
    except StoreFault as e:  # a read-only copy: the rebuild itself still stands
        warn(f"{exp_id}: theory rows not stored ({e})")
    return theory
