"""The monotone claims' pooled rise SE (ghorbani samples)."""

from __future__ import annotations

import math

import pytest

from lazylab.experiments.base import Results
from lazylab.experiments.ghorbani.samples import _pooled_rise_se


def _rows(per_seed: dict[int, list[float]], xs: list[float]) -> Results:
    return Results([{"method": "NN", "x_name": "n/d", "x": x, "metric": "risk", "value": v,
                     "kind": "simulation", "seed": s}
                    for s, vals in per_seed.items() for x, v in zip(xs, vals, strict=True)])


def test_pooled_rise_se_by_hand():
    xs = [1.0, 2.0, 3.0]
    res = _rows({0: [1.0, 0.8, 0.7], 1: [1.0, 0.6, 0.75]}, xs)
    # rises per seed: (-0.2, -0.4) and (-0.1, +0.15); squared deviations 0.02 and 0.03125
    # over 1 + 1 degrees of freedom; SE of a mean of 2 seeds
    assert _pooled_rise_se(res, "NN", xs) == pytest.approx(math.sqrt(0.05125 / 2 / 2), rel=1e-12)


def test_one_seed_has_no_pooled_se():
    xs = [1.0, 2.0]
    assert _pooled_rise_se(_rows({0: [1.0, 0.9]}, xs), "NN", xs) == 0.0
