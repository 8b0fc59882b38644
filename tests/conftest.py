"""Test-wide settings: a non-interactive matplotlib backend, Hypothesis without clocks, the
``slow`` marker on the tests listed in ``SLOW_TESTS``, and the ``one_thread`` fixture."""

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

# The slow tests, in one place (the test files stay as their authors wrote them). Each entry
# took over ~15 s of one core in a full run (`pytest --durations=40`): a real subprocess, a
# process pool or a whole experiment. They carry the ``slow`` marker: plain `pytest` skips
# them (pyproject.toml's addopts, -m "not slow") so that the everyday suite stays short, and
# `make test` (so CI, .ci/run) runs every test (-m "slow or not slow"). An entry is a node id,
# or a test's id without its parameters for all of its cases. tests/test_slow_marker.py checks
# that every entry still names a test. Seconds: one core, a full run under load.
SLOW_TESTS = (
    # lazylab list, show, reproduce, --resume, report, robustness: six fresh interpreters
    "tests/test_plugin.py::test_plugin_end_to_end",  # 51 s
    # a fresh interpreter per case, each running a quick experiment to measure its peak
    "tests/test_memory_model_ab.py::test_peak_estimate_within_2x_of_the_measured_peak",  # 8-41 s
    "tests/test_runner.py::test_arora_spectrum_results_do_not_depend_on_workers",  # 40 s
    "tests/test_nichani_library.py::test_regularizers_at_w_star_scale_with_m",  # 35 s
    "tests/test_runner.py::test_two_workers_match_one",  # 26 s
    "tests/test_integrity.py::test_kill_9_at_random_points_then_resume_is_byte_identical",  # 18 s
    "tests/test_registry_contract.py::test_contract[bailee-xor:smoke-rows-and-claims]",  # 16 s
)


def is_slow(nodeid: str) -> bool:
    """Whether ``nodeid`` is listed in SLOW_TESTS, itself or as a case of a listed test."""
    return nodeid in SLOW_TESTS or nodeid.split("[", 1)[0] in SLOW_TESTS


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)


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
