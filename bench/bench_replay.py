"""What a launch costs: an Allen-Zhu grid epoch eager and replayed from a CUDA graph.

The one-H100 model of ``bench_paper_scale.py`` prices every dispatched operation of a
launch-bound loop at ``LAUNCH_SECONDS`` (5 us, from an eager Ghorbani step on the H100), views
included: eager PyTorch dispatches those too. On a GPU the lr x weight-decay grids replay their
epochs from a CUDA graph (:mod:`lazylab.train.capture`), which launches only the kernels (the
operations that are not views) and no Python. This measures, for one grid of
``allenzhu-performance`` at paper shapes (d = 30, k = 15, batch 50, N = 500: an epoch of ten
steps; 150 configurations) at a launch-bound width:

* operations and kernels an epoch (counted: dispatched aten operations, and those not views);
* seconds an epoch eager, and replayed where the device captures (CUDA);
* seconds an operation eager and a kernel replayed: the model's ``LAUNCH_SECONDS`` against
  what a captured loop pays.

Each time is the difference of runs of ``E`` and ``2 E`` epochs over ``E`` (set-up and the
capture itself cancel), the best of three. On a CPU it prints the eager columns only.

Run: ``.venv/bin/python bench/bench_replay.py [--device cuda] [--m 20] [--mode all|NTK]
[--epochs 20]``. Recorded in ``runs/bench.json`` under ``replay``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from _projection import LAUNCH_SECONDS, OpCounter, sync
from _results import record
from lazylab.experiments import get_experiment
from lazylab.experiments.allenzhu.common import make_learner
from lazylab.seeding import torch_generator
from lazylab.train import capture as cg
from lazylab.train.ensemble import train_grid


class Kernels(OpCounter):
    """The projection's operation counter, read as dispatched aten operations (``ops``) and
    those of them that launch a kernel (``kernels``: not views)."""

    @property
    def ops(self) -> int:
        return self.n


def grid_runner(device: torch.device, arch: str, m: int, mode: str):
    """run(epochs, captured): one paper-shaped grid of ``allenzhu-performance`` panel (a)."""
    p = get_experiment("allenzhu-performance").resolve("paper")
    k = p.d // 2
    net = make_learner(arch, p.d, k, m, untied=False, init=p.init,
                       generator=torch_generator(0), device=device)  # built on the CPU
    X = torch.randn(p.n_all, p.d, generator=torch_generator(1, device), device=device)
    Y = torch.randn(p.n_all, k, generator=torch_generator(2, device), device=device)
    # step sizes small enough that no configuration diverges (a divergence recaptures)
    lrs = [1e-4 * (1 + i) for i in range(15)]
    wds = list(p.wds)

    def run(epochs: int, captured: bool) -> None:
        train_grid(net, X, Y, lrs=lrs, wds=wds, epochs=epochs, batch_size=p.batch_size,
                   linearize=(mode == "NTK"), generator=torch_generator(3, device),
                   max_group=p.max_group, capture=captured)

    return run, len(lrs) * len(wds), p.n_all // p.batch_size


def per_epoch(run, epochs: int, captured: bool, device: torch.device) -> float:
    """Seconds an epoch: (best time of 2E epochs - best time of E) / E."""
    best = {epochs: float("inf"), 2 * epochs: float("inf")}
    for _ in range(3):
        for e in best:
            sync(device)
            t0 = time.perf_counter()
            run(e, captured)
            sync(device)
            best[e] = min(best[e], time.perf_counter() - t0)
    return max(best[2 * epochs] - best[epochs], 0.0) / epochs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--arch", default="3resnet", choices=("3resnet", "3layer", "2layer"))
    ap.add_argument("--m", type=int, default=20, help="width (launch-bound: 20 to 200)")
    ap.add_argument("--mode", default="all", choices=("all", "NTK"))
    ap.add_argument("--epochs", type=int, default=20,
                    help="E: epochs timed at E and 2E (both captured from the 4th; at least 13)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.epochs < cg.WARMUP + 10:  # both runs capture at epoch WARMUP, 10 epochs or more left
        ap.error(f"--epochs must be at least {cg.WARMUP + 10} (a grid is captured after "
                 f"{cg.WARMUP} eager epochs and only with 10 epochs left); got {a.epochs}")
    if a.m < 2:
        ap.error(f"--m must be at least 2; got {a.m}")
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    run, G, steps = grid_runner(device, a.arch, a.m, a.mode)
    counts = []
    for e in (2, 4):
        with Kernels() as kc:
            run(e, False)
        counts.append((kc.ops, kc.kernels))
    ops = (counts[1][0] - counts[0][0]) / 2
    kernels = (counts[1][1] - counts[0][1]) / 2
    eager = per_epoch(run, a.epochs, False, device)
    can = device.type == "cuda" and cg.capture_works(str(device), "grid")
    replay = per_epoch(run, a.epochs, True, device) if can else None
    print(f"device {device}, {a.arch} ({a.mode}) m = {a.m}, {G} configurations, {steps} steps "
          f"an epoch")
    print(f"operations an epoch {ops:.0f}, kernels (not views) {kernels:.0f}")
    print(f"eager: {eager * 1e3:.3f} ms an epoch, {eager / ops * 1e6:.2f} us an operation "
          f"(the model: {LAUNCH_SECONDS * 1e6:.1f} us)")
    out: dict[str, Any] = {"arch": a.arch, "mode": a.mode, "m": a.m, "configs": G,
                           "ops_per_epoch": ops, "kernels_per_epoch": kernels,
                           "eager_seconds_per_epoch": eager,
                           "eager_seconds_per_op": eager / ops,
                           "model_launch_seconds": LAUNCH_SECONDS}
    if replay is not None:
        print(f"replayed: {replay * 1e3:.3f} ms an epoch, {replay / kernels * 1e6:.2f} us a "
              f"kernel; eager / replayed {eager / replay:.2f}")
        out.update(replay_seconds_per_epoch=replay, replay_seconds_per_kernel=replay / kernels)
    else:
        print("replayed: not measured (no CUDA graph capture on this device)")
    record("replay", out, device)


if __name__ == "__main__":
    main()
