"""Nothing lost, nothing mixed (lazylab issue 12): signals, kill -9, locks, store faults,
atomic outputs, early validation and size guards, each on a real process or a real store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lazylab.runner import resolve_spec, run_experiment
from lazylab.runner.outputs import atomic_write
from lazylab.store import STORE_NAME, Store
from proc_helpers import alive, children, run, start, stored, wait_for
from toy_experiment import ToyMean, cli, one_line_exit_2

CPU = torch.device("cpu")
SLOW = ("--set", "sleep=0.25", "--seeds", "3")



pytestmark = pytest.mark.usefixtures("toy_hooks")



def reference_csv(toy, tmp_path_factory, **sets: str) -> bytes:
    out = tmp_path_factory.mktemp("reference")
    spec = resolve_spec(toy, "quick", sets, 3, CPU)
    with Store(out / STORE_NAME) as st:
        run_experiment(spec, out, st)
    return (out / "toy-mean" / "results.csv").read_bytes()


# ---- signals and kill -9 ---------------------------------------------------------------------
def pool_workers(pid: int) -> list[int]:
    """The process pool's workers among ``pid``'s children (multiprocessing's ``spawn_main``;
    not its resource tracker)."""
    out = []
    for child in children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmd:
            out.append(child)
    return out


def held_open(out: Path, gate: Path) -> subprocess.Popen[str]:
    """A two-worker run whose units wait for ``gate``, once it owns its lock and both pool
    workers exist. No unit can finish before the test opens the gate, so what the test does
    next happens to a running pool however slow the machine is."""
    p = start("reproduce", "toy-mean", "--out", str(out), "--workers", "2", "--seeds", "3",
              "--set", f"gate={gate}")

    def running() -> bool:
        return (p.poll() is not None
                or (_lock_pid(out / ".toy-mean.lock") == p.pid and len(pool_workers(p.pid)) >= 2))

    # the timeout only bounds a failure; the condition is the lock and the workers
    assert wait_for(running, timeout=600) and p.poll() is None, p.communicate()
    return p


def test_sigterm_stops_workers_and_marks_the_run_interrupted(tmp_path):
    p = held_open(tmp_path, tmp_path / "gate")
    try:
        workers = pool_workers(p.pid)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=600)  # bounds a failure only
    finally:
        os.killpg(p.pid, signal.SIGKILL) if p.poll() is None else None
    assert p.returncode == 143, err
    assert "terminated; finished units are stored" in err and "Traceback" not in err
    cfg = json.loads((tmp_path / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "interrupted"
    assert stored(tmp_path) == 0  # the gate was never opened
    # the bound only limits a failure: workers die with their parent (PR_SET_PDEATHSIG)
    assert wait_for(lambda: not any(alive(w) for w in workers), timeout=300)


def test_kill_9_of_the_main_process_leaves_no_worker(tmp_path):
    p = held_open(tmp_path, tmp_path / "gate")
    try:
        procs = children(p.pid)  # the two workers and multiprocessing's resource tracker
        assert len(procs) >= 2
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        # Every worker exits within its watchdog period once the parent is gone.
        assert wait_for(lambda: not any(alive(w) for w in procs), timeout=300), \
            [w for w in procs if alive(w)]
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_kill_9_at_random_points_then_resume_is_byte_identical(toy, tmp_path,
                                                               tmp_path_factory):
    """Kill a real run at 5 random points (seeded), resuming each time; then finish."""
    ref = reference_csv(toy, tmp_path_factory, sleep="0.25")
    rng = np.random.default_rng(12)
    out = tmp_path / "cut"
    points = []
    for i in range(5):
        args = ["reproduce", "toy-mean", "--out", str(out), *SLOW]
        if i:
            args.append("--resume")
        p = start(*args)
        before = stored(out)
        target = int(rng.integers(before, 9))  # kill once this many units are stored ...
        delay = float(rng.uniform(0.0, 0.3))   # ... plus a random fraction of a unit
        wait_for(lambda t=target, q=p: stored(out) >= t or q.poll() is not None, timeout=180)
        time.sleep(delay)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)
        points.append((target, round(delay, 3), stored(out)))
    res = run("reproduce", "toy-mean", "--out", str(out), *SLOW, "--resume", timeout=900)
    assert res.returncode == 0, res.stderr
    assert (out / "toy-mean" / "results.csv").read_bytes() == ref, points
    with Store(out / STORE_NAME) as st:  # nothing lost, nothing duplicated
        assert st.count("toy-mean") == 9
    assert json.loads((out / "toy-mean" / "config.json").read_text())["status"] == "complete"
    print("kill points (target units, delay s, units stored at kill):", points)


def test_a_second_writer_is_refused_naming_the_running_process(tmp_path):
    """A run held open by a gate (its units wait for a file) owns the lock; once the lock file
    names its pid, a second writer (--resume or --fresh) is refused in one line naming that pid,
    and the first run then completes every unit. Synchronized on the lock and the gate, never
    on elapsed time, so the outcome does not depend on the machine's load."""
    gate = tmp_path / "gate"
    out = tmp_path / "out"
    args = ("reproduce", "toy-mean", "--out", str(out), "--seeds", "3")
    p = start(*args, "--set", f"gate={gate}")
    lock = out / ".toy-mean.lock"
    try:
        # the timeout only bounds a failure; the condition is the lock naming the run
        assert wait_for(lambda: _lock_pid(lock) == p.pid, timeout=600), p.communicate()
        for extra in (("--resume",), ("--fresh",)):
            res = run(*args, *extra, timeout=900)
            assert res.returncode == 2, res.stderr
            assert f"another lazylab process (pid {p.pid})" in res.stderr, res.stderr
            assert len(res.stderr.strip().splitlines()) == 1
            assert p.poll() is None and _lock_pid(lock) == p.pid  # still the owner
        gate.touch()
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert stored(out) == 9  # 3 sizes x 3 seeds: nothing lost to the refused writers
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=60)


def _lock_pid(lock) -> int | None:
    """The pid a lock file names (None while it is absent or empty)."""
    try:
        text = lock.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


# ---- early validation, before torch -------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ("reproduce", "x", "--scale", "huge"), ("reproduce", "x", "--out", ""),
    ("reproduce", "x", "--seeds", "1000000000"), ("reproduce", "x", "--set", "=1"),
    ("reproduce", "x", "--out", "d" * 300), ("reproduce", "x", "--workers", "0"),
])
def test_argument_errors_are_reported_before_torch_is_imported(args):
    code = ("import sys; from lazylab.cli import main; sys.argv = ['lazylab', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    print('torch' in sys.modules, e.code, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=600)
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == "False 2", r.stderr
    assert len(lines) == 2 and lines[0].startswith("error: "), r.stderr


# ---- store faults -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished(toy, tmp_path_factory):
    out = tmp_path_factory.mktemp("finished")
    res = cli("reproduce", "toy-mean", "--out", str(out))
    assert res.exit_code == 0, res.output
    return out


def _copy(finished, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    return out, out / STORE_NAME


def _zero(db):
    db.write_bytes(b"")


def _truncate(db):
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def _garbage_header(db):
    data = bytearray(db.read_bytes())
    data[:16] = b"not a database!!"
    db.write_bytes(bytes(data))


def _garbage_pages(db):
    data = bytearray(db.read_bytes())
    rng = np.random.default_rng(3)
    data[4096:] = rng.integers(0, 256, len(data) - 4096, dtype=np.uint8).tobytes()
    db.write_bytes(bytes(data))


def _sql(statement):
    def f(db):
        con = sqlite3.connect(db)
        con.execute(statement)
        con.commit()
        con.close()
    return f


CORRUPTIONS = {
    "zero-bytes": (_zero, "is empty (0 bytes"),
    "truncated": (_truncate, "is corrupted or not a lazylab store"),
    "garbage-header": (_garbage_header, "is corrupted or not a lazylab store"),
    "garbage-pages": (_garbage_pages, "is corrupted or not a lazylab store"),
    "rows-edited": (_sql("UPDATE units SET rows = replace(rows, '1', '2') WHERE seed_index = 1"),
                    "fail their checksum"),
    "rows-unparsable": (_sql("UPDATE units SET rows = '[{', checksum = "
                             "'c1d1b8a4a1d7d5e3f9b7b4bbf8d3e0f6' WHERE seed_index = 0"),
                        "fail their checksum"),
    "no-checksums": (_sql("ALTER TABLE units DROP COLUMN checksum"), "older lazylab"),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_store_faults_exit_2_naming_the_file(toy, finished, tmp_path, name):
    corrupt, message = CORRUPTIONS[name]
    out, db = _copy(finished, tmp_path)
    corrupt(db)
    for args in (("report", str(out)), ("reproduce", "toy-mean", "--out", str(out), "--resume")):
        ToyMean.calls = 0
        res = cli(*args)
        one_line_exit_2(res, str(db), message)
        assert ToyMean.calls == 0  # nothing computed


def test_unparsable_rows_with_a_valid_checksum_are_named(toy, finished, tmp_path):
    from lazylab.store import checksum

    out, db = _copy(finished, tmp_path)
    con = sqlite3.connect(db)
    con.execute("UPDATE units SET rows = ?, checksum = ? WHERE seed_index = 0 AND unit_key = ?",
                ("[{", checksum("[{"), '{"n":800}'))
    con.commit()
    con.close()
    one_line_exit_2(cli("report", str(out)), "unit {\"n\":800} (seed index 0)", "do not parse")


def test_read_only_store_is_one_line(toy, finished, tmp_path):
    out, db = _copy(finished, tmp_path)
    if os.geteuid() == 0:  # root writes anyway: exercise the message via sqlite's own error
        with Store(db) as st:
            e = st._fault(sqlite3.OperationalError("attempt to write a readonly database"))
        assert str(db) in str(e) and "read-only" in str(e) and e.exit_code == 2
        return
    os.chmod(db, 0o444)
    os.chmod(out, 0o555)
    try:
        one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(out), "--resume"),
                        str(out))
    finally:
        os.chmod(out, 0o755)
        os.chmod(db, 0o644)


def test_torn_or_crafted_config_json_exits_2(toy, finished, tmp_path):
    out, _ = _copy(finished, tmp_path)
    cfg = out / "toy-mean" / "config.json"
    text = cfg.read_text()
    cfg.write_text(text[: len(text) // 2])
    one_line_exit_2(cli("report", str(out)), str(cfg), "cannot be read")
    crafted = json.loads(text)
    crafted["seeds"] = 10**12
    cfg.write_text(json.dumps(crafted))
    # refused by validation (the message), so never looped over 10^12 seeds; no wall clock
    one_line_exit_2(cli("report", str(out)), str(cfg), "seeds must be between 1 and 10000")


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    atomic_write(path, "old\n")

    def boom(*a):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]  # no temporary left


# ---- small input checks -------------------------------------------------------------------------
def test_out_must_be_a_usable_directory(toy, tmp_path):
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", ""), "--out must name a directory")
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(tmp_path / ("x" * 300))),
                    "longer than 255 bytes")
    (tmp_path / "file").write_text("")
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(tmp_path / "file")),
                    "is not a directory")
    one_line_exit_2(cli("report", ""), "must name a directory")


def test_report_escapes_user_strings(toy, tmp_path):
    import re

    evil = "<img src=x onerror=alert(1)>|*b*"
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    cfg_path = tmp_path / "toy-mean" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["summary"] = evil
    cfg["params"]["data_path"] = evil
    cfg_path.write_text(json.dumps(cfg))
    from lazylab.report import write_report

    md, page = write_report(tmp_path)
    # Outside fenced code blocks (literal text in Markdown) every special character is escaped.
    prose = re.sub(r"(?ms)^(`{3,}).*?^\1$", "", md.read_text())
    assert not re.search(r"(?<!\\)<img src=x", prose)
    assert md.read_text().count("\\<img src=x onerror=alert\\(1\\)\\>\\|\\*b\\*") == 2
    assert "<img src=x" not in page.read_text()
    assert page.read_text().count("&lt;img src=x onerror=alert(1)&gt;") >= 2


def test_cost_guard(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(ToyMean, "cost", lambda self, p, scale="quick": (7200.0, None))
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(tmp_path)), "exceeds 1 h",
                    "--yes")
    assert not (tmp_path / "toy-mean").exists()
    from lazylab.runner import machine_memory

    big = 4.0 * (machine_memory() or 2**40)
    monkeypatch.setattr(ToyMean, "cost", lambda self, p, scale="quick": (1.0, big))
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(tmp_path), "--yes"),
                    "estimated peak memory", "exceeds this machine's")
    monkeypatch.undo()
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    assert res.exit_code == 0 and "estimate toy-mean:" in res.stdout


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(toy, tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".toy-mean.lock").symlink_to(target)
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(out)), "symbolic link")
    assert target.read_text() == "keep me\n"


def test_report_links_stay_inside_the_folder(toy, tmp_path):
    """A run folder named like a URL scheme gives relative, URL-encoded links only."""
    out = tmp_path / "javascript:alert(document.cookie)"
    res = cli("reproduce", "toy-mean", "--out", str(out))
    assert res.exit_code == 0, res.output
    evil = out / "javascript:alert(1)"
    (out / "toy-mean").rename(evil)
    from lazylab.report import write_report

    md, page = write_report(out)
    html_text = page.read_text()
    import re

    links = re.findall(r"(?:href|src)='([^']*)'", html_text)
    assert links and all(u.startswith("./") for u in links), links
    assert "javascript%3Aalert%281%29/results.csv" in html_text
    md_links = re.findall(r"\]\(([^)]*)\)", md.read_text())
    assert md_links and all(u.startswith("./") for u in md_links), md_links


def test_the_recorded_command_replays_with_resume(toy, tmp_path):
    """config.json's command and the report's Reproduce line carry the policy options, and a
    resume under another policy says which options recreate the stored one."""
    out = str(tmp_path)
    res = cli("reproduce", "toy-mean", "--out", out, "--threads", "1", "--memory-budget", "1")
    assert res.exit_code == 0, res.output
    cfg = json.loads((tmp_path / "toy-mean" / "config.json").read_text())
    assert "--threads 1" in cfg["command"] and "--memory-budget 1" in cfg["command"]
    assert "--threads 1 --memory-budget 1" in (tmp_path / "report.md").read_text()
    res = cli("reproduce", "toy-mean", "--out", out, "--threads", "2", "--resume")
    one_line_exit_2(res, "pass --threads 1 --memory-budget 1")


def test_robustness_has_fresh_and_refuses_a_repeated_value(toy, tmp_path):
    args = ("robustness", "toy-mean", "--vary", "sigma=1,2", "--seeds", "1", "--out",
            str(tmp_path), "--threads", "1")
    assert cli(*args).exit_code == 0
    again = cli(*args)
    assert again.exit_code == 2 and "--fresh" in again.output
    assert cli(*args, "--fresh").exit_code == 0
    one_line_exit_2(cli("robustness", "toy-mean", "--vary", "sigma=2,2", "--out",
                        str(tmp_path)), "listed twice")


def test_out_with_control_characters_or_too_long_for_sqlite_is_refused(toy, tmp_path):
    for bad in ("runs\x1b[31m", "a\rb", "a\nb"):
        one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(tmp_path / bad)),
                        "control characters")
    deep = tmp_path / "/".join(["d" * 100] * 5)
    one_line_exit_2(cli("reproduce", "toy-mean", "--out", str(deep)), "SQLite")
    assert not (tmp_path / ("d" * 100)).exists()  # refused before creating the tree
    one_line_exit_2(cli("reproduce", "toy-mean", "--backend", "serial", "--workers", "4",
                        "--out", str(tmp_path / "o")), "--backend serial")


def test_a_temporary_file_left_by_a_killed_writer_is_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".fig.svg.{dead}.tmp"
    stale.write_text("half a figure")
    live = tmp_path / f".fig.svg.{os.getppid()}.tmp"  # a writer still running: kept
    live.write_text("in progress")
    atomic_write(tmp_path / "fig.svg", "<svg/>")
    assert (tmp_path / "fig.svg").read_text() == "<svg/>"
    assert not stale.exists() and live.exists()
