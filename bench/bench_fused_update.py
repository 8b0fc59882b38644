"""The momentum update of the lr x weight-decay grids: two operations against one kernel.

After a grid step's GEMMs have deposited ``b = mu b + g``, the rest of the step is
``b += wd theta; theta -= lr b`` over the (G, T) stacked parameters
(:mod:`lazylab.train.fused_update`). The H100 model of ``bench_paper_scale.py`` prices it as
one kernel making four passes over (G, T) floats: what the fused Triton kernel does where the
device's probe passed. Two in-place operations make six. At the widths where the 3layer grids
are bound by memory traffic (m >= 500: T = m^2 + ...) this update is half of an epoch's bytes.

For G configurations and T parameters each this prints, on the device at hand:

* seconds of the two operations and of the fused kernel (the best of ``--reps`` after a warm
  call; "-" where the probe failed, on a CPU or without Triton), and their ratio;
* the bandwidth each achieves: 6 and 4 passes of G T floats over its seconds;
* the largest difference of the fused result from the two operations', in units in the last
  place (the probe allows 4).

Run: ``.venv/bin/python bench/bench_fused_update.py [--device cuda] [--G 150]
[--T 10000 100000 1000000]``. Recorded in ``runs/bench.json`` under ``fused_update``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from _projection import sync
from _results import record
from lazylab.train import fused_update as fu


def best_seconds(fn, args: list[torch.Tensor], reps: int) -> float:
    fn(*args)
    best = float("inf")
    for _ in range(reps):
        sync(args[0].device)
        t0 = time.perf_counter()
        fn(*args)
        sync(args[0].device)
        best = min(best, time.perf_counter() - t0)
    return best


def ulps(a: torch.Tensor, b: torch.Tensor) -> float:
    eps = torch.finfo(a.dtype).eps
    return ((a - b).abs() / (1 + b.abs())).max().item() / eps


def inputs(G: int, T: int, device: torch.device) -> list[torch.Tensor]:
    """The probe's random theta, buf, wd and lr (float32, seed 0)."""
    return fu._probe_inputs(G, T, device, torch.float32)


def row(G: int, T: int, device: torch.device, fused: bool, reps: int) -> dict[str, Any]:
    floats = G * T * 4
    args = inputs(G, T, device)
    two = best_seconds(fu._two_ops, args, reps)
    out: dict[str, Any] = {"G": G, "T": T, "two_ops_seconds": two,
                           "two_ops_GB_per_s": 6 * floats / two / 1e9}
    if fused:
        launch = fu.triton_launcher()
        one = best_seconds(launch, inputs(G, T, device), reps)
        ref, got = inputs(G, T, device), inputs(G, T, device)
        fu._two_ops(*ref)
        launch(*got)
        out.update(fused_seconds=one, fused_GB_per_s=4 * floats / one / 1e9,
                   ratio=two / one, ulps=max(ulps(got[0], ref[0]), ulps(got[1], ref[1])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--G", type=int, default=150, help="configurations (paper grid: 150)")
    ap.add_argument("--T", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                    help="parameters a configuration (3layer at m = 1000: about 10^6)")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if a.G < 1 or min(a.T) < 1 or a.reps < 1:
        ap.error(f"--G, --T and --reps must be at least 1; got {a.G}, {a.T}, {a.reps}")
    device = torch.device(a.device)
    fused = fu.fused_works(str(device))
    print(f"device {device}: fused kernel {'in use' if fused else 'not in use (probe false)'}")
    print(f"{'G':>5} {'T':>9} {'two ops':>10} {'GB/s':>7} {'fused':>10} {'GB/s':>7} "
          f"{'ratio':>6} {'ulps':>5}")
    rows = []
    for T in a.T:
        r = row(a.G, T, device, fused, a.reps)
        rows.append(r)
        tail = (f"{r['fused_seconds'] * 1e3:8.3f}ms {r['fused_GB_per_s']:7.1f} "
                f"{r['ratio']:6.2f} {r['ulps']:5.1f}" if fused else f"{'-':>10}")
        print(f"{a.G:5d} {T:9d} {r['two_ops_seconds'] * 1e3:8.3f}ms "
              f"{r['two_ops_GB_per_s']:7.1f} {tail}")
    record("fused_update", {"fused": fused, "rows": rows}, device)


if __name__ == "__main__":
    main()
