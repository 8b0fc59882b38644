"""bench/_parts.py: an experiment's projection in disjoint parts (one panel per process) adds up
into its estimate only once the stored parts are disjoint and cover its paper units; anything
else given with ``--set`` (a changed size or epoch count) is refused as a part."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _parts as parts  # noqa: E402

EXP = "allenzhu-performance"  # paper panels ["a", "b"], 65 units each


def test_a_panel_is_a_part_and_both_cover_the_experiment():
    assert parts.check_part(EXP, {"panels": "a"}) == "panels=a"
    assert not parts.covers(EXP, ["panels=a"])
    assert parts.covers(EXP, ["panels=a", "panels=b"])
    assert parts.covers(EXP, ["panels=a,b"])
    assert not parts.covers(EXP, ["panels=a,b", "panels=b"])  # panel (b) twice
    # split by width, panel (a)'s kernel baselines (no width) would be in both parts
    assert not parts.covers(EXP, ["panels=a widths=20,50",
                                  "panels=a widths=100,200,500,1000,2000", "panels=b"])


@pytest.mark.parametrize("overrides", [{"epochs": "3"}, {"widths": "20,64"}, {"n_all": "600"}])
def test_a_change_of_size_is_not_a_part(overrides):
    with pytest.raises(ValueError, match=f"--set {next(iter(overrides))}="):
        parts.check_part(EXP, overrides)


def test_write_estimates_adds_the_parts_once_they_cover(tmp_path, monkeypatch):
    import bench_paper_scale as B

    monkeypatch.setattr(B, "ESTIMATES", tmp_path / "est.json")
    B.ESTIMATES.write_text(json.dumps({EXP: {"paper_h100_seconds": 951.0}}))
    cpu = torch.device("cpu")

    def one(h100: float, here: float) -> dict:
        return {EXP: {"h100_model_seconds": h100, "seconds_here": here}}

    B.write_estimates(one(100.04, 10.0), cpu, quiet=True, part="panels=a")
    got = json.loads(B.ESTIMATES.read_text())[EXP]
    assert got["paper_h100_seconds"] == 951.0  # one panel is not the experiment
    B.write_estimates(one(200.0, 20.0), cpu, quiet=True, part="panels=b")
    got = json.loads(B.ESTIMATES.read_text())[EXP]
    assert got["paper_h100_seconds"] == pytest.approx(300.0)
    assert got["paper_cpu_seconds"] == pytest.approx(30.0)
    B.write_estimates(one(250.0, 25.0), cpu, quiet=True, part="panels=b")  # b measured again
    assert json.loads(B.ESTIMATES.read_text())[EXP]["paper_h100_seconds"] == pytest.approx(350.0)
    B.write_estimates(one(400.0, 40.0), cpu, quiet=True)  # a whole projection replaces parts
    got = json.loads(B.ESTIMATES.read_text())[EXP]
    assert got["paper_h100_seconds"] == 400.0 and "parts" not in got


def test_a_sum_holds_only_what_every_part_measured(tmp_path, monkeypatch):
    """The graph model's seconds are summed once both parts have them (a part stored before
    that column existed has none), the eager model's seconds in any case."""
    import bench_paper_scale as B

    monkeypatch.setattr(B, "ESTIMATES", tmp_path / "est.json")
    cpu = torch.device("cpu")

    def one(h100: float, graph: float | None) -> dict:
        v = {"h100_model_seconds": h100, "seconds_here": 1.0}
        return {EXP: v if graph is None else {**v, "h100_model_graph_seconds": graph}}

    B.write_estimates(one(100.0, None), cpu, quiet=True, part="panels=a")
    B.write_estimates(one(200.0, 150.0), cpu, quiet=True, part="panels=b")
    got = json.loads(B.ESTIMATES.read_text())[EXP]
    assert got["paper_h100_seconds"] == 300.0 and "paper_h100_graph_seconds" not in got
    B.write_estimates(one(100.0, 60.0), cpu, quiet=True, part="panels=a")
    got = json.loads(B.ESTIMATES.read_text())[EXP]
    assert got["paper_h100_graph_seconds"] == 210.0


@pytest.mark.parametrize("items, message", [
    (["panels"], "--set 'panels': expected KEY=VALUE"),
    (["=a"], "--set '=a': expected KEY=VALUE"),
])
def test_set_without_a_key_and_value_is_named(items, message):
    with pytest.raises(ValueError) as e:
        parts.parse_overrides(items)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize("overrides, message", [
    ({"panel": "a"}, "--set panel: allenzhu-performance has no parameter 'panel'"),
    ({"panels": "c"}, "--set panels=c: panels[0]"),
    ({"epochs": "-3"}, "--set epochs=-3: epochs"),
])
def test_a_bad_override_is_one_line_naming_it(overrides, message):
    with pytest.raises(ValueError) as e:
        parts.check_overrides(EXP, overrides)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
