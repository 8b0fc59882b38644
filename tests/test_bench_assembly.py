"""bench/_assembly.py: the assembly of a run's outputs (results.csv, claims, figure), which a
measured run's wall time includes and the projection's groups do not, is timed on a quick
run's rows and priced as host work; the benchmark stores it beside the projection and the
registry's estimate adds it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _assembly as A  # noqa: E402
import _projection as P  # noqa: E402


def test_assembly_is_timed_on_a_quick_runs_rows(toy, tmp_path):
    from lazylab.runner import ExecutionPolicy, resolve_spec, run_experiment
    from lazylab.runner.outputs import read_results
    from lazylab.store import Store

    spec = resolve_spec(toy, "quick", {}, None, torch.device("cpu"), ExecutionPolicy(threads=1))
    run_experiment(spec, tmp_path, Store(tmp_path / "s.sqlite"))
    rows = len(read_results(tmp_path / toy.id / "results.csv").rows)
    r = A.assembly(toy.id, torch.device("cpu"))
    assert r.experiment == toy.id and r.rows == rows > 0
    assert 0 < r.cpu < 60 and r.h100 == pytest.approx(r.cpu / P.HOST_SPEEDUP, rel=1e-12)
    with pytest.raises(ValueError, match="repeats must be a positive integer"):
        A.assembly(toy.id, torch.device("cpu"), repeats=0)


def test_the_stored_assembly_is_kept_and_added(toy, tmp_path, monkeypatch):
    """``--part assembly --write-estimates`` adds its key to an entry and keeps the rest; a
    later projection keeps it; the check against a measured row reads it when this run did not
    measure it."""
    import argparse

    import bench_paper_scale as B

    monkeypatch.setattr(B, "ESTIMATES", tmp_path / "est.json")
    B.ESTIMATES.write_text(json.dumps({toy.id: {"paper_h100_seconds": 10.0}}))
    monkeypatch.setattr(B, "assembly", lambda exp_id, device: A.Assembly(exp_id, 7, 2.0))
    a = argparse.Namespace(only=[toy.id], write_estimates=True)
    out = B.assembly_table(a, torch.device("cpu"))
    assert out[toy.id]["h100_model_seconds"] == 2.0 / P.HOST_SPEEDUP
    got = json.loads(B.ESTIMATES.read_text())[toy.id]
    assert got == {"paper_h100_seconds": 10.0, "paper_h100_assembly_seconds": 0.5}
    B.write_estimates({toy.id: {"h100_model_seconds": 12.0, "seconds_here": 1.0}},
                      torch.device("cpu"), quiet=True)
    got = json.loads(B.ESTIMATES.read_text())[toy.id]
    assert got["paper_h100_seconds"] == 12.0 and got["paper_h100_assembly_seconds"] == 0.5
    assert B.assembly_h100(toy.id, None) == 0.5
    assert B.assembly_h100(toy.id, {toy.id: {"h100_model_seconds": 0.25}}) == 0.25
    assert B.assembly_h100("no-such-experiment", None) == 0.0


def test_host_work_on_a_cuda_machine_is_priced_as_measured(monkeypatch):
    """The 4x host speed-up stands for the GPU machine's host against this CPU; a projection
    run on that machine measures its host itself, so there the assembly costs its CPU seconds."""
    monkeypatch.setattr(P, "HOST_SPEEDUP", P.HOST_SPEEDUP)  # restored after the test
    assert P.price_host_for(torch.device("cuda")) == 1.0
    assert A.Assembly("x", 1, 2.0).h100 == 2.0
    assert P.h100_seconds(0, 0, host=3.0) == 3.0
    assert P.price_host_for(torch.device("cpu")) == 4.0
    assert A.Assembly("x", 1, 2.0).h100 == 0.5 and P.h100_seconds(0, 0, host=3.0) == 0.75
