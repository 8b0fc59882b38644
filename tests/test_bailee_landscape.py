"""bailee-landscape and bailee-generalization: closed forms against autograd, theory
predictions against Monte Carlo, and falsification of every claim (Bai & Lee 2020, spec C7-C10,
C13)."""

from __future__ import annotations

import math

import pytest
import torch

from harness import run_in_memory, tilted
from lazylab.errors import InputError
from lazylab.experiments.bailee.generalization import operator_norm_terms
from lazylab.experiments.bailee.landscape import (
    AT0,
    LEMMA1,
    PLANTED,
    TEACHER,
    THM2,
    _curvature_limit,
    _data,
)
from lazylab.experiments.base import Results
from lazylab.models import SignRandomizedNet, TwoLayerNet
from lazylab.models.bailee.constructions import norm_2p, quadratic_representer
from lazylab.theory.bailee_landscape import (
    COROLLARY3_C,
    alpha_for_norm,
    lemma1_error_limit,
    mp_operator_norm,
    regularizer_sign_hessian_form,
)
from lazylab.train.bailee.landscape import (
    directional_derivatives,
    expected_sign_hessian_form,
    landscape_gap,
    lemma1_terms,
    squared_landscape_terms,
)
from lazylab.train.bailee.randomized_risk import randomized_risk
from lazylab.train.regularizers import norm_2_4_penalty

F64 = torch.float64


def _gen(s: int) -> torch.Generator:
    return torch.Generator().manual_seed(s)


def _setup(m: int, seed: int = 0, d: int = 5, n: int = 30, alpha: float = 1.0):
    net = TwoLayerNet(d, m, activation="relu3_6", init="symmetric", a_init="ones", dtype=F64,
                      generator=_gen(seed))
    g = _gen(seed + 100)
    X = torch.randn(n, d, generator=g, dtype=F64)
    X = X / X.norm(dim=1, keepdim=True)
    beta = torch.randn(d, generator=g, dtype=F64)
    beta = math.sqrt(d) * beta / beta.norm()
    rep = quadratic_representer(net, alpha, beta, 2)
    y = alpha * (X @ beta) ** 2 + 0.3 * torch.randn(n, generator=g, dtype=F64)
    return net, X, y, beta, rep.W


# ------------------------------------------------------------------ closed forms vs autograd
@pytest.mark.parametrize("block", [50, 1 << 21])
def test_squared_landscape_terms_match_autograd(block):
    net, X, y, _, W_star = _setup(24)
    U = 0.7 * W_star + 0.2 * 24**-0.25 * torch.randn(24, 5, generator=_gen(3), dtype=F64)
    t = squared_landscape_terms(net, X, y, U, W_star, block_elems=block)
    r = SignRandomizedNet(net, init=U)
    lg = landscape_gap(lambda: randomized_risk(r, X, y), r.U, W_star, t["risk_q_star"])
    assert abs(t["risk_tilde"] - lg["risk"]) < 1e-12
    assert abs(t["grad_tilde"] - lg["grad_dot_w"]) < 1e-11
    assert abs(t["hess_tilde"] - lg["lhs"]) < 1e-10 * (1 + abs(lg["lhs"]))
    l1 = lemma1_terms(net, X, y, U, W_star, "half_mse")
    for k in ("term_I", "term_II"):
        assert abs(t[k] - l1[k]) < 1e-11 * (1 + abs(l1[k]))
    assert abs(t["risk_q"] - l1["risk"]) < 1e-12
    rhs = t["grad_q"] - 2 * (t["risk_q"] - t["risk_q_star"])
    assert abs(rhs - l1["rhs"]) < 1e-11 * (1 + abs(rhs))


def test_lemma1_is_tight_at_w_star():
    # At W = W* the Bregman slack is 0: LHS - RHS = term II exactly, and term I = RHS.
    net, X, y, _, W_star = _setup(40)
    t = squared_landscape_terms(net, X, y, W_star, W_star)
    rhs = t["grad_q"] - 2 * (t["risk_q"] - t["risk_q_star"])
    assert abs(t["term_I"] - rhs) < 1e-12 * (1 + abs(rhs))
    # ... and away from W* term I sits strictly below the RHS (convexity).
    t = squared_landscape_terms(net, X, y, 0.5 * W_star, W_star)
    assert t["term_I"] < t["grad_q"] - 2 * (t["risk_q"] - t["risk_q_star"]) - 1e-6


def test_regularizer_form_matches_autograd_and_corollary3_bound():
    g = _gen(7)
    lam = 0.3
    W = torch.nn.Parameter(torch.randn(10, 4, generator=g, dtype=F64))
    Ws = torch.randn(10, 4, generator=g, dtype=F64)
    holder = torch.nn.Module()
    holder.U = W
    form, _ = expected_sign_hessian_form(lambda: norm_2_4_penalty(lam, attr="U")(holder), W, Ws)
    assert abs(lam * regularizer_sign_hessian_form(W, Ws) - form) < 1e-9 * abs(form)
    # App. B.5: E form <= 56 lam ||W||^6 ||W*||^2 <= 14 a lam ||W||^8 + (378 lam / a^3)
    # ||W*||^8 with a = 5/14, and C = 378 (14/5)^3.
    assert form <= 56 * lam * norm_2p(W) ** 6 * norm_2p(Ws) ** 2
    assert abs(COROLLARY3_C - 378 * (14 / 5) ** 3) < 1e-9


# ------------------------------------------------------------------ theory vs Monte Carlo
def test_alpha_for_norm_gives_the_representer_norm():
    net, *_ = _setup(200)
    beta = torch.ones(5, dtype=F64)
    alpha = alpha_for_norm(1.7, float(beta.norm()))
    assert abs(quadratic_representer(net, alpha, beta, 2).norm_2_4 - 1.7) < 1e-12


def test_lemma1_error_matches_its_w0_expectation():
    # E_w0 term II = 8 pi alpha^2 mean t^4 / m exactly; 24 independent W0 at m = 200.
    vals = []
    for s in range(24):
        net, X, y, beta, W_star = _setup(200, seed=s)
        vals.append(squared_landscape_terms(net, X, y, W_star, W_star)["term_II"])
    v = torch.tensor(vals, dtype=F64)
    pred = lemma1_error_limit(1.0, (X @ beta).numpy(), 200)
    assert abs(float(v.mean()) - pred) <= 3 * float(v.std()) / math.sqrt(len(vals))
    # a wrong law (e.g. the m^-1/2 of the L~ coupling) is far outside
    assert abs(float(v.mean()) - pred * math.sqrt(200) / 10) > 3 * float(v.std()) / 24**0.5


def test_curvature_at_zero_matches_its_w0_expectation():
    from lazylab.experiments.bailee.landscape import Landscape

    p = Landscape().resolve("quick", {"n": 40, "d": 6})
    _, beta, t, xi = _data(p)
    X = _data(p)[0]
    y = p.alpha * t**2 + p.noise * float((p.alpha * t**2).std()) * xi
    vals = []
    for s in range(16):
        net = TwoLayerNet(p.d, 300, activation="relu3_6", init="symmetric", a_init="ones",
                          dtype=F64, generator=_gen(50 + s))
        W_star = quadratic_representer(net, p.alpha, beta, 2).W
        zero = SignRandomizedNet(net)
        vals.append(directional_derivatives(lambda z=zero: randomized_risk(z, X, y), zero.U,
                                            W_star)[2])
    v = torch.tensor(vals, dtype=F64)
    pred = _curvature_limit(p, t, xi, 300)
    assert pred < 0
    assert abs(float(v.mean()) - pred) <= 3 * float(v.std()) / 4


def test_operator_norm_terms():
    g = _gen(11)
    n, d = 400, 40
    X = torch.randn(n, d, generator=g, dtype=F64)
    X = X / X.norm(dim=1, keepdim=True)
    W0 = torch.randn(6, d, generator=g, dtype=F64)
    t = operator_norm_terms(X, W0, 1.0, 8, _gen(12))
    # M near the Marchenko-Pastur edge (within the d^-2/3 Tracy-Widom shift) and below 1
    assert abs(t["M"] / mp_operator_norm(d, n) - 1) < 0.15
    assert t["R"] <= t["bound"]
    # degenerate data x = +-e_1: M = 1 exactly, and Y_r = (1/n) sum s_i relu(w_r1 x_i1) e1 e1^T
    s = 2.0 * torch.randint(0, 2, (n,), generator=g).to(F64) - 1
    E = torch.zeros(n, d, dtype=F64)
    E[:, 0] = s
    t = operator_norm_terms(E, W0, 1.0, 8, _gen(13))
    assert abs(t["M"] - 1) < 1e-12
    # brute force of one sign draw: max_r |(1/n) sum_i sig_i relu(w_r1 x_i1)|
    g2 = _gen(14)
    sig = 2.0 * torch.randint(0, 2, (n,), generator=g2).to(F64) - 1
    brute = float(((sig[:, None] * (E @ W0.T).clamp_min(0)).mean(0)).abs().max())
    one = operator_norm_terms(E, W0, 1.0, 1, _gen(14))
    assert abs(one["R"] - brute) < 1e-12


# ------------------------------------------------------------------ falsification
@pytest.fixture(scope="module")
def landscape_run():
    return run_in_memory("bailee-landscape", {"m_max": 3000, "m_points": 6,
                                              "teacher_widths": [200, 800, 3200], "steps": 200},
                         seeds=2)


def _tilt(results: Results, method: str, metric: str, fn) -> Results:
    return tilted(results, lambda r: fn(float(r["x"])) if r["method"] == method
                  and r["metric"] == metric and r["x_name"] == "m" else None)


def test_landscape_claims_hold_and_fail_when_tilted(landscape_run):
    run = landscape_run
    for cid in ("lemma1-slope", "lemma1-limit", "theorem2-slope", "theorem4-risk",
                "theorem4-norm", "saddle-curvature", "saddle-stationary",
                "corollary3-regularizer"):
        assert run.claims[cid].held, (cid, run.claims[cid])
    assert run.claims["saddle-stationary"].is_consistency
    res = run.results
    cases = {
        # Lemma 1 violation decaying like m^-1/2 instead of m^-1
        "lemma1-slope": _tilt(res, LEMMA1, "violation", lambda m: (m / 100) ** 0.5),
        # 20% off the 8 pi alpha^2 mean t^4 / m law
        "lemma1-limit": _tilt(res, LEMMA1, "violation", lambda m: 1.2),
        # Theorem 2's violation not shrinking at all (eps(m) -> 0 is the theorem)
        "theorem2-slope": _tilt(res, THM2, "violation", lambda m: (m / 100) ** 0.5),
        # trained risk 3x higher than (1 + gamma) OPT + eps allows
        "theorem4-risk": _tilt(res, TEACHER, "risk_final", lambda m: 3.0),
        # norm growing like m^1/4 (not flat)
        "theorem4-norm": _tilt(res, TEACHER, "norm", lambda m: (m / 200) ** 0.25),
        # curvature at 0 halved
        "saddle-curvature": _tilt(res, AT0, "curvature_at_0", lambda m: 0.5),
    }
    for cid, r in cases.items():
        assert run.reclaim(r)[cid].status == "failed", cid
    # ... or shrinking like m^-1 (Lemma 1's rate, as if L~ were exactly L^Q)
    assert run.reclaim(_tilt(res, THM2, "violation", lambda m: (m / 100) ** -0.5)
                       )["theorem2-slope"].failed
    # a planted OPT 3x too small also breaks Theorem 4's bound
    assert run.reclaim(_tilt(res, PLANTED, "opt", lambda m: 1 / 3)
                       )["theorem4-risk"].status == "failed"


def test_generalization_claims_hold_and_fail_when_tilted():
    run = run_in_memory("bailee-generalization", seeds=2)  # quick sizes
    for cid in ("M-sphere-slope", "M-hypercube-slope", "M-subspace-slope", "R-sphere-slope",
                "R-subspace-slope", "lemma8-bound", "M-at-most-1"):
        assert run.claims[cid].held, (cid, run.claims[cid])

    def tilt(method, metric, t):
        return tilted(run.results, lambda r: (float(r["x"]) / 10) ** t
                      if r["method"] == method and r["metric"] == metric else None)

    # M of isotropic data flat in d (as degenerate data would be) -> fails
    assert run.reclaim(tilt("sphere", "M_x_op", 0.5))["M-sphere-slope"].failed
    assert run.reclaim(tilt("hypercube", "M_x_op", 0.5))["M-hypercube-slope"].failed
    # degenerate data behaving isotropically (M ~ d^-1/2) -> fails
    assert run.reclaim(tilt("subspace", "M_x_op", -0.5))["M-subspace-slope"].failed
    # no sqrt(d) advantage: isotropic R ~ d^-1/2, subspace R ~ d^-1
    assert run.reclaim(tilt("sphere", "rademacher", 0.5))["R-sphere-slope"].failed
    assert run.reclaim(tilt("subspace", "rademacher", -0.5))["R-subspace-slope"].failed


def test_validate_refuses_bad_grids():
    from lazylab.experiments.bailee.generalization import Generalization
    from lazylab.experiments.bailee.landscape import Landscape

    exp = Landscape()
    with pytest.raises(InputError, match="teacher_widths"):
        exp.validate(exp.resolve("quick", {"teacher_widths": [200, 201, 400]}))
    with pytest.raises(InputError, match="m_max"):
        exp.validate(exp.resolve("quick", {"m_min": 500, "m_max": 400}))
    gen = Generalization()
    with pytest.raises(InputError, match="ds"):
        gen.validate(gen.resolve("quick", {"ds": [10, 10, 20]}))
