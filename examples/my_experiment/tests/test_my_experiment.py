"""The plugin's own test: lazylab's experiment contract, as scikit-learn's
parametrize_with_checks does for estimators."""

import pytest
from lazylab_my_experiment import NTKConvergence

from lazylab.testing import experiment_checks, run_in_memory


@pytest.mark.parametrize("check", experiment_checks(NTKConvergence()), ids=lambda c: c.name)
def test_contract(check):
    check()


def test_rate_holds_at_quick_scale():
    run = run_in_memory(NTKConvergence())
    assert run.claims["rate"].held, run.claims["rate"]
