"""A packed Ghorbani step with its per-member sums by ``index_add`` and by runs of equal sizes.

Every lazylab run sets ``torch.use_deterministic_algorithms(True)``. On CUDA that turns
``index_add`` into ``index_put_(accumulate=True)``, which sorts the row indices and adds each
member's rows one after another; the packed trainers (:mod:`lazylab.train.packed`) sum their
members' hidden units that way on a CPU, and on CUDA by one reduction per run of equal-sized
members (:data:`lazylab.train.packed._SEGMENT_SUMS`). For two paper-shaped packs (d = 450,
batch 100) this prints the seconds a step takes both ways, deterministic mode on, on the
device at hand, and their ratio:

* ``samples``: the NN step-size search of ``ghorbani-mg-samples`` (4 members of 180 units);
* ``widths``: the NN grid of ``ghorbani-mg-width`` (15 widths from 45 to 4500, 4 step sizes
  each: 60 members, 63,756 units).

Each time is the best of three runs of ``--steps`` steps after a warm step. On an H200 with
``index_add`` a samples step took about 206 us where the model priced 134-140, and the width
grid stored no unit in 193 s.

Run: ``.venv/bin/python bench/bench_segment_sums.py [--device cuda] [--steps 50]
[--threads 1]``. Recorded
in ``runs/bench.json`` under ``segment_sums``.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from _projection import sync
from _results import record
from lazylab.train import packed

D, BATCH = 450, 100
PACKS = {"samples": [180] * 4,
         "widths": [int(n) for n in np.geomspace(45, 4500, 15).round() for _ in range(4)]}


def make_pack(sizes: list[int], device: torch.device) -> packed._Pack:
    g = torch.Generator(device=device).manual_seed(0)
    first = [torch.randn(n, D, generator=g, device=device) / math.sqrt(D) for n in sizes]
    second = [torch.zeros(n, device=device) for n in sizes]
    G = len(sizes)
    return packed._QuadPackBoth(first, second, torch.zeros(G, device=device),
                                torch.full((G,), 1e-4, device=device), list(range(G)))


def seconds_a_step(sizes: list[int], segment: bool, steps: int, device: torch.device) -> float:
    old = packed._SEGMENT_SUMS
    packed._SEGMENT_SUMS = segment
    try:
        pack = make_pack(sizes, device)
    finally:
        packed._SEGMENT_SUMS = old
    g = torch.Generator(device=device).manual_seed(1)
    X = torch.randn(BATCH, D, generator=g, device=device)
    y = torch.randn(BATCH, generator=g, device=device)
    mult = torch.ones((), device=device)
    pack.step(X, y, mult)
    best = math.inf
    for _ in range(3):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            pack.step(X, y, mult)
        sync(device)
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.steps < 1 or a.threads < 1:
        ap.error(f"--steps and --threads must be at least 1; got {a.steps} and {a.threads}")
    device = torch.device(a.device)
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    out = {}
    print(f"{'pack':>8} {'members':>8} {'units':>7} {'index_add':>11} {'runs':>11} {'ratio':>7}")
    for name, sizes in PACKS.items():
        t_add = seconds_a_step(sizes, False, a.steps, device)
        t_runs = seconds_a_step(sizes, True, a.steps, device)
        out[name] = {"members": len(sizes), "units": sum(sizes), "index_add_seconds": t_add,
                     "runs_seconds": t_runs}
        print(f"{name:>8} {len(sizes):>8} {sum(sizes):>7} {t_add * 1e6:>9.1f}us "
              f"{t_runs * 1e6:>9.1f}us {t_add / t_runs:>7.2f}")
    record("segment_sums", out, device)


if __name__ == "__main__":
    main()
