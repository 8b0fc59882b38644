"""An experiment installed as a plugin (examples/my_experiment, entry-point group
``lazylab.experiments``) runs end to end through the command line: list, show, reproduce,
--resume, report, robustness, and the fast refusal of a mistyped id. `make test` installs
the example package beside lazylab."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

ID = "my-ntk-convergence"

pytestmark = pytest.mark.skipif(
    not any(ep.name == ID for ep in entry_points(group="lazylab.experiments")),
    reason="the example plugin is not installed (pip install -e examples/my_experiment)")


def lazylab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lazylab", *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "COLUMNS": "200"})


def test_plugin_end_to_end(tmp_path):
    out = str(tmp_path / "runs")
    r = lazylab("list")
    assert r.returncode == 0 and ID in r.stdout, r.stderr
    r = lazylab("show", ID)
    assert r.returncode == 0 and "rate" in r.stdout, r.stderr
    r = lazylab("reproduce", ID, "--out", out, "--threads", "1")
    assert r.returncode == 0, r.stderr
    claims = json.loads((tmp_path / "runs" / ID / "claims.json").read_text())
    assert [c["id"] for c in claims] == ["rate"] and claims[0]["held"], claims
    first = (tmp_path / "runs" / ID / "results.csv").read_bytes()
    r = lazylab("reproduce", ID, "--out", out, "--threads", "1", "--resume")
    assert r.returncode == 0 and "0 unit(s) computed" in r.stderr + r.stdout, r.stderr
    assert (tmp_path / "runs" / ID / "results.csv").read_bytes() == first
    r = lazylab("report", out)
    assert r.returncode == 0, r.stderr
    assert "not a registered experiment" not in r.stderr + r.stdout
    r = lazylab("robustness", ID, "--seeds", "1", "--threads", "1", "--out",
                str(tmp_path / "rob"), "--yes")
    assert r.returncode == 0, r.stderr
    assert "rate: holds at" in r.stdout + r.stderr


def test_plugin_ids_are_known_before_torch_is_imported():
    code = ("import sys\nfrom lazylab.cli import main\nsys.argv = ['lazylab', 'reproduce', "
            f"'{ID[:-1]}']\ntry:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('torch' in sys.modules, code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=900)
    assert out.stdout.split()[-2:] == ["False", "2"], out.stdout + out.stderr
    assert f"did you mean {ID}" in out.stderr


def test_plugin_parameters_are_checked_the_slow_way(tmp_path):
    r = lazylab("reproduce", ID, "--set", "n=abc", "--out", str(tmp_path))
    assert r.returncode == 2 and "n" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = lazylab("reproduce", ID, "--set", "depth=3", "--out", str(tmp_path))
    assert r.returncode == 2 and "depth" in r.stderr, r.stderr
