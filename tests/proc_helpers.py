"""Helpers for tests that drive a real ``lazylab`` process (signals, kill -9, locks)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

TOY_CLI = str(Path(__file__).with_name("toy_cli.py"))


def start(*args: str) -> subprocess.Popen[str]:
    """``python tests/toy_cli.py ARGS`` in the background (its own process group)."""
    env = {**os.environ, "COLUMNS": "200", "LAZYLAB_DEBUG": ""}
    return subprocess.Popen([sys.executable, TOY_CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "LAZYLAB_DEBUG": ""}
    return subprocess.run([sys.executable, TOY_CLI, *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def wait_for(cond: Callable[[], bool], timeout: float = 120, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


def stored(out: Path, exp_id: str = "toy-mean") -> int:
    """Units of ``exp_id`` committed in ``out``'s store (0 while it does not exist)."""
    db = out / "lazylab.sqlite"
    if not db.is_file():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT COUNT(*) FROM units WHERE experiment = ?",
                                   (exp_id,)).fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
