"""Test-wide settings: a non-interactive matplotlib backend, Hypothesis without clocks, and the
``one_thread`` fixture."""

import os

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("MPLBACKEND", "Agg")

# Hypothesis's defaults time each example (a 200 ms deadline, and a health check that fails
# when generating data is slow): under load these fail tests that are correct. No clock, and
# the same examples on every run (derandomize), so a result never depends on the machine.
settings.register_profile("lazylab", deadline=None, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("lazylab")


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of small-tensor tests: more threads only oversubscribe a
    shared CPU (up to 10x slower). Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def toy():
    """The toy experiment (tests/toy_experiment.py), registered for the module's tests."""
    from toy_experiment import registered

    with registered() as exp:
        yield exp


@pytest.fixture
def toy_hooks():
    """The toy experiment's test hooks reset before a test (call counters, failure hook).
    Modules that count calls use it with ``pytestmark = pytest.mark.usefixtures(...)``."""
    from toy_experiment import ToyMean

    ToyMean.calls, ToyMean.group_calls, ToyMean.fail_on_call = 0, 0, None
