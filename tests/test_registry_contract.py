"""Contract checks over the whole experiment registry (scikit-learn common-checks style):
:func:`lazylab.testing.experiment_checks` for every registered experiment, including ones
added later (the module docstring of :mod:`lazylab.testing` lists the checks), plus the paper
keys of the built-in experiments. Smoke runs take a few CPU seconds; their time is not asserted
(a timed unit test fails under load; `pytest --durations` shows them, benchmarks measure
speed).

An experiment whose smoke run reads optional data (nichani-taylor: Debian's
dataset-fashion-mnist) has its data-reading checks skipped, naming the data, on a machine
without it, and run where it is installed (CI installs it): a missing data set is the only
failure turned into a skip, and only when the experiment's own validation says it is absent."""

from __future__ import annotations

from functools import cache

import pytest

from lazylab.errors import DataNotFound
from lazylab.experiments import PAPERS, all_experiments
from lazylab.testing import experiment_checks

EXPERIMENTS = {e.id: e for e in all_experiments()}
CHECKS = [c for exp_id in sorted(EXPERIMENTS) for c in experiment_checks(EXPERIMENTS[exp_id])]


@cache
def absent_data(exp_id: str) -> str | None:
    """Why the smoke run of ``exp_id`` cannot find its data on this machine (the
    experiment's DataNotFound message), or None when its data is there or it needs none."""
    exp = EXPERIMENTS[exp_id]
    try:
        exp.validate(exp.resolve("quick", dict(exp.smoke)))
    except DataNotFound as e:
        return str(e)
    except Exception:  # any other problem is the checks' to report
        return None
    return None


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.name)
def test_contract(check):
    try:
        check()
    except DataNotFound:
        reason = absent_data(check.name.split(":", 1)[0])
        if reason is None:  # the data is there: a DataNotFound is a defect
            raise
        pytest.skip(f"optional data absent: {reason}")


@pytest.mark.parametrize("exp_id", sorted(EXPERIMENTS))
def test_builtin_paper_keys(exp_id):
    exp = EXPERIMENTS[exp_id]
    if type(exp).__module__.startswith("lazylab.experiments."):
        assert exp.paper in PAPERS
