"""Fixed-shape training steps captured once in a CUDA graph and replayed.

A small network's step on a GPU is a few dozen kernels that each do little work; launched one
by one from Python, the step costs its launches (about 5 us each), not its arithmetic. A CUDA
graph records the kernels of one step once and replays them with one launch. What a step reads
and writes must stay at the same addresses (parameters updated in place, batches drawn into the
graph's own outputs), and every random draw must come from a generator registered with the
graph, so that a replay draws what an eager step would have drawn.

Each device is probed once per kind of loop (:func:`capture_works`): a small training run,
eager and captured from the same seeds, must give identical parameters, and the captured run
must be faster; otherwise that kind of loop runs eagerly. ``LAZYLAB_CAPTURE=0`` turns capture
off. On a CPU there is nothing to capture and loops run eagerly.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

__all__ = ["ENV", "GRAPH", "MIN_STEPS", "PROBES", "capture", "capture_works", "enabled",
           "fell_back", "grid_probe_run", "probe_run", "same"]

#: Environment switch: "0" runs every loop eagerly.
ENV = "LAZYLAB_CAPTURE"
#: Loops shorter than this run eagerly (capture and warm-up cost about as much as this many
#: eager steps).
MIN_STEPS = 200
#: Eager steps before the capture (CUDA's allocator and cuBLAS handles settle in them).
WARMUP = 3


def enabled(device: torch.device, kind: str = "packed") -> bool:
    """Capture is on for this device and kind of loop (``"packed"``: the packed trainers,
    ``"grid"``: the lr x wd grids): CUDA, not switched off, and that kind's probe passed."""
    if os.environ.get(ENV, "1").strip() == "0" or device.type != "cuda":
        return False
    return capture_works(str(device), kind)


class _CudaGraph:
    """The CUDA pieces of :func:`capture`: warm-up on a side stream, recording, replay."""

    def __init__(self, device: torch.device):
        self.device = device
        self.graph = torch.cuda.CUDAGraph()

    def register(self, generator: torch.Generator) -> None:
        register = getattr(self.graph, "register_generator_state", None)
        if register is None:
            raise RuntimeError("this torch cannot capture draws from a custom generator")
        register(generator)

    def warm_up(self, step: Callable[[], Any]) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                step()
        torch.cuda.current_stream(self.device).wait_stream(side)

    def record(self, step: Callable[[], Any]) -> Any:
        with torch.cuda.graph(self.graph):
            return step()

    def replay(self) -> None:
        self.graph.replay()


#: The graph implementation (tests substitute one that runs on a CPU).
GRAPH: Callable[[torch.device], Any] = _CudaGraph


def capture(step: Callable[[], Any], device: torch.device,
            generators: tuple[torch.Generator, ...] = (),
            state: tuple[torch.Tensor, ...] = ()) -> Callable[[], Any]:
    """Record ``step`` in a CUDA graph; returns ``replay()``, which runs the recorded step and
    returns its (static) outputs.

    ``step`` is first run :data:`WARMUP` times (on a side stream, as CUDA graphs need), then
    recorded. Both change what the step updates in place, so the tensors ``state`` (every
    tensor the step writes and later reads: parameters, momentum) and the ``generators``' states
    are saved before and restored after: the first replay is the step the caller was about to
    take, and a captured loop takes the same steps as an eager one.

    Raises RuntimeError (or what CUDA raises) when the step cannot be captured, the state
    restored; callers fall back to eager steps.
    """
    saved = [t.clone() for t in state]
    drawn = [g.get_state() for g in generators]
    try:
        graph = GRAPH(device)
        for g in generators:
            graph.register(g)
        graph.warm_up(step)
        out = graph.record(step)
    finally:  # also when the capture fails: the caller goes on eagerly from the same state
        with torch.no_grad():
            for t, s in zip(state, saved, strict=True):
                t.copy_(s)
        for g, st in zip(generators, drawn, strict=True):
            g.set_state(st)

    def replay() -> Any:
        graph.replay()
        return out

    return replay


def fell_back(kind: str, exc: BaseException) -> None:
    """Say (once per kind and cause, as a RuntimeWarning) that a loop whose device passed the
    probe could not be captured and runs eagerly: slower, with the same numbers."""
    warnings.warn(f"CUDA graph capture of a {kind} loop failed ({type(exc).__name__}: {exc}); "
                  f"it runs eagerly (same results, slower)", RuntimeWarning, stacklevel=3)


def _timed(dev: torch.device, run: Callable[[], list[torch.Tensor]]
           ) -> tuple[float, list[torch.Tensor]]:
    """(seconds, parameters) of ``run()``, the device synchronised before and after."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    out = run()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return time.perf_counter() - t0, out


def probe_run(dev: torch.device, captured: bool) -> tuple[float, list[torch.Tensor]]:
    """The packed trainer's probe run: seconds and trained parameters of a small Ghorbani-type
    grid (2 members, 4 MIN_STEPS steps), eager or captured."""
    from lazylab.train.packed import train_packed_quad

    gen = torch.Generator(device=dev)

    def sampler(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        X = torch.randn(n, 16, generator=g, device=dev)
        return X, X[:, 0] ** 2 - 1

    W0 = [0.1 * torch.randn(k, 16, generator=gen.manual_seed(0), device=dev) for k in (4, 8)]
    return _timed(dev, lambda: train_packed_quad(
        W0, [0.01, 0.02], sampler=sampler, steps=4 * MIN_STEPS, batch_size=32,
        generator=torch.Generator(dev).manual_seed(1), capture=captured).W)


def grid_probe_run(dev: torch.device, captured: bool) -> tuple[float, list[torch.Tensor]]:
    """The learning-rate x weight-decay grid's probe run (:func:`lazylab.train.ensemble.
    train_grid`, 3resnet, 6 configurations, 40 epochs of 10 steps), eager or captured."""
    from lazylab.models.resnet import ResNet3
    from lazylab.train.ensemble import train_grid

    g = torch.Generator(device=dev).manual_seed(0)
    net = ResNet3(12, 6, 32, generator=g, device=dev)
    X = torch.randn(200, 12, generator=g, device=dev)
    Y = torch.randn(200, 6, generator=g, device=dev)
    return _timed(dev, lambda: list(train_grid(
        net, X, Y, lrs=[0.005, 0.01, 0.02], wds=[0.0, 1e-3], epochs=40, batch_size=20,
        generator=torch.Generator(dev).manual_seed(1), capture=captured).params.values()))


#: The probes, by the loop they stand for.
PROBES: dict[str, Callable[[torch.device, bool], tuple[float, list[torch.Tensor]]]] = {
    "packed": probe_run, "grid": grid_probe_run}


@cache
def capture_works(device: str, kind: str = "packed") -> bool:
    """The once-per-device probe of one kind of loop (module docstring): the captured run
    equals the eager run bit for bit and is faster."""
    dev, run = torch.device(device), PROBES[kind]
    try:
        run(dev, False), run(dev, True)  # warm both paths
        t_eager, w_eager = run(dev, False)
        t_graph, w_graph = run(dev, True)
    except Exception:  # noqa: BLE001 - any failure means: run eagerly
        return False
    return same(w_eager, w_graph) and t_graph < t_eager


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Equal bit for bit, NaN (a diverged member) equal to NaN."""
    return all(x.shape == y.shape and bool(((x == y) | (x.isnan() & y.isnan())).all())
               for x, y in zip(a, b, strict=True))
