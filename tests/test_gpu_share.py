"""Runs sharing one GPU: reservations in a ledger, admission by memory (runner.gpu_share)."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest
import torch

from lazylab.errors import InputError
from lazylab.runner import gpu_share as gs

GiB = 2**30


@pytest.fixture(autouse=True)
def ledger(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYLAB_GPU_LEDGER", str(tmp_path))
    return tmp_path


def test_reservation_is_held_while_the_block_runs_and_released_after(ledger):
    with gs.reserve("card", 3 * GiB, 10 * GiB):
        held = json.loads((ledger / "card.json").read_text())
        assert held == {str(__import__("os").getpid()): 3 * GiB}
    assert json.loads((ledger / "card.json").read_text()) == {}


def test_a_reservation_larger_than_the_card_is_refused_at_once():
    with pytest.raises(InputError, match="expects 9.5 GiB of GPU memory; the card has 9.0 GiB"):
        with gs.reserve("card", int(9.5 * GiB), 10 * GiB):
            pass


def _hold(ledger: str, started, release) -> None:
    import os
    os.environ["LAZYLAB_GPU_LEDGER"] = ledger
    with gs.reserve("card", 6 * GiB, 10 * GiB):
        started.set()
        release.wait(600)  # the test releases it; the bound only ends an abandoned holder


def test_a_second_run_waits_until_the_first_releases(ledger):
    ctx = mp.get_context("spawn")
    started, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=_hold, args=(str(ledger), started, release))
    other.start()
    try:
        assert started.wait(600)  # a spawned interpreter importing torch is slow under load
        waited = []
        with pytest.raises(InputError, match="other runs hold 6.0 of 9.0 GiB"):
            with gs.reserve("card", 6 * GiB, 10 * GiB, wait=0.3, poll=0.1,
                            on_wait=lambda used, usable: waited.append(used)):
                pass
        assert waited == [6 * GiB]
        release.set()
        other.join(600)
        assert other.exitcode == 0
        # the holder is gone, so the room is there at the first look: no waiting allowed
        with gs.reserve("card", 6 * GiB, 10 * GiB, wait=0, poll=0.1):
            pass
    finally:
        release.set()
        other.join(30)


def test_entries_of_dead_processes_are_ignored(ledger):
    (ledger / "card.json").write_text(json.dumps({"999999999": 8 * GiB, "junk": "x"}))
    with gs.reserve("card", 8 * GiB, 10 * GiB, wait=0):
        pass


def test_no_reservation_off_cuda():
    with gs.for_run(torch.device("cpu"), 10**15, 4):
        pass
