"""Benchmark: one GD step of Nichani et al.'s f_L + f_Q + lambda3 R3 vs the bare GEMMs it needs.

A step (:func:`lazylab.train.nichani.taylor_step_grad`) on a batch of B models W (B, m, d)
computes Z = X W^T (B, n, m), f_L, f_Q, the R3 projection (an n x n product) and the pull-back
G^T X (B, m, d): two batched GEMMs of size n x m x d plus O(B n m) elementwise work. The
reference is those two GEMMs alone (target: step / GEMMs <= 2). Also times the B models as a
loop of single-model steps against the batched step (the experiment trains its lambda3 sweep
and baselines as one batched computation). Prints median times over interleaved repeats and
the ratios. Not a test.

Usage: python bench/bench_nichani_step.py [--d 25 --m 7000 --B 6] [--device auto]
(defaults: the quick scale of nichani-regularizer; --paper: d = 100, n = 1000, m = 10^4, B = 9)
"""

from __future__ import annotations

import argparse
import math

import torch

from _results import record
from bench_ntk import interleaved_medians
from lazylab.device import resolve_device
from lazylab.models.nichani import TaylorFeatures, nichani_net
from lazylab.seeding import torch_generator
from lazylab.train.nichani import R3Empirical, taylor_step_grad
from lazylab.train.nichani.gd import fused_for


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=25)
    ap.add_argument("--n", type=int, default=0, help="samples (0: round(d^1.5))")
    ap.add_argument("--m", type=int, default=7000)
    ap.add_argument("--B", type=int, default=6, help="models trained together")
    ap.add_argument("--paper", action="store_true", help="d=100, n=1000, m=10^4, B=9")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    args = ap.parse_args()
    if args.paper:
        args.d, args.n, args.m, args.B = 100, 1000, 10_000, 9
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    d, m, B = args.d, args.m, args.B
    n = args.n or int(round(d**1.5))
    gen = torch_generator(0, device)
    X = math.sqrt(d) * torch.nn.functional.normalize(
        torch.randn(n, d, generator=gen, device=device), dim=1)
    y = torch.randn(n, generator=gen, device=device)
    net = nichani_net(d, m, generator=gen)
    feats = TaylorFeatures.of(net, X)
    r3 = R3Empirical.build(feats, d + 1)
    W = 0.1 * torch.randn(B, m, d, generator=gen, device=device)
    lam = torch.linspace(0, 1, B, device=device)
    G = torch.randn(B, n, m, generator=gen, device=device)
    Zb, Gb = torch.empty(B, n, m, device=device), torch.empty(B, m, d, device=device)

    def gemms() -> torch.Tensor:
        torch.matmul(X, W.transpose(-1, -2), out=Zb)
        return torch.matmul(G.transpose(-1, -2), X, out=Gb)

    work: dict[str, torch.Tensor] = {}
    works: list[dict[str, torch.Tensor]] = [{} for _ in range(B)]

    def step() -> torch.Tensor:
        return taylor_step_grad(feats, W, y, lam, r3, work=work)

    def loop() -> torch.Tensor:
        return [taylor_step_grad(feats, W[b:b + 1], y, lam[b:b + 1], r3, work=works[b])
                for b in range(B)]

    (t_gemm, t_step), ratio = interleaved_medians([gemms, step], args.repeats, device)
    (t_batch, t_loop), ratio_loop = interleaved_medians([step, loop], args.repeats, device)
    blas = ("MKL" if torch.backends.mkl.is_available() else "no MKL") if device.type == "cpu" \
        else f"cuBLAS ({torch.cuda.get_device_name(device)})"
    print(f"device={device} d={d} n={n} m={m} B={B} dtype={X.dtype} "
          f"threads={torch.get_num_threads()} repeats={args.repeats} (interleaved; medians)")
    fused = fused_for(device, B * n * m) is not None
    elementwise = ("elementwise work fused by torch.compile (two kernels)" if fused else
                   "in-place elementwise passes (torch.matmul out=)")
    print(f"path: step = lazylab.train.nichani.taylor_step_grad, batched over B with a reused "
          f"workspace, {elementwise}; baseline = the same two batched torch.matmul calls "
          f"alone; BLAS: {blas}")
    print(f"two bare GEMMs (Z, pull-back)  : {t_gemm * 1e3:9.2f} ms (median)")
    print(f"GD step f_L + f_Q + lam3 R3    : {t_step * 1e3:9.2f} ms (median)")
    print(f"ratio step / GEMMs             : {t_step / t_gemm:9.3f}   (median of per-repeat "
          f"ratios {ratio:.3f}; target <= 2)")
    print(f"B single-model steps (loop)    : {t_loop * 1e3:9.2f} ms; loop / batched = "
          f"{t_loop / t_batch:.2f} (median {ratio_loop:.2f})")
    record("nichani_step_vs_gemm", {"d": d, "n": n, "m": m, "B": B,
                                    "gemm_ms": t_gemm * 1e3, "step_ms": t_step * 1e3,
                                    "ratio": t_step / t_gemm, "median_ratio": ratio,
                                    "target_ratio": 2.0, "loop_ms": t_loop * 1e3,
                                    "loop_over_batched": t_loop / t_batch,
                                    "fused_elementwise": fused}, device)


if __name__ == "__main__":
    main()
