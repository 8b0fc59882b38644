"""Benchmark: one full-batch GD step (forward + backward + update) of a width-m two-layer net,
as a share of the GEMM roofline measured in the same run.

f(x) = m^-1/2 sum_r a_r relu(w_r . x), first layer trained (Arora et al. 2019's setting), loss
(1/2) sum (f - y)^2. A step is two (n x d) x (d x m) GEMMs (Z = X W^T forward, grad W = dZ^T X
backward; 4 n d m flops) plus O(n m) elementwise work. The roofline is the measured rate of a
bare X @ W.T of the same shapes and dtype; the share is (4 n d m / step time) / that rate
(target >= 70% in float32). Timed through the library (``lazylab.train.fit``, optimizer "gd")
and as a bare hand-written step; both interleaved with the GEMM, medians of ``--repeats``.

Sizes: ``--sizes n,d,m`` (repeatable); default Arora et al.'s paper scale n = 10^4, d = 784,
m = 10^4 and a smaller 2000, 784, 2000.

Usage: python bench/bench_gd_step.py [--sizes 10000,784,10000] [--device auto] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from _results import record
from lazylab.device import resolve_device
from lazylab.models import TwoLayerNet
from lazylab.train import fit


def _timed(fn: Callable[[], object], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def bench(n: int, d: int, m: int, device: torch.device, dtype: torch.dtype, repeats: int,
          steps: int) -> dict[str, float]:
    g = torch.Generator(device=device).manual_seed(0)
    X = torch.nn.functional.normalize(torch.randn(n, d, generator=g, device=device,
                                                  dtype=dtype), dim=1)
    y = torch.sign(torch.randn(n, generator=g, device=device, dtype=dtype))
    net = TwoLayerNet(d, m, generator=g, device=device, dtype=dtype)
    W = net.W.detach()
    flops = 4.0 * n * d * m

    def gemm() -> object:
        return X @ W.T

    def library() -> object:
        # `steps` updates; the final logged loss costs one extra forward, measured separately
        return fit(net, data=(X, y), loss="half_sse", optimizer="gd", lr=1e-4, steps=steps,
                   log_steps=[steps], check_every=0)

    def forward() -> object:
        with torch.no_grad():
            return net(X)

    Wb = W.clone().requires_grad_(True)
    a, s = net.a, net.scale

    def bare() -> object:
        Z = X @ Wb.T
        out = torch.relu(Z) @ a * s
        (gW,) = torch.autograd.grad(0.5 * (out - y).square().sum(), Wb)
        with torch.no_grad():
            Wb.sub_(gW, alpha=1e-4)
        return gW

    for fn in (gemm, library, forward, bare):
        fn()  # warm-up
    t: dict[str, list[float]] = {"gemm": [], "library": [], "forward": [], "bare": []}
    for _ in range(repeats):
        for name, fn in (("gemm", gemm), ("library", library), ("forward", forward),
                         ("bare", bare)):
            t[name].append(_timed(fn, device))
    med = {k: statistics.median(v) for k, v in t.items()}
    rate = 2.0 * n * d * m / med["gemm"]
    step_lib = max(med["library"] - med["forward"], 1e-12) / steps
    return {"n": n, "d": d, "m": m, "gemm_gflops": rate / 1e9,
            "step_library_s": step_lib, "step_bare_s": med["bare"],
            "share_library": flops / step_lib / rate, "share_bare": flops / med["bare"] / rate}


#: A share above 1 is impossible (the GEMMs alone reach the roofline): the medians were
#: disturbed, e.g. by other jobs on the device; the row says so instead of reporting it.
INVALID = "  INVALID: share > 1, timing disturbed (other jobs on the device?); rerun when idle"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", action="append", default=None,
                    help="n,d,m (repeatable); default 10000,784,10000 and 2000,784,2000")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="GD steps per timed fit() call")
    args = ap.parse_args()
    device = resolve_device(args.device)
    dtype = getattr(torch, args.dtype)
    sizes = [tuple(int(v) for v in s.split(",")) for s in
             (args.sizes or ["10000,784,10000", "2000,784,2000"])]
    print(f"device={device} dtype={args.dtype} threads={torch.get_num_threads()} "
          f"repeats={args.repeats} (medians; target share >= 0.70)")
    rows = []
    for n, d, m in sizes:
        r = bench(n, d, m, device, dtype, args.repeats, args.steps)
        rows.append(r)
        print(f"n={n:6d} d={d:4d} m={m:6d}: GEMM {r['gemm_gflops']:8.1f} GFLOP/s | GD step "
              f"via fit {r['step_library_s'] * 1e3:9.1f} ms = {r['share_library']:.2f} of "
              f"roofline | bare step {r['step_bare_s'] * 1e3:9.1f} ms = {r['share_bare']:.2f}"
              + (INVALID if max(r["share_library"], r["share_bare"]) > 1.05 else ""),
              flush=True)
    record("gd_step", {"dtype": args.dtype, "sizes": rows,
                       "min_share_library": min(r["share_library"] for r in rows),
                       "target_share": 0.70}, device)


if __name__ == "__main__":
    main()
