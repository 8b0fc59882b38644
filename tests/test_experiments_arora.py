"""The four Arora et al. (2019) experiments at reduced sizes: grid, rows, claims, figures, the
paper's GD update, and bad input."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure
from pydantic import ValidationError

import lazylab.experiments.arora  # noqa: F401  (registers the experiments)
from lazylab.data import DatasetNotFound
from lazylab.experiments import REGISTRY
from lazylab.experiments.arora import common as C
from lazylab.experiments.base import Results
from lazylab.models import TwoLayerNet
from lazylab.seeding import derive_seed

CPU = torch.device("cpu")
FASHION = Path("/usr/share/datasets/fashion-mnist")


def run(exp_id: str, overrides: dict, seeds: int = 1, scale: str = "quick"):
    """Every unit x seed, then the theory rows: the results table the runner would build."""
    exp = REGISTRY[exp_id]
    p = exp.resolve(scale, overrides)
    rows = []
    for key in exp.units(p):
        for s in range(seeds):
            for r in exp.run_unit(p, key, derive_seed(exp.id, key, s), CPU):
                rows.append({**r, "seed": s})
    rows += [{**r, "seed": None} for r in exp.theory(p)]
    res = Results(rows)
    claims = {c.id: c for c in exp.claims(p, res)}
    assert set(claims) == set(exp.claim_statements)
    assert isinstance(exp.plot(p, res), Figure)
    return p, res, claims


def test_registered_with_paper_scale():
    for exp_id in ("arora-convergence", "arora-spectrum", "arora-complexity",
                   "arora-learnability"):
        exp = REGISTRY[exp_id]
        p = exp.resolve("paper")
        assert (p.dataset, p.n_train) == ("fashion-mnist", 10000)
        if hasattr(p, "width"):
            assert (p.width, p.kappa, p.lr, p.init) == (10000, 0.01, 1e-3, "gaussian")


def test_convergence_small():
    p, res, claims = run("arora-convergence", {"n_train": 48, "width": 600, "steps": 60,
                                               "log_points": 6})
    methods = set(res.methods(metric="train_loss"))
    assert methods == {"true labels", "random labels", "worst-case labels"}
    for m in methods:
        x, loss, _, _ = res.series(m, "train_loss")
        _, pred, _, _ = res.series(m, "predicted_loss")
        # symmetric init: u(0) = 0, so Phi(0) = ||y||^2 / 2 = n/2 = the prediction at k = 0
        assert x[0] == 0 and math.isclose(loss[0], 24.0, rel_tol=1e-5)
        assert math.isclose(pred[0], 24.0, rel_tol=1e-12)
    assert claims["ordering"].held
    assert claims["theorem-4.1"].held


def test_spectrum_small():
    p, res, claims = run("arora-spectrum", {"n_train": 80}, seeds=2)
    x, lam, _, _ = res.series("H-infinity", "eigenvalue")
    assert len(x) == 80 and bool((lam[:-1] >= lam[1:]).all())
    assert math.isclose(lam.sum(), 40.0, rel_tol=1e-10)  # tr H_inf = n/2
    _, share, _, _ = res.series("true labels", "cumulative_share")
    assert math.isclose(share[-1], 1.0, rel_tol=1e-12)
    assert claims["alignment"].held and claims["decay"].held


def test_complexity_small():
    p, res, claims = run("arora-complexity", {"n_train": 96, "n_test": 60, "width": 300,
                                              "steps": 60, "fractions": [0, 0.5, 1]})
    _, cm, _, _ = res.series("complexity measure", "complexity")
    assert len(cm) == 3 and cm[0] < cm[1] < cm[2]
    # fully random labels: C^2 = 2 y^T H^-1 y / n, whose mean 2 tr(H^-1)/n is >= 4
    assert cm[2] > 1.5
    _, changed, _, _ = res.series("training", "labels_changed")
    assert changed[0] == 0 and 0.3 < changed[2] < 0.7  # ~ half of the redrawn labels change
    _, bound, _, _ = res.series("Theorem 5.1 bound", "bound")
    assert bool((bound > cm).all())
    assert claims["measure-rises"].held and claims["l1-above-error"].held


def test_learnability_small():
    p, res, claims = run("arora-learnability", {"n_train": 48, "n_points": 3, "width": 300,
                                                "steps": 100})
    ns, rnd, _, _ = res.series("random labels", "rkhs_norm")
    assert list(ns) == [12, 24, 48]
    assert claims["theorem-6.1"].held and claims["random-grows"].held
    d = res.value("p = 1", "distance", 48)
    assert d > 0 and math.isclose(d, res.value("p = 1", "predicted_distance", 48), rel_tol=0.2)


def test_learnability_on_the_sphere_without_training():
    p, res, claims = run("arora-learnability", {"dataset": "sphere", "d": 5, "n_train": 200,
                                                "n_points": 3, "train_targets": False})
    assert claims["theorem-6.1"].held and claims["random-grows"].held
    assert not claims["lemma-5.3"].held  # nothing was trained, so nothing is claimed to hold
    _, p3, _, _ = res.series("p = 3 (not covered)", "rkhs_norm")
    assert p3[-1] > p3[0]  # odd p >= 3 is outside the RKHS: grows with n (spec C7)


def test_training_is_the_papers_gd_update():
    # One step of C.train must be w_r <- w_r - (eta a_r / sqrt(m)) sum_i (u_i - y_i)
    # 1{w_r.x_i >= 0} x_i (Eq. (5)), with a fixed.
    p = REGISTRY["arora-convergence"].resolve("quick", {"width": 40, "steps": 1, "init":
                                                        "gaussian", "kappa": 0.5,
                                                        "precision": "float64"})
    g = torch.Generator().manual_seed(0)
    X = torch.nn.functional.normalize(torch.randn(12, 5, generator=g, dtype=torch.float64), dim=1)
    y = torch.randn(12, generator=g, dtype=torch.float64)
    run_ = C.train(X, y, p, 0.3, seed=11, device=CPU)
    net = run_.net
    # rebuild W(0) from the same seed
    ref = TwoLayerNet(5, 40, weight_std=0.5, generator=C.sub_generator(11, "init", CPU),
                      dtype=torch.float64)
    W, a = ref.W.detach(), ref.a
    u = (torch.relu(X @ W.T) @ a) / math.sqrt(40)
    ind = (X @ W.T >= 0).to(torch.float64)
    grad = (a[:, None] / math.sqrt(40)) * ((ind * (u - y)[:, None]).T @ X)
    assert torch.allclose(net.W.detach(), W - 0.3 * grad, atol=1e-13)
    assert torch.equal(net.a, a)
    assert math.isclose(run_.loss[0], 0.5 * float((y - u).square().sum()), rel_tol=1e-12)


def test_bad_input():
    exp = REGISTRY["arora-convergence"]
    with pytest.raises(ValidationError):
        exp.resolve("quick", {"classes": [3, 3]})
    with pytest.raises(ValidationError):
        exp.resolve("quick", {"init": "symmetric", "width": 7})
    with pytest.raises(ValidationError):
        exp.resolve("quick", {"classes": [0, 11]})
    with pytest.raises(ValidationError):
        REGISTRY["arora-learnability"].resolve("quick", {"powers": [1, 3]})
    p = exp.resolve("quick", {"n_train": 40, "lr": 10.0, "width": 20, "steps": 2})
    with pytest.raises(ValueError, match="lr=10 is too large"):
        exp.run_unit(p, {"labels": "true"}, 0, CPU)
    p = exp.resolve("quick", {"dataset": "mnist", "data_root": "/nonexistent/lazylab-data"})
    with pytest.raises(DatasetNotFound, match="data_root"):
        exp.run_unit(p, {"labels": "true"}, 0, CPU)


@pytest.mark.skipif(not FASHION.is_dir(), reason="dataset-fashion-mnist is not installed")
def test_fashion_mnist_spectrum():
    p, res, claims = run("arora-spectrum", {"dataset": "fashion-mnist", "n_train": 120})
    assert claims["alignment"].held
