"""Thread defaults on a quiet and on a loaded machine: wall and CPU seconds of one quick
experiment for each torch thread count and OpenMP wait policy.

``lazylab reproduce EXPERIMENT --threads T`` runs in a subprocess for T in 1..cores, with
``OMP_WAIT_POLICY`` as lazylab now sets it (PASSIVE, unless the user sets it) and as libgomp
defaults without it (spinning; the variable set to an empty string). "Loaded" runs
``--burners`` processes per core spinning in Python beside it (3 by default: a load average
near 7 on 2 cores, as on the shared node where 181 s against 15.7 s was seen at load 5-11).
The rule checked: the default (threads = the cores, at most 8, with lazylab's wait policy)
costs at most 1.5x the wall time of the best thread count under the same condition.

Run: ``.venv/bin/python bench/bench_threads.py [--experiment ghorbani-mg-samples]``. Recorded
in ``runs/bench.json`` under ``threads``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch

from _results import record


def burn() -> None:
    while True:
        pass


def run(experiment: str, threads: int, policy: str | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one reproduce in a fresh output folder."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    with tempfile.TemporaryDirectory() as out:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "lazylab", "reproduce", experiment, "--out", out,
                        "--threads", str(threads)], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="ghorbani-mg-samples")
    ap.add_argument("--burners", type=int, default=3, help="spinning processes per core")
    ap.add_argument("--conditions", nargs="+", default=["quiet", "loaded"],
                    choices=["quiet", "loaded"])
    a = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    default = max(1, min(8, cores))
    policies = {"lazylab (PASSIVE)": None, "libgomp default": ""}
    out: dict[str, Any] = {"experiment": a.experiment, "cores": cores}
    print(f"{a.experiment}, {cores} cores; default threads {default}")
    print(f"{'condition':<8} {'wait policy':<18} {'threads':>7} {'wall s':>8} {'CPU s':>8}")
    out["burners_per_core"] = a.burners
    for cond in a.conditions:
        burners = ([multiprocessing.Process(target=burn, daemon=True)
                    for _ in range(cores * a.burners)] if cond == "loaded" else [])
        for b in burners:
            b.start()
        try:
            res = {}
            for name, pol in policies.items():
                for t in range(1, cores + 1):
                    wall, cpu = run(a.experiment, t, pol)
                    res[(name, t)] = (wall, cpu)
                    print(f"{cond:<8} {name:<18} {t:>7} {wall:>8.1f} {cpu:>8.1f}", flush=True)
        finally:
            for b in burners:
                b.terminate()
        best = min(w for w, _ in res.values())
        ours = res[("lazylab (PASSIVE)", default)][0]
        old = res[("libgomp default", default)][0]
        print(f"{cond}: default / best wall = {ours / best:.2f} (rule: <= 1.5); "
              f"libgomp's default policy / best = {old / best:.2f}")
        out[cond] = {f"{k[0]}, {k[1]} threads": {"wall": v[0], "cpu": v[1]}
                     for k, v in res.items()}
        out[cond]["default_over_best"] = ours / best
        out[cond]["old_default_over_best"] = old / best
    record("threads", out, torch.device("cpu"))


if __name__ == "__main__":
    main()
