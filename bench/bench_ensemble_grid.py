"""Cost of a 12-configuration (lr x wd) grid trained as one batched ensemble vs one configuration.

Allen-Zhu & Li (2019), Sec. 8 protocol at the quick sizes of ``allenzhu-performance``: T1 data
(d = 30, k = 15), N = 500, batch 50, the three learners at width m. Target: the grid
costs at most 4x one configuration on CPU. Both timings are taken in the same run, interleaved,
best of ``--repeats``.

Run: ``.venv/bin/python bench/bench_ensemble_grid.py [--m 128] [--epochs 5] [--repeats 3]``
(m = 128 is the largest quick width). Also printed: the speed-up over a Python loop running
the 12 configurations one by one (12 x one configuration / the grid). Recorded in
``runs/bench.json`` under ``ensemble_grid``.
"""

from __future__ import annotations

import argparse
import time

import torch

from _results import record
from lazylab.data import HierarchicalParity
from lazylab.models.mlp import MLP2, MLP3
from lazylab.models.resnet import ResNet3
from lazylab.train.ensemble import decade_grid, train_grid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    X = (2 * torch.randint(0, 2, (500, 30), generator=g) - 1).float()
    Y = HierarchicalParity(alpha=0.3, beta=1.0, d=30)(X)
    lrs, wds = decade_grid(-3, -2)[:4], [0.0, 1e-4, 1e-3]          # 4 x 3 = 12 configurations
    print(f"m = {a.m}, N = 500, batch 50, epochs = {a.epochs}, threads = {a.threads}")
    print(f"{'learner':<10} {'mode':<7} {'1 config [s]':>12} {'12 configs [s]':>14} {'ratio':>6}")
    worst = 0.0
    rows = []
    for name, cls in (("3resnet", ResNet3), ("3layer", MLP3), ("2layer", MLP2)):
        for mode, lin in (("all", False), ("NTK", True)):
            net = cls(30, 15, a.m, generator=torch.Generator().manual_seed(1))
            # warm-up: the first torch.func call of a process pays a one-off tracing cost
            train_grid(net, X[:100], Y[:100], lrs=lrs, wds=wds, epochs=1, linearize=lin,
                       generator=torch.Generator().manual_seed(2))
            t1, t12 = float("inf"), float("inf")
            for _ in range(a.repeats):
                for cfg, store in ((1, "one"), (12, "grid")):
                    lr = lrs[:1] if cfg == 1 else lrs
                    wd = wds[:1] if cfg == 1 else wds
                    t = time.perf_counter()
                    train_grid(net, X, Y, lrs=lr, wds=wd, epochs=a.epochs, linearize=lin,
                               generator=torch.Generator().manual_seed(2))
                    dt = time.perf_counter() - t
                    if store == "one":
                        t1 = min(t1, dt)
                    else:
                        t12 = min(t12, dt)
            worst = max(worst, t12 / t1)
            rows.append({"learner": name, "mode": mode, "one_config_s": t1, "grid12_s": t12,
                         "ratio": t12 / t1, "speedup_vs_loop": 12 * t1 / t12})
            print(f"{name:<10} {mode:<7} {t1:12.3f} {t12:14.3f} {t12 / t1:6.2f}"
                  f"   (vs a loop of 12: {12 * t1 / t12:.1f}x faster)")
    print(f"worst ratio 12-config grid / 1 config: {worst:.2f} (target <= 4)")
    record("ensemble_grid", {"m": a.m, "epochs": a.epochs, "threads": a.threads,
                             "rows": rows, "worst_ratio": worst, "target": 4.0},
           torch.device("cpu"))


if __name__ == "__main__":
    main()
