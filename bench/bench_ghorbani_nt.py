"""Benchmark: the Ghorbani et al. (2019) NT model fitted by streamed CG (lazylab.solve.
nt_least_squares) at paper scale, final risk against the exact limit for the same W.

The paper trains NT by one-pass SGD (2 x 10^5 steps of batch 100), which at d = 450 stalls far
above the limit (0.52 against 0.376 at N = 225 on the quadratic target). Here NT is fitted by
least squares on n fresh samples with conjugate gradients on the centred, whitened normal
equations: each iteration is one pass over the samples (three float32 GEMMs per chunk, float64
accumulation), the n x (N d) feature matrix is never formed. Least squares on n samples with p
effective columns (p = k(k+1)/2 + k(d-k) + 1, k = min(N, d)) has excess risk ~ limit * p / (n - p)
over the limit, so n = ``--samples-per-column`` x p lands within ~1/(that factor) of it.

Prints: time, CG iterations, test risk R/R0 (exact population risk of the fitted quadratic
form), the exact limit for the same W (theory.ghorbani_population: ||P_perp B P_perp||^2/||B||^2
for qf, the CG minimiser of nt_mg_population for mg), and the expected finite-n excess.

With ``--compare-lstsq`` the same W and n are also fitted by the quick scale's former protocol
(normal equations in a basis of S_W, ``common.fit_nt_lstsq``, float64) and the ratio of the two
times is printed and recorded (the reason the width figures default to ``nt_protocol=cg``;
measured on the 2-core CPU, one thread: 6.2x at d = 30, N = 30, n = 30000 (mixture), 17.8x at
d = 60, N = 30 and 20.4x at d = 60, N = 60 with 20 samples per column; same risks within
0.002).

Usage: python bench/bench_ghorbani_nt.py --d 450 --N 225 [--kind qf|mg] [--device cuda]
       python bench/bench_ghorbani_nt.py --d 60 --N 60 --samples-per-column 20 --compare-lstsq
"""

from __future__ import annotations

import argparse
import time

import torch

from _results import record
from lazylab.device import resolve_device
from lazylab.experiments.ghorbani.common import (
    QuadForm,
    draw_weights,
    fit_nt_lstsq,
    mg_problem,
    nt_basis_size,
    qf_problem,
)
from lazylab.solve import nt_least_squares
from lazylab.theory.ghorbani_population import nt_mg_population, nt_qf_population


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=450)
    ap.add_argument("--N", type=int, default=225)
    ap.add_argument("--kind", choices=["qf", "mg"], default="qf")
    ap.add_argument("--n", type=int, default=None, help="training samples (default: "
                    "samples-per-column x p)")
    ap.add_argument("--samples-per-column", type=float, default=30.0)
    ap.add_argument("--chunk", type=int, default=65_536)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--compare-lstsq", action="store_true",
                    help="also time the basis least squares (fit_nt_lstsq) on the same W and n")
    args = ap.parse_args()
    device = resolve_device(args.device)
    prob = qf_problem(args.d, 100) if args.kind == "qf" else mg_problem(args.d, 100)
    p = nt_basis_size(args.d, args.N)
    n = args.n or int(args.samples_per_column * p)
    gen = torch.Generator().manual_seed(args.seed)
    W = draw_weights(args.d, args.N, gen)                      # (N, d) float64, rows N(0, I/d)
    t0 = time.perf_counter()
    Wt = W.T.contiguous()                                      # theory takes (d, N)
    limit = (nt_qf_population(Wt, prob.model.B) if args.kind == "qf"
             else nt_mg_population(Wt, prob.model.Delta))
    t_theory = time.perf_counter() - t0
    sampler = prob.sampler(torch.float32)
    last = [time.perf_counter()]

    def progress(it: int, rel: float) -> None:
        now = time.perf_counter()
        if now - last[0] > 5:
            print(f"  CG iteration {it:3d}: relative residual {rel:.2e}", flush=True)
            last[0] = now

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fit = nt_least_squares(W.to(device), sampler, n, seed=args.seed + 1, chunk=args.chunk,
                           tol=args.tol, device=device, callback=progress)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t_fit = time.perf_counter() - t0
    risk = prob.risk(QuadForm(fit.M.double().numpy(), float(fit.c)))
    excess = limit * p / max(n - p - 1, 1)
    print(f"device={device} kind={args.kind} d={args.d} N={args.N} n={n} (p={p}, "
          f"n/p={n / p:.1f}) chunk={args.chunk}")
    print(f"fit: {t_fit:.1f} s, {fit.info.iterations} CG iterations, normal-equation residual "
          f"{fit.info.relative_residual:.1e}, train MSE/R0 {fit.train_mse / prob.r0:.4f}")
    print(f"NT risk R/R0 = {risk:.4f}; exact limit for this W = {limit:.4f} "
          f"(theory {t_theory:.1f} s); expected finite-n excess ~ {excess:.4f}; "
          f"risk - limit = {risk - limit:+.4f}")
    values = {"d": args.d, "N": args.N, "n": n, "p": p, "kind": args.kind,
              "seconds": t_fit, "iterations": fit.info.iterations, "risk": risk, "limit": limit,
              "expected_excess": excess, "converged": fit.info.converged,
              "train_mse_over_r0": fit.train_mse / prob.r0,
              "risk_minus_limit": risk - limit}
    if args.compare_lstsq:
        t0 = time.perf_counter()
        q, _ = fit_nt_lstsq(W.to(device), prob.sampler(torch.float64), n, args.chunk,
                            torch.Generator(device=device).manual_seed(args.seed + 1))
        t_lstsq = time.perf_counter() - t0
        risk_lstsq = prob.risk(q)
        print(f"lstsq (basis normal equations, float64): {t_lstsq:.1f} s, risk R/R0 = "
              f"{risk_lstsq:.4f}; time lstsq / cg = {t_lstsq / t_fit:.1f}")
        values.update(lstsq_seconds=t_lstsq, lstsq_risk=risk_lstsq,
                      lstsq_over_cg_time=t_lstsq / t_fit)
    record(f"ghorbani_nt_{args.kind}_d{args.d}_N{args.N}", values, device)


if __name__ == "__main__":
    main()
