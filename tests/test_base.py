"""Framework contract: facet columns, Results queries, Series, three-state claims."""

import json
import math

import numpy as np
import pytest

from lazylab.experiments.base import Claim, Results, Series, row
from lazylab.runner.outputs import read_results, write_results_csv


def _rows():
    rows = []
    for d in (20, 40):
        for seed, noise in enumerate((0.1, -0.1)):
            for x in (1.0, 2.0):
                r = row("NT", "n", x, "mse", d + x + noise, d=d, arch="two-layer")
                rows.append({**r, "seed": seed})
    rows.append({**row("limit", "n", 1.0, "mse", 0.5, kind="theory", d=20), "seed": None})
    return rows


def test_facets_are_columns_after_the_standard_seven_sorted(tmp_path):
    path = tmp_path / "results.csv"
    write_results_csv(path, _rows())
    header = path.read_text().splitlines()[0].split(",")
    assert header == ["method", "kind", "x_name", "x", "seed", "metric", "value", "arch", "d"]


def test_select_and_series_filter_on_facets_after_a_csv_round_trip(tmp_path):
    path = tmp_path / "results.csv"
    write_results_csv(path, _rows())
    for res in (Results(_rows()), read_results(path)):
        s = res.series("NT", "mse", d=40)
        assert isinstance(s, Series)
        np.testing.assert_array_equal(s.x, [1.0, 2.0])
        np.testing.assert_allclose(s.mean, [41.0, 42.0], atol=1e-12)
        np.testing.assert_allclose(s.sem, [0.1, 0.1], atol=1e-12)  # std 0.1*sqrt2 / sqrt2
        np.testing.assert_array_equal(s.n, [2, 2])
        assert len(res.select(d=[20, 40], kind="simulation")) == 8
        assert len(res.select(d=20, kind="theory")) == 1
        assert res.facet_values("d") == sorted(res.facet_values("d"), key=float)
        assert [float(v) for v in res.facet_values("d")] == [20.0, 40.0]


def test_row_refuses_bad_facets():
    with pytest.raises(ValueError, match="clashes"):
        row("a", "n", 1, "m", 1.0, seed=3)
    with pytest.raises(TypeError, match="scalar"):
        row("a", "n", 1, "m", 1.0, d=[1, 2])
    with pytest.raises(ValueError, match="kind"):
        row("a", "n", 1, "m", 1.0, kind="measured")


def test_claim_three_states_and_json_record():
    ok = Claim.test("a", "s", 1.0, "within", 1.1, 0.2, "seed noise")
    bad = Claim.test("b", "s", 2.0, "within", 1.0, 0.5, "seed noise")
    na = Claim.not_applicable("c", "s", "k-th Hermite coefficient is 0")
    assert (ok.status, bad.status, na.status) == ("held", "failed", "not_applicable")
    assert ok.held and not bad.held and not na.held
    assert bad.failed and not na.failed
    assert math.isclose(ok.ratio, 0.5) and math.isclose(bad.ratio, 2.0) and math.isnan(na.ratio)
    rec = json.loads(json.dumps(ok.to_dict()))
    assert rec["held"] is True and rec["status"] == "held" and rec["error_model"] == "seed noise"
    assert json.loads(json.dumps(na.to_dict(), allow_nan=True))["details"]["reason"]
    check = Claim.test("d", "s", 0.0, "within", 0.0, 1e-10, "exact", {"kind": "consistency"})
    assert check.is_consistency and not ok.is_consistency
    with pytest.raises(ValueError, match="status"):
        Claim("e", "s", "maybe")


def test_legacy_positional_claims_keep_numbers_numeric():
    c = Claim("a", "s", True, {"per_d": [1, 2]}, "text", 0.1)
    # The non-numbers move to details and read as NaN, so the verdict cannot stand as held.
    assert c.status == "failed" and math.isnan(c.measured) and math.isnan(c.expected)
    assert c.details["measured"] == {"per_d": [1, 2]} and c.tolerance == 0.1
    assert c.details["non_finite"].startswith("measured is not a number, expected is not a")
