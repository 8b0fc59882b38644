"""The cost guard's models (issue 12 item 7): accepted sizes that would run for hours or run out
of memory are estimated as such, so ``reproduce`` asks for ``--yes`` or refuses with exit 2."""

from __future__ import annotations

import pytest
import torch

from lazylab.errors import InputError
from lazylab.experiments import all_experiments
from lazylab.experiments.cost import check_cost, estimate, scaled_cost
from lazylab.runner import resolve_spec

CPU = torch.device("cpu")
EXPS = {e.id: e for e in all_experiments()}
GIB = 2**30


def _estimate(exp_id: str, **sets: str):
    exp = EXPS[exp_id]
    return estimate(resolve_spec(exp, "quick", sets, None, CPU))


@pytest.mark.parametrize("exp_id", sorted(EXPS))
def test_the_cost_model_is_anchored_at_the_quick_run(exp_id):
    """At its own quick parameters every cost model gives the measured est_seconds (within
    2x, the quick contract), so the size scaling starts from a measured time."""
    exp = EXPS[exp_id]
    secs, peak = exp.cost(exp.resolve("quick"), "quick")
    per_seed = exp.est_seconds["quick"] / exp.default_seeds.get("quick", 1)
    assert per_seed / 2 <= secs <= 2 * per_seed, (exp_id, secs, per_seed)
    assert peak is None or 0 < peak < 8 * GIB


@pytest.mark.parametrize("exp_id, sets", [
    ("bailee-xor", {"steps": "100000"}),
    ("bailee-xor", {"m": "100000"}),
    ("arora-convergence", {"steps": "1000000"}),
    ("bailee-higher-order", {"n_draws": "10000"}),
    ("allenzhu-norm", {"epochs": "10000"}),
    ("ghorbani-qf-width", {"rf_samples": "100000000"}),
    ("bailee-expressivity", {"n_test": "100000"}),
])
def test_hours_of_work_need_yes(exp_id, sets):
    e = _estimate(exp_id, **sets)
    assert e.seconds > 3600
    with pytest.raises(InputError, match="exceeds 1 h; pass --yes"):
        check_cost([e], yes=False, memory=64 * GIB)
    check_cost([e], yes=True, memory=64 * GIB)


def test_expressivity_width_and_dimension_are_refused_above_memory():
    """m_max = 1e7 (the documented maximum) with d = 100: four float64 (m, d) matrices alone
    are 32 GB; the model's peak grows like m d and is refused on a 16 GiB machine."""
    small = _estimate("bailee-expressivity")
    big = _estimate("bailee-expressivity", m_max="10000000", d="100")
    assert big.peak_bytes > 16 * GIB > small.peak_bytes
    with pytest.raises(InputError, match="exceeds this machine's 16.0 GiB"):
        check_cost([big], yes=True, memory=16 * GIB)
    # The estimate grows monotonically in every size it models.
    prev, prev_peak = 0.0, 0.0
    for m_max in ("10000", "100000", "1000000", "10000000"):
        now = _estimate("bailee-expressivity", m_max=m_max)
        assert now.seconds > prev and now.peak_bytes > prev_peak
        prev, prev_peak = now.seconds, now.peak_bytes


def test_scaled_cost_multiplies_the_default_by_each_size_ratio():
    exp = EXPS["bailee-xor"]
    q = exp.resolve("quick")
    base, _ = scaled_cost(exp, q, "quick", {"steps": 1, "m": 1})
    twice, _ = scaled_cost(exp, exp.resolve("quick", {"steps": 2 * q.steps}), "quick",
                           {"steps": 1, "m": 1})
    sq, _ = scaled_cost(exp, exp.resolve("quick", {"m": 3 * q.m}), "quick", {"m": 2})
    assert twice == pytest.approx(2 * base, rel=1e-12)
    assert sq == pytest.approx(9 * base, rel=1e-12)
