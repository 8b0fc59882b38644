"""Benchmark: relu-NTK kernel regression without the n x n matrix (lazylab.solve.kernel_regression)
against scikit-learn's KernelRidge and a direct Cholesky solve.

Two parts, in one run:

1. **Large n** (``--n``, default 10^5 on a GPU, 2 x 10^4 on CPU): Nystrom-preconditioned CG over
   float32 kernel tiles to relative residual ``--tol`` (1e-3); prints time, iterations, peak
   resident memory of the process (resource.getrusage, measured before part 2 runs; target
   < 2 GB) and the test error. The NTK is Arora et al.'s H-infinity (``trained="first"``) on
   unit-norm inputs, targets one-hot labels minus 0.1 (10 classes), ridge ``--ridge``.
2. **Comparison** (``--n-compare``, default 10^4): the same problem solved by our solver, by
   sklearn ``KernelRidge(kernel="precomputed")`` on the dense float64 kernel, and by
   ``torch.linalg.cholesky`` + ``cholesky_solve`` on it. Prints the three test errors (target:
   within 1 percentage point) and the time ratios (kernel evaluation included for the dense
   solvers, since ours evaluates its own).

Data: ``--data fashion`` (Fashion-MNIST from /usr/share/datasets/fashion-mnist, at most 60 000
training points; the 10 000 test images) or ``--data synthetic`` (a 10-class Gaussian mixture
in d = 784 shaped like Fashion-MNIST, any n; the default when n > 60 000).

Usage: python bench/bench_kernel_solver.py [--n 20000] [--n-compare 10000] [--device auto]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from _results import record
from lazylab.device import resolve_device
from lazylab.kernels import ntk
from lazylab.solve import kernel_regression

N_CLASSES = 10
#: Largest n at which scipy's multithreaded OpenBLAS Cholesky was seen to run on a 2-core CPU.
SKLEARN_SAFE_N = 14_000


def _unit(X: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(X, dim=1)


def load(data: str, n: int, n_test: int, seed: int
         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X, labels, X_test, labels_test) float32 unit-norm rows and int64 labels."""
    rng = np.random.default_rng(seed)
    if data == "fashion":
        from lazylab.data.real import load_raw

        Xtr, ytr, Xte, yte, scale = load_raw("fashion-mnist")
        if n > Xtr.shape[0]:
            raise SystemExit(f"--n {n} exceeds the {Xtr.shape[0]} Fashion-MNIST training images;"
                             " use --data synthetic")
        i = rng.permutation(Xtr.shape[0])[:n]
        j = rng.permutation(Xte.shape[0])[:n_test]
        X = torch.from_numpy(Xtr[i].astype(np.float32) / scale)
        Xt = torch.from_numpy(Xte[j].astype(np.float32) / scale)
        return (_unit(X - X.mean(0)), torch.from_numpy(ytr[i]).long(),
                _unit(Xt - X.mean(0)), torch.from_numpy(yte[j]).long())
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(N_CLASSES, 784, generator=g)

    def draw(m: int) -> tuple[torch.Tensor, torch.Tensor]:
        lab = torch.randint(0, N_CLASSES, (m,), generator=g)
        return _unit(means[lab] * 0.003 + torch.randn(m, 784, generator=g) / 28), lab
    X, y = draw(n)
    Xt, yt = draw(n_test)
    return X, y, Xt, yt


def targets(labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.one_hot(labels, N_CLASSES).double() - 1.0 / N_CLASSES


def error(pred: torch.Tensor, labels: torch.Tensor) -> float:
    return float((pred.argmax(1).cpu() != labels.cpu()).double().mean())


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def ours(X, y, Xt, args, device):
    t0 = time.perf_counter()
    last = [0.0]

    def progress(it: int, rel: float) -> None:
        now = time.perf_counter()
        if now - last[0] > 10 or rel <= args.tol:
            print(f"  CG iteration {it:4d}: relative residual {rel:.3e}  "
                  f"({now - t0:7.1f} s)", flush=True)
            last[0] = now

    fit = kernel_regression(X.to(device), targets(y).to(device), kernel="ntk", ridge=args.ridge,
                            tol=args.tol, rank=min(args.rank, X.shape[0]),
                            max_iter=args.max_iter, generator=torch.Generator().manual_seed(1),
                            device=device, callback=progress)
    pred = fit.predict(Xt.to(device))
    sync(device)
    return fit, pred, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--n-compare", type=int, default=10_000)
    ap.add_argument("--n-test", type=int, default=2000)
    ap.add_argument("--data", choices=["fashion", "synthetic"], default=None)
    ap.add_argument("--ridge", type=float, default=1e-3)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--rank", type=int, default=1000)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--skip-large", action="store_true", help="only the comparison part")
    args = ap.parse_args()
    device = resolve_device(args.device)
    n = args.n or (100_000 if device.type == "cuda" else 20_000)
    data = args.data or ("synthetic" if n > 60_000 else "fashion")
    out: dict = {"device": str(device), "data": data, "ridge": args.ridge, "tol": args.tol,
                 "rank": args.rank}
    print(f"device={device} data={data} ridge={args.ridge} tol={args.tol} rank={args.rank} "
          f"threads={torch.get_num_threads()}")

    if not args.skip_large:
        X, y, Xt, yt = load(data, n, args.n_test, 0)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        fit, pred, t = ours(X, y, Xt, args, device)
        peak = peak_rss_gb()
        gpu_peak = (torch.cuda.max_memory_allocated(device) / 2**30
                    if device.type == "cuda" else None)
        err = error(pred, yt)
        print(f"[large] n={n} d={X.shape[1]}: {t:.1f} s, {fit.info.iterations} CG iterations, "
              f"relative residual {fit.info.relative_residual:.2e} (target {args.tol:g}), "
              f"Nystrom rank {fit.preconditioner_rank}, peak RSS {peak:.2f} GB (target < 2)"
              + (f", GPU peak {gpu_peak:.2f} GB" if gpu_peak is not None else "")
              + f", test error {err:.4f}")
        out["large"] = {"n": n, "seconds": t, "iterations": fit.info.iterations,
                        "relative_residual": fit.info.relative_residual,
                        "converged": fit.info.converged, "peak_rss_gb": peak,
                        "gpu_peak_gb": gpu_peak, "test_error": err}
        del X, y, fit, pred

    m = args.n_compare
    if m:
        from sklearn.kernel_ridge import KernelRidge

        cdata = args.data or "fashion"
        X, y, Xt, yt = load(cdata, m, args.n_test, 2)
        fit, pred, t_ours = ours(X, y, Xt, args, device)
        e_ours = error(pred, yt)
        Y = targets(y)
        t0 = time.perf_counter()
        K = ntk(X.double())
        Kt = ntk(Xt.double(), X.double())
        t_kernel = time.perf_counter() - t0
        # scipy's bundled OpenBLAS segfaults in its multithreaded Cholesky (dposv) on this
        # 2-core CPU from n ~ 15000 (n = 14000 runs, 16000 crashes; one thread runs; cf.
        # OpenMathLib/OpenBLAS#2821): there, scikit-learn gets one BLAS thread, which slows it.
        sk_threads = 1 if device.type == "cpu" and m > SKLEARN_SAFE_N else None
        t0 = time.perf_counter()
        with threadpool_limits(limits=sk_threads, user_api="blas"):
            kr = KernelRidge(alpha=args.ridge, kernel="precomputed").fit(K.numpy().copy(),
                                                                         Y.numpy())
            e_sk = error(torch.from_numpy(kr.predict(Kt.numpy())), yt)
        t_sk = time.perf_counter() - t0 + t_kernel
        del kr
        t0 = time.perf_counter()
        K.diagonal().add_(args.ridge)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(Y, L)
        e_ch = error(Kt @ alpha, yt)
        t_ch = time.perf_counter() - t0 + t_kernel
        print(f"[compare] {cdata} n={m}: test error ours {e_ours:.4f} ({t_ours:.1f} s, "
              f"{fit.info.iterations} it), sklearn KernelRidge {e_sk:.4f} ({t_sk:.1f} s), "
              f"Cholesky {e_ch:.4f} ({t_ch:.1f} s); |ours - direct| = "
              f"{abs(e_ours - e_ch) * 100:.2f} points (target <= 1); time ratios sklearn/ours "
              f"{t_sk / t_ours:.2f}, cholesky/ours {t_ch / t_ours:.2f}"
              + (" (sklearn on 1 BLAS thread)" if sk_threads == 1 else ""))
        out["compare"] = {"n": m, "data": cdata, "error_ours": e_ours, "error_sklearn": e_sk,
                          "error_cholesky": e_ch, "seconds_ours": t_ours,
                          "seconds_sklearn": t_sk, "seconds_cholesky": t_ch,
                          "iterations": fit.info.iterations, "sklearn_blas_threads": sk_threads,
                          "ratio_sklearn_over_ours": t_sk / t_ours,
                          "ratio_cholesky_over_ours": t_ch / t_ours}
    name = f"kernel_solver_{data}_n{n}" if not args.skip_large else "kernel_solver_compare"
    record(name + (f"_compare{m}" if m else ""), out, device)


if __name__ == "__main__":
    main()
