"""The README's experiment table is generated from the registry (`lazylab list --markdown`):
ids, figures, summaries and time estimates cannot drift from `lazylab list`."""

from __future__ import annotations

from pathlib import Path

from lazylab.cli import experiments_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_experiment_table_equals_the_registry():
    text = README.read_text(encoding="utf-8")
    begin = text.index("<!-- experiments:begin")
    begin = text.index("\n", begin) + 1
    end = text.index("<!-- experiments:end -->")
    assert text[begin:end] == experiments_markdown(), (
        "README.md's experiment table is stale: run `make readme` and commit it")
