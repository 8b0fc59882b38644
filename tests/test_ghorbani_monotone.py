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


def _curves(rise: float) -> Results:
    """Three seeds of a decreasing risk 1/x (+-0.002 seed noise) for NN and NT(I), with
    ``rise`` added from x = 8 on (a rise between x = 4 and x = 8)."""
    xs = [1.0, 2.0, 4.0, 8.0, 16.0]
    rows = []
    for method in ("NN", "NT(I)"):
        for s, eps in enumerate((-0.002, 0.0, 0.002)):
            for x in xs:
                rows.append({"method": method, "x_name": "n/d", "x": x, "metric": "risk",
                             "value": 1.0 / x + eps + (rise if x >= 8 else 0.0),
                             "kind": "simulation", "seed": s})
    return Results(rows)


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-samples", "ghorbani-mg-samples"])
@pytest.mark.parametrize("method", ["NN", "NT(I)"])
def test_monotone_claims_fail_on_a_rise(exp_id, method):
    """Seeds that differ by a constant give a rise SE of 0, so the tolerance is the 0.005
    floor: the decreasing curves hold, a rise of 0.075 between x = 4 and 8 fails."""
    from lazylab.experiments import get_experiment

    exp = get_experiment(exp_id)
    p = exp.resolve("quick")

    def claim(res: Results):
        return next(c for c in exp.claims(p, res) if c.id == f"{method}-monotone")

    assert claim(_curves(0.0)).held
    tilted = claim(_curves(0.2))  # 1/4 -> 1/8 + 0.2: a rise of 0.075
    assert tilted.failed and tilted.measured == pytest.approx(0.075, abs=1e-9)
    assert tilted.details["at_x"] == 8.0
