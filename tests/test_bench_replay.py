"""bench/bench_replay.py times an epoch as the difference of runs of E and 2E epochs. That
difference is the replayed epochs' cost only if both runs capture, once each, at the same
epoch: a grid is captured after its eager warm-up epochs and only with enough steps left, which
is why the script refuses E below WARMUP + 10."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_replay as B  # noqa: E402
from lazylab.train import capture as cg  # noqa: E402
from test_capture import CpuGraph  # noqa: E402


@pytest.mark.parametrize("epochs, graphs", [(cg.WARMUP + 10, 1), (2 * (cg.WARMUP + 10), 1),
                                            (cg.WARMUP + 9, 0)])
def test_a_timed_run_captures_once_from_the_warm_up(monkeypatch, epochs, graphs):
    monkeypatch.setattr(cg, "GRAPH", CpuGraph)
    run, configs, steps = B.grid_runner(torch.device("cpu"), "2layer", 4, "all")
    assert (configs, steps) == (150, 10)  # the paper grid, N = 500 in batches of 50
    CpuGraph.made = 0
    run(epochs, True)
    assert CpuGraph.made == graphs


def test_the_kernel_count_leaves_out_views():
    with B.Kernels() as k:
        a = torch.ones(3, 4)
        a.t().unsqueeze(0).sum()
    assert (k.ops, k.kernels) == (4, 2)  # ones, t, unsqueeze, sum
