"""The infinite-width NTK extras of allenzhu-performance / allenzhu-alpha: the closed forms
against the empirical NTK of the wide finite learners, and the rows they add (which no claim
reads)."""

from __future__ import annotations

import math

import pytest
import torch

from lazylab.experiments import get_experiment
from lazylab.experiments.allenzhu.infinite import (
    INFINITE,
    infinite_ntk,
    mlp3_ntk,
    resnet3_kernels,
)
from lazylab.experiments.base import Results, row
from lazylab.kernels import empirical_ntk
from lazylab.models.mlp import MLP3
from lazylab.models.resnet import ResNet3

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
D, WIDTH = 6, 4096


def _cube(n: int, d: int = D) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return (2 * torch.randint(0, 2, (n, d), generator=g) - 1).to(F64)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("arch", ["3layer", "3resnet"])
def test_closed_form_matches_the_wide_learner_within_width_to_minus_half(arch: str) -> None:
    X = _cube(4)
    if arch == "3layer":
        T = mlp3_ntk(X)
        nets = [MLP3(D, 1, WIDTH, generator=torch.Generator().manual_seed(s), dtype=F64)
                for s in range(2)]
    else:
        T = resnet3_kernels(X)[1]
        nets = [ResNet3(D, 1, WIDTH, form="full", generator=torch.Generator().manual_seed(s),
                        dtype=F64) for s in range(2)]
    # measured at m = 4096: 0.02-0.04 (3layer), 0.015-0.04 (3resnet)
    err = sum(_rel(empirical_ntk(net, X), T) for net in nets) / len(nets)
    assert err < 4 / math.sqrt(WIDTH), err
    if arch == "3resnet":
        # the branches' means matter: the sum rule of centred branches is off by about 0.25
        wrong = resnet3_kernels(X, means=False)[1]
        err_wrong = sum(_rel(empirical_ntk(net, X), wrong) for net in nets) / len(nets)
        assert err_wrong > 2 * 4 / math.sqrt(WIDTH), err_wrong


def test_gram_of_a_set_with_itself_is_exactly_symmetric_psd() -> None:
    X = _cube(40, 10)
    for arch in ("3layer", "3resnet"):
        K = infinite_ntk(arch)(X, X.clone())
        assert torch.equal(K, K.T)
        # PSD to rounding (40 cube points in d = 10 repeat some: K is singular there)
        eig = torch.linalg.eigvalsh(K)
        assert float(eig.min()) > -1e-12 * float(eig.max())
        # the cross Gram agrees with the symmetric one
        assert torch.allclose(infinite_ntk(arch)(X[:5], X), K[:5], rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="arch must be one of"):
        infinite_ntk("2layer")


SMOKE = {"d": 8, "widths": [8], "epochs": 2, "n_all": 60, "n_hidden": 60, "n_val": 50,
         "n_test": 200, "lrs": [0.05], "wds": [0.0], "panels": ["a"]}


def test_performance_infinite_rows_exist_finite_and_leave_the_claims_alone() -> None:
    exp = get_experiment("allenzhu-performance")
    p = exp.resolve("quick", SMOKE)
    keys = [k for k in exp.units(p) if "infinite" in k]
    assert [k["infinite"] for k in keys] == ["3resnet", "3layer"]
    assert "infinite" in exp.units(p)[-1]  # last: the other units keep their order
    rows = []
    for key in keys:
        out = exp.run_unit(p, key, 0, torch.device("cpu"))
        assert {r["method"] for r in out} == {f"{key['infinite']}({INFINITE})"}
        assert {r["metric"] for r in out} == {"test_error", "test_error_se", "train_error"}
        assert all(math.isfinite(r["value"]) for r in out)
        rows += [{**r, "seed": 0} for r in out]
    # deterministic: the same rows again
    again = exp.run_unit(p, keys[0], 7, torch.device("cpu"))
    assert [r["value"] for r in again] == [r["value"] for r in rows[:len(again)]]
    # the claims read none of them, however low their error
    base = []
    for meth, arch, mode, x, err in (("3resnet(all)", "3resnet", "all", 8, 0.5),
                                     ("3layer(all)", "3layer", "all", 8, 2.0),
                                     ("3layer(NTK)", "3layer", "NTK", 8, 3.0),
                                     ("gaussian kernel", "kernel", "ridge", 60, 3.0)):
        f = {"panel": "a", "arch": arch, "mode": mode, "selection": "test"}
        base += [{**row(meth, "m", x, "test_error", err, **f), "seed": 0},
                 {**row(meth, "m", x, "test_error_se", 0.01, **f), "seed": 0}]
    low = [{**r, "value": 1e-3} for r in rows]
    before = [(c.id, c.status, c.measured) for c in exp.claims(p, Results(base))]
    after = [(c.id, c.status, c.measured) for c in exp.claims(p, Results(base + low))]
    assert before == after


def test_alpha_infinite_rows_per_beta() -> None:
    exp = get_experiment("allenzhu-alpha")
    p = exp.resolve("quick", {**SMOKE, "betas": [1.0, 0.0]})
    keys = [k for k in exp.units(p) if "infinite" in k]
    assert [k["beta"] for k in keys] == [1.0, 0.0]
    out = exp.run_unit(p, keys[0], 0, torch.device("cpu"))
    metrics = {r["metric"] for r in out}
    assert metrics == {"test_error", "test_error_se", "train_error", "relative_error"}
    assert all(math.isfinite(r["value"]) for r in out)
    assert {r["method"] for r in out} == {f"resnet(beta=1, {INFINITE})"}
    ref = p.k * p.alpha ** 2
    err = {r["selection"]: r["value"] for r in out if r["metric"] == "test_error"}
    rel = {r["selection"]: r["value"] for r in out if r["metric"] == "relative_error"}
    assert rel == pytest.approx({s: v / ref for s, v in err.items()}, rel=1e-12)
