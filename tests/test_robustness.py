"""``lazylab robustness`` on the toy experiment: a claim that holds only for small d shows
exactly that; the table resumes after an interruption with identical output."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from lazylab.cli import app
from lazylab.experiments.base import Claim
from lazylab.robustness import default_replicates, plan_settings, run_robustness
from toy_experiment import ToyMean, registered

CPU = torch.device("cpu")
ENV = {"COLUMNS": "200", "LAZYLAB_DEBUG": ""}


@pytest.fixture
def toy(monkeypatch):
    """The toy with a second claim that holds iff d <= 4 (a deliberately d-dependent claim)."""
    orig = ToyMean.claims

    def claims(self, p, results):
        return [*orig(self, p, results),
                Claim.test("small-d", "d is at most 4", float(p.d), "within", 2.0, 2.0,
                           "exact")]

    monkeypatch.setattr(ToyMean, "claims", claims)
    monkeypatch.setattr(ToyMean, "robustness_axes", {"d": [2, 3, 8], "sigma": [0.5, 1.0, 2.0]},
                        raising=False)
    with registered() as exp:
        yield exp


def test_settings_are_one_at_a_time_around_the_defaults(toy):
    labels = [s.label for s in plan_settings(toy, "quick")]
    assert labels == ["default", "d=2", "d=8", "sigma=0.5", "sigma=2.0"]
    grid = plan_settings(toy, "quick", {"d": ["2", "8"], "sigma": ["1", "2"]})
    assert [s.label for s in grid] == ["d=2, sigma=1", "d=2, sigma=2", "d=8, sigma=1",
                                      "d=8, sigma=2"]
    assert default_replicates(10.0, 5) == 5 and default_replicates(100.0, 5) == 1
    assert default_replicates(60.0, 5) == 3  # 3 x 5 x 60 s = 15 minutes


def test_robustness_table_shows_where_each_claim_holds(toy, tmp_path):
    res = CliRunner().invoke(app, ["robustness", "toy-mean", "--seeds", "3", "--out",
                                   str(tmp_path)], env=ENV)
    assert res.exit_code == 0, res.output
    d = tmp_path / "toy-mean"
    with open(d / "robustness.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 5 * 3 * 2  # settings x seeds x claims
    small = {(r["setting"], r["seed"]): r["status"] for r in rows if r["claim"] == "small-d"}
    assert {k for k, v in small.items() if v == "failed"} == {("d=8", str(s)) for s in range(3)}
    summary = json.loads((d / "robustness.json").read_text())["summary"]
    assert summary["small-d"] == "holds at 4/5 settings; fails at d=8 with 0/3 seeds"
    assert "small-d: holds at 4/5 settings; fails at d=8 with 0/3 seeds" in res.stdout
    # the closing line names the real table, not a placeholder
    assert f"robustness in {d / 'robustness.csv'}, report: " in res.stdout
    assert "/ID/" not in res.stdout
    # Replicate 0 of the default setting is exactly `lazylab reproduce`'s run.
    second = [r for r in rows if r["claim"] == "second-moment" and r["setting"] == "default"]
    ref = CliRunner().invoke(app, ["reproduce", "toy-mean", "--out", str(tmp_path / "ref")],
                             env=ENV)
    assert ref.exit_code == 0, ref.output
    (claim,) = [c for c in json.loads((tmp_path / "ref" / "toy-mean" / "claims.json")
                                      .read_text()) if c["id"] == "second-moment"]
    assert float(second[0]["measured"]) == claim["measured"]
    assert len({r["measured"] for r in second}) == 3  # the seeds are independent reruns
    assert (d / "robustness.png").is_file() and (d / "robustness.svg").is_file()
    md = (tmp_path / "report.md").read_text()
    assert "## Robustness" in md and "fails at d=8 with 0/3 seeds" in md


def test_robustness_resumes_after_an_interruption_with_identical_output(toy, tmp_path):
    full = tmp_path / "full"
    run_robustness(toy, "quick", full, device=CPU, seeds=2)
    cut = tmp_path / "cut"

    class Stop:
        seen = 0

        def started(self, spec, pending, total):
            pass

        def unit_done(self, spec, unit):
            Stop.seen += 1
            if Stop.seen == 7:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_robustness(toy, "quick", cut, device=CPU, seeds=2, progress=Stop())
    ToyMean.calls = 0
    run_robustness(toy, "quick", cut, device=CPU, seeds=2, resume=True)
    assert ToyMean.calls == 5 * 3 * 2 * 2 - 7  # only the units not stored before the cut
    assert (cut / "toy-mean" / "robustness.csv").read_bytes() == \
        (full / "toy-mean" / "robustness.csv").read_bytes()
    assert math.isfinite(float(next(csv.DictReader(open(full / "toy-mean" / "robustness.csv")))
                               ["measured"]))
