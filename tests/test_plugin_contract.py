"""A plugin contract that cannot be fooled.

* A toolkit slope claim whose tolerance is wider than ``|expected|`` (its band contains slope
  0, y not depending on x) is inconclusive by default, with its numbers in the reason.
* ``check_experiment`` reports such a loose tolerance as a failed check that names the claim.
* The contract's verdicts do not depend on the experiment id (which sets the seeds): the
  example plugin under two ids gets the same verdict from every check.
* ``lazylab show`` prints a plugin's own figure and paper key.

The subject is the example plugin, ``examples/my_experiment``, imported from the repository
whether or not it is installed.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from lazylab.experiments.base import Results, row
from lazylab.experiments.toolkit import (
    NO_COMPETING_LAW,
    all_of,
    default_resolution,
    k_eff,
    recorded_slopes,
    series_slope_claim,
    slope_claim,
)
from lazylab.testing import (
    check_every_claim_can_fail,
    check_experiment,
    check_slope_claims_resolve,
    experiment_checks,
    run_in_memory,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "my_experiment"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

from lazylab_my_experiment import NTKConvergence  # noqa: E402

# Four widths, one seed: the residual SE carries the t factor of 2 dof.
WIDTHS = [100.0, 400.0, 1600.0, 6400.0]
WIGGLE = [1.0, 3.0, 0.3, 2.0]  # one noisy draw per width, fixed


def _loose_y() -> list[float]:
    return [m**-0.5 * w for m, w in zip(WIDTHS, WIGGLE, strict=True)]


# ------------------------------------------------------------------ the toolkit's default rule
def test_a_tolerance_wider_than_the_expected_slope_is_inconclusive():
    c = slope_claim("rate", "y ~ m^-1/2", WIDTHS, _loose_y(), -0.5, bias=0.05,
                    error_model="one draw per width")
    assert c.status == "not_applicable"
    reason = c.details["reason"]
    assert reason.startswith("inconclusive: slope ")
    assert f"{k_eff(3.0, 2):.3g} x SE" in reason and "from 4 points" in reason
    assert "distance 0.5 between slope -0.5 and slope 0 (y not depending on x)" in reason
    # the same fit, with the rule turned off, held: what a plugin got before
    off = slope_claim("rate", "y ~ m^-1/2", WIDTHS, _loose_y(), -0.5, bias=0.05,
                      error_model="one draw per width", resolution=NO_COMPETING_LAW)
    assert off.held and off.tolerance > 0.5
    assert off.tolerance == pytest.approx(0.05 + k_eff(3.0, 2) * off.details["se"], rel=1e-12)


def test_a_band_that_excludes_slope_0_keeps_its_verdict_and_details():
    y = [m**-0.5 * (1 + 0.01 * (-1) ** i) for i, m in enumerate(WIDTHS)]
    c = slope_claim("rate", "y ~ m^-1/2", WIDTHS, y, -0.5, bias=0.05, error_model="e")
    assert c.held and c.tolerance < 0.5
    assert "kind" not in c.details  # no consistency demotion by default
    same = slope_claim("rate", "y ~ m^-1/2", WIDTHS, y, -0.5, bias=0.05, error_model="e",
                       resolution=NO_COMPETING_LAW)
    assert same.to_dict() == c.to_dict()


def test_default_resolution_is_the_distance_to_slope_0():
    assert default_resolution(-0.5) == 0.5 and default_resolution(2.0) == 2.0
    assert default_resolution(0.0) == math.inf  # a flat prediction has no default competitor
    assert default_resolution(math.nan) == math.inf
    flat = slope_claim("f", "flat", WIDTHS, [1.0, 1.5, 0.7, 1.2], 0.0, bias=0.05,
                       error_model="e")
    assert flat.status == "held" and flat.tolerance > 1.0


def test_series_slope_claims_and_their_all_of_parts_are_recorded():
    res = Results([dict(row("net", "m", m, "err", m**-0.5 * w), seed=0)
                   for m, w in zip(WIDTHS, WIGGLE, strict=True)])
    with recorded_slopes() as log:
        part = series_slope_claim("p", "", res, "net", "err", -0.5, bias=0.05, error_model="e")
        whole = all_of("both", "", [part])
    assert part.status == "not_applicable" and whole.status == "not_applicable"
    (r,) = log
    assert (r.cid, r.points, r.expected, r.resolution, r.stated) == ("p", 4, -0.5, 0.5, False)
    assert r.tolerance > 0.5 and r.reason == part.details["reason"]
    with recorded_slopes() as inner:
        slope_claim("q", "", WIDTHS, _loose_y(), -0.5, bias=0.05, error_model="e",
                    resolution=1.0)
    assert [(s.cid, s.stated, s.resolution) for s in inner] == [("q", True, 1.0)]
    assert log == [r]  # the outer block was closed before


# ---------------------------------------------------------------- plugins that fool the contract
class LooseNTK(NTKConvergence):
    """The example's claim on four widths, one fixed noisy draw each (no random draw at all):
    the t-widened residual SE gives a tolerance far wider than 1/2."""

    id = "my-loose-ntk"
    smoke = {"n": 10, "widths": [100, 400, 1600, 6400]}

    def run_unit(self, p: Any, key: dict[str, Any], seed: int, device: torch.device,
                 prep: Any = None) -> list[dict[str, Any]]:
        m = int(key["m"])
        return [row("empirical NTK", "m", m, "relative_error",
                    m**-0.5 * WIGGLE[WIDTHS.index(float(m))])]


class TwoPointNTK(LooseNTK):
    """A claim fitted to two widths: no residual, so no SE from one seed."""

    id = "my-two-point-ntk"

    def claims(self, p: Any, results: Results) -> list[Any]:
        s = results.series("empirical NTK", "relative_error")
        return [slope_claim("rate", self.claim_statements["rate"], s.x[:2], s.mean[:2], -0.5,
                            bias=0.05, error_model="two draws")]


def test_check_experiment_reports_a_loose_tolerance():
    run = run_in_memory(LooseNTK(), dict(LooseNTK.smoke))
    assert run.claims["rate"].status == "not_applicable"
    with pytest.raises(AssertionError) as e:
        check_slope_claims_resolve(run)
    msg = str(e.value)
    assert msg.startswith("loose tolerance, the claim cannot tell its law from slope 0")
    assert "rate: inconclusive: slope " in msg and "from 4 points" in msg
    with pytest.raises(AssertionError, match=r"^my-loose-ntk:slope-claims-resolve: loose "):
        check_experiment(LooseNTK)


def test_check_experiment_reports_a_slope_without_a_residual():
    run = run_in_memory(TwoPointNTK(), dict(TwoPointNTK.smoke))
    with pytest.raises(AssertionError, match=r"fewer than 3 points .*: rate \(2 points\)"):
        check_slope_claims_resolve(run)


def test_a_stated_resolution_is_the_claims_own_choice():
    class Stated(LooseNTK):
        id = "my-stated-ntk"

        def claims(self, p: Any, results: Results) -> list[Any]:
            s = results.series("empirical NTK", "relative_error")
            return [slope_claim("rate", self.claim_statements["rate"], s.x, s.mean, -0.5,
                                bias=0.05, error_model="e", resolution=NO_COMPETING_LAW)]

    run = run_in_memory(Stated(), dict(Stated.smoke))
    assert run.claims["rate"].held
    check_slope_claims_resolve(run)  # not held to the default competitor
    with pytest.raises(AssertionError, match=r"claims no perturbation makes fail: \['rate'\]"):
        check_every_claim_can_fail(run)  # but a band this wide survives every tilt


# ------------------------------------------------------------------ the same verdicts for any id
def _verdicts(exp: NTKConvergence) -> dict[str, str]:
    out = {}
    for check in experiment_checks(exp):
        try:
            check()
            out[check.name.split(":", 1)[1]] = "passed"
        except AssertionError as e:
            out[check.name.split(":", 1)[1]] = f"failed: {str(e).split(':', 1)[0]}"
    return out


def test_the_contract_does_not_depend_on_the_id():
    renamed = type("Renamed", (NTKConvergence,), {"id": "my-ntk-renamed"})
    assert _verdicts(NTKConvergence()) == _verdicts(renamed()) == {
        name: "passed" for name in ("declarations", "units", "smoke-rows-and-claims",
                                    "every-claim-can-fail", "slope-claims-resolve", "figure",
                                    "show")}
    # the seeds did change with the id: the smoke numbers differ
    a = run_in_memory(NTKConvergence(), dict(NTKConvergence.smoke)).claims["rate"]
    b = run_in_memory(renamed(), dict(renamed.smoke)).claims["rate"]
    assert a.measured != b.measured


def test_the_loose_plugin_fails_the_same_checks_under_any_id():
    renamed = type("LooseRenamed", (LooseNTK,), {"id": "my-loose-renamed"})
    got = _verdicts(LooseNTK())
    assert got == _verdicts(renamed())
    assert {k for k, v in got.items() if v != "passed"} == {"slope-claims-resolve"}


# ------------------------------------------------------------------------------- show
def test_show_prints_the_plugins_own_figure_and_paper():
    from lazylab.cli import app
    from lazylab.experiments import REGISTRY, all_experiments

    all_experiments()
    exp = type("Shown", (NTKConvergence,), {"id": "my-ntk-shown", "figure": "Fig. T",
                                            "paper": "mine"})()
    REGISTRY[exp.id] = exp
    try:
        res = CliRunner().invoke(app, ["show", exp.id], env={"COLUMNS": "250"})
    finally:
        REGISTRY.pop(exp.id, None)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == "my-ntk-shown: Fig. T, paper mine"
    builtin = CliRunner().invoke(app, ["show", "arora-spectrum"], env={"COLUMNS": "250"})
    assert builtin.output.splitlines()[0].startswith(
        "arora-spectrum: Fig. 1(b)(d) of Arora, Du, Hu, Li, Wang 2019, ")
    assert builtin.output.splitlines()[0].endswith("(arora)")
