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


Probe = Callable[[torch.device, bool], tuple[float, list[torch.Tensor]]]

#: The probes, by the kind of loop they stand for. Each trainer registers its own when it is
#: imported (:func:`register_probe`): ``"packed"`` by :mod:`lazylab.train.packed`, ``"grid"``
#: by :mod:`lazylab.train.ensemble`; this module imports neither.
PROBES: dict[str, Probe] = {}


def register_probe(kind: str, probe: Probe) -> Probe:
    """Register ``probe(device, captured) -> (seconds, trained parameters)`` as the probe of
    one kind of loop (:func:`capture_works` runs it eager and captured); returns ``probe``."""
    PROBES[kind] = probe
    return probe


def timed(dev: torch.device, run: Callable[[], list[torch.Tensor]]
          ) -> tuple[float, list[torch.Tensor]]:
    """(seconds, parameters) of ``run()``, the device synchronised before and after (a
    probe's clock)."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    out = run()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return time.perf_counter() - t0, out


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
