"""The slow-test list (tests/conftest.py, ``SLOW_TESTS``) cannot rot: every entry still names a
collected test; plain `pytest` (pyproject.toml's addopts) leaves each of them out; the command
`make test` runs (the Makefile's test recipe) keeps them, with everything else plain `pytest`
runs. Collection only, in a fresh interpreter, over the files the list names."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SLOW_TESTS, is_slow

ROOT = Path(__file__).resolve().parents[1]


def make_test_args() -> list[str]:
    """The pytest arguments of the Makefile's ``test`` recipe (after ``-m pytest``)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("test:")))
    recipe = next(ln for ln in lines[start + 1:] if ln.startswith("\t"))
    words = shlex.split(recipe.strip())
    assert words[:3] == ["$(BIN)/python", "-m", "pytest"], recipe
    return words[3:]


#: Collects twice in one interpreter (the second time reuses the imports): FILES with
#: pyproject.toml's addopts as they are, then with ARGS after them; prints one JSON line of
#: [[exit status, node ids], ...].
COLLECT = """
import json, sys
import pytest

class Ids:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

files, extra = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = []
for args in ([], extra):
    rec = Ids()
    code = pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", *args, *files],
                       plugins=[rec])
    out.append([int(code), rec.ids])
print(json.dumps(out))
"""


def collected(*args: str) -> list[tuple[int, set[str]]]:
    """(exit status, node ids) of ``pytest --collect-only FILES`` run from the root (so with
    pyproject.toml's addopts), then of ``pytest --collect-only ARGS FILES``; FILES are the
    files SLOW_TESTS names."""
    files = sorted({entry.split("::", 1)[0] for entry in SLOW_TESTS})
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    r = subprocess.run([sys.executable, "-c", COLLECT, json.dumps(files), json.dumps(args)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return [(code, set(ids)) for code, ids in json.loads(r.stdout.splitlines()[-1])]


def named(entry: str, ids: set[str]) -> set[str]:
    return {i for i in ids if i == entry or i.split("[", 1)[0] == entry}


@pytest.fixture(scope="module")
def selections() -> tuple[set[str], set[str]]:
    """Node ids collected by plain `pytest` and by `make test`'s arguments."""
    (code_plain, plain), (code_make, make) = collected(*make_test_args())
    assert code_plain in (0, 5) and code_make == 0, (code_plain, code_make)
    return plain, make


def test_every_slow_entry_names_a_test(selections):
    _, make = selections
    missing = [entry for entry in SLOW_TESTS if not named(entry, make)]
    assert not missing, f"SLOW_TESTS entries that name no test (renamed or removed?): {missing}"


def test_plain_pytest_leaves_the_slow_tests_out_and_make_test_runs_all(selections):
    plain, make = selections
    slow = set().union(*(named(entry, make) for entry in SLOW_TESTS))
    assert slow and not slow & plain, sorted(slow & plain)
    assert plain and plain <= make, sorted(plain - make)


def test_an_entry_without_parameters_covers_every_case_of_its_test_only():
    entry = next(e for e in SLOW_TESTS if "[" not in e)
    assert is_slow(entry) and is_slow(entry + "[any-case]")
    assert not is_slow(entry + "_and_more") and not is_slow(entry.replace("::", "::x"))
    case = next(e for e in SLOW_TESTS if "[" in e)
    assert is_slow(case) and not is_slow(case.split("[", 1)[0] + "[another-case]")
