"""Paper-scale cost of the batched paths: operations, flop and time per step, projections.

For each experiment with a batched path, at the paper's shapes (``--scale paper`` parameters)
with the number of steps capped, this measures in one run on the device at hand:

* ``ops/cfg-step``: aten operations (what a GPU pays one kernel launch for) per configuration
  and step, counted with a dispatch mode, one by one (``lazylab.train.fit`` on each
  configuration, as before batching) and batched (the packed grid); their ratio;
* ``CPU-s/step`` (process time) of one step of the whole grid both ways, and their ratio;
* ``flop/step`` of the batched step (``torch.utils.flop_counter``);
* the measured seconds per batched step here, and the projected paper-scale time: step time
  x the paper's steps x groups (one group per seed);
* the compute-bound floor: flop x steps / the GEMM throughput measured here;
* a one-H100 model of the same steps: max(operations x LAUNCH_SECONDS, flop / H100_FLOPS)
  per step (a step is bound by its launches or its arithmetic, whichever is slower), with the
  constants measured on the lent H100s (docs/paper-scale.md).

Run: ``.venv/bin/python bench/bench_paper_scale.py [--steps 20] [--device cpu|cuda]
[--threads 1]``. Recorded in ``runs/bench.json`` under ``paper_scale``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from _results import record
from lazylab.experiments import get_experiment
from lazylab.experiments.ghorbani import common as C
from lazylab.seeding import torch_generator
from lazylab.train import fit
from lazylab.train.packed import train_packed_quad

#: float32 GEMM throughput of the lent H100 (8192^3, TF32 off), flop/s.
H100_FLOPS = 51.5e12
#: Seconds per launched operation of eager PyTorch on the H100: a 39-operation Ghorbani SGD
#: step took 100-300 us there, 2.5-7.7 us an operation; the middle of that range.
LAUNCH_SECONDS = 5e-6


class OpCounter(TorchDispatchMode):
    """Counts aten operations dispatched (views and metadata queries included)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gemm_flops_per_second(device: torch.device, n: int = 2048) -> float:
    """Measured float32 GEMM throughput (best of 3)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    best = float("inf")
    for _ in range(3):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


@dataclass
class Row:
    experiment: str
    configs: int
    ops_alone: float
    ops_batched: float
    cpu_alone: float
    cpu_batched: float
    flop_step: float
    step_seconds: float
    paper_steps: int
    groups: int

    @property
    def projected(self) -> float:
        return self.step_seconds * self.paper_steps * self.groups

    @property
    def h100(self) -> float:
        """The one-H100 model of the paper's steps (module docstring)."""
        per_step = max(self.ops_batched * self.configs * LAUNCH_SECONDS,
                       self.flop_step / H100_FLOPS)
        return per_step * self.paper_steps * self.groups


def measure(fn: Callable[[int], Any], steps: int, device: torch.device,
            repeats: int = 3) -> tuple[float, float, float]:
    """(aten operations, process CPU seconds, wall seconds) per step of ``fn``: the
    difference between runs of ``steps`` and ``2 steps``, over ``steps`` (so set-up and the
    final evaluation, paid once per run of 10^5 steps, do not count); the times are the best
    of ``repeats`` runs of each length, which a busy machine only slows."""
    with OpCounter() as oc:
        fn(steps)
    ops1 = oc.n
    with OpCounter() as oc:
        fn(2 * steps)
    cpu = {steps: float("inf"), 2 * steps: float("inf")}
    wall = dict(cpu)
    for _ in range(repeats):
        for k in cpu:
            sync(device)
            c0, w0 = time.process_time(), time.perf_counter()
            fn(k)
            sync(device)
            cpu[k] = min(cpu[k], time.process_time() - c0)
            wall[k] = min(wall[k], time.perf_counter() - w0)
    return ((oc.n - ops1) / steps, max(cpu[2 * steps] - cpu[steps], 1e-9) / steps,
            max(wall[2 * steps] - wall[steps], 1e-9) / steps)


def flop_per_step(fn: Callable[[int], Any]) -> float:
    """flop of one step: the count at 2 steps minus the count at 1."""
    counts = []
    for k in (1, 2):
        with FlopCounterMode(display=False) as fc:
            fn(k)
        counts.append(fc.get_total_flops())
    return float(counts[1] - counts[0])


def ghorbani_width(exp_id: str, steps: int, device: torch.device) -> Row:
    """The NN width x step-size grid of a Ghorbani width figure at paper shapes."""
    exp = get_experiment(exp_id)
    p = exp.resolve("paper")
    prob = exp.problem(p)
    mg = prob.kind == "mg"
    widths = exp.widths(p)
    base = C.nn_lr(p.d, p.batch_size, p.nn_lr, exp.nn_lr_coef)
    lrs = [base * f for f in p.lr_factors]
    nets = [C.nn_init(prob, N, p.init_scale, torch_generator(N, device), device) for N in widths]
    sampler = prob.sampler()
    G = len(widths) * len(lrs)

    def alone(k: int) -> None:
        for net0 in nets:
            for lr in lrs:
                net = C.nn_init(prob, net0.W.shape[0], p.init_scale,
                                torch_generator(0, device), device)
                fit(net, sampler=sampler, loss="mse", optimizer="one_pass", lr=lr, steps=k,
                    batch_size=p.batch_size, log_steps=[k],
                    generator=torch_generator(1, device))

    def batched(k: int) -> None:
        train_packed_quad([n.W for n in nets for _ in lrs], [lr for _ in nets for lr in lrs],
                          a0=[n.a.detach() for n in nets for _ in lrs], train_second=mg,
                          sampler=sampler, steps=k, batch_size=p.batch_size,
                          generator=torch_generator(1, device))

    ops_a, cpu_a, _ = measure(alone, steps, device)
    ops_b, cpu_b, wall_b = measure(batched, steps, device)
    return Row(exp_id, G, ops_a / G, ops_b / G, cpu_a, cpu_b, flop_per_step(batched), wall_b,
               p.sgd_steps, 1)


BENCHES = {"ghorbani-qf-width": ghorbani_width, "ghorbani-mg-width": ghorbani_width}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10, help="capped steps per configuration")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None, help="experiment ids")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    peak = gemm_flops_per_second(device)
    print(f"device {device}, threads {a.threads}, float32 GEMM {peak / 1e9:.1f} GFLOP/s, "
          f"{a.steps} capped steps")
    head = (f"{'experiment':<20} {'cfgs':>5} {'ops/cfg-step alone':>18} {'batched':>8} "
            f"{'ratio':>6} {'CPU-s/step alone':>16} {'batched':>8} {'ratio':>6} {'GFLOP/step':>10} "
            f"{'s/step':>8} {'projected':>10} {'floor':>8} {'H100 model':>10}")
    print(head)
    out: dict[str, Any] = {"device": str(device), "gemm_flops": peak, "steps": a.steps}
    for exp_id, fn in BENCHES.items():
        if a.only and exp_id not in a.only:
            continue
        r = fn(exp_id, a.steps, device)
        floor = r.flop_step * r.paper_steps * r.groups / peak
        print(f"{r.experiment:<20} {r.configs:>5} {r.ops_alone:>18.1f} {r.ops_batched:>8.2f} "
              f"{r.ops_alone / r.ops_batched:>6.1f} {r.cpu_alone:>16.4f} {r.cpu_batched:>8.4f} "
              f"{r.cpu_alone / r.cpu_batched:>6.2f} {r.flop_step / 1e9:>10.2f} "
              f"{r.step_seconds:>8.4f} {r.projected / 60:>8.1f} m {floor / 60:>6.1f} m "
              f"{r.h100:>8.1f} s")
        out[r.experiment] = {
            "configs": r.configs, "ops_per_config_step_alone": r.ops_alone,
            "ops_per_config_step_batched": r.ops_batched,
            "ops_ratio": r.ops_alone / r.ops_batched, "cpu_seconds_per_step_alone": r.cpu_alone,
            "cpu_seconds_per_step_batched": r.cpu_batched, "cpu_ratio": r.cpu_alone / r.cpu_batched,
            "flop_per_step": r.flop_step, "seconds_per_step": r.step_seconds,
            "paper_steps": r.paper_steps, "groups": r.groups,
            "projected_seconds": r.projected, "floor_seconds": floor,
            "h100_model_seconds": r.h100}
    record("paper_scale", out, device)


if __name__ == "__main__":
    main()
