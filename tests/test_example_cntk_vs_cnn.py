"""examples/cntk_vs_cnn.py at a small size, on scikit-learn's 8x8 digits (always present):
every depth x head row is written, the CNTK beats chance by a binomial bound, the Gram matrices
are symmetric and PSD, the one-pass kernels of all depths equal ``DeepKernel`` of each depth,
and bad arguments or missing data exit 2 with one line."""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from scipy.stats import binom

from lazylab.kernels.deep import DeepKernel

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cntk_vs_cnn.py"


def _load():
    spec = importlib.util.spec_from_file_location("example_cntk_vs_cnn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def example():
    return _load()


@pytest.fixture(scope="module")
def small_run(example, tmp_path_factory):
    out = tmp_path_factory.mktemp("cntk") / "rows.csv"
    rows = example.main(["--dataset", "digits", "--n-train", "150", "--n-test", "100",
                         "--gap-n-train", "80", "--gap-n-test", "60", "--gap-side", "4",
                         "--depths", "2-3", "--heads", "flatten,gap", "--width", "8",
                         "--epochs", "2", "--seed", "1", "--out", str(out)])
    return rows, out


def _chance_bound(n: int, p: float = 0.1, alpha: float = 1e-9) -> int:
    """Fewest correct answers out of n that guessing (accuracy p) reaches with probability
    below alpha."""
    return int(binom.isf(alpha, n, p)) + 1


def test_every_depth_and_head_is_a_row(small_run):
    rows, out = small_run
    with open(out, newline="") as f:
        written = list(csv.DictReader(f))
    assert [(r["head"], int(r["depth"])) for r in written] == [
        ("flatten", 2), ("flatten", 3), ("gap", 2), ("gap", 3)]
    assert {(r["head"], int(r["side"]), int(r["n_train"]), int(r["n_test"]))
            for r in written} == {("flatten", 8, 150, 100), ("gap", 4, 80, 60)}
    assert len(rows) == len(written)


def test_cntk_beats_chance(small_run):
    rows, _ = small_run
    for r in rows:
        n = r["n_test"]
        assert round(r["cntk_acc"] * n) >= _chance_bound(n), r
        assert 0.0 <= r["cnn_acc"] <= 1.0


def test_grams_are_symmetric_and_psd(small_run):
    rows, _ = small_run
    for r in rows:
        assert r["gram_asym"] == 0.0, r
        assert r["gram_min_eig_rel"] > -1e-12, r


@pytest.mark.parametrize("head", ["flatten", "gap"])
def test_one_pass_equals_deep_kernel_per_depth(example, head):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(7, 1, 5, 5, generator=g, dtype=torch.float64)
    Z = torch.randn(4, 1, 5, 5, generator=g, dtype=torch.float64)
    depths = [1, 3, 4]
    train = example.depth_grams(X, None, depths, head)
    cross = example.depth_grams(Z, X, depths, head)
    assert sorted(train) == depths == sorted(cross)
    for d in depths:
        K = DeepKernel(example.architecture(d, head))
        torch.testing.assert_close(train[d], K(X), rtol=1e-12, atol=0)
        torch.testing.assert_close(cross[d], K(Z, X), rtol=1e-12, atol=0)
    assert not torch.allclose(train[1], train[4])  # the depths differ


def test_missing_data_names_the_install(example, monkeypatch):
    import lazylab.data.real as real

    def absent(name, root=None):
        raise real.DatasetNotFound(f"data set {name!r} not found; pip install 'lazylab[data]'")

    monkeypatch.setattr(real, "load_raw", absent)
    with pytest.raises(example.UsageError, match=r"mnist-5k.*lazylab\[data\]"):
        example.main(["--dataset", "mnist", "--epochs", "0"])


@pytest.mark.parametrize("args", [["--depths", "0-3"], ["--heads", "flatten,max"],
                                  ["--n-train", "2000"], ["--heads", "gap", "--gap-side", "3"],
                                  ["--width", "0"], ["--ridge", "-1"]])
def test_bad_arguments_are_refused_before_computing(example, args):
    with pytest.raises(example.UsageError):
        example.main(["--dataset", "digits", "--epochs", "0"] + args)


def test_command_line_exits_2_with_one_line():
    code = ("import runpy, sys; import lazylab.data.real as r\n"
            "def absent(name, root=None): raise r.DatasetNotFound('apt-get install it')\n"
            "r.load_raw = absent\n"
            "sys.argv = ['cntk_vs_cnn', '--dataset', 'fashion-mnist']\n"
            f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines == ["cntk_vs_cnn: apt-get install it"], res.stderr


def test_the_docs_tables_are_the_committed_runs():
    """docs/cntk-vs-cnn.md's accuracy tables are the CSVs of the documented commands
    (docs/cntk-vs-cnn/cntk-DATASET.csv), to the 0.1 point they print."""
    import csv
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    page = (docs / "cntk-vs-cnn.md").read_text()
    for ds, title in (("fashion-mnist", "### Fashion-MNIST"), ("mnist", "### MNIST")):
        rows = list(csv.DictReader((docs / "cntk-vs-cnn" / f"cntk-{ds}.csv").open()))
        by = {(r["head"], int(r["depth"])): r for r in rows}
        section = page[page.index(title):].split("\n\n")[1]
        table = [line for line in section.splitlines() if re.match(r"\| \d", line)]
        assert len(table) == 7
        for line in table:
            depth, cv, nv, cg, ng = (float(c) for c in line.strip("| ").split(" | "))
            f, g = by[("flatten", int(depth))], by[("gap", int(depth))]
            shown = [f"{100 * float(r[k]):.1f}" for r, k in
                     ((f, "cntk_acc"), (f, "cnn_acc"), (g, "cntk_acc"), (g, "cnn_acc"))]
            assert [f"{v:.1f}" for v in (cv, nv, cg, ng)] == shown, (ds, depth)
