"""No claim holds on non-finite numbers, and a degenerate parameter range is refused up front
(lazylab issue 46, section 1).

* A held verdict with a NaN or infinite measured value, expected value or tolerance is
  failed, naming the number; claims.json writes null there (never the text "nan").
* Non-finite result values are kept in results.csv and flagged in config.json.
* ``nichani-spectrum --set b=1e308`` (every eigenvalue 0, so "0 within 0 +- 0" held 3/3) is
  refused: 0.5 <= |b| <= 20.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch

from lazylab.experiments import REGISTRY
from lazylab.experiments.base import Claim, Results
from lazylab.experiments.toolkit import match_claim
from lazylab.runner.assemble import non_finite_summary
from lazylab.runner.outputs import write_json
from toy_experiment import ToyMean, cli, one_line_exit_2

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("measured, expected, tolerance, named", [
    (1.0, 1.0, NAN, "tolerance is not a number"),
    (NAN, 1.0, 0.1, "measured is not a number"),
    (INF, INF, 0.1, "measured is +infinity, expected is +infinity"),
    (1.0, 1.0, INF, "tolerance is +infinity"),
    (1.0, -INF, 0.1, "expected is -infinity"),
])
def test_a_held_verdict_on_non_finite_numbers_is_failed(measured, expected, tolerance, named):
    c = Claim("c", "s", "held", measured, expected, tolerance)
    assert c.status == "failed" and not c.held and c.failed
    assert c.details["non_finite"] == f"{named}: a claim cannot hold on non-finite numbers"
    for op in (">=", "<=", "within"):  # a tested claim never holds on them either
        assert Claim.test("c", "s", measured, op, expected, tolerance, "MC").failed


def test_finite_verdicts_follow_their_printed_test():
    assert Claim.test("c", "s", 1.0, "within", 1.0, 0.0, "MC").status == "held"
    assert Claim.test("c", "s", 1.0, "above", 1.0, 0.5, "MC").status == "failed"
    assert Claim.test("c", "s", 1.6, "above", 1.0, 0.5, "MC").status == "held"
    assert Claim.test("c", "s", 9.0, ">=", 1.0, 0.5, "MC").comparison == ">="
    na = Claim.not_applicable("c", "s", "nothing to test")
    assert na.status == "not_applicable" and "non_finite" not in na.details


def test_claims_json_holds_null_never_nan_text(tmp_path):
    claims = [Claim("held-bad-tolerance", "s", "held", 1.0, 1.0, NAN),
              Claim.test("failed-inf", "s", INF, "within", 1.0, 0.1, "MC",
                         {"per_point": [1.0, NAN, -INF]}),
              Claim.not_applicable("na", "s", "k-th Hermite coefficient is 0")]
    write_json(tmp_path / "claims.json", [c.to_dict() for c in claims])
    text = (tmp_path / "claims.json").read_text()
    assert "nan" not in text.lower() and "Infinity" not in text  # JSON's tokens, or text
    recs = {r["id"]: r for r in json.loads(text)}
    held = recs["held-bad-tolerance"]
    assert (held["held"], held["status"], held["tolerance"], held["ratio"]) == (
        False, "failed", None, None)
    assert held["measured"] == 1.0 and "tolerance is not a number" in held["details"]["non_finite"]
    inf = recs["failed-inf"]
    assert inf["measured"] is None and inf["details"]["non_finite"] == "measured is +infinity"
    assert inf["details"]["per_point"] == [1.0, None, None]
    na = recs["na"]
    assert na["measured"] is None and na["details"] == {"reason": "k-th Hermite coefficient is 0"}


def test_match_claim_with_a_nan_standard_error_fails():
    # gram-ridge held with a NaN tolerance: a NaN SE made "tol > 0" false and "dev > 0" false.
    c = match_claim("ridge", "s", 0.0, 0.0, NAN, error_model="SE of a median", bias=0.0)
    assert c.status == "failed" and math.isnan(c.tolerance)
    c = match_claim("m", "s", [1.0, 1.0], [1.0, 1.0], [0.1, NAN], error_model="MC")
    assert c.status == "failed" and c.details["tightest_x"] == 1.0
    assert match_claim("m", "s", [1.0, 1.0], [1.0, 1.0], [0.1, 0.1],
                       error_model="MC").status == "held"


def test_non_finite_results_are_flagged():
    rows = [{"kind": "simulation", "method": "NN", "metric": "risk", "x": 1.0, "value": v}
            for v in (0.5, INF, NAN)]
    rows.append({"kind": "theory", "method": "NT", "metric": "risk", "x": NAN, "value": 1.0})
    assert non_finite_summary(rows) == {"rows": 3, "series": ["simulation NN/risk",
                                                              "theory NT/risk"]}
    assert non_finite_summary(rows[:1]) is None


class InfiniteToy(ToyMean):
    """The toy experiment with an infinite second-moment estimate at the largest n."""

    id = "toy-inf"

    def run_unit(self, p, key: dict[str, Any], seed: int, device: torch.device,
                 prep: Any = None) -> list[dict[str, Any]]:
        rows = super().run_unit(p, key, seed, device, prep)
        if int(key["n"]) == max(p.ns):
            rows[0]["value"] = INF
        return rows


def test_a_run_with_an_infinite_result_does_not_hold_and_says_so(tmp_path):
    REGISTRY[InfiniteToy.id] = InfiniteToy()
    try:
        res = cli("reproduce", "toy-inf", "--out", str(tmp_path), "--strict")
    finally:
        REGISTRY.pop(InfiniteToy.id, None)
    assert res.exit_code == 1, res.output  # --strict: a claim did not hold
    exp_dir = tmp_path / "toy-inf"
    claim, = json.loads((exp_dir / "claims.json").read_text())
    assert claim["held"] is False and claim["measured"] is None
    assert "measured is +infinity" in claim["details"]["non_finite"]
    cfg = json.loads((exp_dir / "config.json").read_text())
    assert cfg["status"] == "complete"
    assert cfg["non_finite_values"] == {"rows": 2, "series": ["simulation mc/second_moment"]}
    assert "inf" in [line.split(",")[6] for line in
                     (exp_dir / "results.csv").read_text().splitlines()]


# ---- nichani-spectrum: the shift b ------------------------------------------------------------
@pytest.mark.parametrize("value, text", [
    ("1e308", "must be <= 20"), ("-1e308", "must be >= -20"), ("21", "must be <= 20"),
])
def test_spectrum_refuses_a_shift_that_underflows_the_features(tmp_path, value, text):
    res = cli("reproduce", "nichani-spectrum", "--out", str(tmp_path), "--set", f"b={value}")
    one_line_exit_2(res, "b", text)
    assert not (tmp_path / "nichani-spectrum").exists()


@pytest.mark.parametrize("value", ["0", "0.3", "-0.49"])
def test_spectrum_refuses_a_shift_near_zero(tmp_path, value):
    res = cli("reproduce", "nichani-spectrum", "--out", str(tmp_path), "--set", f"b={value}")
    one_line_exit_2(res, "--set b: must satisfy 0.5 <= |b| <= 20")
    assert not (tmp_path / "nichani-spectrum").exists()


def test_spectrum_bounds_are_where_the_plateaus_stay_ordered():
    """xi_1 > xi_0 > xi_2 > xi_3 > 0 (the sorted-order groups) at the edges of the range."""
    from lazylab.experiments.nichani.spectrum import B_MAX, B_MIN
    from lazylab.models.nichani import shifted_sigmoid
    from lazylab.theory.nichani import ntk_eigenvalues

    for d in (4, 8, 200):
        for b in (B_MIN, -B_MIN, B_MAX, -B_MAX):
            xi = ntk_eigenvalues(shifted_sigmoid(b), d, 3)
            assert xi[1] > xi[0] > xi[2] > xi[3] > 0, (d, b, xi)
    # At b = 0 sigma' is even: xi_0 and xi_2 vanish (to rounding), the order breaks.
    xi = ntk_eigenvalues(shifted_sigmoid(0.0), 8, 2)
    assert xi[0] < 1e-20 * xi[1] and xi[2] < 1e-20 * xi[1]


def test_spectrum_claims_on_an_all_zero_table_do_not_hold():
    """What b = 1e308 produced (every eigenvalue 0) no longer passes as agreement with the
    theory at an accepted b."""
    from lazylab.experiments import get_experiment

    exp = get_experiment("nichani-spectrum")
    p = exp.resolve("quick", {"d": 5, "m": 40, "N": 2000, "d_gram": 10, "m_gram": 400})
    rows = [dict(r, seed=0, value=0.0) for key in exp.units(p)
            for r in exp.run_unit(p, key, 1, torch.device("cpu"))]
    rows += [dict(r, seed=None) for r in exp.theory(p)]
    claims = {c.id: c for c in exp.claims(p, Results(rows))}
    assert not any(c.held for c in claims.values()), {k: c.status for k, c in claims.items()}
