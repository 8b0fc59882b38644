"""The package cites only what a reader can find: the papers themselves (author, year, section,
equation, figure, appendix) and the documentation pages. It never names the project's internal
documents (the per-paper technical extractions, the product brief) or its issue tracker, which do
not ship with it. This test fails, naming file and line, on such a citation anywhere in the
source of :mod:`lazylab` (docstrings, comments and user-facing strings alike).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import lazylab

SRC = Path(lazylab.__file__).resolve().parent

#: What an unshipped citation looks like: an item or section of a per-paper extraction
#: ("spec C14", "spec Sec. 3.5"), a path into the extractions ("specs/..."), the product brief,
#: or an issue number ("issue 12", "Issue 3").
PATTERNS = {
    "extraction item": re.compile(r"\bspec C\d"),
    "extraction section": re.compile(r"\bspec Sec"),
    "extraction path": re.compile(r"\bspecs/"),
    "product brief": re.compile(r"PRODUCT\.md"),
    "issue number": re.compile(r"\bissue \d", re.IGNORECASE),
}

#: Exempt lines by exact text (path relative to the package, stripped line), so that no other
#: citation can hide behind them; none are left.
PENDING: frozenset[tuple[str, str]] = frozenset()


def find_citations(root: Path = SRC) -> list[str]:
    """Every line of a .py file under ``root`` that matches a pattern, as "path:line: kind: text"
    (path relative to ``root``), except the :data:`PENDING` ones."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for kind, pat in PATTERNS.items():
                if pat.search(line) and (rel, line.strip()) not in PENDING:
                    found.append(f"{rel}:{no}: {kind}: {line.strip()}")
                    break
    return found


def test_no_unshipped_citations():
    found = find_citations()
    assert not found, (
        "the source cites documents that do not ship with the package (cite the paper's "
        "section / equation / figure, or state the reason, or point to a docs/ page):\n"
        + "\n".join(found))


@pytest.mark.parametrize("text, kind", [
    ("(spec C14)", "extraction item"),
    ("as in spec Sec. 3.5", "extraction section"),
    ("see specs/bai-lee-2020.md", "extraction path"),
    ("within PRODUCT.md's 2 minutes", "product brief"),
    ("(lazylab issue 12, item 3)", "issue number"),
    ("Issue 4 says", "issue number"),
])
def test_patterns_catch_each_kind(tmp_path, text, kind):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(f'"""Doc.\n\n{text}\n"""\n', encoding="utf-8")
    assert find_citations(tmp_path) == [f"pkg/mod.py:3: {kind}: {text}"]


@pytest.mark.parametrize("text", [
    "spec = resolve_spec(exp)",          # a variable named spec
    "RunSpec(exp, params)",              # a class
    "the spec's parameters",             # a RunSpec in prose
    "Bai & Lee (2020), Sec. 3.1",        # a paper citation
    "tissue 3",                          # not the word issue
])
def test_patterns_spare_the_rest(tmp_path, text):
    (tmp_path / "mod.py").write_text(f"# {text}\n", encoding="utf-8")
    assert find_citations(tmp_path) == []


def test_every_paper_has_a_bibtex_entry_matching_citation_cff():
    from lazylab.bibtex import BIBTEX
    from lazylab.experiments import PAPERS

    assert set(BIBTEX) == set(PAPERS)
    cff = (SRC.parents[1] / "CITATION.cff").read_text()
    for entry in BIBTEX.values():
        assert entry.startswith("@inproceedings{") and entry.rstrip().endswith("}")
        year = entry.split("year      = {")[1][:4]
        assert f"year: {year}" in cff
