"""Captured training steps (lazylab.train.capture): the loop's bookkeeping around a graph, the
fallback, the switch. On a GPU the probe itself compares captured and eager runs bit for bit."""

from __future__ import annotations

import pytest
import torch

from lazylab.train import capture as cg
from lazylab.train import ensemble, packed
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


class CpuGraph:
    """Stands in for a CUDA graph on the CPU, with its semantics: the warm-up runs real steps,
    'recording' runs the step once more (a real recording computes nothing, but what the
    warm-up did is just as real), a replay runs the step and writes its outputs into the
    tensors the recording returned (a real replay's static outputs). So
    :func:`lazylab.train.capture.capture` itself, warm-up and restore included, is what runs."""

    made = 0

    def __init__(self, device):
        CpuGraph.made += 1
        self.step, self.out = None, None

    def register(self, generator):
        pass

    def warm_up(self, step):
        for _ in range(cg.WARMUP):
            step()

    def record(self, step):
        self.step = step
        self.out = step()
        return self.out

    def replay(self):
        new = self.step()
        for a, b in zip(torch.utils._pytree.tree_leaves(self.out),
                        torch.utils._pytree.tree_leaves(new), strict=True):
            a.copy_(b)


@pytest.mark.parametrize("lrs", [[0.01, 0.02, 0.005], [0.01, 50.0, 0.005]],
                         ids=["all-converge", "one-diverges"])
def test_replayed_steps_equal_eager_steps(monkeypatch, lrs):
    eager = _train(lrs, capture=False)
    monkeypatch.setattr(cg, "GRAPH", CpuGraph)
    CpuGraph.made = 0
    replayed = _train(lrs, capture=True)
    assert CpuGraph.made == (1 if eager.diverged.sum() == 0 else 2)  # recaptured after a drop
    for a, b in zip(eager.W, replayed.W, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(eager.diverged, replayed.diverged)
    assert torch.equal(eager.final_loss.isnan(), replayed.final_loss.isnan())


def test_a_step_that_cannot_be_captured_runs_eagerly(monkeypatch):
    def broken(step, device, generators=(), state=()):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(cg, "capture", broken)
    with pytest.warns(RuntimeWarning, match="capture of a packed loop failed .*runs eagerly"):
        a = _train([0.01, 0.02, 0.005], capture=True)
    b = _train([0.01, 0.02, 0.005], capture=False)
    assert all(torch.equal(x, y) for x, y in zip(a.W, b.W, strict=True))


def test_capture_is_off_on_a_cpu_and_by_the_switch(monkeypatch):
    assert not cg.enabled(torch.device("cpu"))
    monkeypatch.setenv(cg.ENV, "0")
    assert not cg.enabled(torch.device("cuda"))


def test_without_restoring_the_warm_up_a_captured_run_differs(monkeypatch):
    """The check above can fail: a capture that keeps its warm-up steps trains further."""
    eager = _train([0.01, 0.02, 0.005], capture=False)
    monkeypatch.setattr(cg, "GRAPH", CpuGraph)
    real = cg.capture

    def unrestored(step, device, generators=(), state=()):
        return real(step, device, generators, ())

    monkeypatch.setattr(cg, "capture", unrestored)
    kept = _train([0.01, 0.02, 0.005], capture=True)
    assert not all(torch.equal(a, b) for a, b in zip(eager.W, kept.W, strict=True))


def test_each_trainer_registers_its_own_probe():
    """capture.py imports no trainer: packed and ensemble put their probes in the registry
    when they are imported, under the kind of loop they pass to ``enabled``."""
    assert cg.PROBES["packed"] is packed._capture_probe
    assert cg.PROBES["grid"] is ensemble._capture_probe
    assert cg.register_probe("toy", packed._capture_probe) is packed._capture_probe
    assert cg.PROBES.pop("toy") is packed._capture_probe


def test_the_probe_runs_its_training_on_any_device():
    """The probe's two runs (eager and captured) are well-formed calls; on a CPU the captured
    one falls back to eager steps, saying so, and the two agree."""
    t_eager, w_eager = cg.PROBES["packed"](torch.device("cpu"), False)
    with pytest.warns(RuntimeWarning, match="runs eagerly"):
        t_graph, w_graph = cg.PROBES["packed"](torch.device("cpu"), True)
    assert all(torch.equal(a, b) for a, b in zip(w_eager, w_graph, strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_probe_on_this_gpu_decides_once():
    first = cg.capture_works("cuda")
    assert cg.capture_works("cuda") is first


def _grid(capture, lrs=(0.01, 0.05, 0.2)):
    from lazylab.models.resnet import ResNet3
    from lazylab.train.ensemble import train_grid

    g = torch.Generator().manual_seed(0)
    net = ResNet3(6, 3, 16, generator=g, dtype=torch.float64)
    X = torch.randn(60, 6, generator=g, dtype=torch.float64)
    Y = torch.randn(60, 3, generator=g, dtype=torch.float64)
    return train_grid(net, X, Y, lrs=list(lrs), wds=[0.0, 1e-3], epochs=30, batch_size=6,
                      generator=torch.Generator().manual_seed(1), capture=capture)


@pytest.mark.parametrize("lrs", [(0.01, 0.05, 0.2), (0.01, 0.05, 40.0)],
                         ids=["all-converge", "one-diverges"])
def test_replayed_grid_epochs_equal_eager_epochs(monkeypatch, lrs):
    eager = _grid(False, lrs)
    monkeypatch.setattr(cg, "GRAPH", CpuGraph)
    CpuGraph.made = 0
    replayed = _grid(True, lrs)
    diverged = bool(eager.train_loss.isnan().any())
    assert CpuGraph.made == (2 if diverged else 1)  # recaptured after configurations left
    for nm, v in eager.params.items():
        torch.testing.assert_close(v, replayed.params[nm], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(eager.train_loss, replayed.train_loss, rtol=0, atol=0,
                               equal_nan=True)


def test_the_grid_probe_runs_on_any_device():
    _, w_eager = cg.PROBES["grid"](torch.device("cpu"), False)
    with pytest.warns(RuntimeWarning, match="grid loop failed"):
        _, w_graph = cg.PROBES["grid"](torch.device("cpu"), True)
    assert all(bool(w.isfinite().all()) for w in w_eager)  # the probe times real training
    assert cg.same(w_eager, w_graph)
    assert not cg.same(w_eager, [w + 1e-6 for w in w_graph])
