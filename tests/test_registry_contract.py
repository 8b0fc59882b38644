"""Contract checks over the whole experiment registry (scikit-learn common-checks style).

Every registered experiment, including ones added later, is checked for:

* declarations: paper key, figure, summary, est_seconds per scale, claims, ``robustness_axes``
  (1-3 parameters with 3 valid values each, the default among them) and ``smoke`` sizes;
* its grid: units JSON-able and unique at quick and paper scale;
* a smoke run (``Experiment.smoke`` overrides, in memory, one seed): rows well formed, claim ids
  and statements exactly ``statements(p)``, numbers numeric, three-state status, an error model
  for every tested claim;
* falsification: every claim (consistency checks aside) that held at the smoke run fails
  under at least one perturbation
  of the simulation rows (global scalings, power tilts along x, per-method scalings:
  :func:`harness.perturbations`);
* its figure: every axes with data has labelled x and y axes, and the figure has a legend;
* ``lazylab show ID`` exits 0 and lists every claim id.
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from harness import Run, perturbations, run_in_memory
from lazylab.cli import app
from lazylab.experiments import PAPERS, all_experiments
from lazylab.experiments.base import COLUMNS, STATUSES
from lazylab.seeding import canonical_key

EXPERIMENTS = {e.id: e for e in all_experiments()}
IDS = sorted(EXPERIMENTS)
# Smoke runs are meant to take a few CPU seconds; their time is not asserted (a timed unit
# test fails under load; `pytest --durations` shows them, benchmarks measure speed).

_runs: dict[str, Run | Exception] = {}


def smoke_run(exp_id: str) -> Run:
    """The experiment at its smoke sizes (computed once per test session)."""
    if exp_id not in _runs:
        exp = EXPERIMENTS[exp_id]
        if not exp.smoke:
            _runs[exp_id] = AssertionError(
                f"{exp_id}: declare `smoke` (tiny overrides) so the contract test can run it")
        else:
            try:
                _runs[exp_id] = run_in_memory(exp, dict(exp.smoke))
            except Exception as e:  # noqa: BLE001 - reported by every test that needs it
                _runs[exp_id] = e
    got = _runs[exp_id]
    if isinstance(got, Exception):
        raise got
    return got


@pytest.mark.parametrize("exp_id", IDS)
def test_declarations(exp_id):
    exp = EXPERIMENTS[exp_id]
    assert exp.paper in PAPERS
    assert exp.figure and exp.summary
    assert set(exp.est_seconds) >= {"quick", "paper"}
    assert exp.est_seconds["quick"] <= 120, "quick scale is at most 2 minutes"
    assert set(exp.scales) >= {"quick", "paper"}
    assert exp.statements(exp.resolve("quick")), "no claims"
    axes = exp.robustness_axes
    assert 1 <= len(axes) <= 3, f"{exp_id}: declare 1-3 robustness_axes"
    fields = exp.Params.model_fields
    for name, values in axes.items():
        assert name in fields, f"robustness axis {name!r} is not a parameter"
        assert len(values) == 3, f"robustness axis {name!r} needs 3 values"
        default = exp.resolve("quick").model_dump()[name]
        assert default in values, f"robustness axis {name!r} must include the default {default}"
        for v in values:
            exp.resolve("quick", {name: v})  # valid
    for k in exp.smoke:
        assert k in fields, f"smoke key {k!r} is not a parameter"


@pytest.mark.parametrize("exp_id", IDS)
@pytest.mark.parametrize("scale", ["quick", "paper"])
def test_units_are_jsonable_and_unique(exp_id, scale):
    exp = EXPERIMENTS[exp_id]
    p = exp.resolve(scale)
    units = exp.units(p)
    assert units, "empty grid"
    keys = [canonical_key(u) for u in units]
    assert len(set(keys)) == len(keys), "duplicate units"
    for u in units:
        assert json.loads(canonical_key(u)) == u, f"unit {u} does not survive JSON"
    st = exp.statements(p)
    assert len(st) == len(set(st)) and all(isinstance(t, str) and t for t in st.values())


@pytest.mark.parametrize("exp_id", IDS)
def test_smoke_run_rows_and_claims(exp_id):
    run = smoke_run(exp_id)
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
    assert set(run.claims) == set(expected)
    for c in got:
        assert c.statement == expected[c.id], c.id
        assert c.status in STATUSES
        for v in (c.measured, c.expected, c.tolerance):
            assert isinstance(v, float)
        if c.status != "not_applicable":
            assert c.error_model, f"{c.id}: state the error model"
            assert math.isfinite(c.tolerance), f"{c.id}: tolerance must be a number"
        json.dumps(c.to_dict(), allow_nan=True)


@pytest.mark.parametrize("exp_id", IDS)
def test_every_claim_can_fail(exp_id):
    run = smoke_run(exp_id)
    held = [cid for cid, c in run.claims.items() if c.held and not c.is_consistency]
    flipped: dict[str, str] = {}
    for name, res in perturbations(run.results):
        for cid, c in run.reclaim(res).items():
            if cid in held and cid not in flipped and c.status == "failed":
                flipped[cid] = name
        if len(flipped) == len(held):
            break
    assert set(flipped) == set(held), f"claims no perturbation makes fail: " \
                                      f"{sorted(set(held) - set(flipped))}"


@pytest.mark.parametrize("exp_id", IDS)
def test_figure_has_labelled_axes_and_a_legend(exp_id):
    run = smoke_run(exp_id)
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


@pytest.mark.parametrize("exp_id", IDS)
def test_show_works(exp_id):
    res = CliRunner().invoke(app, ["show", exp_id], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    for cid in EXPERIMENTS[exp_id].statements(EXPERIMENTS[exp_id].resolve("quick")):
        assert cid in res.output
