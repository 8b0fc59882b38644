"""The opt-in C allocator setting of the projection (lazylab.machine.keep_freed_memory):
glibc's mmap and trim thresholds raised through mallopt, left alone on request or without
mallopt, the numbers of a computation the same either way, and never applied by a run's
execution policy (it can grow resident memory far past the peak)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from lazylab.machine import _KEEP_BYTES, ALLOCATOR_ENV, keep_freed_memory


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param, value) -> int:
        self.calls.append((param.value, value.value))
        return self.answer


def test_both_thresholds_raised(monkeypatch):
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    libc = FakeLibc()
    assert keep_freed_memory(libc) is True
    assert libc.calls == [(-3, _KEEP_BYTES), (-1, _KEEP_BYTES)]  # M_MMAP_, M_TRIM_THRESHOLD


def test_refused_setting_reported(monkeypatch):
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    assert keep_freed_memory(FakeLibc(answer=0)) is False


def test_no_mallopt_left_alone(monkeypatch):
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)
    assert keep_freed_memory(object()) is False


@pytest.mark.parametrize("value", ["system", " System "])
def test_switched_off(monkeypatch, value):
    monkeypatch.setenv(ALLOCATOR_ENV, value)
    libc = FakeLibc()
    assert keep_freed_memory(libc) is False
    assert libc.calls == []


SCRIPT = """
import sys, torch
from lazylab.machine import keep_freed_memory
print(keep_freed_memory())
g = torch.Generator().manual_seed(0)
acc = torch.zeros(20000, 450, dtype=torch.float64)
for _ in range(4):
    X = torch.randn(20000, 450, generator=g, dtype=torch.float64)
    acc += X * X
    del X
print(float(acc.sum()).hex())
"""


def test_same_numbers_either_way():
    """Blocks of 72 MB drawn, squared and freed, with the setting and without it: the same
    bits (the allocator places memory; it never changes a value)."""
    out = {}
    for mode in ("", "system"):
        env = {**os.environ, ALLOCATOR_ENV: mode}
        res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                             text=True, check=True)
        out[mode] = res.stdout.split()
    assert out["system"][0] == "False"
    if sys.platform == "linux" and platform.libc_ver()[0] == "glibc":
        assert out[""][0] == "True"
    assert out[""][1] == out["system"][1]


def test_a_run_leaves_the_allocator_alone():
    """ExecutionPolicy.apply() does not call mallopt (a run's memory stays the system's)."""
    code = ("import lazylab.machine as m\nfrom lazylab.runner.policy import ExecutionPolicy\n"
            "ExecutionPolicy(threads=1).apply()\nprint(m._applied)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split()[-1] == "None"
