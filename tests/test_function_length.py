"""No function in lazylab has more than 60 lines of code.

A function's length is its ``def`` line through its last line, from :mod:`ast`, less the lines
of its docstring: decorators and the docstring do not count, while blank lines and comments
inside the body do. Nested functions and methods count on their own, named by their qualified
name (and their lines also count towards the enclosing function). A function in ``ALLOWLIST``
may not grow; once it is within the limit it must leave the list (the list is empty and stays
so).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

#: The most lines of code (docstring excluded) a function may have.
MAX_LINES = 60

SRC = Path(__file__).resolve().parents[1] / "src" / "lazylab"

#: The current offenders, ``"module/path.py::qualname": lines``. Only ever remove entries or
#: lower a count; a split function must be taken off this list.
ALLOWLIST: dict[str, int] = {}


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """``def`` line through last line, less the lines the docstring spans."""
    span = (node.end_lineno or node.lineno) - node.lineno + 1
    first = node.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        span -= (first.end_lineno or first.lineno) - first.lineno + 1
    return span


def _lengths(path: Path) -> dict[str, int]:
    """Every function and method in one module: ``qualname -> lines``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                found[name] = _code_lines(child)
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _all_lengths() -> dict[str, int]:
    return {f"{path.relative_to(SRC).as_posix()}::{name}": n
            for path in sorted(SRC.rglob("*.py")) for name, n in _lengths(path).items()}


@pytest.fixture(scope="module")
def lengths() -> dict[str, int]:
    return _all_lengths()


def test_the_scan_sees_the_package(lengths: dict[str, int]) -> None:
    # Guards against a wrong SRC silently passing every check below.
    assert "solve/cg.py::kernel_ridge_cg" in lengths
    assert "runner/backends.py::register_backend" in lengths


def test_no_new_function_past_a_screen(lengths: dict[str, int]) -> None:
    long = {k: n for k, n in lengths.items() if n > MAX_LINES and k not in ALLOWLIST}
    assert not long, (f"functions longer than {MAX_LINES} lines: {long}; split them into "
                      "named pieces (tests/test_function_length.py)")


def test_allowlisted_functions_only_shrink(lengths: dict[str, int]) -> None:
    grown = {k: (cap, lengths[k]) for k, cap in ALLOWLIST.items()
             if k in lengths and lengths[k] > cap}
    assert not grown, (f"allowlisted functions grew (listed, now): {grown}; split them "
                       "instead of adding lines")


def test_allowlist_has_no_stale_entries(lengths: dict[str, int]) -> None:
    stale = sorted(k for k in ALLOWLIST if lengths.get(k, 0) <= MAX_LINES)
    assert not stale, (f"{stale} are now {MAX_LINES} lines or less (or gone): remove them from "
                       "ALLOWLIST in tests/test_function_length.py")


def test_lengths_count_def_through_last_line_less_the_docstring(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("@dec\ndef f():\n    '''doc'''\n\n    return 1\n\n\n"
                   "class C:\n    def g(self):\n        def h():\n            pass\n"
                   "        return h\n", encoding="utf-8")
    assert _lengths(src) == {"f": 3, "C.g": 4, "C.g.h": 2}


def test_a_multiline_docstring_does_not_count_but_comments_and_blanks_do(
        tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('def f():\n    """one\n\n    three\n    """\n    # note\n\n    return 1\n'
                   'def g():\n    x = "not a docstring"\n    return x\n', encoding="utf-8")
    assert _lengths(src) == {"f": 4, "g": 3}
