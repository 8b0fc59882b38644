"""Layer descriptions as JSON-able specs: a list of {"type": ..., parameters} dicts.

The spec is the common language of lazylab and neural-tangents' ``stax`` in
bench/bench_vs_neural_tangents.py and of the reference values in the tests: ``"Dense"``,
``"Conv"`` (``filter_shape``, ``strides``, ``padding`` as in stax: ``"SAME"``, ``"VALID"``,
``"CIRCULAR"``), ``"ABRelu"`` (``a``, ``b``), ``"Erf"``/``"Sin"`` (``a``, ``b``, ``c0``),
``"Gelu"``, ``"AvgPool"`` (``window``, ``strides``, ``padding``), ``"GlobalAvgPool"``,
``"Flatten"``, ``"LayerNorm"`` (``eps``, ``axis``: ``"channels"`` or ``"all"``, with ``nd``
the spatial dimensions for neural-tangents), ``"Residual"`` and ``"Product"`` (``branches``:
lists of specs; FanInSum and FanInProd);
affine layers take ``W_std``, ``b_std``, ``parameterization``, ``width``.

Example
-------
>>> net = from_spec([{"type": "Dense", "W_std": 2.0}, {"type": "ABRelu", "a": 0.0, "b": 1.0}])
>>> net.layers[1]
ABRelu(a=0.0, b=1.0)
"""

from __future__ import annotations

from typing import Any

from lazylab.kernels.deep.activations import ABRelu, Erf, Gelu, Sin
from lazylab.kernels.deep.layers import (
    AvgPool,
    Conv,
    Dense,
    Flatten,
    GlobalAvgPool,
    Layer,
    LayerNorm,
    Product,
    Residual,
    Serial,
)


def from_spec(specs: list[dict[str, Any]]) -> Serial:
    """The :class:`Serial` of a list of layer specs."""
    return Serial(*[layer_from_spec(s) for s in specs])


def layer_from_spec(spec: dict[str, Any]) -> Layer:
    """The layer of one spec entry (the entry neural-tangents builds the same layer from)."""
    t = spec["type"]
    kw = {k: v for k, v in spec.items() if k != "type"}
    if t == "Dense":
        return Dense(kw.get("W_std", 1.0), kw.get("b_std"), kw.get("parameterization", "ntk"),
                     kw.get("width"))
    if t == "Conv":
        strides = tuple(kw["strides"]) if kw.get("strides") else None
        return Conv(tuple(kw["filter_shape"]), strides, kw.get("padding", "valid").lower(),
                    kw.get("W_std", 1.0), kw.get("b_std"), kw.get("parameterization", "ntk"),
                    kw.get("width"))
    simple = {"ABRelu": lambda: ABRelu(kw["a"], kw["b"]), "Gelu": Gelu,
              "Erf": lambda: Erf(kw.get("a", 1.0), kw.get("b", 1.0), kw.get("c0", 0.0)),
              "Sin": lambda: Sin(kw.get("a", 1.0), kw.get("b", 1.0), kw.get("c0", 0.0)),
              "GlobalAvgPool": GlobalAvgPool, "Flatten": Flatten,
              "LayerNorm": lambda: LayerNorm(kw.get("eps", 1e-12), kw.get("axis", "channels"))}
    if t in simple:
        return simple[t]()
    if t == "AvgPool":
        return AvgPool(tuple(kw["window"]), tuple(kw.get("strides") or kw["window"]),
                       kw.get("padding", "valid").lower())
    if t in ("Residual", "Product"):
        fan_in = Residual if t == "Residual" else Product
        return fan_in(*[Serial(*[layer_from_spec(s) for s in b]) for b in kw["branches"]])
    raise ValueError(f"unknown layer type {t!r}")
