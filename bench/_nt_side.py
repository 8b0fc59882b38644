"""The neural-tangents side of bench_vs_neural_tangents.py (runs in the side environment).

Reads a JSON job {"archs": {name: spec}, "inputs": {name: path.npz}, "dtypes": [...],
"repeats": r} from argv[1], builds each architecture with ``neural_tangents.stax``, evaluates
its jitted ``kernel_fn`` (NNGP and NTK together) on the inputs (channels-last), and writes
{name: {dtype: {"nngp": path, "ntk": path, "seconds": best time}}} to argv[2]. Only this file
imports JAX; lazylab never does.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def _layer(stax, spec: dict):  # type: ignore[no-untyped-def]
    t = spec["type"]
    kw = {k: v for k, v in spec.items() if k != "type"}
    if t in ("Dense", "Conv"):
        args = dict(W_std=kw.get("W_std", 1.0), b_std=kw.get("b_std"),
                    parameterization=kw.get("parameterization", "ntk"))
        width = kw.get("width") or 1
        if t == "Dense":
            return stax.Dense(width, **args)
        return stax.Conv(width, tuple(kw["filter_shape"]),
                         tuple(kw.get("strides") or (1,) * len(kw["filter_shape"])),
                         kw.get("padding", "VALID").upper(), **args)
    if t == "ABRelu":
        return stax.ABRelu(kw["a"], kw["b"])
    if t == "Erf":
        return stax.Erf(kw.get("a", 1.0), kw.get("b", 1.0), kw.get("c0", 0.0))
    if t == "Sin":
        return stax.Sin(kw.get("a", 1.0), kw.get("b", 1.0), kw.get("c0", 0.0))
    if t == "Gelu":
        return stax.Gelu(approximate=False)
    if t == "AvgPool":
        return stax.AvgPool(tuple(kw["window"]), tuple(kw.get("strides") or kw["window"]),
                            kw.get("padding", "VALID").upper())
    if t == "GlobalAvgPool":
        return stax.GlobalAvgPool()
    if t == "Flatten":
        return stax.Flatten()
    if t == "LayerNorm":
        # "all": channels and the nd spatial axes of channels-last data
        axis = -1 if kw.get("axis", "channels") == "channels" else tuple(
            range(1, kw["nd"] + 2))
        return stax.LayerNorm(axis=axis, eps=kw.get("eps", 1e-12))
    if t in ("Residual", "Product"):
        branches = [stax.serial(*[_layer(stax, s) for s in b]) if b else stax.Identity()
                    for b in kw["branches"]]
        fan_in = stax.FanInSum() if t == "Residual" else stax.FanInProd()
        return stax.serial(stax.FanOut(len(branches)), stax.parallel(*branches), fan_in)
    raise ValueError(f"unknown layer type {t!r}")


def main() -> None:
    job = json.load(open(sys.argv[1]))
    dtypes = job["dtypes"]
    import jax

    jax.config.update("jax_enable_x64", "float64" in dtypes)
    from neural_tangents import stax

    out: dict = {}
    for name, spec in job["archs"].items():
        _, _, kernel_fn = stax.serial(*[_layer(stax, s) for s in spec])
        fn = jax.jit(kernel_fn, static_argnames="get")
        data = np.load(job["inputs"][name])
        out[name] = {}
        for dt in dtypes:
            x = jax.numpy.asarray(data["x"].astype(dt))
            k = fn(x, x, get=("nngp", "ntk"))
            jax.block_until_ready(k)  # compile
            best = float("inf")
            for _ in range(job["repeats"]):
                t0 = time.perf_counter()
                k = fn(x, x, get=("nngp", "ntk"))
                jax.block_until_ready(k)
                best = min(best, time.perf_counter() - t0)
            path = f"{job['outdir']}/{name}-{dt}.npz"
            np.savez(path, nngp=np.asarray(k.nngp), ntk=np.asarray(k.ntk))
            out[name][dt] = {"path": path, "seconds": best}
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
