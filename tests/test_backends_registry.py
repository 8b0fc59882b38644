"""The backend registry is read when asked, so a backend registered later is known at once."""

from __future__ import annotations

import pytest

from lazylab.errors import InputError
from lazylab.runner import backends
from lazylab.runner.serial import SerialBackend


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A private copy of the registry, so a test's registration never leaks into another."""
    monkeypatch.setattr(backends, "_FACTORIES", dict(backends._FACTORIES))


def test_builtin_names_in_order() -> None:
    assert backends.backend_names() == ("local", "serial", "pool", "ray")


def test_registered_backend_is_listed_and_accepted(registry: None) -> None:
    before = backends.backend_names()
    with pytest.raises(InputError, match=r"^--backend must be one of local, serial, pool, ray; "
                                         r"got 'x'$"):
        backends.check_backend("x")
    backends.register_backend("x", lambda w, a, n: SerialBackend())
    assert backends.backend_names() == (*before, "x")
    backends.check_backend("x")  # accepted: no InputError
    backends.check_backend("x", workers=4)  # the serial-only worker rule is the serial name's
    assert isinstance(backends.make_backend("x"), SerialBackend)
    with pytest.raises(InputError, match=r"one of local, serial, pool, ray, x; got 'y'$"):
        backends.check_backend("y")


def test_reregistering_replaces_without_duplicating(registry: None) -> None:
    backends.register_backend("serial", lambda w, a, n: SerialBackend())
    assert backends.backend_names() == ("local", "serial", "pool", "ray")


def test_runner_package_exports_the_live_function(registry: None) -> None:
    from lazylab import runner

    backends.register_backend("late", lambda w, a, n: SerialBackend())
    assert "late" in runner.backend_names()
    assert not hasattr(runner, "BACKENDS")
