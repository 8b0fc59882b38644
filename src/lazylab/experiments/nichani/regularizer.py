"""nichani-regularizer: Fig. 1 of Nichani, Bai & Lee (2022), Sec. 5 (with Sec. 1.1 and Remark 1).

f_L + f_Q of the symmetric-init sigmoid(z - 1) network is trained by full-batch GD on the square
loss plus lambda3 R3 (the empirical R3 from the top n_k singular directions of the training
feature matrix, as in the authors' code) for a sweep of lambda3, on the Fig. 1 target
f*(x) = (beta.x + (beta.x)^2 - 1)/sqrt(3) (k = 1: dense linear part plus a sparse quadratic),
x uniform on S^{d-1}(sqrt d), n = d^{n_exponent} samples (the paper: d^1.5, so d << n << d^2).
Baselines (same data, init and optimizer): f_L only, f_Q only (from a small random start, W = 0
being a saddle of f_Q), and NTK ridgeless regression with the finite-width Gram matrix.
All lambda3 values and the two baselines of one seed train as one batched computation
(:func:`lazylab.train.nichani.train_taylor`).

Rows: for every logged step t, x = log_d(eta t) (the paper plots log_d t at eta = 1), metrics
``train_loss``, ``test_loss``, ``test_loss_se`` (the test set's Monte Carlo SE), ``R3`` and
``max_row`` (max_r ||w_r||); lambda3 = 0 is the method
``f_L+f_Q`` and lambda3 > 0 the method ``f_L+f_Q+R3`` with facet ``lam3``. Theory rows: the NTK
level ||P_{>1} f*||^2 (test error of a kernel method that learns exactly the degree <= 1 part)
and the eigenlearning prediction of the NTK ridgeless test error on n samples
(:func:`lazylab.theory.nichani.ridgeless_risk`), both from the exact spherical-harmonic spectrum
(no fitted number). The claim ``plateau`` (lambda3 = 0's test loss when its train loss first
reaches ||P_{>1} f*||^2: the degree <= 1 part is learned first, Sec. 1.1) compares with the
level under the same 12% finite-n / finite-m allowance as ``ntk-ridgeless``. ``ntk-level``
(lambda3 = 0 ends at the NTK's level) is paired per seed with the NTK ridgeless fit of the same
training set: at n = d^1.5 the kernel itself ends ~10% below ||P_{>1} f*||^2 (it learns part of
the degree-2 component) and varies with the training set by more than one seed's test-set SE
sees, so only the f_Q part's finite-width drift is left for the 12% allowance.

Quick scale: d = 25, n = 125, m = 7000, eta = 8 (eight times the paper's step, still below the
stability limit ~ n / lambda_max(K)) for 4500 steps, lambda3 in {0, 0.1, 1, 10}; about 80 s per
seed on a 2-core CPU. Three rules fix these sizes: d is large enough for ``ordering`` to pass at
three seeds (at k = 1 f_Q alone can fit the rank-one linear part, Remark 1, so the gap
f_Q only - best R3 is a constant factor that widens with d); m is large enough that lambda3 = 0's
finite-width drift below the NTK fit, O(m^-1/2), stays inside ``ntk-level``'s allowance; and
the run is long enough that the best member's final test loss no longer changes (below the
stability limit GD follows the same path in log_d(eta t) whatever eta). The measurements behind
each rule, and the settings tried and rejected, are in the documentation page "How the quick
protocol was chosen" (docs/protocols/nichani-regularizer.md). At paper scale (d = 100,
n = 1000, m = 10^4, 5 seeds) every claim held: best R3 0.033, f_Q only 0.197, f_L only 0.618.

Normalization of R3: here R3 = |U2^T f_L|^2 / n (the mean over the training set, as Eq. (18)
and the authors' code write it). The paper's Fig. 1 plots n times this quantity: at d = 100,
n = 1000 our lambda3 = 0 run ends at R3 = 0.386, theirs at ~390. So the paper's lambda3 equals
ours / n, and the paper-scale grid {0, 0.01, 0.1, 1, 10, 100} is exactly the paper's
{0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1}.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field

from lazylab.errors import InputError
from lazylab.experiments import register
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row, worst_at
from lazylab.experiments.cost import anchor
from lazylab.experiments.nichani.common import (
    PAPER,
    fig1_energies,
    fig1_problem,
    final_stats,
    paired_gap,
)
from lazylab.experiments.style import method_color
from lazylab.experiments.toolkit import K_SE, Check, joint_claim, match_claim, sub_generator
from lazylab.models.nichani import TaylorFeatures, nichani_net
from lazylab.solve import kernel_ridge
from lazylab.theory.nichani import ntk_level, ridgeless_risk
from lazylab.train.history import log_spaced_steps
from lazylab.train.nichani import R3Empirical, train_taylor
from lazylab.train.nichani.gd import EVAL_BLOCK_ELEMS

LQ, LQR, LONLY, QONLY, NTK = "f_L+f_Q", "f_L+f_Q+R3", "f_L only", "f_Q only", "NTK ridgeless"
LEVEL = "||P_>1 f*||^2"
X_NAME = "log_d(eta t)"
#: "Markedly lower" (Fig. 1, Sec. 5): the best lambda3 cuts the lambda3 = 0 test loss by at
#: least 25% (the paper: ~0.2 vs ~0.6 at d = 100; small runs at d = 30: 0.12-0.18 vs 0.40-0.53).
ESCAPE_RATIO = 0.75
#: ... while keeping R3 at most this fraction of the unregularized run's R3 (the paper: R3
#: "grows large" at lambda3 = 0 and stays ~0 for good lambda3).
R3_RATIO = 0.25
#: Interpolation (Sec. 5, "near zero training error"): final train loss <= 2% of E y^2 = 1.
TRAIN_TOL = 0.02
#: Relative bias allowed between the NTK ridgeless test error and its eigenlearning prediction:
#: the deterministic equivalent has O(n^{-1/2}) relative corrections (n = 125 at quick: ~9%)
#: and the finite-width Gram matrix differs from the infinite-width one by O(m^{-1/2}) (~2%).
NTK_BIAS = 0.12
#: The allowance of ``plateau``, which compares with the NTK level ||P_>1 f*||^2.
LEVEL_BIAS_MODEL = (f"plus {NTK_BIAS:.0%} of the level for the O(n^-1/2) corrections to the "
                    "deterministic equivalent and the O(m^-1/2) finite-width kernel (the "
                    "ntk-ridgeless allowance, fixed before these runs); two-sided")
#: The error model of ``ntk-level`` (the comparison is paired: see ``Regularizer._ntk_level``).
LEVEL_PAIRED_MODEL = (
    "paired per seed (same data, init and Gram matrix): measured = final test loss of the "
    "lambda3 = 0 (f_L + f_Q) run, expected = the NTK ridgeless test loss of the same seeds; SE "
    "of the per-seed gap from its seed spread or the two test-set Monte Carlo SEs in "
    f"quadrature; plus {NTK_BIAS:.0%} of the NTK's loss for the f_Q part's O(m^-1/2) "
    "finite-width drift (the width rule keeps it inside this allowance, fixed before these "
    "runs); two-sided")
#: "Neurons move far beyond the lazy regime" (Sec. 1 asks each neuron to move >> m^{-1/2}): the
#: largest neuron of the best R3 run moves at least this many times as far as the largest neuron
#: of the f_L-only fit.
LAZY_RATIO = 2.0


class RegularizerParams(ExperimentParams):
    d: int = Field(25, ge=5, le=2000, description="input dimension d")
    n_exponent: float = Field(1.5, gt=1.0, lt=2.5,
                              description="n = round(d^n_exponent) training samples (paper 1.5)")
    m: int = Field(7000, ge=100, le=200_000, multiple_of=2, description="width m (even)")
    lr: float = Field(8.0, gt=0, le=10.0, description="GD step size eta")
    steps: int = Field(4500, ge=10, le=1_000_000, description="GD steps T")
    lam3: list[float] = Field([0.0, 0.1, 1.0, 10.0], min_length=2,
                              description="lambda3 grid (must contain 0 and a positive value)")
    n_k: int | None = Field(None, ge=1, description="top singular directions kept by R3 "
                            "(default n_1 = d + 1; the authors' code uses d)")
    n_test: int = Field(2000, ge=100, le=1_000_000, description="test points")
    inputs: Literal["sphere", "gaussian"] = Field(
        "sphere", description="x uniform on S^{d-1}(sqrt d) (paper) or N(0, I_d) (code)")
    target: Literal["code", "paper"] = Field(
        "code", description="(z + z^2 - 1)/sqrt 3 (code, unit variance) or x_1 + z^2 - 1")
    qonly_init: float = Field(0.01, gt=0, le=1.0,
                              description="f_Q only starts at N(0, (qonly_init^2/d)) entries")
    b: float = Field(1.0, description="sigmoid shift: sigma(z) = 1/(1 + exp(b - z))")
    log_points: int = Field(25, ge=3, le=400, description="log-spaced logged steps")


@register
class Regularizer(Experiment):
    id = "nichani-regularizer"
    paper = PAPER
    figure = "Fig. 1"
    summary = ("f_L + f_Q trained with R3 for a sweep of lambda3: train loss, test loss and R3 "
               "vs log_d t; baselines NTK ridgeless, f_L only, f_Q only")
    Params = RegularizerParams
    scales = {"quick": {}, "paper": {"d": 100, "m": 10_000, "lr": 1.0, "steps": 20_000,
                                      "lam3": [0.0, 0.01, 0.1, 1.0, 10.0, 100.0],
                                      "n_test": 10_000, "log_points": 60}}
    default_seeds = {"quick": 1, "paper": 5}
    est_seconds = {"quick": 80.0}
    robustness_axes = {"d": [20, 25, 30], "m": [6000, 7000, 8000]}
    smoke = {"d": 8, "m": 100, "steps": 30, "n_test": 200, "log_points": 5}
    claim_statements = {
        "interpolation": "every lambda3 reaches near-zero training loss (<= 2% of E y^2)",
        "ntk-ridgeless": "NTK ridgeless regression stays at the NTK level: its test loss "
                         "matches the harmonic (eigenlearning) prediction, ~||P_>1 f*||^2",
        "ntk-level": "lambda3 = 0 ends at the NTK's level: its final test loss matches NTK "
                     "ridgeless regression on the same training set (paired per seed; the "
                     "kernel's own level at this n, ~||P_>1 f*||^2; paper Sec. 5: 'when "
                     "lambda3 is zero or very small, the model struggles to learn the entire "
                     "signal, and test error plateaus near 0.6')",
        "plateau": "before overfitting, the test loss plateaus near the low-degree level "
                   "||P_>1 f*||^2: lambda3 = 0's test loss when its train loss first reaches "
                   "that level (the degree <= 1 part is learned first; the paper's "
                   "Fig. 1 test pane plateaus at ~0.72 for log_d t in [0.7, 1.5])",
        "escape": "the best lambda3 > 0 lowers the lambda3 = 0 test loss by >= 25% while "
                  "keeping R3 <= 1/4 of the unregularized R3",
        "ordering": "test loss: f_L + f_Q + R3 (best lambda3) < f_Q only < f_L only",
        "far-from-lazy": "with R3 the neurons move far beyond the lazy regime: max_r ||w_r|| "
                         "at least twice that of the f_L-only (NTK) fit",
    }

    # ---- parameters ------------------------------------------------------------------------
    @staticmethod
    def sizes(p: RegularizerParams) -> tuple[int, int]:
        """(n, n_k): n = round(d^n_exponent), n_k = d + 1 unless given."""
        return int(round(p.d ** p.n_exponent)), (p.n_k if p.n_k is not None else p.d + 1)

    def validate(self, p: RegularizerParams) -> None:
        n, nk = self.sizes(p)
        if 0.0 not in p.lam3 or not any(v > 0 for v in p.lam3):
            raise InputError(f"--set lam3: the grid must contain 0 and a positive value; got "
                             f"{p.lam3}")
        if any(v < 0 for v in p.lam3) or len(set(p.lam3)) != len(p.lam3):
            raise InputError(f"--set lam3: values must be distinct and >= 0; got {p.lam3}")
        if not nk + 2 <= n:
            raise InputError(f"--set n_k: must be <= n - 2 = {n - 2} (n = round(d^"
                             f"{p.n_exponent:g})); got {nk}")

    def cost(self, p: RegularizerParams, scale: str = "quick") -> tuple[float, float | None]:
        """Time: the GD steps, ~ (B + 2) n m d T (B = len(lam3)), and the logged test
        evaluations, ~ (B + 2) n_test m (log points), scaled from the scale's own estimate
        (:func:`lazylab.experiments.cost.anchor`; at the quick defaults 87% and 13% of the
        80 s measured at one thread: 34 s with 1500 steps instead of 4500). Memory: the
        (B + 2, n, m) training buffers (six), the test features D1, D2 (n_test, m) and two
        blocks of the blocked test evaluation
        (:data:`lazylab.train.nichani.gd.EVAL_BLOCK_ELEMS`)."""
        n, _ = self.sizes(p)
        q, per_seed = anchor(self, scale)
        nq, _ = self.sizes(q)
        members, members_q = len(p.lam3) + 2, len(q.lam3) + 2
        work = members * n * p.m * p.d * p.steps / (members_q * nq * q.m * q.d * q.steps)
        evals = (members * p.n_test * p.m * p.log_points
                 / (members_q * q.n_test * q.m * q.log_points))
        peak = 4 * members * n * p.m * 6 + 4 * p.n_test * p.m * 2 + 4 * 2 * EVAL_BLOCK_ELEMS
        return per_seed * (0.87 * work + 0.13 * evals), float(peak)

    # ---- computation -----------------------------------------------------------------------
    def units(self, p: RegularizerParams) -> list[dict[str, Any]]:
        return [{"run": "lambda3 sweep + baselines"}]

    def run_unit(self, p: RegularizerParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        self.validate(p)
        n, nk = self.sizes(p)
        dtype = torch.float32
        _, X, y, Xt, yt = fig1_problem(p.d, n, p.n_test, p.inputs, p.target, seed, device,
                                       dtype)
        net = nichani_net(p.d, p.m, b=p.b, generator=sub_generator(seed, "init", device),
                          dtype=dtype)
        tr, te = TaylorFeatures.of(net, X), TaylorFeatures.of(net, Xt)
        r3 = R3Empirical.build(tr, nk)
        lams = [float(v) for v in p.lam3]
        B = len(lams)
        g = sub_generator(seed, "qonly-init", device)
        w_q = (p.qonly_init / math.sqrt(p.d)) * torch.randn(p.m, p.d, generator=g, device=device,
                                                           dtype=dtype)
        init = torch.zeros(B + 2, p.m, p.d, device=device, dtype=dtype)
        init[B + 1] = w_q
        terms = [("L", "Q")] * B + [("L",), ("Q",)]
        steps = log_spaced_steps(p.steps, p.log_points)
        run = train_taylor(tr, y, steps=p.steps, lr=p.lr, log_steps=steps,
                           lam3=lams + [0.0, 0.0], r3=r3, terms=terms, test=te, y_test=yt,
                           W_init=init)
        names = [(LQ, {}) if v == 0 else (LQR, {"lam3": v}) for v in lams]
        names += [(LONLY, {}), (QONLY, {})]
        out: list[dict[str, Any]] = []
        logd = math.log(p.d)
        for i, t in enumerate(run.steps):
            if t == 0:
                continue
            x = math.log(p.lr * t) / logd
            for b, (meth, facets) in enumerate(names):
                # test_loss_se: the test set's Monte Carlo SE of test_loss at this step
                for metric in ("train_loss", "test_loss", "test_loss_se", "max_row"):
                    out.append(row(meth, X_NAME, x, metric, run.metrics[metric][i, b], **facets))
                if b < B:
                    out.append(row(meth, X_NAME, x, "R3", run.metrics["R3"][i, b], **facets))
        x_end = math.log(p.lr * p.steps) / logd
        # NTK ridgeless with the finite-width Gram matrix (float64 solve)
        K = tr.gram().double()
        alpha = kernel_ridge(K, y.double())
        pred = te.gram(tr).double() @ alpha
        e2k = (pred - yt.double()) ** 2
        out.append(row(NTK, X_NAME, x_end, "test_loss", float(e2k.mean())))
        out.append(row(NTK, X_NAME, x_end, "test_loss_se",
                       float(e2k.std() / math.sqrt(p.n_test))))
        return out

    def theory(self, p: RegularizerParams, prep: Any = None) -> list[dict[str, Any]]:
        n, _ = self.sizes(p)
        from lazylab.models.nichani import shifted_sigmoid

        en = fig1_energies(p.d, p.target)
        level = float(en[2:].sum())
        if p.target == "code":
            level = ntk_level(lambda z: (z + z**2 - 1) / math.sqrt(3), p.d, 1)
        ridgeless = ridgeless_risk(shifted_sigmoid(p.b), p.d, n, en)
        xs = [math.log(p.lr) / math.log(p.d), math.log(p.lr * p.steps) / math.log(p.d)]
        out = []
        for x in xs:
            out.append(row(LEVEL, X_NAME, x, "test_loss", level, kind="theory"))
            out.append(row(NTK, X_NAME, x, "test_loss", ridgeless, kind="theory"))
        return out

    # ---- claims ------------------------------------------------------------------------------
    def _best(self, p: RegularizerParams, results: Results) -> tuple[float, float, float]:
        """(lambda3, final test mean, SE) of the best lambda3 > 0 (lowest final test loss)."""
        best = (math.nan, math.inf, math.nan)
        for lam in sorted(v for v in p.lam3 if v > 0):
            mu, se, _ = final_stats(results, LQR, "test_loss", "test_loss_se", lam3=lam)
            if math.isfinite(mu) and mu < best[1]:
                best = (lam, mu, se)
        return best

    def claims(self, p: RegularizerParams, results: Results) -> list[Claim]:
        level = _level(results)
        best = self._best(p, results)
        return [self._interpolation(p, results),
                self._ntk_ridgeless(results),
                self._ntk_level(results, level),
                self._plateau(results, level),
                self._escape(results, best),
                self._ordering(results, best),
                self._far_from_lazy(p, results, best)]

    def _interpolation(self, p: RegularizerParams, results: Results) -> Claim:
        """Every lambda3 run ends with train loss <= TRAIN_TOL."""
        finals = {}
        for lam in p.lam3:
            meth, f = (LQ, {}) if lam == 0 else (LQR, {"lam3": lam})
            finals[lam] = final_stats(results, meth, "train_loss", **f)[0]
        worst = max(finals.values()) if finals else math.nan
        lam_w = max(finals, key=lambda lam: finals[lam]) if finals else math.nan
        # A train loss is >= 0, so "within 0 +- TRAIN_TOL" is the bound "<= TRAIN_TOL".
        return Claim.test(
            "interpolation", self.claim_statements, worst, "within", 0.0, TRAIN_TOL,
            error_model="optimization only: GD for T steps interpolates n << m d points; the "
                        "paper's 'near zero' read as <= 2% of the target variance E y^2 = 1",
            details={"final_train_loss": {str(k): v for k, v in finals.items()},
                     "worst_at": worst_at(lambda3=float(lam_w))})

    def _ntk_ridgeless(self, results: Results) -> Claim:
        """NTK ridgeless test loss against its eigenlearning prediction."""
        mu, se, k = final_stats(results, NTK, "test_loss", "test_loss_se")
        th = results.series(NTK, "test_loss", kind="theory")
        pred = float(th.mean[-1]) if len(th.x) else math.nan
        return match_claim(
            "ntk-ridgeless", self.claim_statements, mu, pred, se,
            bias=NTK_BIAS * pred,
            error_model=f"test-set Monte Carlo SE (and seed SEM), K_SE = {K_SE:g}, plus "
                        f"{NTK_BIAS:.0%} for the O(n^-1/2) corrections to the deterministic "
                        "equivalent and the O(m^-1/2) finite-width kernel",
            details={"seeds": k})

    def _ntk_level(self, results: Results, level: float) -> Claim:
        """lambda3 = 0 ends at the NTK's level on its own training set, paired per seed.

        The reference is the NTK ridgeless test loss of the same seed (same data, same
        finite-width Gram matrix), not the n -> infinity line ||P_>1 f*||^2: at n = d^1.5 the
        kernel itself learns part of the degree-2 component (the eigenlearning prediction is
        ~10% below the line at quick sizes) and its test loss varies with the training set far
        more than the test set's Monte Carlo SE, which one seed alone cannot estimate. Both
        cancel in the per-seed gap lambda3 = 0 - NTK; what is left is the f_Q part's
        finite-width drift, O(m^-1/2), that the protocol's width rule keeps inside the
        allowance. ``ntk-ridgeless`` ties the NTK's loss to the harmonic prediction.
        """
        mu_lv = final_stats(results, LQ, "test_loss")[0]
        gap, se_gap, k = paired_gap(results, (LQ, {}), (NTK, {}), "test_loss", "test_loss_se")
        ref = mu_lv - gap  # mean NTK ridgeless test loss over the seeds both runs have
        return match_claim(
            "ntk-level", self.claim_statements, mu_lv, ref, se_gap,
            bias=NTK_BIAS * ref, error_model=LEVEL_PAIRED_MODEL + f"; K_SE = {K_SE:g}",
            details={"seeds": k, "gap": gap, "gap_se": se_gap, "level": level,
                     "ntk_minus_level": ref - level, "comparison": "paired with NTK ridgeless"})

    def _plateau(self, results: Results, level: float) -> Claim:
        """The lambda3 = 0 test loss when its train loss first reaches the low-degree level."""
        st = self.claim_statements
        pts = plateau_points(results, LQ, level)
        vals = [v for v in pts.values() if math.isfinite(v[1])]
        if not pts or len(vals) != len(pts):
            return Claim.missing(
                "plateau", st, "the lambda3 = 0 train loss never reached the level in some "
                "seed (or no rows)", expected=level, tolerance=NTK_BIAS * level,
                error_model=PLATEAU_DEF, details={"seeds": len(pts)})
        tests = np.array([v[1] for v in vals])
        mc = math.sqrt(float(np.mean(np.square([v[2] for v in vals]))) / len(vals))
        sem = float(tests.std(ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else 0.0
        return match_claim(
            "plateau", st, float(tests.mean()), level, max(sem, mc),
            bias=NTK_BIAS * level, error_model=PLATEAU_DEF + f"; K_SE = {K_SE:g}; "
            + LEVEL_BIAS_MODEL,
            details={"seeds": len(vals), "level": level,
                     "per_seed": {str(s): {"x": v[0], "test": v[1], "se": v[2]}
                                  for s, v in pts.items()}})

    def _escape(self, results: Results, best: tuple[float, float, float]) -> Claim:
        """Best lambda3 vs lambda3 = 0 (paired over seeds: same data and init)."""
        lam_b, mu_b, _ = best
        mu_0 = final_stats(results, LQ, "test_loss", "test_loss_se")[0]
        gap, se_gap, _ = paired_gap(results, (LQ, {}), (LQR, {"lam3": lam_b}), "test_loss",
                                    "test_loss_se")
        r3_0 = final_stats(results, LQ, "R3")[0]
        r3_b = final_stats(results, LQR, "R3", lam3=lam_b)[0] if math.isfinite(lam_b) \
            else math.nan
        ratio = mu_b / mu_0 if mu_0 > 0 else math.nan
        return joint_claim(
            "escape", self.claim_statements,
            [Check("test ratio", ratio, "<=", ESCAPE_RATIO, 0.0),
             Check("paired gap", gap, "above", 0.0, K_SE * se_gap),
             Check("R3", r3_b, "<=", R3_RATIO * r3_0, 0.0)],
            error_model="paired over seeds (same data and init): the SE of the per-seed gap "
                        "test(lambda3 = 0) - test(best) from its seed spread or the test-set "
                        f"Monte Carlo SEs; the gap must exceed {K_SE:g} SE and the ratio be <= "
                        f"{ESCAPE_RATIO} (one-sided, 'markedly lower'); R3 ratio <= {R3_RATIO}",
            details={"best_lam3": lam_b, "test_best": mu_b, "test_lam0": mu_0,
                     "gap": gap, "gap_se": se_gap, "gap_margin": K_SE * se_gap,
                     "R3_best": r3_b, "R3_lam0": r3_0, "comparison": "<="})

    def _ordering(self, results: Results, best: tuple[float, float, float]) -> Claim:
        """Test loss: best lambda3 < f_Q only < f_L only (paired over seeds)."""
        lam_b, mu_b, _ = best
        mu_l = final_stats(results, LONLY, "test_loss")[0]
        mu_q = final_stats(results, QONLY, "test_loss")[0]
        g1, s1, _ = paired_gap(results, (QONLY, {}), (LQR, {"lam3": lam_b}), "test_loss",
                               "test_loss_se")
        g2, _, _ = paired_gap(results, (LONLY, {}), (QONLY, {}), "test_loss")
        return joint_claim(
            "ordering", self.claim_statements,
            [Check("best below f_Q only", mu_b, "below", mu_q, K_SE * s1),
             Check("f_Q only below f_L only", g2, "above", 0.0, 0.0)],
            error_model="paired over seeds: f_L+f_Q+R3 below f_Q only by "
                        f"{K_SE:g} SE of the per-seed gap; f_Q only below f_L only in mean (at "
                        "k = 1 the low-degree part has rank 1, so f_Q alone can partly "
                        "succeed: Remark 1)",
            details={"test_fL_only": mu_l, "test_fQ_only": mu_q, "test_best_R3": mu_b,
                     "gap_fQ_best": g1, "gap_se": s1, "gap_fL_fQ": g2,
                     "comparison": "below"})

    def _far_from_lazy(self, p: RegularizerParams, results: Results,
                       best: tuple[float, float, float]) -> Claim:
        """The best lambda3 run's largest neuron moves >= LAZY_RATIO times f_L only's."""
        lam_b = best[0]
        mv_b = final_stats(results, LQR, "max_row", lam3=lam_b)[0] if math.isfinite(lam_b) \
            else math.nan
        mv_l = final_stats(results, LONLY, "max_row")[0]
        ratio_mv = mv_b / mv_l if mv_l > 0 else math.nan
        return Claim.test(
            "far-from-lazy", self.claim_statements, ratio_mv, ">=", LAZY_RATIO, 0.0,
            error_model="deterministic scales, same data and init: the f_L-only fit spreads its "
                        "movement over all neurons (max_r ||w_r|| ~ ||W||_F / sqrt(m) up to a "
                        "log factor) while the quadratic part concentrates it (||w_r|| ~ "
                        "m^-1/4 on the moved neurons); 'far beyond' read as a "
                        f"factor >= {LAZY_RATIO:g}",
            details={"max_row_best": mv_b, "max_row_fL_only": mv_l,
                     "max_row_best_times_sqrt_m": mv_b * math.sqrt(p.m)})

    # ---- figure --------------------------------------------------------------------------------
    def plot(self, p: RegularizerParams, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(15.5, 3.9))
        axes = [fig.add_subplot(1, 3, i + 1) for i in range(3)]
        cmap = _lam_colors(p)
        for ax, metric, ylabel in zip(axes, ("R3", "train_loss", "test_loss"),
                                      ("R3(W)", "train loss", "test loss"), strict=True):
            for lam in p.lam3:
                meth, f = (LQ, {}) if lam == 0 else (LQR, {"lam3": lam})
                s = results.series(meth, metric, **f)
                if len(s.x) == 0:
                    continue
                std = s.sem * np.sqrt(np.maximum(s.n, 1))
                ax.plot(s.x, s.mean, color=cmap[lam], label=rf"$\lambda_3$ = {lam:g}")
                ax.fill_between(s.x, s.mean - std, s.mean + std, color=cmap[lam], alpha=0.2)
            if metric != "R3":
                for meth, ls in ((LONLY, "--"), (QONLY, ":")):
                    s = results.series(meth, metric)
                    if len(s.x):
                        ax.plot(s.x, s.mean, color=method_color(meth), linestyle=ls, label=meth)
            if metric == "test_loss":
                s = results.series(NTK, "test_loss")
                th = results.series(NTK, "test_loss", kind="theory")
                lv = results.series(LEVEL, "test_loss", kind="theory")
                if len(s.x):
                    ax.errorbar(s.x, s.mean, yerr=s.sem, fmt="s", color="k", label=NTK)
                if len(th.x):
                    ax.plot(th.x, th.mean, color="k", linestyle="-.",
                            label="NTK ridgeless (theory)")
                if len(lv.x):
                    ax.plot(lv.x, lv.mean, color="0.5", linestyle="--",
                            label=r"$\|P_{>1} f^*\|^2$")
                    pts = [v for v in plateau_points(results, LQ, float(lv.mean[-1])).values()
                           if math.isfinite(v[1])]
                    if pts:
                        ax.plot([v[0] for v in pts], [v[1] for v in pts], "D", color="C3",
                                label="plateau (train loss = level)")
            ax.set_xlabel(r"$\log_d(\eta t)$")
            ax.set_ylabel(ylabel)
            ax.spines["top"].set_visible(False)
            ax.spines["right"].set_visible(False)
        axes[0].legend(fontsize=7, frameon=False)
        axes[2].legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.02, 0.5))
        n, _ = self.sizes(p)
        fig.suptitle(f"f_L + f_Q with R3: d = {p.d}, n = {n}, m = {p.m}, eta = {p.lr:g}, "
                     f"{p.inputs} inputs", fontsize=10)
        fig.tight_layout()
        return fig


PLATEAU_DEF = (
    "definition (fixed before the runs): per seed, t1 = the first time the lambda3 = 0 "
    "(f_L + f_Q) train loss is <= L = ||P_>1 f*||^2, the training error left once exactly the "
    "degree <= 1 part is fitted (any later decrease fits the degree-2 part: by interpolation "
    "through V2 for the NTK); linear interpolation in log_d(eta t) between logged steps; the "
    "plateau is the test loss at t1, mean over seeds. SE: the larger of the seed SEM and the "
    "test-set Monte Carlo SE at t1 (root mean square over seeds / sqrt(seeds))")


def _level(results: Results) -> float:
    """The NTK level ||P_>1 f*||^2 (its theory row at the last x; nan when absent)."""
    lv = results.series(LEVEL, "test_loss", kind="theory")
    return float(lv.mean[-1]) if len(lv.x) else math.nan


def plateau_points(results: Results, method: str, level: float,
                   **filters) -> dict[Any, tuple[float, float, float]]:
    """{seed: (x1, test(x1), test SE(x1))} at the first x where ``train_loss`` <= ``level``.

    Linear interpolation in x between the two logged points around the crossing (the first
    logged point if the train loss starts below ``level``); nan values if it never does.
    """
    by: dict[Any, dict[str, dict[float, float]]] = {}
    for metric in ("train_loss", "test_loss", "test_loss_se"):
        for r in results.select(method=method, metric=metric, kind="simulation", **filters):
            by.setdefault(r.get("seed"), {}).setdefault(metric, {})[float(r["x"])] = \
                float(r["value"])
    out: dict[Any, tuple[float, float, float]] = {}
    for seed, m in by.items():
        xs = sorted(m.get("train_loss", {}))
        tr = [m["train_loss"][x] for x in xs]
        te = [m.get("test_loss", {}).get(x, math.nan) for x in xs]
        se = [m.get("test_loss_se", {}).get(x, math.nan) for x in xs]
        out[seed] = (math.nan, math.nan, math.nan)
        for i, v in enumerate(tr):
            if v <= level:
                if i == 0:
                    out[seed] = (xs[0], te[0], se[0])
                else:
                    f = (tr[i - 1] - level) / (tr[i - 1] - v) if tr[i - 1] > v else 1.0
                    out[seed] = tuple(a + f * (b - a) for a, b in  # type: ignore[assignment]
                                      ((xs[i - 1], xs[i]), (te[i - 1], te[i]),
                                       (se[i - 1], se[i])))
                break
    return out


def _lam_colors(p: RegularizerParams) -> dict[float, Any]:
    from matplotlib import colormaps

    cm = colormaps["viridis"]
    lams = list(p.lam3)
    return {lam: cm(i / max(len(lams) - 1, 1)) for i, lam in enumerate(lams)}
