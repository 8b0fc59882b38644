"""Fig. 1 (left) of Ghorbani et al. (2019): R/R0 vs width N on the quadratic target.

Target f*(x) = x^T B x - Tr B, B = diag(Exp(1))/sqrt(d), x ~ N(0, I_d) (paper Sec. 2, Eq. (8)).
Methods (legend names):

* ``RF(I)``, ``RF(Gamma*)``: random features sigma = u^2 - 1 with w_i ~ N(0, I/d), resp.
  N(0, B/Tr B), second layer by least squares on ``rf_samples`` samples; theory Eq. (12).
* ``NT(I)``: the linearization at w_i ~ N(0, I/d), least squares on samples (quick) or one-pass
  SGD (paper); theory Theorem 2.
* ``NN``: f = sum_i (w_i.x)^2 + c trained by one-pass SGD; theory Theorem 3 (the infimum
  1 - sum_{i<=N} lambda_i(B)^2/||B||_F^2 of the realised B).

Result rows (x_name "N"): simulation metrics ``risk`` (exact population risk R/R0 of the trained
model, what the theory predicts), ``test_risk`` (mean squared error on ``test_samples`` fresh
samples / R0, the paper's protocol), ``train_loss`` / R0 and, for RF and NT,
``risk_population_limit`` (the exact n = infinity optimum over the class for the same W).
Theory metrics: ``risk`` (the paper's formulas with the realised B, on a fine grid and at the
simulated N), ``risk_finite_d`` (finite-d reference the claims use: Monte Carlo mean over
``theory_draws`` draws of W of the exact population RF risk; the exact Weingarten expectation
for NT; Theorem 3's exact infimum for NN) and ``risk_finite_d_sd`` (spread over draws of W).
Why finite-d references: at small d the RF risk sits below Eq. (12) by about
(1 - tau_B) N / (d(d+1)/2), the share of the traceless part of B captured by N random rank-one
directions (O(rho/d)), and the NT risk differs from Theorem 2 by O(1/d).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from lazylab.experiments import register
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row
from lazylab.experiments.ghorbani import common as C
from lazylab.experiments.ghorbani.verdicts import (
    K_SE,
    lstsq_allowance,
    match_claim,
    sgd_allowance,
    sim_stats,
)
from lazylab.experiments.ghorbani.widths import width_grid, width_plot
from lazylab.seeding import derive_seed, torch_generator
from lazylab.theory.ghorbani import nn_qf, nt_qf, nt_qf_finite, rf_qf_quadratic, tau
from lazylab.theory.ghorbani_population import nt_qf_population, rf_qf_population

__all__ = ["QFWidth", "QFWidthParams"]

METHODS = ("NN", "NT(I)", "RF(I)", "RF(Gamma*)")
#: NT and NN count as "reaching 0" below this R/R0: 1% of the trivial risk, 3x the NN SGD
#: allowance floor at rho >= 1 and far below NT's smallest value for N < d on the grids used
#: (NT(I) at rho = 0.9 is 0.055).
ZERO_THRESHOLD = 0.01


class QFWidthParams(ExperimentParams):
    d: int = Field(40, ge=4, le=4000, description="input dimension (paper: 450)")
    target_seed: int = Field(100, ge=0, description="seed of B = diag(Exp(1))/sqrt(d) "
                             "(the companion code uses 100)")
    rho_min: float = Field(0.1, gt=0, le=1, description="smallest N/d of the width grid")
    rho_max: float = Field(10.0, ge=1, le=100, description="largest N/d of the width grid")
    n_widths: int = Field(13, ge=3, le=60, description="geometric grid size (N = d is added)")
    rf_samples: int = Field(40_000, ge=100, le=10**8,
                            description="samples of the RF least-squares fit (paper: 5e5)")
    rf_reps: int = Field(3, ge=1, le=100, description="independent draws of W per RF point "
                         "(paper: 10)")
    nt_protocol: Literal["lstsq", "sgd"] = Field(
        "lstsq", description="NT training: least squares on nt_samples samples, or one-pass SGD "
        "(the paper's protocol; needed when N d is large)")
    nt_samples: int = Field(20_000, ge=100, le=10**8,
                            description="samples of the NT least-squares fit")
    test_samples: int = Field(10_000, ge=100, le=10**8,
                              description="fresh samples of the reported test risk")
    sgd_steps: int = Field(4000, ge=10, le=10**7,
                           description="one-pass SGD steps for NN (and NT with sgd; paper 2e5)")
    batch_size: int = Field(100, ge=1, le=100_000, description="SGD minibatch size")
    nn_lr: float | None = Field(None, gt=0, le=10, description="NN step size; default "
                                "0.13/sqrt(d)")
    nt_lr: float | None = Field(None, gt=0, le=10, description="NT SGD step size; default 0.1/N")
    tail_fraction: float = Field(0.15, ge=0, le=0.5, description="length of each of the lr/10 "
                                 "and lr/15 phases, as a fraction of sgd_steps")
    init_scale: float = Field(0.3, gt=0, le=10, description="NN init w_i ~ N(0, s^2 I/max(N,d))")
    theory_draws: int = Field(20, ge=2, le=10_000, description="draws of W for the finite-d "
                              "Monte Carlo references")
    chunk: int = Field(8192, ge=64, le=10**7, description="rows per least-squares chunk")

    @model_validator(mode="after")
    def _check(self) -> QFWidthParams:
        n_max = max(width_grid(self.d, self.rho_min, self.rho_max, self.n_widths))
        if self.rf_samples <= 2 * n_max:
            raise ValueError(f"rf_samples must exceed 2 N_max = {2 * n_max} (least squares "
                             f"with N_max features); got {self.rf_samples}")
        p = C.nt_basis_size(self.d, n_max)
        if self.nt_protocol == "lstsq" and self.nt_samples <= 2 * p:
            raise ValueError(f"nt_samples must exceed twice the NT basis size {p} at d = "
                             f"{self.d}; got {self.nt_samples} (or use nt_protocol=sgd)")
        return self


@register
class QFWidth(Experiment):
    id = "ghorbani-qf-width"
    paper = "ghorbani"
    figure = "Fig. 1 (left)"
    summary = ("R/R0 vs N for RF(I), RF(Gamma*), NT(I), NN on the quadratic target; theory "
               "lines (Eq. 12, Thms 2-3) and simulations trained on samples")
    Params = QFWidthParams
    scales = {"quick": {}, "paper": {
        "d": 450, "n_widths": 15, "rf_samples": 500_000, "rf_reps": 10,
        "nt_protocol": "sgd", "test_samples": 10_000, "sgd_steps": 200_000,
        "tail_fraction": 0.075, "theory_draws": 4, "chunk": 20_000}}
    default_seeds = {"quick": 1, "paper": 1}
    est_seconds = {"quick": 60.0, "paper": 4 * 3600.0}
    claim_statements = {
        **{f"{m}-matches-theory": f"{m} simulations match the finite-d theory at every N"
           for m in METHODS},
        "ordering": "NN <= NT(I) < RF(I) for every simulated N < d",
        "zero-for-N>=d": f"NT(I) and NN reach ~0 (R/R0 <= {ZERO_THRESHOLD}) for N >= d",
    }

    # ------------------------------------------------------------------ grid
    def widths(self, p: QFWidthParams) -> list[int]:
        return width_grid(p.d, p.rho_min, p.rho_max, p.n_widths)

    def units(self, p: QFWidthParams) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for N in self.widths(p):
            out += [{"method": "NN", "N": N}, {"method": "NT(I)", "N": N}]
            out += [{"method": m, "N": N, "rep": r}
                    for m in ("RF(I)", "RF(Gamma*)") for r in range(p.rf_reps)]
        return out

    # ------------------------------------------------------------------ one unit
    def run_unit(self, p: QFWidthParams, key: dict[str, Any], seed: int,
                 device: torch.device) -> list[dict[str, Any]]:
        method, N = key["method"], int(key["N"])
        prob = C.qf_problem(p.d, p.target_seed)
        B = prob.model.B
        gen = torch_generator(seed, device)
        extra: dict[str, float] = {}
        if method.startswith("RF"):
            cov = B / np.trace(B) if method == "RF(Gamma*)" else None
            W = C.draw_weights(p.d, N, gen, covariance=cov).to(device)
            q, train = C.fit_rf(W, prob.sampler(torch.float64), p.rf_samples, p.chunk, gen)
            extra["risk_population_limit"] = rf_qf_population(W.T, B)
        elif method == "NT(I)" and p.nt_protocol == "lstsq":
            W = C.draw_weights(p.d, N, gen).to(device)
            q, train = C.fit_nt_lstsq(W, prob.sampler(torch.float64), p.nt_samples, p.chunk, gen)
            extra["risk_population_limit"] = nt_qf_population(W.T, B)
        elif method == "NT(I)":
            cfg = C.SGDConfig(p.sgd_steps, p.batch_size, C.nt_lr(N, p.nt_lr), p.tail_fraction)
            q, hist, W = C.train_nt_sgd(prob, N, cfg, gen, device)
            train = hist.final_loss
            extra["risk_population_limit"] = nt_qf_population(W.T, B)
        elif method == "NN":
            cfg = C.SGDConfig(p.sgd_steps, p.batch_size, C.nn_lr(p.d, p.nn_lr), p.tail_fraction)
            q, hist = C.train_nn(prob, N, cfg, p.init_scale, gen, device)
            train = hist.final_loss
        else:
            raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
        test = C.test_risk(q, prob.sampler(), p.test_samples, p.chunk, gen, prob.r0, device)
        rows = [row(method, "N", N, "risk", prob.risk(q)),
                row(method, "N", N, "test_risk", test),
                row(method, "N", N, "train_loss", train / prob.r0)]
        rows += [row(method, "N", N, k, v) for k, v in extra.items()]
        return rows

    # ------------------------------------------------------------------ theory
    def theory(self, p: QFWidthParams) -> list[dict[str, Any]]:
        prob = C.qf_problem(p.d, p.target_seed)
        B, d = prob.model.B, p.d
        tB = tau(B)
        sim = self.widths(p)
        fine = sorted(set(np.geomspace(min(sim), max(sim), 150).tolist()) | set(sim))
        ints = sorted(set(np.unique(np.round(np.geomspace(min(sim), max(sim), 150)))
                          .astype(int).tolist()) | set(sim))
        gstar = B / np.trace(B)
        rows = []
        for N in fine:
            rho = N / d
            rows += [row("RF(I)", "N", N, "risk", rf_qf_quadratic(rho, B), kind="theory"),
                     row("RF(Gamma*)", "N", N, "risk", rf_qf_quadratic(rho, B, gstar),
                         kind="theory"),
                     row("NT(I)", "N", N, "risk", nt_qf(rho, tB), kind="theory")]
        for N in ints:
            rows += [row("NN", "N", N, "risk", nn_qf(N, B), kind="theory"),
                     row("NN", "N", N, "risk_finite_d", nn_qf(N, B), kind="theory"),
                     row("NT(I)", "N", N, "risk_finite_d", nt_qf_finite(d, N, B), kind="theory")]
        for N in sim:
            for method, cov in (("RF(I)", None), ("RF(Gamma*)", gstar)):
                vals = [rf_qf_population(C.draw_weights(d, N, self._theory_gen(method, N, k),
                                                        covariance=cov).T, B)
                        for k in range(p.theory_draws)]
                rows += [row(method, "N", N, "risk_finite_d", np.mean(vals), kind="theory"),
                         row(method, "N", N, "risk_finite_d_sd", np.std(vals, ddof=1),
                             kind="theory")]
            nts = [nt_qf_population(C.draw_weights(d, N, self._theory_gen("NT(I)", N, k)).T, B)
                   for k in range(p.theory_draws)]
            rows.append(row("NT(I)", "N", N, "risk_finite_d_sd", np.std(nts, ddof=1),
                            kind="theory"))
        return rows

    def _theory_gen(self, method: str, N: int, k: int) -> torch.Generator:
        return torch_generator(derive_seed(self.id, "theory", method, N, k))

    # ------------------------------------------------------------------ claims
    def claims(self, p: QFWidthParams, results: Results) -> list[Claim]:
        out = []
        for m in ("RF(I)", "RF(Gamma*)"):
            out.append(match_claim(
                f"{m}-matches-theory", self.claim_statements[f"{m}-matches-theory"], results, m,
                ref_metric="risk_finite_d", ref_draws=p.theory_draws,
                allowance=lambda N, ref: lstsq_allowance(ref, int(N), p.rf_samples),
                rule=f"3 SE (over {p.rf_reps} W draws and the {p.theory_draws}-draw reference) "
                     f"+ 2 ref N/(n-N-1) least-squares excess (n = {p.rf_samples}) + 0.005"))
        if p.nt_protocol == "lstsq":
            def nt_allow(N: float, ref: float) -> float:
                return lstsq_allowance(ref, C.nt_basis_size(p.d, int(N)), p.nt_samples)
            nt_rule = (f"3 SE (W fluctuation) + 2 ref p/(n-p-1) least-squares excess "
                       f"(p = NT basis size, n = {p.nt_samples}) + 0.005")
        else:
            def nt_allow(N: float, ref: float) -> float:
                return sgd_allowance(ref)
            nt_rule = "3 SE (W fluctuation) + SGD allowance 0.01 + 0.05 ref + 0.005"
        out.append(match_claim("NT(I)-matches-theory", self.claim_statements[
            "NT(I)-matches-theory"], results, "NT(I)", ref_metric="risk_finite_d",
            allowance=nt_allow, rule=nt_rule))
        out.append(match_claim("NN-matches-theory", self.claim_statements["NN-matches-theory"],
                               results, "NN", ref_metric="risk_finite_d",
                               allowance=lambda N, ref: sgd_allowance(ref),
                               rule="3 SE + SGD allowance 0.01 + 0.05 ref + 0.005"))
        out.append(ordering_claim(self.claim_statements["ordering"], results, p.d))
        out.append(zero_claim(self.claim_statements["zero-for-N>=d"], results, p.d))
        return out

    # ------------------------------------------------------------------ figure
    def plot(self, p: QFWidthParams, results: Results):
        return width_plot(results, METHODS, p.d,
                          title=f"quadratic target, d = {p.d}", ylim=(0.0, 1.02))


def ordering_claim(statement: str, results: Results, d: int) -> Claim:
    """NN <= NT(I) + 3 SE + 0.005 and RF(I) - NT(I) > 3 SE at every simulated N < d."""
    nn, nt, rf = (sim_stats(results, m) for m in ("NN", "NT(I)", "RF(I)"))
    Ns = sorted(x for x in set(nn) & set(nt) & set(rf) if x < d)
    if not Ns:
        return Claim("ordering", statement, False, "no simulated N < d", "NN <= NT < RF(I)",
                     None)
    gap_nn = [nt[N][0] - nn[N][0] + K_SE * math.hypot(nt[N][1], nn[N][1]) + 0.005 for N in Ns]
    gap_rf = [rf[N][0] - nt[N][0] - K_SE * math.hypot(rf[N][1], nt[N][1]) for N in Ns]
    held = min(gap_nn) >= 0 and min(gap_rf) > 0
    measured = {"min_NT_minus_NN": round(min(nt[N][0] - nn[N][0] for N in Ns), 5),
                "min_RF_minus_NT": round(min(rf[N][0] - nt[N][0] for N in Ns), 5),
                "N_checked": Ns}
    return Claim("ordering", statement, held, measured,
                 "NT - NN >= -(3 SE + 0.005) and RF(I) - NT > 3 SE",
                 "3 SE of the difference (+0.005 for NN <= NT)")


def zero_claim(statement: str, results: Results, d: int) -> Claim:
    """max over simulated N >= d of the NT(I) and NN risks is <= ZERO_THRESHOLD."""
    worst = {}
    for m in ("NT(I)", "NN"):
        st = sim_stats(results, m)
        vals = [v[0] for x, v in st.items() if x >= d]
        if vals:
            worst[m] = round(max(vals), 6)
    held = len(worst) == 2 and max(worst.values()) <= ZERO_THRESHOLD
    return Claim("zero-for-N>=d", statement, held, {"max_risk_N>=d": worst}, 0.0,
                 ZERO_THRESHOLD)
