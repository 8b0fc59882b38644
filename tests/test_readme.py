"""The README's experiment table is generated from the registry (`lazylab list --markdown`):
ids, figures, summaries and time estimates cannot drift from `lazylab list`. Its Python
blocks run as a user would paste them, and print what their comments say."""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
from pathlib import Path

import pytest

from lazylab.cli import experiments_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_experiment_table_equals_the_registry():
    text = README.read_text(encoding="utf-8")
    begin = text.index("<!-- experiments:begin")
    begin = text.index("\n", begin) + 1
    end = text.index("<!-- experiments:end -->")
    assert text[begin:end] == experiments_markdown(), (
        "README.md's experiment table is stale: run `make readme` and commit it")


def _python_blocks() -> list[str]:
    """The README's fenced ```python blocks, in order."""
    text = README.read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def _run_block(code: str) -> str:
    """Execute one README block in a fresh namespace (as a user pasting it would); its stdout."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})  # noqa: S102
    return buf.getvalue()


def test_readme_has_the_python_blocks_this_file_runs():
    blocks = _python_blocks()
    assert len(blocks) == 2, "a README python block was added or removed: test it here"
    assert "empirical_ntk(net, X)" in blocks[0] and "GridSearchCV" in blocks[1]


@pytest.mark.slow
def test_readme_ntk_block_prints_the_m_to_the_minus_half_error():
    """The first block says its maximum deviation is "~0.01, i.e. O(m^-1/2)" at m = 20000
    (m^-1/2 = 0.007): the printed value is within a few times that."""
    out = _run_block(_python_blocks()[0])
    value = float(re.search(r"tensor\(([-0-9.e]+)", out).group(1))
    assert 0 < value < 5 / math.sqrt(20_000), out


@pytest.mark.slow
def test_readme_estimator_block_runs_a_grid_search():
    """The second block fits a scikit-learn grid search over KernelRegressor's ridge and
    prints the best parameters: one of the grid's values."""
    out = _run_block(_python_blocks()[1])
    best = ast.literal_eval(out.strip().splitlines()[-1])
    assert set(best) == {"kernelregressor__ridge"}
    assert best["kernelregressor__ridge"] in (1e-3, 1e-2, 1e-1)
