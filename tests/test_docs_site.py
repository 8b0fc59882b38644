"""The documentation site: it builds in strict mode, the API pages show no raw Sphinx markup,
every default shown in a Parameters table equals the code's (``inspect.signature``), and the
docstring rewrite (mkdocs_griffe.py) turns lazylab's docstring habits into numpydoc/Markdown.

The build runs once per session (about half a minute); it is skipped only when mkdocs is not
installed (``make docs`` installs the docs extra).
"""

from __future__ import annotations

import ast
import html
import importlib
import inspect
import logging
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj):`|``")
HEADING = re.compile(r'<h(\d) id="(lazylab\.[\w.]+)" class="doc doc-heading"')
ROW = re.compile(r'<tr class="doc-section-item">(.*?)</tr>', re.S)
CELL = re.compile(r"<td>(.*?)</td>", re.S)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make docs)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def _pages(site: Path) -> list[Path]:
    pages = sorted((site / "api").glob("*/index.html")) + sorted(
        (site / "papers").glob("*/index.html"))
    assert len(pages) >= 9, pages
    return pages


def test_no_raw_sphinx_roles_or_double_backticks(site: Path) -> None:
    bad = {}
    for page in _pages(site):
        text = _text(page.read_text())
        hits = [text[max(0, m.start() - 40): m.end() + 40] for m in RAW.finditer(text)]
        if hits:
            bad[str(page.relative_to(site))] = hits[:3]
    assert not bad, bad


def test_roles_become_links_to_documented_objects(site: Path) -> None:
    page = (site / "api" / "estimators" / "index.html").read_text()
    # ":func:`lazylab.solve.lstsq`" in RandomFeaturesRegressor's docstring
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="\.\./solve/#lazylab\.'
                     r'solve\.lstsq"><code>lazylab\.solve\.lstsq</code></a>', page)


def test_doctests_only_in_code_blocks(site: Path) -> None:
    """A doctest left to Markdown becomes three nested block quotes (``>>>``) holding one
    paragraph; a ``>>>`` outside <pre>/<code> is the same failure in another spelling."""
    for page in _pages(site):
        prose = re.sub(r"<pre.*?</pre>|<code.*?</code>", "", page.read_text(), flags=re.S)
        assert "&gt;&gt;&gt;" not in prose, page
        assert not re.search(r"<blockquote>\s*<blockquote>\s*<blockquote>", prose), page


def test_doctest_is_a_code_block(site: Path) -> None:
    """toolkit.unresolved's doctest: one code block, its lines kept apart (not a paragraph
    whose ``[:44]`` Markdown would read as a reference link)."""
    page = (site / "api" / "experiments" / "index.html").read_text()
    start = page.index('id="lazylab.experiments.toolkit.unresolved"')
    block = page[start:page.index('class="doc doc-heading"', start + 50)]
    code = [_text(m) for m in re.findall(r"<pre[^>]*>(.*?)</pre>", block, re.S)]
    assert any('>>> unresolved("s", "", 1.4' in c and "\n" in c and "[:44]" in c for c in code)


def _resolve(path: str) -> tuple[Any, dict[str, Any]]:
    """The object at a dotted path and the globals of the module that defines it."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        module = sys.modules[getattr(obj, "__module__", None) or ".".join(parts[:i])]
        return obj, vars(module)
    raise ImportError(path)


def _same(shown: str, default: Any, namespace: dict[str, Any]) -> bool:
    try:
        value = ast.literal_eval(shown)
    except (ValueError, SyntaxError):
        try:  # an expression of the defining module (K_SE, torch.float64, -math.inf)
            value = eval(shown, dict(namespace))
        except NameError:  # a full path the module does not import by that name
            value = _resolve(shown)[0]
    if isinstance(value, float) and isinstance(default, float) and math.isnan(default):
        return math.isnan(value)
    return type(value) is type(default) and value == default or value is default


def _tables(site: Path) -> list[tuple[str, str, str]]:
    """(object path, parameter name, default shown) for every Parameters table row."""
    rows = []
    for page in sorted((site / "api").glob("*/index.html")):
        text = page.read_text()
        heads = list(HEADING.finditer(text))
        for head, nxt in zip(heads, [*heads[1:], None], strict=True):
            body = text[head.end(): nxt.start() if nxt else len(text)]
            title = body.find('doc-section-title">Parameters:')
            if title < 0:
                continue
            table = body[title: body.index("</table>", title)]
            if "<th>Default</th>" not in table:
                continue
            for row in ROW.findall(table):
                cells = CELL.findall(row)
                # a name in a default (torch.float32) is a span titled with its full path
                default = re.sub(r'<span title="([^"]*)">[^<]*</span>', r"\1", cells[-1])
                rows.append((head.group(2), _text(cells[0]), _text(default)))
    return rows


def test_defaults_shown_equal_the_signature(site: Path) -> None:
    rows = _tables(site)
    shown = {(p, n): d for p, n, d in rows}
    # the case: numpydoc gave every name of "weight_std, covariance, scaling" the
    # first one's default (1.0)
    est = "lazylab.estimators.RandomFeaturesRegressor"
    assert shown[est, "covariance"] == "None" and shown[est, "scaling"] == "'none'"
    assert sum(p.startswith("lazylab.estimators.") for p, _, _ in rows) >= 15
    wrong = []
    for path, name, text in rows:
        obj, namespace = _resolve(path)
        param = inspect.signature(obj).parameters.get(name.lstrip("*"))
        if param is None:
            continue  # documented but not in the signature (e.g. a **kwargs key)
        if param.default is inspect.Parameter.empty:
            ok = text == "required" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
        else:
            ok = _same(text, param.default, namespace)
        if not ok:
            wrong.append((path, name, text, param.default))
    assert not wrong, wrong


def test_parameter_descriptions_are_not_types(site: Path) -> None:
    """A ``name : description`` line used to put the description in the Type column."""
    page = (site / "api" / "estimators" / "index.html").read_text()
    section = page[page.index('id="lazylab.estimators.RandomFeaturesRegressor"'):]
    row = next(r for r in ROW.findall(section) if "<code>width</code>" in r)
    cells = [_text(c) for c in CELL.findall(row)]
    assert cells[1] == "int" and cells[2] == "number of random features m."


def test_paper_pages_show_the_committed_figures(site: Path) -> None:
    from lazylab.experiments import all_experiments

    docs = ROOT / "docs"
    expected = {}
    for e in all_experiments():
        if not type(e).__module__.startswith("lazylab.experiments."):
            continue  # plugins have no paper page
        found = [p for p in (docs / "figures" / f"{e.id}.png", docs / f"{e.id}.png")
                 if p.is_file()] + sorted((docs / "paper-scale").glob(f"{e.id}-*.png"))
        expected[e.paper] = expected.get(e.paper, []) + [p.name for p in found]
    assert sum(map(len, expected.values())) >= 12  # the committed quick + paper-scale figures
    for paper, names in expected.items():
        page = (site / "papers" / paper / "index.html").read_text()
        shown = {Path(src).name for src in re.findall(r'<img [^>]*src="([^"]+)"', page)}
        assert set(names) <= shown, (paper, set(names) - shown)
        for src in re.findall(r'<img [^>]*src="([^"]+)"', page):
            assert (site / "papers" / paper / src).resolve().is_file(), src


# --- the rewrite itself, without a build -------------------------------------------------


@pytest.fixture(scope="module")
def rewrite() -> Any:
    pytest.importorskip("griffe", reason="the docs extra is not installed (make docs)")
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module("mkdocs_griffe").rewrite
    finally:
        sys.path.remove(str(ROOT))


def test_every_docstring_parses_without_warnings(rewrite: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """numpydoc's parser warns where it drops text (a prose line read as a parameter, a name
    that is not in the signature); after the rewrite no docstring of the package does."""
    import griffe

    ext = griffe.load_extensions(sys.modules[rewrite.__module__].SphinxToMarkdown)
    pkg = griffe.load("lazylab", search_paths=[str(ROOT / "src")], extensions=ext,
                      docstring_parser="numpy")
    stack: list[Any] = [pkg]
    parsed = 0
    with caplog.at_level(logging.WARNING, logger="griffe"):
        while stack:
            obj = stack.pop()
            stack += [m for m in obj.members.values() if not m.is_alias]
            if obj.docstring is not None:
                obj.docstring.parse("numpy")
                parsed += 1
    assert parsed > 300
    bad = [r.getMessage() for r in caplog.records if "Base class" not in r.getMessage()]
    assert not bad, bad


def test_rewrite_roles_and_backticks(rewrite: Any) -> None:
    doc = ("See :func:`~lazylab.solve.lstsq` and :class:`Thing`, ``x[0]`` and :meth:`Ex.\n"
           "group`.")
    found = {"lazylab.solve.lstsq": "lazylab.solve.lstsq", "Ex.group": "a.Ex.group"}
    out = rewrite(doc, found.get)
    assert out == ('See <autoref identifier="lazylab.solve.lstsq" optional>`lstsq`</autoref> '
                   "and `Thing`, `x[0]` and <autoref identifier=\"a.Ex.group\" optional>"
                   "`Ex.group`</autoref>.\n")


def test_rewrite_parameters_one_item_per_name(rewrite: Any) -> None:
    doc = ("Summary.\n\nParameters\n----------\nwidth : number of features.\n"
           "a, b : the two\n    halves.\nridge : >= 0; seed : its seed.\n\nMore prose.\n")
    out = rewrite(doc, known=frozenset({"seed"}))
    assert out == ("Summary.\n\nParameters\n----------\nwidth\n    number of features.\n"
                   "a\n    the two\n    halves.\nb\n    the two\n    halves.\n"
                   "ridge\n    \\>= 0\nseed\n    its seed.\n\nNotes\n-----\nMore prose.\n")


def test_rewrite_returns_prose_and_doctests(rewrite: Any) -> None:
    doc = ("Summary.\n\n>>> f(1)[:44]\n'a'\n\nReturns\n-------\n(n, n') tensor on\n"
           "X's device.\n")
    assert rewrite(doc) == ("Summary.\n\n```pycon\n>>> f(1)[:44]\n'a'\n```\n\nReturns\n"
                            "-------\n:\n    (n, n') tensor on\n    X's device.\n")
    assert rewrite("S.\n\nReturns\n-------\nHistory\n") == "S.\n\nReturns\n-------\nHistory\n"
