"""Benchmark: structured empirical NTK of a TwoLayerNet vs PyTorch's NTK-tutorial method.

The tutorial ("Neural Tangent Kernels", pytorch.org/tutorials, torch.func) builds
per-example Jacobians with vmap(jacrev(functional_call)) and contracts them,
O(n^2 m d) work and O(n m d) memory. For f(x) = s sum_r a_r sigma(w_r.x) the first-layer
kernel is s^2 (S'_X diag(a^2) S'_X^T) * (X X^T), O(n^2 m + n m d) (target: >= 100x faster).
Prints the median times, their ratio and the max abs difference. Not a test.

Usage: python bench/bench_empirical_ntk.py [--n 500] [--d 100] [--width 4096] [--device auto]
       [--threads 1] [--path probe|int8|float32]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch.func import functional_call, jacrev, vmap

from _results import record
from lazylab.device import resolve_device
from lazylab.kernels import empirical_ntk
from lazylab.kernels.empirical import coactivation_path, set_coactivation_path
from lazylab.models import TwoLayerNet
from lazylab.seeding import torch_generator


def _timed(fn: Callable[[], torch.Tensor], device: torch.device
           ) -> tuple[float, torch.Tensor]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, out


def tutorial_ntk(net: torch.nn.Module, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
    """``empirical_ntk_jacobian_contraction`` of the PyTorch NTK tutorial (scalar output kept
    as a length-1 vector so that the Jacobians are (N, 1, P) as there)."""
    params = {k: v.detach() for k, v in net.named_parameters()}
    buffers = dict(net.named_buffers())

    def fnet_single(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(net, (p, buffers), (x.unsqueeze(0),))

    jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
    jac1 = [j.flatten(2) for j in jac1.values()]
    jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
    jac2 = [j.flatten(2) for j in jac2.values()]
    result = torch.stack([torch.einsum("Naf,Mbf->NMab", j1, j2)
                          for j1, j2 in zip(jac1, jac2, strict=True)])
    return result.sum(0)[:, :, 0, 0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--tutorial-repeats", type=int, default=3)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    ap.add_argument("--path", choices=["probe", "int8", "float32"], default="probe",
                    help="co-activation GEMM: the one-time probe's choice, or forced")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.path != "probe":
        set_coactivation_path(args.path)
    device = resolve_device(args.device)
    gen = torch_generator(0, device)
    net = TwoLayerNet(args.d, args.width, generator=gen, device=device)  # float32
    X = torch.randn(args.n, args.d, generator=gen, device=device)

    def ours() -> torch.Tensor:
        return empirical_ntk(net, X, trained="first")

    # warm-up, then interleave: each tutorial run is surrounded by runs of ours, so that a
    # change of machine load hits both alike
    K_ours, K_tut = ours(), tutorial_ntk(net, X, X)
    t_ours_all, t_tut_all = [], []
    per_round = max(1, args.repeats // args.tutorial_repeats)
    for _ in range(args.tutorial_repeats):
        for _ in range(per_round):
            t_ours_all.append(_timed(ours, device)[0])
        t_tut_all.append(_timed(lambda: tutorial_ntk(net, X, X), device)[0])
    t_ours, t_tut = statistics.median(t_ours_all), statistics.median(t_tut_all)
    diff = float((K_ours - K_tut).abs().max())
    scale = float(K_tut.abs().max())

    print(f"device={device} n={args.n} d={args.d} width={args.width} dtype=float32 "
          f"threads={torch.get_num_threads()} (trained='first', W only, as in the tutorial)")
    print(f"lazylab empirical_ntk (structured) : {t_ours * 1e3:10.1f} ms (median of "
          f"{len(t_ours_all)})")
    print(f"tutorial jacrev + vmap + einsum    : {t_tut * 1e3:10.1f} ms (median of "
          f"{args.tutorial_repeats})")
    print(f"speed-up                           : {t_tut / t_ours:10.1f}x   (target >= 100x)")
    print(f"max abs diff {diff:.3e} (max |K| {scale:.3e}, relative {diff / scale:.2e})")
    path = coactivation_path(device)
    how = "one-time probe" if args.path == "probe" else "forced by --path"
    print(f"co-activation path ({how} on {device}): {path}")
    name = "empirical_ntk" + ("" if args.path == "probe" else f"_{args.path}")
    record(name, {"n": args.n, "d": args.d, "width": args.width, "threads": args.threads,
                  "ours_ms": t_ours * 1e3, "tutorial_ms": t_tut * 1e3,
                  "speedup": t_tut / t_ours, "target_speedup": 100.0,
                  "coactivation_path": path, "max_rel_diff": diff / scale}, device)


if __name__ == "__main__":
    main()
