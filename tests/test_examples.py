"""The scripts in examples/ run, and what they print holds: each is imported and its main()
called (at a smaller n where the script allows it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ntk_of_your_model():
    errors = load("ntk_of_your_model").main()
    assert errors[0] < 0.2
    for a, b in zip(errors, errors[1:], strict=False):
        assert 0.3 < b / a < 0.75  # m^-1/2: 0.5 per 4x width


def test_lazy_vs_feature_learning():
    out = load("lazy_vs_feature_learning").main()
    assert out["linearized"] < 0.25 and out["full network"] < 0.25  # chance is 0.5
    assert out["prediction gap"] > 0.01  # the two models part ways


def test_kernel_regression_large_n():
    out = load("kernel_regression_large_n").main(4000)
    assert out["relative_test_error"] < 0.2 and out["iterations"] < 300


def test_paper_figure(tmp_path):
    statuses = load("paper_figure").main(tmp_path)
    assert statuses and all(s == "held" for s in statuses.values()), statuses
    assert (tmp_path / "bailee-coupling" / "bailee-coupling.png").is_file()


@pytest.mark.slow
def test_robustness_study(tmp_path):
    summary = load("robustness_study").main(tmp_path)
    assert summary and all("settings" in line for line in summary.values())


def test_entk_methods_cnn():
    import torch

    out = load("entk_methods_cnn").main(n=16, dtype=torch.float64)
    assert out["shape"] == (16, 16, 4, 4)
    assert set(out["times"]) == {"jacobian", "ntvp", "structured", "auto"}
    assert out["auto_method"] in ("jacobian", "ntvp", "structured")
    assert out["max_rel_diff"] < 1e-9  # all three methods are exact: agree to rounding
