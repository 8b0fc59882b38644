"""Shared pieces of the Nichani, Bai & Lee (2022) experiments: data, the Fig. 1 target's harmonic
energies, and the aggregation of final values over seeds."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch

from lazylab.data import gaussian, nichani_fig1_target, sphere
from lazylab.data.spherical import ridge_degree_norms
from lazylab.data.targets import Target
from lazylab.experiments.base import Results
from lazylab.experiments.toolkit import sub_generator
from lazylab.ids import paper_of

PAPER = paper_of(__name__)  # the key of this package in lazylab.ids.PAPERS


def draw_inputs(n: int, d: int, inputs: Literal["sphere", "gaussian"],
                generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """x ~ Unif(S^{d-1}(sqrt d)) (the paper) or N(0, I_d) (the authors' code)."""
    if inputs == "sphere":
        return sphere(n, d, radius=math.sqrt(d), generator=generator, dtype=dtype)
    return gaussian(n, d, generator=generator, dtype=dtype)


def fig1_energies(d: int, variant: str) -> np.ndarray:
    """||P_l f*||^2, l = 0..3, of the Fig. 1 target on the sphere (a ridge function of beta.x).

    ``"code"``: f* = (z + z^2 - 1)/sqrt(3); ``"paper"``: x_1 + z^2 - 1, whose degree-1 part
    x_1 has energy 1 and is orthogonal to z^2 - 1 (degree 2).
    """
    if variant == "code":
        return ridge_degree_norms(lambda z: (z + z**2 - 1) / math.sqrt(3), d, 3)
    en = ridge_degree_norms(lambda z: z**2 - 1, d, 3)
    en[1] += 1.0
    return en


def fig1_problem(d: int, n: int, n_test: int, inputs: Literal["sphere", "gaussian"],
                 variant: str, seed: int, device: torch.device, dtype: torch.dtype,
                 ) -> tuple[Target, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(f*, X, y, X_test, y_test) for the Fig. 1 task, each stream from its own sub-generator."""
    f = nichani_fig1_target(d, generator=sub_generator(seed, "target"), variant=variant)
    X = draw_inputs(n, d, inputs, sub_generator(seed, "train"), torch.float64)
    Xt = draw_inputs(n_test, d, inputs, sub_generator(seed, "test"), torch.float64)
    y, yt = f(X), f(Xt)
    return (f, X.to(device, dtype), y.to(device, dtype), Xt.to(device, dtype),
            yt.to(device, dtype))


def final_stats(results: Results, method: str, metric: str, se_metric: str | None = None,
                **filters) -> tuple[float, float, int]:
    """(mean, SE, seeds) of the last-x value of (method, metric) over seeds.

    SE is the larger of the seed SEM and, when ``se_metric`` rows exist, the within-seed Monte
    Carlo SE (root mean square over seeds, divided by sqrt(seeds)); nan mean when absent.
    """
    s = results.series(method, metric, **filters)
    if len(s.x) == 0:
        return math.nan, math.nan, 0
    mean, sem, k = float(s.mean[-1]), float(s.sem[-1]), int(s.n[-1])
    if se_metric is not None:
        e = results.series(method, se_metric, **filters)
        if len(e.x):
            vals = [float(r["value"]) for r in results.select(
                method=method, metric=se_metric, kind="simulation", **filters)
                if float(r["x"]) == float(e.x[-1])]
            mc = math.sqrt(float(np.mean(np.square(vals))) / max(len(vals), 1))
            sem = max(sem, mc)
    return mean, sem, k


def _final_by_seed(results: Results, method: str, metric: str, **filters) -> dict[Any, float]:
    """{seed: value at the largest x} of the simulation rows (method, metric, filters)."""
    best: dict[Any, tuple[float, float]] = {}
    for r in results.select(method=method, metric=metric, kind="simulation", **filters):
        x, s = float(r["x"]), r.get("seed")
        if s not in best or x > best[s][0]:
            best[s] = (x, float(r["value"]))
    return {s: v for s, (_, v) in best.items()}


def paired_gap(results: Results, a: tuple[str, dict], b: tuple[str, dict], metric: str,
               se_metric: str | None = None) -> tuple[float, float, int]:
    """(mean over seeds of final a - final b, its SE, seeds): a paired comparison.

    The two methods share each seed's data and initialization, so the gap is averaged per
    seed; its SE is the larger of the seed spread of the per-seed gaps / sqrt(k) (k >= 2) and
    the within-seed Monte Carlo SE sqrt(se_a^2 + se_b^2) (root mean square over seeds) /
    sqrt(k).
    """
    va = _final_by_seed(results, a[0], metric, **a[1])
    vb = _final_by_seed(results, b[0], metric, **b[1])
    seeds = sorted(set(va) & set(vb), key=str)
    if not seeds:
        return math.nan, math.nan, 0
    gaps = np.array([va[s] - vb[s] for s in seeds])
    k = len(seeds)
    se = float(gaps.std(ddof=1) / math.sqrt(k)) if k > 1 else 0.0
    if se_metric is not None:
        sa = _final_by_seed(results, a[0], se_metric, **a[1])
        sb = _final_by_seed(results, b[0], se_metric, **b[1])
        mc = [sa.get(s, 0.0) ** 2 + sb.get(s, 0.0) ** 2 for s in seeds]
        se = max(se, math.sqrt(float(np.mean(mc)) / k))
    return float(gaps.mean()), se, k
