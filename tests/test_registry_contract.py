"""Contract checks over the whole experiment registry (scikit-learn common-checks style):
:func:`lazylab.testing.experiment_checks` for every registered experiment, including ones
added later (the module docstring of :mod:`lazylab.testing` lists the checks), plus the paper
keys of the built-in experiments. Smoke runs take a few CPU seconds; their time is not asserted
(a timed unit test fails under load; `pytest --durations` shows them, benchmarks measure
speed)."""

from __future__ import annotations

import pytest

from lazylab.experiments import PAPERS, all_experiments
from lazylab.testing import experiment_checks

EXPERIMENTS = {e.id: e for e in all_experiments()}
CHECKS = [c for exp_id in sorted(EXPERIMENTS) for c in experiment_checks(EXPERIMENTS[exp_id])]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_contract(check):
    check()


@pytest.mark.parametrize("exp_id", sorted(EXPERIMENTS))
def test_builtin_paper_keys(exp_id):
    exp = EXPERIMENTS[exp_id]
    if type(exp).__module__.startswith("lazylab.experiments."):
        assert exp.paper in PAPERS
