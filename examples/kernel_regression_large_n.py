"""Kernel regression where the n x n kernel is never formed.

``KernelRegressor(solver="cg")`` solves (K + ridge I) alpha = y by Nystrom-preconditioned
conjugate gradients over float32 kernel tiles: memory O(n (d + rank)) instead of n^2. Here
n = 20,000 points on the sphere and a smooth target; the n x n float64 kernel would take
3.2 GB. Run: ``python examples/kernel_regression_large_n.py [n]``.
"""

import sys
import time

import torch

from lazylab.estimators import KernelRegressor


def main(n: int = 20_000) -> dict[str, float]:
    g = torch.Generator().manual_seed(0)
    X = torch.nn.functional.normalize(torch.randn(n + 1000, 10, generator=g), dim=1).double()
    y = torch.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    t0 = time.perf_counter()
    est = KernelRegressor(kernel="ntk", ridge=1e-3, solver="cg", rank=300, tol=1e-4,
                          max_iter=300).fit(X[:n], y[:n])
    secs = time.perf_counter() - t0
    err = float((est.predict(X[n:]) - y[n:]).pow(2).mean() / y[n:].pow(2).mean())
    print(f"n = {n}: {est.n_iter_} CG iterations in {secs:.1f} s; relative test error "
          f"{err:.4f}; the dense float64 kernel would take {8 * n * n / 2**30:.1f} GiB")
    return {"seconds": secs, "relative_test_error": err, "iterations": est.n_iter_}


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
