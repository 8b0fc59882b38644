"""The docs include files by path (``--8<-- "path"``, pymdownx.snippets from the repository
root): every included file exists, and the plugin page shows the example plugin whose own
tests run lazylab's experiment contract (examples/my_experiment/tests)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INCLUDE = re.compile(r'^--8<-- "([^"]+)"$', re.M)


def test_every_include_names_a_file() -> None:
    found = 0
    for page in (ROOT / "docs").rglob("*.md"):
        for path in INCLUDE.findall(page.read_text()):
            found += 1
            assert (ROOT / path).is_file(), f"{page.relative_to(ROOT)} includes {path}"
    assert found >= 1


def test_the_plugin_page_shows_the_tested_example() -> None:
    page = (ROOT / "docs" / "own-experiment.md").read_text()
    assert INCLUDE.findall(page)[0] == "examples/my_experiment/lazylab_my_experiment/__init__.py"
    tests = (ROOT / "examples/my_experiment/tests/test_my_experiment.py").read_text()
    assert "experiment_checks(NTKConvergence())" in tests


def test_snippets_resolve_from_the_repository_root() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "pymdownx.snippets" in config
    assert re.search(r"base_path:\s*\[?\s*['\"]?\.['\"]?", config), "snippets base_path must be ."
