"""A resume never mixes code versions (lazylab issue 46, section 1): the identity of stored
units covers every source file a unit runs (all of lazylab, and a plugin's own package), and a
``--resume`` after an edit to any of them is refused with one line naming the file.

The tests edit a copy of lazylab's source (the hashed tree is pointed at it), never the real
source tree."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch

from lazylab.experiments import code_identity as ci
from lazylab.runner import resolve_spec, run_experiment
from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean, cli, one_line_exit_2

CPU = torch.device("cpu")


class StopAfter:
    """A progress sink that interrupts the run (like Ctrl-C) after k stored units."""

    def __init__(self, k: int):
        self.k, self.seen = k, 0

    def started(self, spec, pending, total) -> None:
        pass

    def unit_done(self, spec, unit) -> None:
        self.seen += 1
        if self.seen == self.k:
            raise KeyboardInterrupt


@pytest.fixture
def source_copy(tmp_path, monkeypatch):
    """A copy of lazylab's source tree standing for the installed package, hashed afresh."""
    copy = tmp_path / "lazylab-src"
    shutil.copytree(ci.LAZYLAB_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ci, "LAZYLAB_ROOT", copy)
    monkeypatch.setattr(ci, "_CACHE", {})
    return copy


def interrupted_run(toy, out, k: int = 2) -> str:
    """Run toy-mean (3 sizes x 2 seeds) until k units are stored; its config hash."""
    spec = resolve_spec(toy, "quick", {}, 2, CPU)
    with Store(out / STORE_NAME) as st, pytest.raises(KeyboardInterrupt):
        run_experiment(spec, out, st, progress=StopAfter(k))
    return spec.config_hash


def test_the_identity_hashes_every_lazylab_file_and_the_plugin(toy):
    ident = ToyMean.code_identity()
    assert set(ident) == {"lazylab", "toy_experiment"}
    assert list(ident["toy_experiment"]) == ["toy_experiment.py"]
    files = ident["lazylab"]
    # Shared modules, not only the experiment's paper package, are covered.
    for f in ("experiments/toolkit.py", "runner/spec.py", "models/two_layer.py",
              "experiments/nichani/spectrum.py"):
        assert f in files, f
    assert all(len(h) == 16 and int(h, 16) >= 0 for h in files.values())
    assert len(files) == len(list(ci.LAZYLAB_ROOT.rglob("*.py")))


def test_an_edit_to_shared_code_between_kill_and_resume_is_refused(toy, tmp_path,
                                                                   source_copy):
    out = tmp_path / "out"
    old_hash = interrupted_run(toy, out)
    toolkit = source_copy / "experiments" / "toolkit.py"
    original = toolkit.read_bytes()
    toolkit.write_bytes(original + b"\n# an edit to sub_generator's module\n")
    ci._CACHE.clear()  # what a new process sees
    res = cli("reproduce", "toy-mean", "--out", str(out), "--resume")
    one_line_exit_2(res, "--resume", "lazylab source changed (experiments/toolkit.py)")
    # Nothing was computed or mixed: the store holds the two units of the old code only.
    with Store(out / STORE_NAME) as st:
        assert st.config_hash("toy-mean") == old_hash
        assert len(st.done("toy-mean", old_hash)) == 2
    # The same source again: the resume is accepted and computes only the 4 missing units.
    toolkit.write_bytes(original)
    ci._CACHE.clear()
    ToyMean.calls = 0
    res = cli("reproduce", "toy-mean", "--out", str(out), "--resume")
    assert res.exit_code == 0, res.output
    assert ToyMean.calls == 4
    cfg = json.loads((out / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "complete" and cfg["timing"]["units_reused"] == 2


def test_an_edit_to_the_plugin_package_is_refused_naming_it(tmp_path, monkeypatch):
    """A plugin that is a package: its own files are hashed, and an edit to one is named."""
    pkg = tmp_path / "plug" / "fsplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from fsplug.core import PlugMean\n")
    (pkg / "core.py").write_text(
        "from toy_experiment import ToyMean\n\n\n"
        "class PlugMean(ToyMean):\n    id = 'fs-plug-mean'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    monkeypatch.setattr(ci, "_CACHE", {})
    from fsplug import PlugMean

    try:
        before = PlugMean.code_identity()
        assert set(before) == {"lazylab", "fsplug"}
        assert set(before["fsplug"]) == {"__init__.py", "core.py"}
        (pkg / "helpers.py").write_text("SCALE = 2.0\n")
        ci._CACHE.clear()
        after = PlugMean.code_identity()
        assert ci.describe_code_change(before, after) == [
            "plugin fsplug source changed (helpers.py)"]
    finally:
        for name in ("fsplug", "fsplug.core"):
            sys.modules.pop(name, None)


def test_the_refusal_names_few_files_and_counts_the_rest():
    old = {"lazylab": {f"m{i}.py": "a" for i in range(6)}}
    new = {"lazylab": {f"m{i}.py": "b" for i in range(6)}}
    assert ci.describe_code_change(old, new) == [
        "lazylab source changed (m0.py, m1.py, m2.py and 3 more)"]
    assert ci.describe_code_change(old, old) == []
