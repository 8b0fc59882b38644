"""Captured training steps (lazylab.train.capture): the loop's bookkeeping around a graph, the
fallback, the switch. On a GPU the probe itself compares captured and eager runs bit for bit."""

from __future__ import annotations

import pytest
import torch

from lazylab.train import capture as cg
from lazylab.train.packed import train_packed_quad


def _sampler(n: int, gen: torch.Generator):
    X = torch.randn(n, 5, generator=gen, dtype=torch.float64)
    return X, X[:, 0] ** 2 - 1


def _train(lrs, capture, steps=400):
    g = torch.Generator().manual_seed(0)
    W0 = [0.1 * torch.randn(k, 5, generator=g, dtype=torch.float64) for k in (3, 4, 2)]
    return train_packed_quad(W0, lrs, sampler=_sampler, steps=steps, batch_size=16,
                             generator=torch.Generator().manual_seed(1), capture=capture,
                             schedule=lambda t: 1.0 if t < 300 else 0.1, check_every=10)


class FakeGraph:
    """Stands in for a CUDA graph on the CPU: 'recording' does not run the step, a replay
    runs it (as a real graph would)."""

    def __init__(self):
        self.captures = 0

    def __call__(self, step, device, generators=()):
        self.captures += 1
        return step


@pytest.mark.parametrize("lrs", [[0.01, 0.02, 0.005], [0.01, 50.0, 0.005]],
                         ids=["all-converge", "one-diverges"])
def test_replayed_steps_equal_eager_steps(monkeypatch, lrs):
    eager = _train(lrs, capture=False)
    fake = FakeGraph()
    monkeypatch.setattr(cg, "capture", fake)
    replayed = _train(lrs, capture=True)
    assert fake.captures == (1 if eager.diverged.sum() == 0 else 2)  # recaptured after a drop
    for a, b in zip(eager.W, replayed.W, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(eager.diverged, replayed.diverged)
    assert torch.equal(eager.final_loss.isnan(), replayed.final_loss.isnan())


def test_a_step_that_cannot_be_captured_runs_eagerly(monkeypatch):
    def broken(step, device, generators=()):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(cg, "capture", broken)
    a, b = _train([0.01, 0.02, 0.005], capture=True), _train([0.01, 0.02, 0.005], capture=False)
    assert all(torch.equal(x, y) for x, y in zip(a.W, b.W, strict=True))


def test_capture_is_off_on_a_cpu_and_by_the_switch(monkeypatch):
    assert not cg.enabled(torch.device("cpu"))
    monkeypatch.setenv(cg.ENV, "0")
    assert not cg.enabled(torch.device("cuda"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_probe_on_this_gpu_decides_once():
    first = cg.capture_works("cuda")
    assert cg.capture_works("cuda") is first
