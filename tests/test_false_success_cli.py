"""Clear exits everywhere (issue 46, section 4): each case gives one line and exit 2 (or the
documented code), never a traceback, an "unexpected ..." exit 1, a hang or a run that exits 3
having done nothing.

Ray cases need no running cluster: the address is refused by its form or by the TCP probe, the
bounded connect and the SIGTERM hand-over are checked on a stand-in for ``ray`` whose
``init`` never returns, and a local cluster's temporary folder is checked before Ray starts.
"""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lazylab.errors import InputError
from lazylab.runner import ray_backend
from lazylab.runner.address import check_address
from lazylab.runner.provenance import resume_policy_advice
from toy_experiment import ToyMean, cli

pytestmark = pytest.mark.usefixtures("toy_hooks")


def lazylab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m lazylab ARGS`` (no toy registered: the checks here run before the
    registry is loaded)."""
    full = {**os.environ, "COLUMNS": "200", "LAZYLAB_DEBUG": "", **(env or {})}
    for name in ("RAY_ADDRESS", "RAY_TMPDIR"):  # Ray reads both; this test sets its own
        if name not in (env or {}):
            full.pop(name, None)
    return subprocess.run([sys.executable, "-m", "lazylab", *args], capture_output=True,
                          text=True, env=full, timeout=600)


def one_error_line(res: Any, code: int = 2) -> str:
    """The single ``error:`` line of a refused command (exit ``code``, no traceback)."""
    out = res.stderr if isinstance(res, subprocess.CompletedProcess) else res.output
    assert exit_code(res) == code, out
    errors = [ln for ln in out.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in out and "unexpected" not in out, out
    return errors[0]


def exit_code(res: Any) -> int:
    """The exit code of a subprocess or of an in-process (CliRunner) call."""
    return res.returncode if isinstance(res, subprocess.CompletedProcess) else res.exit_code


@pytest.fixture
def free_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listener() -> Iterator[int]:
    """A local port that accepts TCP connections and never answers (not a Ray head node)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])


# ---- Ray: the address, the probe, the bounded connect, SIGTERM, the temporary folder --------
@pytest.mark.parametrize("addr", ["not an address", "127.0.0.1", "host:0", "host:65536",
                                  ":6379", "http://h:1", "h:1:2"])
def test_malformed_addresses_are_refused_by_form(addr):
    with pytest.raises(InputError, match="expected HOST:PORT"):
        check_address(addr)


def test_well_formed_addresses_name_the_host_and_port(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert check_address("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert check_address("ray://head.example.org:10001") == ("head.example.org", 10001)
    assert check_address("[::1]:6379") == ("::1", 6379)
    assert check_address("auto") is None and check_address("local") is None
    assert check_address(None) is None
    monkeypatch.setenv("RAY_ADDRESS", "oops")
    with pytest.raises(InputError, match="^RAY_ADDRESS 'oops': expected HOST:PORT"):
        check_address(None)


def test_cli_refuses_a_malformed_address_before_anything_runs():
    res = lazylab("reproduce", "arora-spectrum", "--backend", "ray", "--address",
                  "not an address")
    line = one_error_line(res)
    assert "--address 'not an address': expected HOST:PORT" in line
    assert "estimate" not in res.stdout  # refused before the cost estimate (nothing imported)


def test_cli_refuses_an_unreachable_address_at_once(free_port):
    """The case that hung for 829 s: nothing listens there, the probe says so (exit 2)."""
    res = lazylab("reproduce", "arora-spectrum", "--backend", "ray", "--address",
                  f"127.0.0.1:{free_port}")
    line = one_error_line(res)
    assert f"--address 127.0.0.1:{free_port}: no Ray cluster answers" in line
    assert "estimate" not in res.stdout


def test_probe_accepts_a_listening_port(listener):
    ray_backend.probe("x", "127.0.0.1", listener)  # no error


class _HangingRay:
    """A stand-in for ``ray`` whose ``init`` never connects (Python-level wait, so the
    alarm's handler runs), optionally doing what Ray's ``init`` does to SIGTERM first."""

    def __init__(self, term_self: bool = False):
        self.term_self = term_self
        self.shutdowns = 0

    def is_initialized(self) -> bool:
        return False

    def init(self, **kw: Any) -> None:
        if self.term_self:  # ray.init: signal.signal(SIGTERM, lambda *a: sys.exit(signum))
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
            os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(6000):  # at most 60 s: the test fails instead of hanging
            time.sleep(0.01)
        raise AssertionError("ray.init was not interrupted")

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_connecting_is_bounded(monkeypatch, listener):
    """A port that accepts but never speaks Ray: refused after CONNECT_SECONDS, exit 2."""
    monkeypatch.setattr(ray_backend, "CONNECT_SECONDS", 0.2)
    fake = _HangingRay()
    backend = ray_backend.RayBackend(f"127.0.0.1:{listener}")
    with pytest.raises(InputError) as err:
        backend._connect(fake)
    assert err.value.exit_code == 2
    assert str(err.value) == (f"--address 127.0.0.1:{listener}: the Ray cluster did not accept "
                              "this driver within 0 s (is it a Ray head node, and of the same "
                              "Ray version?)")
    assert fake.shutdowns == 1
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_sigterm_during_connect_reaches_the_kept_handler(monkeypatch, listener):
    """ray.init replaces the SIGTERM handler with sys.exit; the command line's handler is
    back in place, and a SIGTERM received meanwhile reaches it (the CLI: exit 143)."""

    class Stop(KeyboardInterrupt):  # as the command line's Terminated
        pass

    def kept(signum: int, frame: object) -> None:
        raise Stop()

    old = signal.signal(signal.SIGTERM, kept)
    try:
        with pytest.raises(Stop):
            ray_backend.RayBackend(f"127.0.0.1:{listener}")._connect(_HangingRay(term_self=True))
        assert signal.getsignal(signal.SIGTERM) is kept
    finally:
        signal.signal(signal.SIGTERM, old)


def test_an_unwritable_ray_temp_folder_is_refused(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("TMPDIR", str(blocker))
    with pytest.raises(InputError, match=r"cannot write Ray's temporary folder .*a-file/ray"):
        ray_backend.preflight(None)
    res = lazylab("reproduce", "arora-spectrum", "--backend", "ray",
                  env={"TMPDIR": str(blocker)})
    line = one_error_line(res)
    assert "cannot write Ray's temporary folder" in line and "RAY_TMPDIR" in line


# ---- the output: encodings, paths ------------------------------------------------------------
def test_ascii_stdout_gets_ascii_verdicts(tmp_path):
    """PYTHONIOENCODING=ascii: the run completes and so does its verdict table."""
    env = {"PYTHONIOENCODING": "ascii"}
    res = subprocess.run([sys.executable, str(Path(__file__).with_name("toy_cli.py")),
                          "reproduce", "toy-mean", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "COLUMNS": "200", "LAZYLAB_DEBUG": "", **env})
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "UnicodeEncodeError" not in res.stderr
    row = next(ln for ln in res.stdout.splitlines() if "second-moment" in ln)
    assert " yes " in row or " NO " in row, row
    assert res.stdout.isascii()


def test_unencodable_text_is_replaced_not_raised(monkeypatch):
    from lazylab.cli import _replace_unencodable

    buf = io.BytesIO()
    stream = io.TextIOWrapper(buf, encoding="ascii")
    monkeypatch.setattr(sys, "stdout", stream)
    _replace_unencodable()
    print("held ✓ in 0.5 µs", file=stream)
    stream.flush()
    assert buf.getvalue() == b"held ? in 0.5 ?s\n"


def test_out_id_existing_as_a_file_is_refused_before_computing(toy, tmp_path):
    (tmp_path / "toy-mean").write_text("not a folder")
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    line = one_error_line(res)
    assert f"{tmp_path / 'toy-mean'} exists and is not a folder" in line
    assert ToyMean.calls == 0


def test_an_output_file_existing_as_a_folder_is_refused_before_computing(toy, tmp_path):
    (tmp_path / "toy-mean" / "results.csv").mkdir(parents=True)
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    line = one_error_line(res)
    assert f"{tmp_path / 'toy-mean' / 'results.csv'} exists and is a folder" in line
    assert ToyMean.calls == 0
    (tmp_path / "toy-mean" / "results.csv").rmdir()
    (tmp_path / "report.md").mkdir()
    line = one_error_line(cli("reproduce", "toy-mean", "--out", str(tmp_path)))
    assert f"{tmp_path / 'report.md'} exists and is not a regular file" in line
    assert ToyMean.calls == 0


def test_robustness_refuses_an_out_id_file_before_computing(toy, tmp_path):
    (tmp_path / "toy-mean").write_text("not a folder")
    res = cli("robustness", "toy-mean", "--vary", "sigma=1,2", "--seeds", "1", "--out",
              str(tmp_path))
    line = one_error_line(res)
    assert f"{tmp_path / 'toy-mean'} exists and is not a folder" in line
    assert ToyMean.calls == 0


# ---- resume advice names the option that differs ---------------------------------------------
def test_resume_advice_names_each_differing_option():
    assert resume_policy_advice({"threads": 2, "memory_budget": None},
                                {"threads": 2, "memory_budget": 2**30}) == (
        "stored no --memory-budget, this run --memory-budget 1: to resume, leave out "
        "--memory-budget")
    assert resume_policy_advice({"threads": 4, "memory_budget": 2**29, "allow_tf32": True},
                                {"threads": 4, "memory_budget": None, "allow_tf32": False}) == (
        "stored --precision tf32, this run --precision fp32; stored --memory-budget 0.5, this "
        "run no --memory-budget: to resume, pass --precision tf32 --memory-budget 0.5")
    text = resume_policy_advice({"threads": 2}, {"threads": 2, "blas_threads": 2})
    assert text.endswith("no option recreates the stored policy")


def test_following_the_resume_advice_resumes(toy, tmp_path):
    out = str(tmp_path)
    assert cli("reproduce", "toy-mean", "--out", out).exit_code == 0
    line = one_error_line(cli("reproduce", "toy-mean", "--out", out, "--resume",
                              "--memory-budget", "1"))
    assert "stored no --memory-budget, this run --memory-budget 1" in line
    assert "to resume, leave out --memory-budget" in line and "--threads" not in line
    from lazylab.runner.policy import default_threads

    other = default_threads() + 1
    line = one_error_line(cli("reproduce", "toy-mean", "--out", out, "--resume",
                              "--threads", str(other), "--memory-budget", "1"))
    assert (f"stored --threads {default_threads()}, this run --threads {other}; stored no "
            "--memory-budget, this run --memory-budget 1: to resume, pass --threads "
            f"{default_threads()} and leave out --memory-budget") in line
    calls = ToyMean.calls
    res = cli("reproduce", "toy-mean", "--out", out, "--resume")  # the advice, followed
    assert res.exit_code == 0, res.output
    assert ToyMean.calls == calls  # everything was stored: nothing recomputed


def test_resume_advice_adds_a_stored_memory_budget(toy, tmp_path):
    out = str(tmp_path)
    assert cli("reproduce", "toy-mean", "--out", out, "--memory-budget", "0.5").exit_code == 0
    line = one_error_line(cli("reproduce", "toy-mean", "--out", out, "--resume"))
    assert line.endswith("execution options: stored --memory-budget 0.5, this run no "
                         "--memory-budget: to resume, pass --memory-budget 0.5; or use --fresh "
                         "to discard them, or a new --out DIR")
    res = cli("reproduce", "toy-mean", "--out", out, "--resume", "--memory-budget", "0.5")
    assert res.exit_code == 0, res.output


# ---- --max-time ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["0.001s", "9s", "0.1m", "0"])
def test_a_max_time_shorter_than_start_up_is_refused(toy, tmp_path, bad):
    line = one_error_line(cli("reproduce", "toy-mean", "--out", str(tmp_path), "--max-time",
                              bad))
    assert line == (f"error: --max-time must be between 10 seconds (the command's own start-up "
                    f"takes several) and a year; got {bad!r}")


def test_a_budget_that_fits_no_unit_is_refused_not_exit_3(toy, tmp_path, monkeypatch):
    """The cost model says a unit takes hours: --max-time 10s would start nothing, every time
    it is repeated with --resume. Refused (exit 2) naming the estimate and the budget."""
    monkeypatch.setattr(ToyMean, "est_seconds", {"quick": 3 * 3600.0, "paper": 20.0})
    for extra in ((), ("--resume",)):
        res = cli("reproduce", "toy-mean", "--out", str(tmp_path), "--max-time", "10s", "--yes",
                  *extra)
        line = one_error_line(res)
        want = (r"error: --max-time 10s: toy-mean's next group of 1 unit\(s\) is estimated at "
                r"\d+ min \(the cost model's estimate\), more than the \d+ s the budget "
                r"leaves after start-up \(\d+ s\); raise --max-time")
        assert re.fullmatch(want, line), line
    assert ToyMean.calls == 0


def test_a_stop_without_progress_exits_2(toy, tmp_path, monkeypatch):
    """The last guard: should the runner still stop before any unit (the pre-check passed),
    the command says so and exits 2, not 3."""
    import lazylab.cli as cli_mod

    monkeypatch.setattr(ToyMean, "est_seconds", {"quick": 3 * 3600.0, "paper": 20.0})
    monkeypatch.setattr(cli_mod, "_check_budget", lambda *a, **k: None)
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path), "--max-time", "10s", "--yes")
    assert exit_code(res) == 2, res.output
    assert "--max-time 10s: no unit fitted in the time left after start-up" in res.output
    assert ToyMean.calls == 0


# ---- warnings --------------------------------------------------------------------------------
def test_warnings_become_one_line_messages(monkeypatch, capsys):
    from lazylab.cli import _tool_warnings

    monkeypatch.delenv("LAZYLAB_DEBUG", raising=False)
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    _tool_warnings()
    # worker processes: numpy's floating-point warnings only
    assert os.environ["PYTHONWARNINGS"].split(",") == [
        "ignore:overflow encountered:RuntimeWarning",
        "ignore:invalid value encountered:RuntimeWarning",
        "ignore:divide by zero encountered:RuntimeWarning",
        "ignore:underflow encountered:RuntimeWarning"]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        for _ in range(2):
            warnings.warn("overflow encountered in exp", RuntimeWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err == "warning: overflow encountered in exp\n"


def test_warnings_keep_their_source_under_debug(monkeypatch):
    from lazylab.cli import _tool_warnings

    monkeypatch.setenv("LAZYLAB_DEBUG", "1")
    before = warnings.showwarning
    monkeypatch.setattr(warnings, "showwarning", before)
    _tool_warnings()
    assert warnings.showwarning is before



def test_workers_ignore_only_numpys_float_warnings(monkeypatch):
    """The inherited PYTHONWARNINGS silences numpy's overflow in a child process; a lazylab
    warning (a solver that did not converge) still shows."""
    from lazylab.cli import _tool_warnings

    monkeypatch.delenv("LAZYLAB_DEBUG", raising=False)
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    _tool_warnings()
    code = ("import warnings, numpy as np; np.exp(np.float64(1000)); np.float64(1) / 0; "
            "warnings.warn('did not reach the tolerance', RuntimeWarning)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=600)
    assert res.returncode == 0, res.stderr
    assert "overflow" not in res.stderr and "divide by zero" not in res.stderr
    assert "did not reach the tolerance" in res.stderr
