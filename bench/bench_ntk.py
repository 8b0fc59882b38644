"""Benchmark: closed-form relu NTK (Arora et al.'s H_inf) vs the bare Gram matrix X @ X.T.

H_inf(x, z) = x.z (pi - arccos(cos angle)) / (2 pi) needs the Gram matrix plus a few
elementwise passes, so its cost should stay close to that of X @ X.T (target: <= 1.2x).
Prints the median time of each over a few interleaved repeats and their ratio. Not a test.

Usage: python bench/bench_ntk.py [--n 5000] [--d 784] [--repeats 5] [--device auto]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from _results import record
from lazylab.device import resolve_device
from lazylab.kernels import ntk
from lazylab.seeding import torch_generator


def _timed(fn: Callable[[], torch.Tensor], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    del out
    return time.perf_counter() - t0


def interleaved_medians(fns: list[Callable[[], torch.Tensor]], repeats: int,
                        device: torch.device) -> tuple[list[float], float]:
    """Median time of each fn, alternating them in every repeat so that a change of machine
    load hits all alike, and the median of the per-repeat ratios fns[1] / fns[0]."""
    for fn in fns:
        fn()  # warm-up (allocator, kernels, CUDA context)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            times[k].append(_timed(fn, device))
    ratios = [b / a for a, b in zip(times[0], times[1], strict=True)]
    return [statistics.median(t) for t in times], statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--d", type=int, default=784)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    dtype = getattr(torch, args.dtype)
    gen = torch_generator(0, device)
    X = torch.randn(args.n, args.d, generator=gen, device=device, dtype=dtype)

    (t_gram, t_ntk), ratio = interleaved_medians(
        [lambda: X @ X.T, lambda: ntk(X, activation="relu", trained="first")],
        args.repeats, device)
    # sanity check of the values on a subset against the textbook formula
    sub = X[:200].double()
    G = sub @ sub.T
    nrm = G.diagonal().sqrt()
    cos = (G / nrm[:, None] / nrm).clamp(-1, 1)
    ref = G * (torch.pi - torch.arccos(cos)) / (2 * torch.pi)
    err = float((ntk(X[:200]).double() - ref).abs().max() / ref.abs().max())

    print(f"device={device} dtype={args.dtype} n={args.n} d={args.d} repeats={args.repeats} "
          f"threads={torch.get_num_threads()}")
    print(f"X @ X.T          : {t_gram * 1e3:9.1f} ms (median)")
    print(f"ntk relu 'first' : {t_ntk * 1e3:9.1f} ms (median)")
    print(f"ratio ntk / gram : {t_ntk / t_gram:9.3f}   (median of per-repeat ratios "
          f"{ratio:.3f}; target <= 1.2)")
    print(f"max rel. deviation from the textbook formula on 200 points: {err:.2e}")
    record("ntk_vs_gram", {"n": args.n, "d": args.d, "dtype": args.dtype, "threads": args.threads,
                           "gram_ms": t_gram * 1e3, "ntk_ms": t_ntk * 1e3,
                           "ratio": t_ntk / t_gram, "median_ratio": ratio, "target_ratio": 1.2,
                           "max_rel_err": err}, device)


if __name__ == "__main__":
    main()
