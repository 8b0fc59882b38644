"""The command line on the toy experiment: list, show, reproduce, report, and bad input."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean, cli

FILES = ("results.csv", "claims.json", "config.json", "toy-mean.png", "toy-mean.svg")



pytestmark = pytest.mark.usefixtures("toy_hooks")



@pytest.fixture(scope="module")
def reference(toy, tmp_path_factory):
    """``lazylab reproduce toy`` (the paper key) uninterrupted, default quick scale (2 seeds)."""
    out = tmp_path_factory.mktemp("ref")
    res = cli("reproduce", "toy", "--out", str(out))
    assert res.exit_code == 0, res.output
    return out, res


def test_list_and_show(toy):
    res = cli("list")
    assert res.exit_code == 0 and "toy-mean" in res.stdout and "Monte Carlo" in res.stdout
    res = cli("show", "toy-mean")
    assert res.exit_code == 0, res.output
    out = res.stdout
    for text in ("sigma", "> 0", "one of plain, centered", "[1000, 10000, 100000]",
                 "second-moment", "within 4 standard errors", "work units"):
        assert text in out, text


def test_reproduce_writes_every_output(reference):
    out, res = reference
    for name in FILES:
        assert (out / "toy-mean" / name).is_file(), name
    header = (out / "toy-mean" / "results.csv").read_text().splitlines()[0]
    assert header == "method,kind,x_name,x,seed,metric,value"
    claims = json.loads((out / "toy-mean" / "claims.json").read_text())
    assert [set(c) for c in claims] == [
        {"id", "statement", "held", "measured", "expected", "tolerance", "status", "ratio",
         "comparison", "error_model", "details"}]
    assert claims[0]["status"] in ("held", "failed", "not_applicable")
    assert "✓" in res.stdout and "second-moment" in res.stdout  # the verdict table
    md = (out / "report.md").read_text()
    assert "toy-mean/toy-mean.png" in md and "second-moment" in md
    assert "toy-mean/toy-mean.svg" in (out / "report.html").read_text()
    cfg = json.loads((out / "toy-mean" / "config.json").read_text())
    assert cfg["seeds"] == 2 and cfg["scale"] == "quick" and cfg["device"] == "cpu"
    assert cfg["command"].startswith("lazylab reproduce toy --scale quick")
    assert "Traceback" not in res.output


def test_failed_unit_then_resume_matches_uninterrupted(toy, reference, tmp_path):
    ToyMean.fail_on_call = 4
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    assert res.exit_code == 1
    assert "training diverged" in res.stderr and "Traceback" not in res.output
    with Store(tmp_path / STORE_NAME) as st:
        assert len(st.done("toy-mean", st.config_hash("toy-mean"))) == 3
    # The report of the unfinished run says what is missing and how to finish it.
    res = cli("report", str(tmp_path))
    assert res.exit_code == 0 and "3 work unit(s) not stored" in res.stderr
    assert "Not assembled (run status: failed)" in (tmp_path / "report.md").read_text()
    ToyMean.calls, ToyMean.fail_on_call = 0, None
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path), "--resume")
    assert res.exit_code == 0, res.output
    assert ToyMean.calls == 3  # only the 3 missing units of 6
    ref = (reference[0] / "toy-mean" / "results.csv").read_bytes()
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == ref

    # Without --resume a run over finished units is refused before anything is deleted ...
    ToyMean.calls = 0
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    assert res.exit_code == 2 and ToyMean.calls == 0
    assert "already holds 6 finished unit(s)" in res.stderr and "--fresh" in res.stderr
    with Store(tmp_path / STORE_NAME) as st:
        assert st.count("toy-mean") == 6
    # ... and --fresh discards them and recomputes everything.
    assert cli("reproduce", "toy-mean", "--out", str(tmp_path), "--fresh").exit_code == 0
    assert ToyMean.calls == 6
    # Resuming with another configuration is refused before anything runs.
    ToyMean.calls = 0
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path), "--resume", "--set", "sigma=2")
    assert res.exit_code == 2 and ToyMean.calls == 0
    assert "changed: sigma 1.0 -> 2.0" in res.stderr and "--fresh" in res.stderr


def test_strict_exits_1_when_a_claim_fails(toy, tmp_path):
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path), "--set", "shift=1")
    assert res.exit_code == 0 and "✗" in res.stdout
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path), "--set", "shift=1", "--resume",
              "--strict")
    assert res.exit_code == 1 and "claim failed" in res.stderr
    assert ToyMean.calls == 6  # the --strict rerun reused every unit


def test_report_rebuilds_without_recomputing(reference):
    out, _ = reference
    d = out / "toy-mean"
    before = (d / "results.csv").read_bytes()
    claims = (d / "claims.json").read_bytes()
    for name in ("results.csv", "claims.json", "toy-mean.png", "toy-mean.svg"):
        (d / name).unlink()
    (out / "report.md").unlink()
    res = cli("report", str(out))
    assert res.exit_code == 0, res.output
    assert ToyMean.calls == 0
    assert (d / "results.csv").read_bytes() == before
    assert (d / "claims.json").read_bytes() == claims
    assert (d / "toy-mean.png").is_file() and (out / "report.md").is_file()


def test_report_uses_the_stored_theory_rows(reference, monkeypatch, tmp_path):
    """The run stores its theory rows; ``report`` reuses them (theory() is not called, the
    results are byte-identical), ``--recompute-theory`` computes them again, and a store
    without them (an older lazylab) gets them computed and stored by the rebuild."""
    import shutil

    out, _ = reference
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    d = copy / "toy-mean"
    before = (d / "results.csv").read_bytes()
    h = json.loads((d / "config.json").read_text())["config_hash"]
    with Store(copy / STORE_NAME) as st:
        stored = st.theory("toy-mean", h)
    assert stored and all(r["kind"] == "theory" for r in stored)
    calls = []
    original = ToyMean.theory

    def counted(self, p, prep=None):
        calls.append(1)
        return original(self, p, prep=prep)

    monkeypatch.setattr(ToyMean, "theory", counted)
    assert cli("report", str(copy)).exit_code == 0 and calls == []
    assert (d / "results.csv").read_bytes() == before
    assert cli("report", str(copy), "--recompute-theory").exit_code == 0 and calls == [1]
    assert (d / "results.csv").read_bytes() == before
    with Store(copy / STORE_NAME) as st:
        st._con.execute("DELETE FROM theory")
    assert cli("report", str(copy)).exit_code == 0 and calls == [1, 1]
    with Store(copy / STORE_NAME) as st:
        assert st.theory("toy-mean", h) == stored
        st._con.execute("UPDATE theory SET rows = '[]'")
    res = cli("report", str(copy))
    assert res.exit_code == 2 and "fail their checksum" in res.stderr
    assert "Traceback" not in res.output


BAD = [
    (("reproduce", "nope"), "unknown experiment or paper 'nope'"),
    (("reproduce", "toy-mea"), "did you mean toy-mean"),
    (("reproduce", "toy", "--set", "foo=1"), "unknown --set key 'foo'"),
    (("reproduce", "toy", "--set", "d"), "expected KEY=VALUE"),
    (("reproduce", "toy", "--set", "d=1"), "--set d=1: d must be >= 2 (toy-mean)"),
    (("reproduce", "toy", "--set", "estimator=fancy"), "estimator must be 'plain' or 'centered'"),
    (("reproduce", "toy", "--seeds", "0"), "--seeds must be between 1 and 10000"),
    (("reproduce", "toy", "--seeds", "1000000000"), "--seeds must be between 1 and 10000"),
    (("reproduce", "toy", "--set", "sigma=inf"), "sigma must be a finite number"),
    (("reproduce", "toy", "--set", "shift=nan"), "shift must be a finite number"),
    (("reproduce", "toy", "--resume", "--fresh"), "exclude each other"),
    (("reproduce", "toy", "--threads", "0"), "--threads must be between 1 and 1024"),
    (("reproduce", "toy", "--address", "1.2.3.4:6379"), "--address needs --backend ray"),
    (("reproduce", "toy", "--backend", "spark"), "--backend must be one of"),
    (("reproduce", "toy", "--scale", "huge"), "--scale must be one of quick, paper"),
    (("reproduce", "toy", "--device", "tpu"), "--device must be one of auto, cpu, cuda"),
    (("reproduce", "toy", "--workers", "0"), "--workers must be >= 1"),
    (("reproduce", "toy", "--precision", "fp16"), "--precision must be one of auto, fp32, tf32"),
    (("reproduce", "toy", "--allow-tf32", "--precision", "fp32"), "exclude each other"),
    (("reproduce", "toy", "--set", "data_path=/no/such/file"), "toy data set not found"),
    (("show", "nope"), "unknown experiment id 'nope'"),
    (("report", "/no/such/dir"), "does not exist"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_with_one_line(toy, tmp_path, args, message):
    extra = ("--out", str(tmp_path)) if args[0] == "reproduce" else ()
    res = cli(*args, *extra)
    assert res.exit_code == 2, res.output
    assert message in res.stderr
    assert "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_environment_dependent_errors(toy, tmp_path):
    if not torch.cuda.is_available():
        res = cli("reproduce", "toy", "--device", "cuda", "--out", str(tmp_path))
        assert res.exit_code == 2 and "no CUDA GPU" in res.stderr
    if importlib.util.find_spec("ray") is None:
        res = cli("reproduce", "toy", "--backend", "ray", "--out", str(tmp_path))
        assert res.exit_code == 2 and "pip install 'lazylab[ray]'" in res.stderr
    assert not (tmp_path / "toy-mean").exists()  # refused before anything was started
    res = cli("report", str(tmp_path))  # exists, but holds no results
    assert res.exit_code == 2 and "holds no lazylab results" in res.stderr


def test_python_dash_m_help():
    r = subprocess.run([sys.executable, "-m", "lazylab", "--help"], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0
    for cmd in ("list", "show", "reproduce", "report"):
        assert cmd in r.stdout


def test_report_goes_on_when_a_figure_cannot_be_drawn(toy, tmp_path, monkeypatch):
    out = str(tmp_path)
    assert cli("reproduce", "toy-mean", "--out", out).exit_code == 0

    def broken(self, p, results):
        raise ValueError("no such axis")

    monkeypatch.setattr(ToyMean, "plot", broken)
    res = cli("report", out)
    assert res.exit_code == 0, res.output
    assert "figure could not be drawn" in res.output and "no such axis" in res.output
    assert (tmp_path / "toy-mean" / "claims.json").is_file()


def test_paths_with_rich_markup_are_printed_literally(toy, tmp_path):
    out = tmp_path / "a[/]b[bold]c"
    res = cli("reproduce", "toy-mean", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "a[/]b[bold]c" in res.output.replace("\n", "")
    res = cli("report", str(out))
    assert res.exit_code == 0, res.output


def test_every_verdict_prints_its_comparison(toy, tmp_path):
    res = cli("reproduce", "toy-mean", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    claims = json.loads((tmp_path / "toy-mean" / "claims.json").read_text())
    assert {c["comparison"] for c in claims} <= {"within", ">=", "<="}
    assert " within " in res.output  # the two-sided second-moment claim
    md = (tmp_path / "report.md").read_text()
    assert "| test |" in md and " within " in md
    from lazylab.experiments.base import Claim, comparison_text

    # A one-sided claim prints its own test, never "within".
    c = Claim.test("c", "s", 0.967, ">=", 0.5, 0.0158, "MC")
    assert c.held and comparison_text(0.967, 0.5, 0.0158, c.comparison) == "0.967 >= 0.5 - 0.0158"


def test_show_states_bounds_that_depend_on_the_data_set():
    res = cli("show", "arora-spectrum")
    assert res.exit_code == 0, res.output
    assert "data-dependent bounds (quick: digits, classes 0 and 1): n_train + n_test <= 360" \
        in res.output.replace("\n", " ")


@pytest.mark.parametrize("command", ["reproduce", "robustness"])
def test_reproduce_and_robustness_share_the_execution_options(command, toy, tmp_path):
    """Both commands take --threads, --precision, --allow-tf32 and --memory-budget, with the
    same checks (exit 2 before any compute, nothing written)."""
    for args, msg in ((["--memory-budget", "0"], "--memory-budget must be a positive"),
                      (["--threads", "0"], "--threads must be between 1 and 1024"),
                      (["--precision", "fp16"], "--precision"),
                      (["--allow-tf32", "--precision", "fp32"], "exclude each other")):
        res = cli(command, "toy-mean", "--out", str(tmp_path / "o"), *args)
        assert res.exit_code == 2, (args, res.output)
        assert msg in res.output, (args, res.output)
    assert not (tmp_path / "o").exists()
