"""A unit that ends its process is a failed unit, never a success (lazylab issue 46, section 1):
``sys.exit(0)`` in ``run_unit`` (or ``prepare``) exits 1 with one line, config.json says
"failed", and the units finished before it stay stored; in a worker process too, where a
unit that kills its process outright (``os._exit(0)``) fails the same way."""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, Literal

import pytest
import torch
from pydantic import Field

from lazylab.experiments import REGISTRY
from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean, ToyParams, cli

pytestmark = pytest.mark.usefixtures("toy_hooks")


class ExitParams(ToyParams):
    how: Literal["sys_exit", "os_exit", "kill"] = Field(
        "sys_exit", description="how the unit ends its process (kill: SIGKILL, workers only)")
    where: Literal["unit", "prepare"] = Field("unit", description="which call exits")


class ExitingPlugin(ToyMean):
    """The toy experiment, except that the unit with n = 800 ends its process."""

    id = "toy-exit"
    Params = ExitParams

    def prepare(self, p: ExitParams, device: torch.device) -> Any:
        if p.where == "prepare":
            sys.exit(0)
        return None

    def run_unit(self, p: ExitParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        if int(key["n"]) == 800:
            if p.how == "os_exit":
                os._exit(0)
            if p.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            sys.exit(0)
        return super().run_unit(p, key, seed, device, prep)


@pytest.fixture
def plugin():
    ExitingPlugin.calls = 0  # counts run_unit calls in this process
    REGISTRY[ExitingPlugin.id] = ExitingPlugin()
    try:
        yield REGISTRY[ExitingPlugin.id]
    finally:
        REGISTRY.pop(ExitingPlugin.id, None)


def failed_run(res, out, *texts: str) -> None:
    """Exit 1, one line naming the failure, status "failed", no results.csv."""
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    for t in texts:
        assert t in res.stderr, (t, res.stderr)
    cfg = json.loads((out / "toy-exit" / "config.json").read_text())
    assert cfg["status"] == "failed"
    assert not (out / "toy-exit" / "results.csv").exists()


def stored_units(out) -> set[tuple[str, int]]:
    with Store(out / STORE_NAME) as st:
        return st.done("toy-exit", st.config_hash("toy-exit"))


def test_sys_exit_in_a_unit_fails_the_serial_run(plugin, tmp_path):
    res = cli("reproduce", "toy-exit", "--out", str(tmp_path), "--seeds", "1")
    failed_run(res, tmp_path, 'toy-exit: unit {"n":800} (seed index 0) failed',
               "the unit tried to end the process (SystemExit(0))")
    assert stored_units(tmp_path) == {('{"n":200}', 0)}
    assert ExitingPlugin.calls == 1  # n = 200; the run stopped at n = 800, n = 3200 never ran


def test_sys_exit_in_prepare_fails_the_run(plugin, tmp_path):
    res = cli("reproduce", "toy-exit", "--out", str(tmp_path), "--set", "where=prepare")
    failed_run(res, tmp_path, "toy-exit: prepare tried to end the process (SystemExit(0))")


@pytest.mark.parametrize("how, text", [
    ("sys_exit", "the unit tried to end the process (SystemExit(0))"),
    ("os_exit", "the unit tried to end the process (SystemExit('os._exit(0)'))"),
    ("kill", "a worker process died while running"),
])
def test_a_unit_ending_its_worker_process_fails_the_run(plugin, tmp_path, how, text):
    res = cli("reproduce", "toy-exit", "--out", str(tmp_path), "--workers", "2",
              "--seeds", "1", "--set", f"how={how}")
    failed_run(res, tmp_path, '{"n":800}', text)
    assert ExitingPlugin.calls == 0  # every unit ran in a worker process


def test_os_exit_in_a_serial_unit_fails_the_run_instead_of_ending_it(plugin, tmp_path):
    """os._exit would end this very process with status 0; while a unit runs it raises."""
    res = cli("reproduce", "toy-exit", "--out", str(tmp_path), "--seeds", "1",
              "--set", "how=os_exit")
    failed_run(res, tmp_path, '{"n":800}', "the unit tried to end the process",
               "os._exit(0)")
    import os
    assert os._exit.__module__ == "posix"  # restored after the unit


def test_a_broken_pool_names_every_unit_in_flight():
    """Which worker died is unknown once the pool breaks: all units in flight are named, so the
    message holds the culprit whatever finished first (the order depends on the machine's load)."""
    from types import SimpleNamespace

    from lazylab.runner.pool import _died

    def group(key: str) -> Any:
        return SimpleNamespace(units=[SimpleNamespace(key_json=key)])

    one = str(_died("x", [group('{"n":800}')]))
    assert 'running {"n":800} (' in one
    two = str(_died("x", [group('{"n":800}'), group('{"n":3200}'), group('{"n":800}')]))
    assert 'running one of {"n":3200}, {"n":800} (' in two
