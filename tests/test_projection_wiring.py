"""bench/_projection.py hands its options down to every measured group: ``--fast`` (no timed
runs) and the H100 model's GEMM rate of an experiment that declares TF32 at paper scale.
Both were once dropped on the way (every group timed, every group priced at float32)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _projection as P  # noqa: E402


@pytest.fixture
def spy(monkeypatch):
    """Every ``_measure_group`` call's rate and fast flag; timed runs refused."""
    seen: list[tuple[float, bool]] = []
    real = P._measure_group

    def measure(call, cap, tcap, device, rate=P.H100_FLOPS, fast=False):
        seen.append((rate, fast))
        return real(call, cap, tcap, device, rate, fast)

    def no_timing(*a, **k):
        raise AssertionError("a timed run in a --fast projection")

    monkeypatch.setattr(P, "_measure_group", measure)
    monkeypatch.setattr(P, "_timed", no_timing)
    return seen


@pytest.mark.parametrize("declared, rate", [({}, P.H100_FLOPS),
                                            ({"paper": "tf32"}, P.H100_TF32_FLOPS)])
def test_fast_and_the_tf32_rate_reach_every_group(toy, spy, monkeypatch, declared, rate):
    monkeypatch.setattr(type(toy), "precision", declared)
    pr = P.project(toy.id, cap=2, sample=3, device=torch.device("cpu"), limit=60, fast=True)
    assert pr.sampled == len(spy) >= 2
    assert spy == [(rate, True)] * len(spy)
