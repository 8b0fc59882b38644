"""Every built-in experiment shows its quick-scale figure on its paper page (lazylab issue 49,
section 1): ``docs/figures/ID.png`` exists, is a PNG, and the docs hook puts it on the page."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from lazylab.experiments import all_experiments

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = sorted(e.id for e in all_experiments()
                 if type(e).__module__.startswith("lazylab.experiments."))


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def figures_of():
    return _load("lazylab_test_mkdocs_hooks", ROOT / "mkdocs_hooks.py")._figures


@pytest.mark.parametrize("eid", BUILTIN)
def test_each_experiment_has_a_committed_quick_figure(eid):
    png = ROOT / "docs" / "figures" / f"{eid}.png"
    assert png.is_file(), f"run bench/quick_figures.py on a quick run to add {png.name}"
    head = png.read_bytes()[:8]
    assert head == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000  # a drawn figure, not an empty canvas


def test_the_paper_page_shows_it(figures_of):
    for eid in BUILTIN:
        md = "\n".join(figures_of(eid, None))
        assert f"](../figures/{eid}.png)" in md, eid


def test_the_copy_script_names_a_missing_figure(tmp_path, capsys):
    qf = _load("lazylab_test_quick_figures", ROOT / "bench" / "quick_figures.py")
    assert qf.main([str(tmp_path), "arora-spectrum"]) == 1
    assert "arora-spectrum" in capsys.readouterr().err
