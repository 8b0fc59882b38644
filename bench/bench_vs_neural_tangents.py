"""lazylab's deep kernels against neural-tangents 0.6.5: agreement and time, side by side.

Creates (once) a side environment with neural-tangents and JAX on CPU:

    python -m venv /tmp/nt-venv
    /tmp/nt-venv/bin/pip install neural-tangents==0.6.5 'jax[cpu]==0.4.30'

then builds each architecture in both libraries from one JSON spec, evaluates NNGP and NTK
together on the same inputs (channels-first for lazylab, channels-last for JAX), and prints,
per architecture and dtype, the largest relative difference max|K_lazylab - K_nt| / max|K_nt|
over NNGP and NTK, and the best-of-``--repeats`` time of each library (neural-tangents' kernel
function jitted and compiled before timing). ``--write-reference`` stores the neural-tangents
float64 kernels of the small architectures in tests/data/deep_kernels_nt.json for the package
tests (which never import JAX).

Usage::

    python bench/bench_vs_neural_tangents.py [--quick] [--repeats 3] [--write-reference]
        [--timing-only] [--no-peer]

Without ``--quick`` it also reports, on the three timing shapes, the share of a plain float32
GEMM (dense inputs) or 3x3 convolution (image inputs) of the same flops that the kernel
reaches: the kernel's flops are counted per layer (:func:`layer_flops`), and the GEMM or
convolution is timed in the same run (:func:`dense_op_rate`). The kernel is elementwise work
on covariance tensors (arc-cosine maps, window sums), memory-bound where a GEMM reuses each
operand many times, so its share is a small fraction: that fraction is what the line reports.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from lazylab.kernels.deep import DeepKernel, from_spec  # noqa: E402

VENV = Path(os.environ.get("NT_VENV", "/tmp/nt-venv"))
SIDE = Path(__file__).with_name("_nt_side.py")
REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "deep_kernels_nt.json"
#: inputs per architecture kept in the reference file
REFERENCE_N = 4
ACTS = {"relu": {"type": "ABRelu", "a": 0.0, "b": 1.0}, "erf": {"type": "Erf"},
        "gelu": {"type": "Gelu"}}


def mlp(depth: int, act: str, bias: bool, param: str, width: int = 64) -> list[dict]:
    """depth hidden layers of ``act`` then a linear readout."""
    b = 0.3 if bias else None
    spec: list[dict] = []
    for _ in range(depth):
        spec += [{"type": "Dense", "W_std": 1.4, "b_std": b, "parameterization": param,
                  "width": width}, ACTS[act]]
    return spec + [{"type": "Dense", "W_std": 1.1, "b_std": b, "parameterization": param,
                    "width": 1}]


def cnn(nd: int, head: str, padding: str, strides: int, depth: int = 2) -> list[dict]:
    f = [3] * nd
    spec: list[dict] = []
    for _ in range(depth):
        spec += [{"type": "Conv", "filter_shape": f, "strides": [strides] * nd,
                  "padding": padding, "W_std": 1.5, "b_std": 0.2}, ACTS["relu"]]
    spec.append({"type": "Flatten"} if head == "flatten" else {"type": "GlobalAvgPool"})
    return spec + [{"type": "Dense", "W_std": 1.2, "b_std": 0.1}]


def resnet(nd: int = 2) -> list[dict]:
    conv = {"type": "Conv", "filter_shape": [3] * nd, "padding": "SAME", "W_std": 1.4,
            "b_std": 0.1}
    block = {"type": "Residual", "branches": [[ACTS["relu"], conv, ACTS["relu"], conv], []]}
    return [conv, block, block, {"type": "AvgPool", "window": [2] * nd, "padding": "VALID"},
            ACTS["relu"], {"type": "GlobalAvgPool"}, {"type": "Dense", "W_std": 1.0}]


def layernorm_mlp(depth: int = 3) -> list[dict]:
    spec: list[dict] = []
    for _ in range(depth):
        spec += [{"type": "Dense", "W_std": 1.3, "b_std": 0.2}, {"type": "LayerNorm"},
                 ACTS["gelu"]]
    return spec + [{"type": "Dense", "W_std": 1.0}]


def extras() -> dict[str, tuple[list[dict], tuple[int, ...], int]]:
    """Standard-parametrized convolutions, the rest of the relu family and sine, LayerNorm
    over channels and positions, average pooling with SAME padding, and products of
    branches (FanInProd)."""
    def conv(width: int, param: str = "ntk", padding: str = "SAME", nd: int = 2) -> dict:
        return {"type": "Conv", "filter_shape": [3] * nd, "padding": padding, "W_std": 1.3,
                "b_std": 0.2, "parameterization": param, "width": width}

    relu = ACTS["relu"]
    return {
        "cnn2d-standard": ([conv(3, "standard"), relu, conv(4, "standard"), relu,
                            {"type": "Flatten"}, {"type": "Dense", "W_std": 1.1, "b_std": 0.1,
                                                  "parameterization": "standard",
                                                  "width": 1}], (2, 5, 5), 6),
        "mlp-leaky-abs-sin": ([{"type": "Dense", "W_std": 1.3}, {"type": "ABRelu", "a": 0.2,
                                                                  "b": 1.0},
                               {"type": "Dense", "W_std": 1.2, "b_std": 0.1},
                               {"type": "ABRelu", "a": -1.0, "b": 1.0},
                               {"type": "Dense", "W_std": 0.9},
                               {"type": "Sin", "a": 1.1, "b": 0.8, "c0": 0.3},
                               {"type": "Dense"}], (5,), 8),
        "cnn2d-layernorm": ([conv(1), {"type": "LayerNorm", "axis": "all", "nd": 2}, relu,
                             conv(1), {"type": "LayerNorm"}, ACTS["gelu"],
                             {"type": "GlobalAvgPool"}, {"type": "Dense"}], (2, 5, 5), 6),
        "mlp-product": ([{"type": "Dense", "W_std": 1.3, "b_std": 0.2}, relu,
                         {"type": "Product", "branches": [
                             [{"type": "Dense", "W_std": 1.2, "b_std": 0.1}, relu],
                             [{"type": "Dense", "W_std": 1.1, "b_std": 0.3}, ACTS["erf"]]]},
                         {"type": "Dense"}], (5,), 8),
        "cnn1d-product-gap": ([conv(1, nd=1), relu,
                               {"type": "Product", "branches": [[conv(1, nd=1), ACTS["gelu"]],
                                                                []]},
                               {"type": "GlobalAvgPool"}, {"type": "Dense"}], (2, 8), 6),
        "cnn1d-avgpool-same": ([conv(1, nd=1), relu, {"type": "AvgPool", "window": [3],
                                                     "strides": [1], "padding": "SAME"},
                                conv(1, nd=1, padding="VALID"), ACTS["erf"],
                                {"type": "Flatten"}, {"type": "Dense"}], (2, 8), 6),
    }


def architectures(quick: bool) -> dict[str, tuple[list[dict], tuple[int, ...], int]]:
    """name -> (spec, input shape channels-first, n)."""
    out: dict[str, tuple[list[dict], tuple[int, ...], int]] = {}
    depths = (1, 3) if quick else (1, 2, 3, 5, 10)
    for depth in depths:
        for act in ACTS:
            for bias in (False, True):
                for param in ("ntk", "standard"):
                    name = f"mlp-d{depth}-{act}-{'b' if bias else 'nob'}-{param}"
                    out[name] = (mlp(depth, act, bias, param), (7,), 12)
    for nd, size in ((1, (2, 9)), (2, (2, 6, 6))):
        for head in ("flatten", "gap"):
            for padding in ("SAME", "VALID", "CIRCULAR"):
                out[f"cnn{nd}d-{head}-{padding.lower()}"] = (cnn(nd, head, padding, 1),
                                                            size, 6)
            out[f"cnn{nd}d-{head}-stride2"] = (cnn(nd, head, "SAME", 2), size, 6)
    out["resnet2d"] = (resnet(2), (2, 6, 6), 5)
    out.update(extras())
    out["layernorm-mlp"] = (layernorm_mlp(), (7,), 12)
    return out


def timing_archs() -> dict[str, tuple[list[dict], tuple[int, ...], int]]:
    """The issue's three timing shapes (float32, NNGP and NTK together)."""
    conv = {"type": "Conv", "filter_shape": [3, 3], "padding": "SAME", "W_std": 1.4}
    two = [conv, ACTS["relu"], conv, ACTS["relu"]]
    return {"time-mlp5-n2000": (mlp(5, "relu", False, "ntk"), (64,), 2000),
            "time-cnn-flatten-28x28-n200": (two + [{"type": "Flatten"},
                                                  {"type": "Dense"}], (1, 28, 28), 200),
            "time-cnn-gap-8x8-n100": (two + [{"type": "GlobalAvgPool"}, {"type": "Dense"}],
                                      (1, 8, 8), 100)}


#: Flops per covariance element and input pair, NNGP and NTK together, by layer (an
#: elementwise transcendental function counts as one flop): an affine map scales and shifts
#: both covariances (4); ReLU's arc-cosine step is about 15 (the correlation, its arccos and
#: sine, the two closed forms); a convolution adds a window of f entries per tracked axis for
#: each covariance (2 sum f) before the affine map; pooling heads average their input (2).
AFFINE_FLOPS, ACT_FLOPS, MEAN_FLOPS = 4, 15, 2


def _positions(shape: tuple[int, ...], full: bool) -> int:
    p = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return p * p if full else p


def layer_flops(spec: list[dict], shape: tuple[int, ...]) -> list[tuple[str, float]]:
    """(layer, flops per input pair) of a flat spec (no branches), from the kernel's plan:
    the input covariance (2 C per element), then each layer's count above times the elements
    of its output (its input for the pooling heads)."""
    kernel = DeepKernel(from_spec(spec))
    traces = kernel.plan(shape)
    full = kernel.net.need_in(False)
    out = [("input", 2.0 * shape[0] * _positions(shape, full and len(shape) > 1))]
    prev, prev_full = shape, full and len(shape) > 1
    for layer_spec, t in zip(spec, traces, strict=True):
        kind = layer_spec["type"]
        if kind in ("Dense", "Conv"):
            axes = (len(t.shape) - 1) * (2 if t.full else 1)
            window = sum(layer_spec.get("filter_shape", [])) / max(1, len(t.shape) - 1)
            per = AFFINE_FLOPS + (2 * window * axes if kind == "Conv" else 0)
            out.append((kind, per * _positions(t.shape, t.full)))
        elif kind in ("Flatten", "GlobalAvgPool", "AvgPool"):
            out.append((kind, MEAN_FLOPS * _positions(prev, prev_full)))
        else:
            out.append((kind, ACT_FLOPS * _positions(t.shape, t.full)))
        prev, prev_full = t.shape, t.full
    return out


def _best(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    """Best CPU seconds of this process over ``repeats`` calls (one thread: other load on
    the machine does not enter the GEMM share)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def dense_op_rate(shape: tuple[int, ...], repeats: int) -> tuple[str, float]:
    """(what, flop/s) of a float32 GEMM (dense inputs) or of a 3x3 SAME convolution on the
    same spatial shape (image inputs), timed here: the yardstick of the kernel's flops."""
    g = torch.Generator().manual_seed(0)
    if len(shape) == 1:
        s = 512
        a, b = torch.randn(s, s, generator=g), torch.randn(s, s, generator=g)
        reps = 8
        t = _best(lambda: [torch.matmul(a, b) for _ in range(reps)], repeats)
        return f"matmul {s}x{s}", reps * 2.0 * s ** 3 / t
    c, batch = 32, 16
    x = torch.randn((batch, c) + tuple(shape[1:]), generator=g)
    w = torch.randn(c, c, 3, 3, generator=g)
    reps = 4
    t = _best(lambda: [torch.nn.functional.conv2d(x, w, padding=1) for _ in range(reps)],
              repeats)
    flops = 2.0 * batch * c * c * 9 * int(np.prod(shape[1:]))
    return f"conv2d {c}->{c} 3x3 on {batch}x{c}x{'x'.join(map(str, shape[1:]))}", reps * flops / t


def gemm_share(archs: dict, repeats: int) -> None:
    """Print, per timing shape, the kernel's flops per layer, its flop rate and its share of
    a plain GEMM's (convolution's) rate, both timed here in CPU seconds of this process (the
    kernel: NNGP and NTK together, float32, as in the timing table)."""
    print("\nshare of a plain GEMM / convolution of the same flops (float32, CPU seconds of "
          "this process, one thread):")
    rng = np.random.default_rng(0)
    for name, (spec, shape, n) in archs.items():
        per = layer_flops(spec, shape)
        pairs = n * (n + 1) / 2  # the symmetric kernel: each pair once
        total = pairs * sum(f for _, f in per)
        kernel = DeepKernel(from_spec(spec))
        X = torch.from_numpy(rng.standard_normal((n,) + shape).astype("float32"))
        secs = _best(lambda k=kernel, X=X: k.both(X), repeats)
        what, rate = dense_op_rate(shape, repeats)
        mine = total / secs
        layers = ", ".join(f"{k} {pairs * f / 1e9:.3g}" for k, f in per)
        print(f"{name}: kernel {total / 1e9:.3g} GFLOP ({layers}) in {secs:.3f} s "
              f"= {mine / 1e9:.3g} GFLOP/s; {what}: {rate / 1e9:.3g} GFLOP/s; share "
              f"{100 * mine / rate:.2f}% (the {what.split()[0]} would take "
              f"{total / rate:.4f} s)")


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "neural-tangents==0.6.5",
                        "jax[cpu]==0.4.30"], check=True)
    return python


def lazylab_kernels(spec: list[dict], x: np.ndarray, dtype: str, repeats: int
                    ) -> tuple[np.ndarray, np.ndarray, float]:
    kernel = DeepKernel(from_spec(spec))
    X = torch.from_numpy(x.astype(dtype))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        nngp, ntk = kernel.both(X)
        best = min(best, time.perf_counter() - t0)
    return nngp.numpy(), ntk.numpy(), best


def split_rel(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """max |a - b| / max |b| off the diagonal and on it (coincident inputs, where
    neural-tangents' arccos sees a correlation 1 - O(eps) and lazylab exactly 1)."""
    d = np.abs(a - b) / max(np.abs(b).max(), 1e-300)
    diag = float(np.diag(d).max())
    np.fill_diagonal(d, 0.0)
    return float(d.max()), diag


def run(archs: dict, dtypes: list[str], repeats: int, tmp: str) -> dict:
    inputs = {}
    rng = np.random.default_rng(0)
    for name, (_, shape, n) in archs.items():
        # rounded so that the reference file stores the inputs exactly
        x = rng.standard_normal((n,) + shape).round(6)
        path = f"{tmp}/{name}-x.npz"
        # neural-tangents is channels-last
        np.savez(path, x=np.moveaxis(x, 1, -1) if len(shape) > 1 else x)
        inputs[name] = (path, x)
    job = {"archs": {k: v[0] for k, v in archs.items()}, "dtypes": dtypes,
           "inputs": {k: v[0] for k, v in inputs.items()}, "repeats": repeats, "outdir": tmp}
    Path(f"{tmp}/job.json").write_text(json.dumps(job))
    subprocess.run([str(ensure_venv()), str(SIDE), f"{tmp}/job.json", f"{tmp}/out.json"],
                   check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    nt = json.loads(Path(f"{tmp}/out.json").read_text())
    rows = {}
    for name, (spec, _, _) in archs.items():
        for dt in dtypes:
            ref = np.load(nt[name][dt]["path"])
            k, th, sec = lazylab_kernels(spec, inputs[name][1], dt, repeats)
            off, diag = split_rel(k, ref["nngp"]), split_rel(th, ref["ntk"])
            rows[(name, dt)] = {"rel": max(off[0], diag[0]), "rel_diag": max(off[1], diag[1]),
                                "lazylab_s": sec, "nt_s": nt[name][dt]["seconds"],
                                "x": inputs[name][1], "nngp": ref["nngp"], "ntk": ref["ntk"]}
    return rows


def write_reference(rows: dict, archs: dict) -> None:
    ref = {}
    for (name, dt), r in rows.items():
        if dt != "float64":
            continue
        # a kernel entry depends only on its pair: the first m inputs' block is exact
        m = REFERENCE_N
        ref[name] = {"spec": archs[name][0], "x": r["x"][:m].tolist(),
                     "nngp": r["nngp"][:m, :m].tolist(), "ntk": r["ntk"][:m, :m].tolist()}
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    REFERENCE.write_text(json.dumps(ref, separators=(",", ":")))
    print(f"wrote {REFERENCE} ({len(ref)} architectures)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer depths, no timing shapes")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--write-reference", action="store_true")
    p.add_argument("--timing-only", action="store_true",
                   help="only the timing shapes (float32) and their GEMM share")
    p.add_argument("--no-peer", action="store_true",
                   help="lazylab side only (no neural-tangents): times and GEMM share")
    a = p.parse_args()
    if a.no_peer:
        lazylab_only(a.repeats)
        return
    archs = architectures(a.quick)
    with tempfile.TemporaryDirectory() as tmp:
        if a.write_reference:
            small = architectures(True)
            write_reference(run(small, ["float64"], 1, tmp), small)
            return
        rows = {} if a.timing_only else run(archs, ["float64", "float32"], a.repeats, tmp)
        if not a.quick:
            rows.update(run(timing_archs(), ["float32"], a.repeats, tmp))
    print(f"{'architecture':36s} {'dtype':8s} {'rel off-diag':>12s} {'rel diag':>9s} "
          f"{'lazylab s':>10s} {'nt s':>8s} {'nt/lazylab':>10s}")
    worst = [0.0, 0.0]
    for (name, dt), r in rows.items():
        if dt == "float64" and not name.startswith("time-"):
            worst = [max(worst[0], r["rel"]), max(worst[1], r["rel_diag"])]
        print(f"{name:36s} {dt:8s} {r['rel']:12.2e} {r['rel_diag']:9.2e} "
              f"{r['lazylab_s']:10.4f} {r['nt_s']:8.4f} {r['nt_s'] / r['lazylab_s']:10.2f}")
    if not a.timing_only:
        print(f"largest float64 relative difference: {worst[0]:.2e} off the diagonal, "
              f"{worst[1]:.2e} on it")
    if not a.quick:
        gemm_share(timing_archs(), a.repeats)


def lazylab_only(repeats: int) -> None:
    """The timing shapes on the lazylab side alone (wall seconds), with their GEMM share."""
    rng = np.random.default_rng(0)
    for name, (spec, shape, n) in timing_archs().items():
        x = rng.standard_normal((n,) + shape).round(6)
        print(f"{name:36s} float32 lazylab {lazylab_kernels(spec, x, 'float32', repeats)[2]:.4f} s")
    gemm_share(timing_archs(), repeats)


if __name__ == "__main__":
    main()
