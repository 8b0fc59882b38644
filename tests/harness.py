"""The one in-memory run harness of the test suite, and result perturbations for falsification.

:func:`run_in_memory` assembles an experiment's results table exactly as the runner does
(every unit x seed index with the runner's seed ``derive_seed(id, key, seed_index)``, then the
theory rows; ``validate`` and ``prepare`` when the experiment has them), without a store or
files, and evaluates the claims. :func:`tilted` and :func:`perturbations` build the perturbed
tables that falsification tests feed back into ``claims``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from lazylab.experiments import get_experiment
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results
from lazylab.seeding import derive_seed

CPU = torch.device("cpu")

__all__ = ["CPU", "Run", "perturbations", "run_in_memory", "tilted"]


@dataclass
class Run:
    """An in-memory run: experiment, resolved parameters, results table and claims."""

    exp: Experiment
    p: ExperimentParams
    results: Results
    claims: dict[str, Claim]
    prep: Any = None

    def reclaim(self, results: Results) -> dict[str, Claim]:
        """The claims recomputed on another (e.g. tilted) results table."""
        return {c.id: c for c in self.exp.claims(self.p, results)}


def _overrides_prepare(exp: Experiment) -> bool:
    base = getattr(Experiment, "prepare", None)
    return base is not None and getattr(type(exp), "prepare", base) is not base


def run_in_memory(exp: Experiment | str, overrides: dict[str, Any] | None = None, *,
                  seeds: int = 1, scale: str = "quick", device: torch.device = CPU) -> Run:
    """Every unit x seed, then the theory rows, as the runner assembles them; then the claims.

    ``overrides`` are typed values (``{"d": 12}``), not ``--set`` strings.
    """
    if isinstance(exp, str):
        exp = get_experiment(exp)
    p = exp.resolve(scale, overrides or {})
    if hasattr(exp, "validate"):
        exp.validate(p)
    prep, kw = None, {}
    if _overrides_prepare(exp):
        prep = exp.prepare(p, device)
        kw = {"prep": prep}
    rows: list[dict[str, Any]] = []
    for key in exp.units(p):
        for s in range(seeds):
            rows += [{**r, "seed": s}
                     for r in exp.run_unit(p, key, derive_seed(exp.id, key, s), device, **kw)]
    rows += [{**r, "seed": None} for r in exp.theory(p, **kw)]
    results = Results(rows)
    claims = {c.id: c for c in exp.claims(p, results)}
    return Run(exp, p, results, claims, prep)


def tilted(results: Results, fn: Callable[[dict[str, Any]], float | None]) -> Results:
    """A copy of ``results`` whose simulation rows get ``value *= fn(row)`` (None: unchanged).

    Theory rows are never changed: a falsification test moves the measurements away from the
    prediction.
    """
    out = []
    for r in results.rows:
        f = fn(r) if r.get("kind") == "simulation" else None
        out.append(r if f is None else {**r, "value": float(r["value"]) * f})
    return Results(out)


def perturbations(results: Results) -> Iterator[tuple[str, Results]]:
    """Named perturbations of the simulation rows used by the registry contract test.

    Global scalings (x0.3, x3), power tilts along each x axis (value * (x/x_min)^t for
    t = +-1, +-3, +-6), per-method scalings (x0.2, x5) of every simulated method, and scalings
    (x0.1, x10) of one
    (method, metric) at a time (a measurement moves while a reference stored beside it does
    not). A claim that can fail is failed under at least one of them.
    """
    sims = results.select(kind="simulation")
    yield "scale x0.3", tilted(results, lambda r: 0.3)
    yield "scale x3", tilted(results, lambda r: 3.0)
    xmin: dict[str, float] = {}
    for r in sims:
        x = float(r["x"])
        if x > 0:
            xmin[r["x_name"]] = min(xmin.get(r["x_name"], math.inf), x)
    for name, x0 in xmin.items():
        for t in (1.0, -1.0, 3.0, -3.0, 6.0, -6.0):
            yield (f"tilt ({name}/{x0:g})^{t:+g}",
                   tilted(results, lambda r, name=name, x0=x0, t=t:
                          (float(r["x"]) / x0) ** t
                          if r["x_name"] == name and float(r["x"]) > 0 else None))
    for m in dict.fromkeys(r["method"] for r in sims):
        for f in (0.2, 5.0):
            yield (f"{m} x{f:g}",
                   tilted(results, lambda r, m=m, f=f: f if r["method"] == m else None))
    for m, k in dict.fromkeys((r["method"], r["metric"]) for r in sims):
        for f in (0.1, 10.0):
            yield (f"{m}/{k} x{f:g}",
                   tilted(results, lambda r, m=m, k=k, f=f:
                          f if r["method"] == m and r["metric"] == k else None))
