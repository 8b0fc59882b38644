"""The registry's paper-scale estimates come from the benchmark's projections where it ran."""

from __future__ import annotations

import json

import pytest

from lazylab.experiments import PAPER_ESTIMATES, REGISTRY, all_experiments


def _file() -> dict:
    return json.loads(PAPER_ESTIMATES.read_text())


def test_every_projection_names_an_experiment_and_is_used():
    all_experiments()
    data = _file()
    assert data, "bench/bench_paper_scale.py --write-estimates has not been run"
    for exp_id, v in data.items():
        assert exp_id in REGISTRY, exp_id
        assert v["paper_h100_seconds"] > 0
        assert REGISTRY[exp_id].est_seconds["paper"] == pytest.approx(
            max(1.0, v["paper_h100_seconds"] + v.get("paper_h100_assembly_seconds", 0.0)))
