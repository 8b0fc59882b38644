"""Fixed-shape training steps captured once in a CUDA graph and replayed.

A small network's step on a GPU is a few dozen kernels that each do little work; launched one
by one from Python, the step costs its launches (about 5 us each), not its arithmetic. A CUDA
graph records the kernels of one step once and replays them with one launch. What a step reads
and writes must stay at the same addresses (parameters updated in place, batches drawn into the
graph's own outputs), and every random draw must come from a generator registered with the
graph, so that a replay draws what an eager step would have drawn.

Each device is probed once (:func:`capture_works`): a small packed training run, eager and
captured from the same seeds, must give identical parameters, and the captured steps must be
faster; otherwise every loop runs eagerly. ``LAZYLAB_CAPTURE=0`` turns capture off. On a CPU
there is nothing to capture and loops run eagerly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import cache
from typing import Any

import torch

__all__ = ["ENV", "MIN_STEPS", "capture", "capture_works", "enabled"]

#: Environment switch: "0" runs every loop eagerly.
ENV = "LAZYLAB_CAPTURE"
#: Loops shorter than this run eagerly (capture and warm-up cost about as much as this many
#: eager steps).
MIN_STEPS = 200
#: Eager steps before the capture (CUDA's allocator and cuBLAS handles settle in them).
WARMUP = 3


def enabled(device: torch.device) -> bool:
    """Capture is on for this device: CUDA, not switched off, and the probe passed."""
    if os.environ.get(ENV, "1").strip() == "0" or device.type != "cuda":
        return False
    return capture_works(str(device))


def capture(step: Callable[[], Any], device: torch.device,
            generators: tuple[torch.Generator, ...] = ()) -> Callable[[], Any]:
    """Run ``step`` eagerly :data:`WARMUP` times on a side stream, then record one call in a
    CUDA graph; returns ``replay()`` which runs the recorded step and returns its (static)
    outputs. The warm-up calls are real steps; the recording is not (a replay is).

    Raises RuntimeError (or what CUDA raises) when the step cannot be captured; callers fall
    back to eager steps.
    """
    graph = torch.cuda.CUDAGraph()
    for g in generators:
        register = getattr(graph, "register_generator_state", None)
        if register is None:
            raise RuntimeError("this torch cannot capture draws from a custom generator")
        register(g)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    with torch.cuda.graph(graph):
        out = step()

    def replay() -> Any:
        graph.replay()
        return out

    return replay


@cache
def capture_works(device: str) -> bool:
    """The once-per-device probe (module docstring)."""
    from lazylab.train.packed import train_packed_quad

    dev = torch.device(device)
    gen = torch.Generator(device=dev)

    def sampler(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        X = torch.randn(n, 16, generator=g, device=dev)
        return X, X[:, 0] ** 2 - 1

    W0 = [0.1 * torch.randn(k, 16, generator=gen.manual_seed(0), device=dev) for k in (4, 8)]

    def run(captured: bool) -> tuple[float, list[torch.Tensor]]:
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        res = train_packed_quad(W0, [0.01, 0.02], sampler=sampler, steps=4 * MIN_STEPS,
                                batch_size=32, generator=torch.Generator(dev).manual_seed(1),
                                capture_steps=captured)
        torch.cuda.synchronize(dev)
        return time.perf_counter() - t0, res.W

    try:
        run(False), run(True)  # warm both paths
        t_eager, w_eager = run(False)
        t_graph, w_graph = run(True)
    except Exception:  # noqa: BLE001 - any failure means: run eagerly
        return False
    same = all(torch.equal(a, b) for a, b in zip(w_eager, w_graph, strict=True))
    return same and t_graph < t_eager
