"""Training loop, schedules, losses and regularizers.

Most checks use linear least squares, where GD is a linear recursion with a known spectrum:
for loss (1/n) ||F c - y||^2 the Hessian is H = (2/n) F^T F and the error e_k = c_k - c*
obeys e_{k+1} = (I - lr H) e_k exactly, so its component on each eigenvector v_i of H is
multiplied by (1 - lr lambda_i) per step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.solve import lstsq
from lazylab.train import (
    History,
    TrainingDiverged,
    constant,
    cosine,
    distance_penalty,
    fit,
    ghorbani_paper,
    l2_penalty,
    log_spaced_steps,
    norm_2_4_penalty,
    piecewise,
    step_decay,
    steps_per_epoch,
    sum_penalties,
    warmup,
)
from lazylab.train.losses import get_loss

D = torch.float64


class Linear(nn.Module):
    """f(x) = x . c (one output per row)."""

    def __init__(self, p: int, init: torch.Tensor | None = None):
        super().__init__()
        self.c = nn.Parameter(init.clone() if init is not None else torch.zeros(p, dtype=D))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return X @ self.c


def _problem(n: int, p: int, seed: int, eigs: np.ndarray | None = None):
    """A least-squares problem; with ``eigs``, F^T F / n has exactly these eigenvalues."""
    g = torch.Generator().manual_seed(seed)
    if eigs is None:
        F = torch.randn(n, p, generator=g, dtype=D)
    else:
        U, _ = torch.linalg.qr(torch.randn(n, p, generator=g, dtype=D))
        V, _ = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=D))
        F = math.sqrt(n) * U @ torch.diag(torch.as_tensor(np.sqrt(eigs), dtype=D)) @ V.T
    y = torch.randn(n, generator=g, dtype=D)
    return F, y


def test_gd_converges_to_lstsq_at_the_spectral_rate() -> None:
    F, y = _problem(200, 10, 0)
    n = F.shape[0]
    H = 2.0 / n * F.T @ F
    lam, V = torch.linalg.eigh(H)
    lr = 1.0 / float(lam[-1])
    c_star = lstsq(F, y)
    model = Linear(10)
    e0 = (model.c.detach() - c_star).clone()
    errs: list[torch.Tensor] = []
    h = fit(model, data=(F, y), loss="mse", lr=lr, steps=400, log_points=12,
            eval_fn=lambda m: errs.append(m.c.detach() - c_star) or {})
    rate = 1.0 - lr * float(lam[0])
    for k, e in zip(h.steps, errs, strict=True):
        # Upper bound ||e_k|| <= (1 - lr lambda_min)^k ||e_0|| (lr <= 1/lambda_max), and the
        # slowest component decays exactly at that rate: v_min . e_k = rate^k v_min . e_0.
        assert float(e.norm()) <= rate**k * float(e0.norm()) * (1 + 1e-9) + 1e-13
        expected = rate**k * float(V[:, 0] @ e0)
        assert abs(float(V[:, 0] @ e) - expected) <= 1e-9 * abs(float(V[:, 0] @ e0))
    assert float(errs[-1].norm()) < 1e-6  # rate^400 ~ 1e-7 for this spectrum
    # train_loss is the loss of the parameters after k updates, measured on the whole set.
    final = float(((F @ model.c.detach() - y) ** 2).mean())
    assert h.train_loss[-1] == pytest.approx(final, rel=1e-12)


def test_half_sse_gradient_scale() -> None:
    # (1/2) sum (y - f)^2 has gradient F^T (F c - y): one step from 0 is lr F^T y exactly.
    F, y = _problem(30, 4, 1)
    model = Linear(4)
    fit(model, data=(F, y), loss="half_sse", lr=1e-3, steps=1)
    assert torch.allclose(model.c.detach(), 1e-3 * F.T @ y, rtol=1e-13, atol=0)


def test_one_pass_sgd_noiseless_linear_model() -> None:
    d = 10
    beta = torch.linspace(-1, 1, d, dtype=D)

    def sampler(n: int, g: torch.Generator):
        X = torch.randn(n, d, generator=g, dtype=D)
        return X, X @ beta

    model = Linear(d)
    g = torch.Generator().manual_seed(3)
    h = fit(model, sampler=sampler, optimizer="one_pass", batch_size=10, lr=0.05, steps=400,
            generator=g)
    # E||e_{t+1}||^2 = (1 - 4 lr + 4 lr^2 (b + d + 1) / b) E||e_t||^2 = 0.821 E||e_t||^2 for
    # Gaussian x (b = d = 10, lr = 0.05), so after 400 steps E||e||^2 ~ 1e-34 ||beta||^2.
    assert float((model.c.detach() - beta).norm()) < 1e-8
    assert h.train_loss[0] > 1.0 and h.train_loss[-1] < 1e-14


def test_momentum_beats_gd_on_ill_conditioned_quadratic() -> None:
    mu, L = 1e-3, 1.0  # eigenvalues of F^T F / n; Hessian of mse is twice that
    eigs = np.geomspace(mu, L, 8)
    F, y = _problem(64, 8, 2, eigs)
    c_star = lstsq(F, y)
    steps = 300
    mu_h, L_h = 2 * mu, 2 * L

    def run(**kw) -> float:
        model = Linear(8)
        fit(model, data=(F, y), loss="mse", steps=steps, log_points=2, **kw)
        return float((model.c.detach() - c_star).norm())

    e0 = float(c_star.norm())
    gd = run(lr=1.0 / L_h)
    # Polyak's heavy ball with optimal parameters: rate (sqrt k - 1)/(sqrt k + 1), k = L/mu.
    sk = math.sqrt(L_h / mu_h)
    hb = run(lr=4.0 / (math.sqrt(L_h) + math.sqrt(mu_h)) ** 2, momentum=((sk - 1) / (sk + 1)) ** 2)
    nag = run(lr=1.0 / L_h, momentum=0.9, nesterov=True)
    # GD's slowest mode decays as (1 - mu/L)^300 = 0.74; heavy ball as ~ k q^k with
    # q = 0.939, i.e. ~ 1e-6 (the constant k from the repeated root is at most ~ 300).
    assert gd > 0.5 * (1 - mu / L) ** steps * e0 * 0.1
    assert hb < 1e-3 * gd
    assert nag < 0.1 * gd


def test_schedule_multipliers_at_boundaries() -> None:
    s = piecewise([10, 20], [1.0, 0.5, 0.25])
    assert [s(t) for t in (0, 9, 10, 19, 20, 10**6)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    T, t1, t2 = 1000, 150, 100
    g = ghorbani_paper(T, tail1=t1, tail2=t2)
    b1, b2 = T - t1 - t2, T - t2
    assert [g(t) for t in (0, b1 - 1, b1, b2 - 1, b2, T - 1)] == [1, 1, 0.1, 0.1, 1 / 15, 1 / 15]
    assert ghorbani_paper(10, 0, 10)(0) == 1 / 15 and ghorbani_paper(10, 10, 0)(9) == 0.1
    assert constant()(12345) == 1.0
    sd = step_decay(5, 0.5)
    assert [sd(t) for t in (0, 4, 5, 10)] == [1.0, 1.0, 0.5, 0.25]
    c = cosine(100, 0.1)
    assert c(0) == pytest.approx(1.0) and c(50) == pytest.approx(0.55) and c(100) == 0.1
    w = warmup(4, sd)
    assert [w(t) for t in (0, 3, 4, 5)] == [0.25, 1.0, 1.0, 0.5]
    with pytest.raises(ValueError, match="tail1 \\+ tail2"):
        ghorbani_paper(100)
    with pytest.raises(ValueError, match="factors"):
        piecewise([10], [1.0])
    with pytest.raises(ValueError, match="increasing"):
        piecewise([10, 10], [1.0, 1.0, 1.0])


def test_fit_applies_the_schedule_per_step() -> None:
    # Loss (1/2)(c - 0)^2 on one sample x = 1: c_{t+1} = (1 - lr_t) c_t.
    X, y = torch.ones(1, 1, dtype=D), torch.zeros(1, dtype=D)
    model = Linear(1, torch.ones(1, dtype=D))
    sched = piecewise([3, 5], [1.0, 0.5, 0.1])
    fit(model, data=(X, y), loss="half_sse", lr=0.4, steps=7, schedule=sched)
    expected = math.prod(1 - 0.4 * sched(t) for t in range(7))
    assert float(model.c.detach()) == pytest.approx(expected, rel=1e-14)


def test_divergence_raises_with_lr_and_step() -> None:
    F, y = _problem(50, 5, 4)
    lam_max = float(torch.linalg.eigvalsh(2 / 50 * F.T @ F)[-1])
    lr = 3.0 / lam_max  # |1 - lr lambda_max| = 2: the error doubles each step
    with pytest.raises(TrainingDiverged, match=f"lr={lr:g}") as err:
        fit(Linear(5), data=(F, y), lr=lr, steps=5000)
    assert isinstance(err.value, RuntimeError)
    assert 0 < err.value.step < 5000 and f"step {err.value.step}" in str(err.value)
    assert "lower the learning rate" in str(err.value)
    # Without raising, the run stops early and says so.
    h = fit(Linear(5), data=(F, y), lr=lr, steps=5000, raise_on_divergence=False)
    assert h.diverged and h.steps[-1] < 5000 and not math.isfinite(h.train_loss[-1])
    # Nothing logged in between and no periodic checks: the final check still catches it.
    with pytest.raises(TrainingDiverged):
        fit(Linear(5), data=(F, y), lr=lr, steps=5000, log_steps=[0], check_every=0)


def test_log_steps() -> None:
    for steps, points in [(100_000, 30), (1000, 10), (7, 30)]:
        s = log_spaced_steps(steps, points)
        assert s[0] == 0 and s[-1] == steps and s == sorted(set(s))
        assert len(s) <= points + 1
    s = np.array(log_spaced_steps(100_000, 30)[1:])
    ratios = np.diff(np.log(s[s >= 100]))
    # Geometric grid: log-gaps equal log(1e5)/29 up to rounding to integers (<= 0.5/100).
    assert np.allclose(ratios, math.log(100_000) / 29, atol=0.011)
    F, y = _problem(20, 3, 5)
    h = fit(Linear(3), data=(F, y), lr=0.01, steps=250, log_points=8,
            eval_fn=lambda m: {"norm": float(m.c.norm())})
    assert h.steps == log_spaced_steps(250, 8) and len(h.evals) == len(h.steps)
    assert h.evals[0]["norm"] == 0.0 and h.evals[-1]["norm"] > 0
    h = fit(Linear(3), data=(F, y), lr=0.01, steps=250, log_steps=[250, 0, 17])
    assert h.steps == [0, 17, 250]
    rows = h.as_rows()
    assert rows[1]["step"] == 17 and rows[1]["train_loss"] == h.train_loss[1]


def _noisy_sgd_run(seed: int) -> tuple[History, torch.Tensor]:
    F, y = _problem(60, 4, 6)
    model = Linear(4)
    g = torch.Generator().manual_seed(seed)
    h = fit(model, data=(F, y), optimizer="sgd", batch_size=7, lr=0.02, steps=300,
            momentum=0.5, noise_std=0.1, generator=g,
            eval_fn=lambda m: {"c0": float(m.c[0])})
    return h, model.c.detach().clone()


def test_same_seed_gives_bitwise_identical_history() -> None:
    h1, c1 = _noisy_sgd_run(123)
    h2, c2 = _noisy_sgd_run(123)
    h3, _ = _noisy_sgd_run(124)
    assert h1 == h2 and torch.equal(c1, c2)
    assert h1.train_loss != h3.train_loss


def test_sgd_epochs_visit_every_sample_once() -> None:
    n, b = 23, 5
    X = torch.arange(n, dtype=D).unsqueeze(1)
    seen: list[torch.Tensor] = []

    def forward(model: nn.Module, Xb: torch.Tensor) -> torch.Tensor:
        seen.append(Xb[:, 0].detach().clone())
        return model(Xb)

    epochs = 3
    steps = epochs * steps_per_epoch(n, b)
    fit(Linear(1), data=(X, torch.zeros(n, dtype=D)), optimizer="sgd", batch_size=b, lr=1e-3,
        steps=steps, log_steps=[], generator=torch.Generator().manual_seed(0), forward=forward)
    batches = seen[:steps]
    per_epoch = steps_per_epoch(n, b)
    for e in range(epochs):
        idx = torch.cat(batches[e * per_epoch:(e + 1) * per_epoch]).long()
        assert sorted(idx.tolist()) == list(range(n))


@pytest.mark.parametrize("mode,var_per_step", [("gradient", lambda lr, s: (lr * s) ** 2),
                                               ("langevin", lambda lr, s: 2 * lr * s**2)])
def test_noise_variance(mode: str, var_per_step) -> None:
    # Zero inputs: the loss gradient vanishes and c_K - c_0 is the sum of K noise steps.
    p, K, lr, s = 20_000, 4, 0.1, 0.5
    model = Linear(p)
    fit(model, data=(torch.zeros(3, p, dtype=D), torch.zeros(3, dtype=D)), lr=lr, steps=K,
        noise_std=s, noise_mode=mode, generator=torch.Generator().manual_seed(9))
    var = K * var_per_step(lr, s)
    est = float(model.c.detach().square().mean())
    # Sample variance of p Gaussian entries: standard error var * sqrt(2/p); allow 5 SE.
    assert abs(est - var) < 5 * var * math.sqrt(2 / p)


def test_weight_decay_equals_l2_penalty_and_groups() -> None:
    F, y = _problem(40, 6, 7)
    a, b = Linear(6), Linear(6)
    fit(a, data=(F, y), lr=0.05, steps=50, weight_decay=0.3)
    fit(b, data=(F, y), lr=0.05, steps=50, regularizer=l2_penalty(0.3))
    assert torch.allclose(a.c, b.c, rtol=1e-12, atol=1e-14)
    # lr_scale 0 freezes a group; lr_scale 2 with lr equals lr 2x.
    frozen = Linear(6)
    fit(frozen, data=(F, y), lr=0.05, steps=5, params=[{"params": ["c"], "lr_scale": 0.0}])
    assert float(frozen.c.detach().abs().max()) == 0.0
    c1, c2 = Linear(6), Linear(6)
    fit(c1, data=(F, y), lr=0.02, steps=20, params=[{"params": [c1.c], "lr_scale": 2.0}])
    fit(c2, data=(F, y), lr=0.04, steps=20)
    assert torch.allclose(c1.c, c2.c, rtol=1e-12, atol=1e-14)


def test_regularizers_match_their_formulas() -> None:
    g = torch.Generator().manual_seed(8)

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.W = nn.Parameter(torch.randn(5, 3, generator=g, dtype=D))

    m = M()
    lam = 0.7
    R = norm_2_4_penalty(lam)(m)
    rn2 = m.W.detach().square().sum(1)
    S = float(rn2.square().sum())
    assert R.item() == pytest.approx(lam * S**2, rel=1e-13)
    (grad,) = torch.autograd.grad(R, m.W)
    # d/dW lam (sum_r ||w_r||^4)^2 = lam * 2 S * 4 ||w_r||^2 w_r
    assert torch.allclose(grad, lam * 8 * S * rn2.unsqueeze(1) * m.W.detach(), rtol=1e-12)
    ref = torch.ones(5, 3, dtype=D)
    dist = distance_penalty(2.0, "W", ref)
    both = sum_penalties(dist, l2_penalty(1.0))
    expect = ((m.W - ref).square().sum() + 0.5 * m.W.square().sum()).item()
    assert both(m).item() == pytest.approx(expect, rel=1e-13)


def test_losses_and_validation() -> None:
    pred = torch.tensor([0.5, -2.0], dtype=D)
    y = torch.tensor([1.0, -1.0], dtype=D)
    assert float(get_loss("mse")(pred, y)) == pytest.approx((0.25 + 1.0) / 2)
    assert float(get_loss("half_sse")(pred, y)) == pytest.approx(0.5 * 1.25)
    assert float(get_loss("logistic")(pred, y)) == pytest.approx(
        (math.log1p(math.exp(-0.5)) + math.log1p(math.exp(-2.0))) / 2)
    with pytest.raises(ValueError, match="does not match target shape"):
        get_loss("mse")(pred.unsqueeze(1), y)
    F, y = _problem(10, 2, 0)
    with pytest.raises(ValueError, match="optimizer"):
        fit(Linear(2), data=(F, y), optimizer="adam", lr=0.1, steps=1)
    with pytest.raises(ValueError, match="generator"):
        fit(Linear(2), data=(F, y), optimizer="sgd", batch_size=2, lr=0.1, steps=1)
    with pytest.raises(ValueError, match="batch_size"):
        fit(Linear(2), data=(F, y), batch_size=2, lr=0.1, steps=1)
    with pytest.raises(ValueError, match="lr"):
        fit(Linear(2), data=(F, y), lr=-1.0, steps=1)
    with pytest.raises(ValueError, match="loss must be one of"):
        fit(Linear(2), data=(F, y), loss="hinge", lr=0.1, steps=1)


def test_stop_callback_ends_training_at_a_logged_step() -> None:
    """stop(t, history) -> True at a logged step ends the run there: the history ends at t,
    the parameters are those after t updates (equal to a run of exactly t steps)."""
    from lazylab.train import fit as fit_

    def problem() -> tuple[torch.nn.Module, tuple[torch.Tensor, torch.Tensor]]:
        g = torch.Generator().manual_seed(5)
        X = torch.randn(40, 3, generator=g, dtype=torch.float64)
        y = X @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
        model = torch.nn.Linear(3, 1, bias=False).double()
        torch.nn.init.zeros_(model.weight)
        return model, (X, y.unsqueeze(1))

    m1, data = problem()
    h = fit_(m1, data=data, lr=0.05, steps=500, log_steps=range(0, 501, 10),
             stop=lambda t, hist: hist.train_loss[-1] < 1e-3)
    assert h.stopped and h.steps[-1] < 500 and h.train_loss[-1] < 1e-3 <= h.train_loss[-2]
    m2, _ = problem()
    fit_(m2, data=data, lr=0.05, steps=h.steps[-1], log_points=1)
    assert torch.equal(m1.weight, m2.weight)
    with pytest.raises(ValueError, match="stop"):
        fit_(m2, data=data, lr=0.05, steps=1, stop=3)


def test_eval_rows_gives_the_full_data_loss_in_blocks() -> None:
    """The full-data loss from predictions in row blocks (eval_rows) equals the one-block
    loss to 1e-12, and the blocks really are bounded: no forward sees more than eval_rows."""
    F, y = _problem(23, 4, 5)
    sizes: list[int] = []

    def forward(model: nn.Module, Xb: torch.Tensor) -> torch.Tensor:
        sizes.append(len(Xb))
        return model(Xb)

    runs = []
    for rows in (None, 5):
        sizes.clear()
        h = fit(Linear(4), data=(F, y), optimizer="sgd", batch_size=4, lr=0.05, steps=12,
                log_steps=[0, 6, 12], generator=torch.Generator().manual_seed(3),
                forward=forward, eval_rows=rows)
        runs.append((h.train_loss, max(sizes)))
    (full, biggest_full), (blocked, biggest_blocked) = runs
    assert biggest_full == 23 and biggest_blocked == 5
    np.testing.assert_allclose(blocked, full, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="eval_rows"):
        fit(Linear(4), data=(F, y), optimizer="gd", lr=0.1, steps=1, eval_rows=0)
