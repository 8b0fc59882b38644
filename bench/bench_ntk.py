"""Benchmark: closed-form relu NTK (Arora et al.'s H_inf) vs the bare Gram matrix X @ X.T.

H_inf(x, z) = x.z (pi - arccos(cos angle)) / (2 pi) needs the Gram matrix plus a few
elementwise passes, so its cost should stay close to that of X @ X.T (target: <= 1.5x).
Prints the median time of each over a few repeats and their ratio. Not a test.

Usage: python bench/bench_ntk.py [--n 5000] [--d 784] [--repeats 5] [--device auto]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from lazylab.device import resolve_device
from lazylab.kernels import ntk
from lazylab.seeding import torch_generator


def _median_time(fn: Callable[[], torch.Tensor], repeats: int, device: torch.device) -> float:
    fn()  # warm-up (allocator, kernels, CUDA context)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        out = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
        del out
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--d", type=int, default=784)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = ap.parse_args()
    device = resolve_device(args.device)
    dtype = getattr(torch, args.dtype)
    gen = torch_generator(0, device)
    X = torch.randn(args.n, args.d, generator=gen, device=device, dtype=dtype)

    t_gram = _median_time(lambda: X @ X.T, args.repeats, device)
    t_ntk = _median_time(lambda: ntk(X, activation="relu", trained="first"), args.repeats,
                         device)
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
    print(f"ratio ntk / gram : {t_ntk / t_gram:9.3f}   (target <= 1.5)")
    print(f"max rel. deviation from the textbook formula on 200 points: {err:.2e}")


if __name__ == "__main__":
    main()
