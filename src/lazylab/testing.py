"""The experiment contract as a test a plugin can run: ``check_experiment(exp)``.

In the manner of scikit-learn's ``parametrize_with_checks``, every experiment, built in or
installed as a plugin (entry-point group ``lazylab.experiments``), is checked for:

* declarations: paper key, figure, summary, est_seconds per scale (quick at most 2 minutes),
  claims, ``robustness_axes`` (1-3 parameters with 3 valid values each, the default among
  them) and ``smoke`` sizes;
* its grid: units JSON-able and unique at quick and paper scale;
* a smoke run (``Experiment.smoke`` overrides, in memory, one seed, computed as the runner
  computes it, batched groups included): rows well formed, claim ids and statements exactly
  ``statements(p)``, numbers numeric, three-state status, an error model for every tested claim;
* falsification: every tested claim (held or failed at the smoke run, consistency checks
  aside) fails under at least one perturbation of the simulation rows (:func:`perturbations`);
* resolution: every toolkit slope claim held to the default competitor (slope 0) fits at
  least 3 points at the smoke sizes and has a tolerance within ``|expected|`` (a loose
  tolerance is reported with its numbers);
* its figure: every axes with data has labelled axes, and the figure has a legend;
* ``lazylab show ID`` exits 0 and lists every claim id.

Example (a plugin's own test)::

    import pytest
    from lazylab.testing import experiment_checks

    @pytest.mark.parametrize("check", experiment_checks(MyExperiment()), ids=lambda c: c.name)
    def test_contract(check):
        check()

or simply ``check_experiment(MyExperiment())``, which runs them all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from lazylab.experiments.base import (
    COLUMNS,
    STATUSES,
    Claim,
    Experiment,
    ExperimentParams,
    Results,
    comparison_text,
    passes,
)
from lazylab.seeding import canonical_key

CPU = torch.device("cpu")


@dataclass
class Run:
    """An in-memory run: experiment, resolved parameters, results table and claims."""

    exp: Experiment
    p: ExperimentParams
    results: Results
    claims: dict[str, Claim]
    prep: Any = None

    def reclaim(self, results: Results) -> dict[str, Claim]:
        """The claims recomputed on another (e.g. tilted) results table."""
        return {c.id: c for c in self.exp.claims(self.p, results)}


def run_in_memory(exp: Experiment | str, overrides: dict[str, Any] | None = None, *,
                  seeds: int = 1, scale: str = "quick", device: torch.device = CPU) -> Run:
    """Every unit x seed as the runner computes it (its groups, seeds and ``prepare``), then
    the theory rows; then the claims. No store, no files.

    ``overrides`` are typed values (``{"d": 12}``), not ``--set`` strings.
    """
    from lazylab.experiments import get_experiment
    from lazylab.runner.spec import RunSpec, plan_groups

    if isinstance(exp, str):
        exp = get_experiment(exp)
    p = exp.resolve(scale, overrides or {})
    exp.validate(p)
    prep = exp.prepare(p, device)
    rows: list[dict[str, Any]] = []
    for g in plan_groups(RunSpec(exp, p, scale, seeds, device)):
        if g.label is None:
            (key, seed), = g.members
            out = [exp.run_unit(p, key, seed, device, prep=prep)]
        else:
            out = exp.run_group(p, g.members, g.seed, device, prep=prep)
        for u, unit_rows in zip(g.units, out, strict=True):
            rows += [{**r, "seed": u.seed_index} for r in unit_rows]
    rows += [{**r, "seed": None} for r in exp.theory(p, prep=prep)]
    results = Results(rows)
    return Run(exp, p, results, {c.id: c for c in exp.claims(p, results)}, prep)


def tilted(results: Results, fn: Callable[[dict[str, Any]], float | None]) -> Results:
    """A copy of ``results`` whose simulation rows get ``value *= fn(row)`` (None: unchanged).

    Theory rows are never changed: a falsification test moves the measurements away from the
    prediction.
    """
    out = []
    for r in results.rows:
        f = fn(r) if r.get("kind") == "simulation" else None
        out.append(r if f is None else {**r, "value": float(r["value"]) * f})
    return Results(out)


def perturbations(results: Results) -> Iterator[tuple[str, Results]]:
    """Named perturbations of the simulation rows used by the falsification check.

    Global scalings (x0.3, x3), power tilts along each x axis (value * (x/x_min)^t for
    t = +-1, +-3, +-6), per-method scalings (x0.2, x5) of every simulated method, and scalings
    (x0.1, x10) of one (method, metric) at a time (a measurement moves while a reference stored
    beside it does not). A claim that can fail is failed under at least one of them.
    """
    sims = results.select(kind="simulation")
    yield "scale x0.3", tilted(results, lambda r: 0.3)
    yield "scale x3", tilted(results, lambda r: 3.0)
    xmin: dict[str, float] = {}
    for r in sims:
        x = float(r["x"])
        if x > 0:
            xmin[r["x_name"]] = min(xmin.get(r["x_name"], math.inf), x)
    for name, x0 in xmin.items():
        for t in (1.0, -1.0, 3.0, -3.0, 6.0, -6.0):
            def tilt(r: dict[str, Any], name: str = name, x0: float = x0,
                     t: float = t) -> float | None:
                return ((float(r["x"]) / x0) ** t
                        if r["x_name"] == name and float(r["x"]) > 0 else None)

            yield f"tilt ({name}/{x0:g})^{t:+g}", tilted(results, tilt)
    for m in dict.fromkeys(r["method"] for r in sims):
        for f in (0.2, 5.0):
            def scale_method(r: dict[str, Any], m: Any = m, f: float = f) -> float | None:
                return f if r["method"] == m else None

            yield f"{m} x{f:g}", tilted(results, scale_method)
    for m, k in dict.fromkeys((r["method"], r["metric"]) for r in sims):
        for f in (0.1, 10.0):
            def scale_metric(r: dict[str, Any], m: Any = m, k: Any = k,
                             f: float = f) -> float | None:
                return f if r["method"] == m and r["metric"] == k else None

            yield f"{m}/{k} x{f:g}", tilted(results, scale_metric)


# ----------------------------------------------------------------------------- the checks
@dataclass(frozen=True)
class Check:
    """One named contract check of one experiment; call it to run it (AssertionError)."""

    name: str
    fn: Callable[[], None]

    def __call__(self) -> None:
        self.fn()

    def __repr__(self) -> str:
        return self.name


def check_declarations(exp: Experiment) -> None:
    assert isinstance(exp.paper, str) and exp.paper, f"{exp.id}: declare the paper key"
    assert exp.figure and exp.summary, f"{exp.id}: declare figure and summary"
    assert set(exp.est_seconds) >= {"quick", "paper"}, f"{exp.id}: est_seconds per scale"
    assert exp.est_seconds["quick"] <= 120, "quick scale is at most 2 minutes"
    assert set(exp.scales) >= {"quick", "paper"}, f"{exp.id}: scales quick and paper"
    assert exp.statements(exp.resolve("quick")), "no claims"
    axes = exp.robustness_axes
    assert 1 <= len(axes) <= 3, f"{exp.id}: declare 1-3 robustness_axes"
    fields = exp.Params.model_fields
    for name, values in axes.items():
        assert name in fields, f"robustness axis {name!r} is not a parameter"
        assert len(values) == 3, f"robustness axis {name!r} needs 3 values"
        default = exp.resolve("quick").model_dump()[name]
        assert default in values, f"robustness axis {name!r} must include the default {default}"
        for v in values:
            exp.resolve("quick", {name: v})  # valid
    assert exp.smoke, f"{exp.id}: declare `smoke` (tiny overrides) so the contract can run it"
    for k in exp.smoke:
        assert k in fields, f"smoke key {k!r} is not a parameter"


def check_units(exp: Experiment) -> None:
    for scale in ("quick", "paper"):
        p = exp.resolve(scale)
        units = exp.units(p)
        assert units, f"empty grid at {scale} scale"
        keys = [canonical_key(u) for u in units]
        assert len(set(keys)) == len(keys), f"duplicate units at {scale} scale"
        for u in units:
            assert json.loads(canonical_key(u)) == u, f"unit {u} does not survive JSON"
        st = exp.statements(p)
        assert all(isinstance(t, str) and t for t in st.values()), "empty claim statement"


def check_smoke_rows_and_claims(run: Run) -> None:
    assert run.results.select(kind="simulation"), "no simulation rows"
    for r in run.results.rows:
        assert set(COLUMNS) <= set(r), r
        assert r["kind"] in ("simulation", "theory")
        assert isinstance(r["value"], float) and isinstance(r["x"], float)
        for k in set(r) - set(COLUMNS):
            assert isinstance(r[k], (int, float, str, bool)), f"facet {k}={r[k]!r}"
    expected = run.exp.statements(run.p)
    got = list(run.exp.claims(run.p, run.results))
    assert [c.id for c in got] == list(run.claims), "duplicate claim ids"
    assert set(run.claims) == set(expected), "claims() ids differ from statements(p)"
    for c in got:
        assert c.statement == expected[c.id], c.id
        assert c.status in STATUSES
        for v in (c.measured, c.expected, c.tolerance):
            assert isinstance(v, float)
        if c.status != "not_applicable":
            assert c.error_model, f"{c.id}: state the error model"
            assert math.isfinite(c.tolerance), f"{c.id}: tolerance must be a number"
        if c.held:  # the printed comparison is one the verdict passed
            _check_comparison(c)
        json.dumps(c.to_dict(), allow_nan=True)


def _check_comparison(c: Claim) -> None:
    m, e, t, op = c.measured, c.expected, c.tolerance, c.comparison
    if not all(math.isfinite(v) for v in (m, e, t)):
        return
    assert passes(m, e, t, op), \
        f"{c.id} held, but its printed test fails: {comparison_text(m, e, t, op)}"


def check_every_claim_can_fail(run: Run) -> None:
    """Every tested claim (held or failed at the smoke run, consistency checks aside) fails
    under at least one of :func:`perturbations`.

    The claims checked are the tested ones, not only those that happened to hold: which of
    them held at the smoke sizes depends on the seed (and so on the experiment id), what is
    checked must not. A toolkit slope claim that is tested has ``tolerance <= resolution``
    (:func:`~lazylab.experiments.toolkit.slope_claim`), and a power tilt by ``t`` moves its
    slope by exactly ``t`` while leaving its residuals and SE unchanged, so one of the tilts
    by +-6 fails it whenever ``tolerance < 6 - |measured - expected|``, whatever the seed.
    """
    tested = [cid for cid, c in run.claims.items()
              if c.status in ("held", "failed") and not c.is_consistency]
    flipped: dict[str, str] = {}
    for name, res in perturbations(run.results):
        for cid, c in run.reclaim(res).items():
            if cid in tested and cid not in flipped and c.status == "failed":
                flipped[cid] = name
        if len(flipped) == len(tested):
            break
    assert set(flipped) == set(tested), \
        f"claims no perturbation makes fail: {sorted(set(tested) - set(flipped))}"


def check_slope_claims_resolve(run: Run) -> None:
    """Every slope claim that :func:`~lazylab.experiments.toolkit.slope_claim` holds to its
    default competitor, the flat law (no ``resolution`` stated; parts folded by ``all_of``
    included), fits at least 3 points at the smoke sizes, so that its slope has a residual
    to estimate an SE from, and has ``tolerance <= |expected|``: a wider band contains slope 0,
    so the claim is inconclusive, a test that y not depending on x at all would pass.

    A claim that states its ``resolution`` (or ``NO_COMPETING_LAW``) has chosen its
    competitor, and may be inconclusive at the smoke sizes by design; the report shows it so.
    """
    from lazylab.experiments.toolkit import recorded_slopes

    with recorded_slopes() as log:
        run.reclaim(run.results)
    log = [r for r in log if not r.stated]
    few = [f"{r.cid} ({r.points} points)" for r in log if r.points < 3]
    assert not few, (f"slope claims fitted to fewer than 3 points at the smoke sizes, with no "
                     f"residual to estimate their SE from: {', '.join(few)}; give `smoke` at "
                     "least 3 x values")
    loose = [f"{r.cid}: {r.reason or f'tolerance {r.tolerance:.3g} > {r.resolution:g}'}"
             for r in log if r.tolerance > r.resolution]
    assert not loose, ("loose tolerance, the claim cannot tell its law from slope 0 (fit more "
                       "points or seeds in `smoke`, or state a smaller bias): "
                       + "; ".join(loose))


def check_figure(run: Run) -> None:
    fig = run.exp.plot(run.p, run.results)
    used = [ax for ax in fig.axes if ax.has_data()]
    assert used, "empty figure"
    for ax in used:
        if getattr(ax, "name", "") == "colorbar" or ax.get_label() == "<colorbar>":
            continue
        assert ax.get_xlabel(), f"axes {ax.get_title()!r} has no x label"
        assert ax.get_ylabel() or any(a.get_ylabel() for a in used), \
            f"axes {ax.get_title()!r} has no y label"
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    assert any(lg is not None for lg in legends), "no legend"
    import matplotlib.pyplot as plt

    plt.close(fig)


def check_show(exp: Experiment) -> None:
    from typer.testing import CliRunner

    from lazylab.cli import app
    from lazylab.experiments import REGISTRY, all_experiments

    all_experiments()
    added = exp.id not in REGISTRY  # an experiment checked before it is installed
    if added:
        REGISTRY[exp.id] = exp
    try:
        res = CliRunner().invoke(app, ["show", exp.id], env={"COLUMNS": "250"})
    finally:
        if added:
            REGISTRY.pop(exp.id, None)
    assert res.exit_code == 0, res.output
    for cid in exp.statements(exp.resolve("quick")):
        assert cid in res.output, f"show does not list claim {cid}"


def experiment_checks(exp: Experiment) -> list[Check]:
    """The contract checks of ``exp`` (the module docstring), each a callable :class:`Check`;
    the smoke run is computed once, on first use, and shared by the checks that need it."""
    cache: dict[str, Run | BaseException] = {}

    def smoke() -> Run:
        if "run" not in cache:
            try:
                cache["run"] = run_in_memory(exp, dict(exp.smoke))
            except BaseException as e:  # reported by every check that needs it
                cache["run"] = e
        got = cache["run"]
        if isinstance(got, BaseException):
            raise got
        return got

    return [
        Check(f"{exp.id}:declarations", lambda: check_declarations(exp)),
        Check(f"{exp.id}:units", lambda: check_units(exp)),
        Check(f"{exp.id}:smoke-rows-and-claims", lambda: check_smoke_rows_and_claims(smoke())),
        Check(f"{exp.id}:every-claim-can-fail", lambda: check_every_claim_can_fail(smoke())),
        Check(f"{exp.id}:slope-claims-resolve", lambda: check_slope_claims_resolve(smoke())),
        Check(f"{exp.id}:figure", lambda: check_figure(smoke())),
        Check(f"{exp.id}:show", lambda: check_show(exp)),
    ]


def check_experiment(exp: Experiment | type[Experiment]) -> None:
    """Run every contract check of an experiment (an instance or its class); the first
    failure raises AssertionError naming the check."""
    inst = exp() if isinstance(exp, type) else exp
    for check in experiment_checks(inst):
        try:
            check()
        except AssertionError as e:
            raise AssertionError(f"{check.name}: {e}") from e
