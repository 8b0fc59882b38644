"""Kernel regression on the empirical NTK of a generic module: formed kernel vs NTK-vector
products, and a model whose Jacobian does not fit in memory.

Part 1 (both fit): an MLP 784 -> m -> m -> 1 (tanh) at n inputs. Ridge regression (ridge 1e-2,
relative residual 1e-4) by conjugate gradients
  (a) on K formed by Jacobian contraction (``empirical_ntk(net, X, trained="all")``), then K v;
  (b) on ``lazylab.kernels.NTKOperator`` (K v = J (J^T v), one vjp and one jvp, chunked);
  (c) on the torch.func tutorial's NTK-vector product (vjp then jvp over all n rows at once);
with the predictions of (b) and (c) compared to (a).
Part 2: the same MLP at ``--big-m`` and ``--big-n``, whose Jacobian (n x P float32) is printed
and far exceeds this machine's memory: seconds per product and the process's peak resident
memory.

Run: ``.venv/bin/python bench/bench_ntk_products.py [--n 1000 --m 512 --big-m 4096
--big-n 5000]``. Recorded in ``runs/bench.json`` under ``ntk_products``.
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
from torch.func import functional_call, jvp, vjp

from _results import record
from lazylab.kernels import NTKOperator, empirical_ntk
from lazylab.solve import kernel_ridge_cg


def mlp(d: int, m: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, m), torch.nn.Tanh(), torch.nn.Linear(m, m),
                               torch.nn.Tanh(), torch.nn.Linear(m, 1))


def recipe_matvec(net: torch.nn.Module, X: torch.Tensor):
    """The torch.func tutorial's NTK-vector product, for a whole vector at once."""
    params = {k: v.detach() for k, v in net.named_parameters()}

    def f(p):
        return functional_call(net, p, (X,)).reshape(-1)

    def mv(v: torch.Tensor) -> torch.Tensor:
        _, pull = vjp(f, params)
        (u,) = pull(v.to(X.dtype))
        return jvp(f, (params,), (u,))[1].double()

    return lambda V: torch.stack([mv(V[:, j]) for j in range(V.shape[1])], 1)


def cg_seconds(matvec, y: torch.Tensor) -> tuple[float, torch.Tensor, int]:
    t0 = time.perf_counter()
    alpha, info = kernel_ridge_cg(matvec, y, ridge=1e-2, tol=1e-4, max_iter=500,
                                  preconditioner=None, return_info=True)
    return time.perf_counter() - t0, alpha, info.iterations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--m", type=int, default=512)
    ap.add_argument("--big-m", type=int, default=4096)
    ap.add_argument("--big-n", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(1)
    X = torch.randn(a.n, 784, generator=g)
    y = torch.sin(X[:, 0]).double()
    net = mlp(784, a.m)
    P = sum(p.numel() for p in net.parameters())
    t0 = time.perf_counter()
    K = empirical_ntk(net, X, trained="all").double()
    t_form = time.perf_counter() - t0
    t_a, alpha_a, it_a = cg_seconds(lambda V: K @ V, y)
    op = NTKOperator(net, X, trained="all")
    t_b, alpha_b, it_b = cg_seconds(lambda V: op.matmul(V).double(), y)
    t_c, alpha_c, it_c = cg_seconds(recipe_matvec(net, X), y)
    rel = float((alpha_b - alpha_a).norm() / alpha_a.norm())
    rel_c = float((alpha_c - alpha_a).norm() / alpha_a.norm())
    print(f"part 1: n = {a.n}, P = {P:,} parameters, {a.threads} threads")
    print(f"(a) formed K: {t_form:.2f} s to form + {t_a:.2f} s CG ({it_a} iterations)")
    print(f"(b) NTKOperator: {t_b:.2f} s CG ({it_b} iterations), alpha within {rel:.1e}")
    print(f"(c) torch.func recipe: {t_c:.2f} s CG ({it_c} iterations), alpha within {rel_c:.1e}")
    big = mlp(784, a.big_m)
    Pb = sum(p.numel() for p in big.parameters())
    Xb = torch.randn(a.big_n, 784, generator=g)
    opb = NTKOperator(big, Xb, trained="all", chunk=1000)
    v = torch.randn(a.big_n, generator=g)
    opb.matmul(v[:, None])
    t0 = time.perf_counter()
    opb.matmul(v)
    t_big = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    jac = a.big_n * Pb * 4 / 2**30
    print(f"part 2: n = {a.big_n}, P = {Pb:,}: the Jacobian would take {jac:,.0f} GiB; one "
          f"NTK-vector product {t_big:.2f} s, peak resident memory {rss:.2f} GiB")
    record("ntk_products", {"n": a.n, "params": P, "formed_seconds": t_form + t_a,
                            "operator_seconds": t_b, "recipe_seconds": t_c,
                            "operator_alpha_rel_diff": rel, "big_n": a.big_n, "big_params": Pb,
                            "big_jacobian_gib": jac, "big_product_seconds": t_big,
                            "peak_rss_gib": rss}, torch.device("cpu"))


if __name__ == "__main__":
    main()
