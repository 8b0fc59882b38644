"""Nichani, Bai & Lee (2022) library: spherical harmonics, the network and its Taylor terms,
constructions, regularizers and the batched trainer (spec claims C1-C3, C5, C8, C9).

Tolerances: identities to float64 rounding (1e-10 relative); Monte Carlo means within K_SE = 3
standard errors; slopes within 3 SE of the fit plus a stated finite-width allowance.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from lazylab.data import sphere
from lazylab.data.harmonics import num_harmonics
from lazylab.data.spherical import gegenbauer_coeffs, ridge_degree_norms, tau_expect
from lazylab.experiments.toolkit import K_SE, loglog_fit
from lazylab.models.nichani import (
    TaylorFeatures,
    construct_wl,
    construct_wq,
    nichani_net,
    norm_2_4,
    random_signs,
    shifted_sigmoid,
    tau_moment,
)
from lazylab.theory.nichani import (
    ntk_eigenvalues,
    ntk_eigenvalues_asymptotic,
    ntk_level,
    ridgeless_risk,
    trace_identity,
)
from lazylab.train.nichani import (
    R1Stochastic,
    R3Empirical,
    SigmaSplit,
    r4,
    r4_grad,
    taylor_step_grad,
    train_taylor,
)

F64 = torch.float64
ACT = shifted_sigmoid(1.0)


pytestmark = pytest.mark.usefixtures("one_thread")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _setup(d=8, m=40, n=30, seed=0):
    g = _gen(seed)
    net = nichani_net(d, m, generator=g, dtype=F64)
    X = sphere(n, d, radius=math.sqrt(d), generator=g, dtype=F64)
    return net, X, g


# ----------------------------------------------------------------------------- harmonics (C5)
def test_tau_moments_and_gegenbauer_orthogonality():
    d = 12
    assert tau_expect(lambda z: z**2, d) == pytest.approx(1.0, abs=1e-12)
    assert tau_expect(lambda z: z**4, d) == pytest.approx(3 * d / (d + 2), abs=1e-12)
    # lambda_{d,l}(Q_j(sqrt(d) z)) = delta_lj / B(d,l): orthogonality of Gegenbauer polynomials
    from lazylab.data.harmonics import gegenbauer_q
    for j in range(4):
        lam = gegenbauer_coeffs(lambda z, j=j: gegenbauer_q(j, d, math.sqrt(d) * z), d, 5)
        expect = np.zeros(6)
        expect[j] = 1 / num_harmonics(d, j)
        np.testing.assert_allclose(lam, expect, atol=1e-12)


def test_ridge_norms_parseval_and_hermite_limit():
    d = 15
    norms = ridge_degree_norms(lambda z: np.tanh(z - 0.5), d, 30)
    assert norms.sum() == pytest.approx(tau_expect(lambda z: np.tanh(z - 0.5) ** 2, d), rel=1e-8)
    # lambda_{d,l}(g) sqrt(B(d,l) l!) -> mu_l(g) as d grows: at d = 2000, O(1/d) off
    dd = 2000
    lam = gegenbauer_coeffs(lambda z: z**3, dd, 3)
    hermite = [0.0, 3.0, 0.0, 6.0]  # z^3 = He_3 + 3 He_1
    for l in (1, 3):
        scaled = lam[l] * math.sqrt(num_harmonics(dd, l) * math.factorial(l))
        assert scaled == pytest.approx(hermite[l], rel=5e-3)


@pytest.mark.parametrize("d", [10, 30, 100])
def test_xi_trace_identity_and_asymptotics(d):
    lhs, rhs = trace_identity(ACT, d, 60)
    assert lhs == pytest.approx(rhs, rel=1e-10)
    xi = ntk_eigenvalues(ACT, d, 3)
    asym = ntk_eigenvalues_asymptotic(ACT, d, 3)
    assert (xi > 0).all()
    # xi_1 and xi_2 are O(1/d) off their limits (spec C5: accurate for l <= 2 at d >= 30)
    if d >= 30:
        np.testing.assert_allclose(xi[1:3], asym[1:3], rtol=3.0 / d)
    # the spec's [CALIB] values at d = 30
    if d == 30:
        np.testing.assert_allclose(xi[:4], [2.87e-3, 3.17e-2, 1.81e-4, 3.33e-6], rtol=5e-3)


def test_ntk_level_and_ridgeless_risk():
    d = 30
    level = ntk_level(lambda z: (z + z**2 - 1) / math.sqrt(3), d, 1)
    assert level == pytest.approx(2 * (d - 1) / (3 * (d + 2)), rel=1e-10)
    en = ridge_degree_norms(lambda z: (z + z**2 - 1) / math.sqrt(3), d, 3)
    # more samples never hurt, and with n << d^2 the risk stays near the degree-2 energy
    r = [ridgeless_risk(ACT, d, n, en) for n in (100, 164, 400)]
    assert r[0] > r[1] > r[2]
    assert 0.7 * level < r[1] < 1.2 * level


# ----------------------------------------------------------------------------- network (C1-C3)
def test_symmetric_init_is_exactly_zero():
    for seed in range(3):
        net, X, _ = _setup(d=20, m=200, n=100, seed=seed)
        assert float(net(X).detach().abs().max()) == 0.0


def test_closed_form_terms_match_taylor_terms_and_autograd():
    net, X, g = _setup()
    feats = TaylorFeatures.of(net, X)
    U = 0.3 * torch.randn(net.width, net.d, generator=g, dtype=F64)
    _, fl, fq = net.taylor_terms(X, U, 2)
    torch.testing.assert_close(feats.f_L(U), fl, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(feats.f_Q(U), fq, rtol=1e-12, atol=1e-12)
    phi = feats.phi()
    torch.testing.assert_close((phi * U).sum((1, 2)), fl, rtol=1e-12, atol=1e-12)
    # gradient of the training loss (no regularizer) against autograd
    y = torch.randn(X.shape[0], generator=g, dtype=F64)
    W = U.clone().requires_grad_(True)
    loss = ((feats.f_L(W) + feats.f_Q(W) - y) ** 2).mean()
    (auto,) = torch.autograd.grad(loss, W)
    grad, _, _ = taylor_step_grad(feats, U.unsqueeze(0), y, None, None)
    torch.testing.assert_close(grad[0], auto, rtol=1e-10, atol=1e-12)


def test_taylor_remainder_is_cubic():
    net, X, g = _setup(d=20, m=200, n=50)
    feats = TaylorFeatures.of(net, X)
    U = torch.randn(net.width, net.d, generator=g, dtype=F64) / math.sqrt(net.d)
    ts = np.geomspace(1e-3, 1e-1, 5)
    res = []
    for t in ts:
        full = net.evaluate(X, net.W + t * U).detach()
        res.append(float((full - feats.f_L(t * U) - feats.f_Q(t * U)).abs().max()))
    fit = loglog_fit(ts, res)
    assert abs(fit.slope - 3.0) < 0.05


def test_sign_identities():
    net, X, g = _setup(d=20, m=1000, n=20)
    feats = TaylorFeatures.of(net, X)
    W = torch.randn(net.width, net.d, generator=g, dtype=F64) / math.sqrt(net.d)
    draws = 500
    fq = feats.f_Q(W)
    sq = torch.zeros(X.shape[0], dtype=F64)
    vals = []
    for _ in range(draws):
        s = random_signs(net.width, generator=g, balanced=False, dtype=F64)
        WS = s.unsqueeze(1) * W
        torch.testing.assert_close(feats.f_Q(WS), fq, rtol=1e-12, atol=1e-12)
        v = feats.f_L(WS) ** 2
        vals.append(v)
        sq += v
    vals = torch.stack(vals)
    mean, se = vals.mean(0), vals.std(0) / math.sqrt(draws)
    # E_S f_L(x; S W)^2 = (1/m) sum_r sigma'(w0_r.x)^2 (x.w_r)^2 = sum_r D1_ir^2 (x_i.w_r)^2
    exact = (feats.D1**2 * feats.z(W) ** 2).sum(-1)
    assert bool(((mean - exact).abs() <= K_SE * se).float().mean() >= 0.9)
    assert float(((mean - exact) / se).mean().abs()) < K_SE * 3 / math.sqrt(len(exact))


# ----------------------------------------------------------------------------- constructions (C8)
def test_wq_error_decays_and_norms_scale():
    d, n = 20, 200
    g = _gen(3)
    X = sphere(n, d, radius=math.sqrt(d), generator=g, dtype=F64)
    beta = torch.randn(d, generator=g, dtype=F64)
    beta /= beta.norm()
    target = (X @ beta) ** 2
    ms, errs, n24, fro2 = [1000, 4000, 16000], [], [], []
    for m in ms:
        net = nichani_net(d, m, generator=_gen(m), dtype=F64)
        Wq = construct_wq(net, beta, k=1)
        errs.append(float((TaylorFeatures.of(net, X).f_Q(Wq) - target).pow(2).mean().sqrt()))
        n24.append(float(norm_2_4(Wq) ** 4))
        fro2.append(float(Wq.pow(2).sum()))
    e2 = float(tau_expect(lambda z: ACT.deriv(torch.tensor(z), 2).numpy(), d))
    np.testing.assert_allclose(n24, 8 / e2**2, rtol=1e-10)   # ||W_Q||_{2,4}^4 = 8 / E[s'']^2
    np.testing.assert_allclose(fro2, [2 * math.sqrt(m) / e2 for m in ms], rtol=1e-10)
    # random-features error ~ m^{-1/2}; the m-grid spans 1.2 decades, 3 points
    assert abs(loglog_fit(ms, errs).slope + 0.5) < 0.15


def test_wq_k2_and_wl():
    d, n, m = 15, 300, 20000
    g = _gen(4)
    X = sphere(n, d, radius=math.sqrt(d), generator=g, dtype=F64)
    beta = torch.randn(d, generator=g, dtype=F64)
    beta /= beta.norm()
    net = nichani_net(d, m, generator=g, dtype=F64)
    feats = TaylorFeatures.of(net, X)
    z = X @ beta
    err3 = float((feats.f_Q(construct_wq(net, beta, k=2)) - z**3).pow(2).mean())
    assert err3 < 0.1 * float((z**3).pow(2).mean())
    u = torch.randn(d, generator=g, dtype=F64)
    u /= u.norm()
    Wl = construct_wl(net, u, b0=0.5)
    errl = float((feats.f_L(Wl) - (0.5 + X @ u)).pow(2).mean())
    assert errl < 0.05
    # ||W_L||_F^2 = 1/E[s']^2 + b0^2/E[z s']^2 + O(m^-1/2): O(1), independent of m
    e1, ez1 = tau_moment(net, 1, 0), tau_moment(net, 1, 1)
    assert float(Wl.pow(2).sum()) == pytest.approx(1 / e1**2 + 0.25 / ez1**2, rel=0.03)


def test_random_signs_kill_the_linear_term():
    d, n, m = 20, 200, 8000
    g = _gen(5)
    X = sphere(n, d, radius=math.sqrt(d), generator=g, dtype=F64)
    beta = torch.randn(d, generator=g, dtype=F64)
    net = nichani_net(d, m, generator=g, dtype=F64)
    feats = TaylorFeatures.of(net, X)
    Wq = construct_wq(net, beta, k=1)
    s = random_signs(m, generator=g, dtype=F64)
    assert float(s[: m // 2].sum()) == 0.0 and float(s[m // 2:].sum()) == 0.0
    no_signs = float(feats.f_L(Wq).pow(2).mean())
    with_signs = float(feats.f_L(s.unsqueeze(1) * Wq).pow(2).mean())
    assert no_signs > 10.0 and with_signs < 0.1


# ----------------------------------------------------------------------------- regularizers
def _fd_check(fun, grad, W, g, eps=1e-6):
    V = torch.randn(W.shape, generator=g, dtype=F64)
    fd = (fun(W + eps * V) - fun(W - eps * V)) / (2 * eps)
    assert float((grad(W) * V).sum()) == pytest.approx(float(fd), rel=1e-6, abs=1e-10)


def test_regularizer_gradients_and_kernel_trick():
    net, X, g = _setup(d=6, m=20, n=25)
    feats = TaylorFeatures.of(net, X)
    W = torch.randn(net.width, net.d, generator=g, dtype=F64)
    r3 = R3Empirical.build(feats, 7)
    _fd_check(r3.value, r3.grad, W, g)
    # kernel trick = explicit Phi (I - V1 V1^T) with V1 the top right singular vectors
    Phi = feats.phi().reshape(feats.n, -1)
    _, _, Vh = torch.linalg.svd(Phi, full_matrices=False)
    V1 = Vh[:7].T
    w = W.reshape(-1)
    explicit = float((Phi @ (w - V1 @ (V1.T @ w))).pow(2).sum() / feats.n)
    assert float(r3.value(W)) == pytest.approx(explicit, rel=1e-9)
    Xu = sphere(40, net.d, radius=math.sqrt(net.d), generator=g, dtype=F64)
    split = SigmaSplit.build(TaylorFeatures.of(net, Xu), 7)
    _fd_check(split.r1, split.r1_grad, W, g)
    _fd_check(split.r2, split.r2_grad, W, g)
    # R1 + R2 = vec(W)^T Sigma-hat vec(W) = E_{X'} f_L^2
    tot = float(TaylorFeatures.of(net, Xu).f_L(W).pow(2).mean())
    assert float(split.r1(W) + split.r2(W)) == pytest.approx(tot, rel=1e-10)
    r1s = R1Stochastic.build(feats, 7)
    fresh = TaylorFeatures.of(net, sphere(15, net.d, radius=math.sqrt(net.d), generator=g,
                                          dtype=F64))
    _fd_check(lambda V: r1s.value(fresh, V), lambda V: r1s.grad(fresh, V), W, g)
    # on the training points themselves the stochastic R1 is R3
    assert float(r1s.value(feats, W)) == pytest.approx(float(r3.value(W)), rel=1e-8)
    _fd_check(r4, r4_grad, W, g)
    assert float(r4(W)) == pytest.approx(float(norm_2_4(W) ** 8), rel=1e-12)


def test_regularizers_at_w_star_scale_with_m():
    """C9: E_S R1(W*), E_S R3(W*) ~ m^{-1/2}; R2 O(1) and R4 flat in m (Theorem 2)."""
    d, n, draws = 10, 150, 4
    g = _gen(6)
    X = sphere(n, d, radius=math.sqrt(d), generator=g, dtype=F64)
    Xu = sphere(1500, d, radius=math.sqrt(d), generator=g, dtype=F64)
    beta = torch.randn(d, generator=g, dtype=F64)
    u = torch.randn(d, generator=g, dtype=F64)
    u /= u.norm()
    ms = [1000, 4000, 16000]
    vals = {k: [] for k in ("R1", "R2", "R3", "R4")}
    for m in ms:
        net = nichani_net(d, m, generator=_gen(100 + m), dtype=F64)
        Wl, Wq = construct_wl(net, u), construct_wq(net, beta)
        r3 = R3Empirical.build(TaylorFeatures.of(net, X), d + 1)
        split = SigmaSplit.build(TaylorFeatures.of(net, Xu), d + 1)
        acc = dict.fromkeys(vals, 0.0)
        for _ in range(draws):
            Ws = Wl + random_signs(m, generator=g, dtype=F64).unsqueeze(1) * Wq
            acc["R1"] += float(split.r1(Ws)) / draws
            acc["R2"] += float(split.r2(Ws)) / draws
            acc["R3"] += float(r3.value(Ws)) / draws
            acc["R4"] += float(r4(Ws)) / draws
        for k in vals:
            vals[k].append(acc[k])
    for k in ("R1", "R3"):
        assert abs(loglog_fit(ms, vals[k]).slope + 0.5) < 0.15, (k, vals[k])
    assert abs(loglog_fit(ms, vals["R4"]).slope) < 0.05
    assert 0.5 < vals["R2"][-1] < 2.0  # ~ ||u.x||^2 = 1 (W_L's low-degree part)


# ----------------------------------------------------------------------------- batched trainer
def test_batched_training_equals_separate_runs():
    net, X, g = _setup(d=8, m=40, n=30)
    feats = TaylorFeatures.of(net, X)
    y = torch.randn(X.shape[0], generator=g, dtype=F64)
    r3 = R3Empirical.build(feats, 9)
    init = 0.01 * torch.randn(3, net.width, net.d, generator=g, dtype=F64)
    terms = [("L", "Q"), ("L",), ("Q",)]
    kw = {"steps": 30, "lr": 0.5, "log_steps": [0, 10, 30], "r3": r3}
    batched = train_taylor(feats, y, lam3=[0.5, 0.0, 0.0], terms=terms, W_init=init, **kw)
    for b in range(3):
        one = train_taylor(feats, y, lam3=[[0.5, 0.0, 0.0][b]], terms=[terms[b]],
                           W_init=init[b], **kw)
        torch.testing.assert_close(batched.W[b], one.W[0], rtol=1e-10, atol=1e-12)
    # GD decreases the training loss on f_L + f_Q
    assert batched.metrics["train_loss"][-1, 0] < batched.metrics["train_loss"][0, 0]


def test_blocked_test_evaluation_equals_the_whole_one(monkeypatch):
    """The logged test loss, evaluated a block of rows at a time (one Z = X W^T per block for
    f_L and f_Q), is ml f_L + mq f_Q of the whole set to 1e-12 in float64, blocks of 7 rows
    (a ragged last block) and a single block alike."""
    from lazylab.train.nichani import gd

    net, X, g = _setup(d=8, m=40, n=30)
    feats = TaylorFeatures.of(net, X)
    W = 0.3 * torch.randn(3, net.width, net.d, generator=g, dtype=F64)
    ml = torch.tensor([[1.0], [1.0], [0.0]], dtype=F64)
    mq = torch.tensor([[1.0], [0.0], [1.0]], dtype=F64)
    whole = ml * feats.f_L(W) + mq * feats.f_Q(W)
    for elems in (3 * 40 * 7, 1 << 22):
        monkeypatch.setattr(gd, "EVAL_BLOCK_ELEMS", elems)
        torch.testing.assert_close(gd._predict(feats, W, ml, mq), whole, rtol=0, atol=1e-12)


def _masked_step_inputs():
    """(features, W of 3 members, y, lam3, R3, the f_L and f_Q masks) at d = 8, m = 40, n = 30
    in float64: a Taylor-model step with every option on."""
    net, X, g = _setup(d=8, m=40, n=30)
    feats = TaylorFeatures.of(net, X)
    y = torch.randn(X.shape[0], generator=g, dtype=F64)
    r3 = R3Empirical.build(feats, 9)
    W = 0.3 * torch.randn(3, net.width, net.d, generator=g, dtype=F64)
    lam = torch.tensor([0.5, 0.0, 2.0], dtype=F64)
    ml = torch.tensor([[1.0], [1.0], [0.0]], dtype=F64)
    mq = torch.tensor([[1.0], [0.0], [1.0]], dtype=F64)
    return feats, W, y, lam, r3, ml, mq


def test_fused_step_branch_equals_the_buffered_step(monkeypatch):
    """The GPU's fused branch of taylor_step_grad (here with the uncompiled functions that
    torch.compile fuses) gives the buffered path's gradient, f and f_L to 1e-12 in float64,
    with masks and R3; and the fused path is never selected on a CPU."""
    from lazylab.train.nichani import gd

    assert gd.fused_path(torch.device("cpu")) is None
    feats, W, y, lam, r3, ml, mq = _masked_step_inputs()
    ref = [t.clone() for t in taylor_step_grad(feats, W, y, lam, r3, ml=ml, mq=mq, work={})]
    calls = []

    def forward(*a):
        calls.append("forward")
        return gd._forward_terms(*a)

    monkeypatch.setattr(gd, "fused_path", lambda device: (forward, gd._pullback_weights))
    monkeypatch.setattr(gd, "FUSE_MIN_ELEMS", 1)
    got = taylor_step_grad(feats, W, y, lam, r3, ml=ml, mq=mq, work={})
    assert calls == ["forward"], "the fused branch ran"
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cols", [7, 13])
def test_column_blocks_step_equals_the_whole_step(monkeypatch, cols):
    """A CPU step over blocks of hidden units (gd.CPU_COLUMNS; 40 units in blocks of 7 or 13,
    the last one shorter) gives the whole step's gradient, f and f_L to 1e-12 in float64, with
    masks and R3, and over repeated calls with one workspace."""
    from lazylab.train.nichani import gd

    feats, W, y, lam, r3, ml, mq = _masked_step_inputs()
    monkeypatch.setattr(gd, "CPU_COLUMNS", None)
    ref = [t.clone() for t in taylor_step_grad(feats, W, y, lam, r3, ml=ml, mq=mq, work={})]
    monkeypatch.setattr(gd, "CPU_COLUMNS", cols)
    calls = []
    real = gd._step_grad_blocks
    monkeypatch.setattr(gd, "_step_grad_blocks", lambda *a: calls.append(a[-1]) or real(*a))
    work: dict[str, torch.Tensor] = {}
    for _ in range(2):
        got = taylor_step_grad(feats, W, y, lam, r3, ml=ml, mq=mq, work=work)
        for a, b in zip(got, ref, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert calls == [cols, cols]
    # the same workspace with the other block size: its own blocks
    other_cols = 13 if cols == 7 else 7
    monkeypatch.setattr(gd, "CPU_COLUMNS", other_cols)
    got = taylor_step_grad(feats, W, y, lam, r3, ml=ml, mq=mq, work=work)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(gd, "CPU_COLUMNS", cols)
    # the same workspace with other features: their blocks, not the cached ones
    other = dataclasses.replace(feats, D1=2.0 * feats.D1, D2=-0.5 * feats.D2)
    monkeypatch.setattr(gd, "CPU_COLUMNS", None)
    ref = [t.clone() for t in taylor_step_grad(other, W, y, lam, r3, ml=ml, mq=mq, work={})]
    monkeypatch.setattr(gd, "CPU_COLUMNS", cols)
    got = taylor_step_grad(other, W, y, lam, r3, ml=ml, mq=mq, work=work)
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
