"""Training step of a linearized network against the network itself (issue target: <= 3x).

A 3-layer tanh MLP (d -> m -> m -> 1) and its first-order Taylor model
(``lazylab.models.LinearizedModel``, generic ``torch.func`` path) are trained by the same SGD
step (forward, mean squared loss, backward, update) on the same batch. Printed: seconds per
step of the network, of the linearized model (a jvp forward and a vjp backward), and of the
reverse-over-forward path it replaced (autograd through the jvp), and the ratios to the
network. Best of ``--repeats`` blocks of ``--steps`` steps, all timed in one run.

Run: ``.venv/bin/python bench/bench_linearized.py [--m 1000] [--batch 256] [--threads 1]``.
Recorded in ``runs/bench.json`` under ``linearized``.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from _results import record
from lazylab.models import LinearizedModel


def step_seconds(model: nn.Module, X: torch.Tensor, y: torch.Tensor, steps: int,
                 repeats: int) -> float:
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    def one() -> None:
        opt.zero_grad()
        ((model(X) - y) ** 2).mean().backward()
        opt.step()

    one()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            one()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    net = nn.Sequential(nn.Linear(a.d, a.m), nn.Tanh(), nn.Linear(a.m, a.m), nn.Tanh(),
                        nn.Linear(a.m, 1))
    X = torch.randn(a.batch, a.d, generator=g)
    y = torch.randn(a.batch, 1, generator=g)
    lin = LinearizedModel(net)
    slow = LinearizedModel(net)
    slow._fast_linear = lambda X: False  # the reverse-over-forward path, for comparison
    t_net = step_seconds(net, X, y, a.steps, a.repeats)
    t_lin = step_seconds(lin, X, y, a.steps, a.repeats)
    t_slow = step_seconds(slow, X, y, a.steps, a.repeats)
    print(f"3-layer tanh MLP d={a.d} m={a.m} batch={a.batch}, {a.threads} thread(s)")
    print(f"network                 {t_net * 1e3:8.2f} ms/step")
    print(f"linearized (jvp + vjp)  {t_lin * 1e3:8.2f} ms/step  {t_lin / t_net:5.2f}x "
          "(target <= 3)")
    print(f"linearized (autograd through jvp) {t_slow * 1e3:8.2f} ms/step  "
          f"{t_slow / t_net:5.2f}x")
    record("linearized", {"network_s": t_net, "linearized_s": t_lin, "ratio": t_lin / t_net,
                          "reverse_over_forward_s": t_slow,
                          "reverse_over_forward_ratio": t_slow / t_net,
                          "d": a.d, "m": a.m, "batch": a.batch}, torch.device("cpu"))


if __name__ == "__main__":
    main()
