"""Risk vs number of SGD samples n/d (Figs. 1 and 2, right, of Ghorbani et al. 2019).

NT(I) and NN at one width N = round(rho d) are trained by one-pass minibatch SGD (a fresh
batch every step, so n = steps x batch samples are seen) with the companion code's schedule
(lr, then lr/10 and lr/15 over the last two ``tail_fraction`` blocks).  The paper does not state
N for these panels (spec Sec. 8 item 9); each experiment states its choice of rho.

Units ``{"method": "NN"}`` and ``{"method": "NT(I)"}`` (times the seeds) return, at log- and
linearly-spaced steps, rows with x_name "n/d", x = step * batch / d:

* ``risk``: the exact population risk R/R0 of the model at that step;
* ``train_loss``: the loss of that step's fresh batch / R0 (an unbiased estimate of the risk);

and at the last x ``lr`` (the step size kept among ``lr_factors``) and, for NT,
``risk_population_limit``, the exact n = infinity NT risk for its own W (the finite-d limit its
SGD converges to).  Theory rows: ``lim NN`` and ``lim NT(I)``
(the dashed large-n limits of the paper's legend) with metric ``risk`` (the paper's formulas)
and ``risk_finite_d`` (exact finite-d values), constant in x.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field

from lazylab.experiments import style
from lazylab.experiments.base import Claim, Experiment, Results, row
from lazylab.experiments.ghorbani import common as C
from lazylab.experiments.ghorbani.verdicts import ABS_FLOOR, K_SE, sgd_allowance, sim_stats
from lazylab.seeding import torch_generator
from lazylab.train import log_spaced_steps

__all__ = ["SamplesParams", "SamplesExperiment", "eval_steps"]

METHODS = ("NN", "NT(I)")


def eval_steps(steps: int, points: int) -> list[int]:
    """Steps where the risk is recorded: ``points`` log-spaced and ``points`` evenly spaced
    (the paper's axis is linear in n/d; the log points resolve the early decrease)."""
    lin = np.rint(np.linspace(0, steps, points + 1)).astype(int).tolist()
    return sorted(set(log_spaced_steps(steps, points)) | set(lin))


class SamplesParams(C.GhorbaniParams):
    """Parameters of a risk-vs-samples figure (subclasses change defaults)."""

    rho: float = Field(0.5, gt=0, le=4, description="width N = round(rho d)")
    sgd_steps: int = Field(15_000, ge=10, le=10**7, description="one-pass SGD steps")
    eval_points: int = Field(25, ge=2, le=1000, description="log- and evenly-spaced points "
                             "where the risk is recorded (each)")
    theory_draws: int = Field(20, ge=0, le=10_000, description="draws of W for the Monte "
                              "Carlo finite-d NT limit (mixture; 0: none, the claims use each "
                              "run's exact limit anyway)")


class SamplesExperiment(Experiment):
    """Shared units, claims and figure of the two risk-vs-n/d experiments."""

    nn_lr_coef: ClassVar[float] = 0.18
    ylim: ClassVar[tuple[float, float]] = (0.0, 1.0)
    target_name: ClassVar[str] = ""
    claim_statements = {
        "NN-converges": "NN's one-pass SGD risk decreases with n and ends within tolerance of "
                        "its large-n limit",
        "NT(I)-converges": "NT(I)'s one-pass SGD risk decreases with n and ends within "
                           "tolerance of its large-n limit (for its own W)",
        "NN-below-NT": "at the end NN's risk is below NT(I)'s by more than 3 SE (N < d)",
    }

    def problem(self, p: SamplesParams) -> C.Problem:
        raise NotImplementedError

    def nt_limit(self, W: torch.Tensor, prob: C.Problem) -> float:
        raise NotImplementedError

    def limits(self, p: SamplesParams) -> dict[str, dict[str, float]]:
        """{"lim NN": {"risk": paper formula, "risk_finite_d": exact}, "lim NT(I)": ...}."""
        raise NotImplementedError

    def width(self, p: SamplesParams) -> int:
        return max(1, round(p.rho * p.d))

    # ------------------------------------------------------------------ units
    def units(self, p: SamplesParams) -> list[dict[str, Any]]:
        return [{"method": m} for m in METHODS]

    def run_unit(self, p: SamplesParams, key: dict[str, Any], seed: int,
                 device: torch.device) -> list[dict[str, Any]]:
        method = key["method"]
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
        prob, N = self.problem(p), self.width(p)
        gen = torch_generator(seed, device)
        steps = eval_steps(p.sgd_steps, p.eval_points)
        def evaluator(risks: list[float]):
            def on_eval(q: C.QuadForm) -> dict[str, float]:
                risks.append(prob.risk(q))
                return {"risk": risks[-1]}
            return on_eval

        def run(lr: float) -> tuple:
            risks: list[float] = []
            cfg = C.SGDConfig(p.sgd_steps, p.batch_size, lr, p.tail_fraction)
            if method == "NN":
                q, hist = C.train_nn(prob, N, cfg, p.init_scale, gen, device, log_steps=steps,
                                     on_eval=evaluator(risks))
                return q, hist, None, risks
            q, hist, W = C.train_nt_sgd(prob, N, cfg, gen, device, log_steps=steps,
                                        on_eval=evaluator(risks))
            return q, hist, W, risks

        base = (C.nn_lr(p.d, p.batch_size, p.nn_lr, self.nn_lr_coef) if method == "NN"
                else C.nt_lr(p.d, N, p.batch_size, p.nt_lr))
        with C.small_op_threads(device):
            (_, hist, W, risks), lr = C.best_lr_run(run, base, p.lr_factors, gen,
                                                    lambda o: o[3][-1])
        extra = [("lr", lr)]
        if W is not None:
            extra.append(("risk_population_limit", self.nt_limit(W, prob)))
        x = [s * p.batch_size / p.d for s in hist.steps]
        rows = []
        for xi, r, tl in zip(x, risks, hist.train_loss, strict=True):
            rows += [row(method, "n/d", xi, "risk", r),
                     row(method, "n/d", xi, "train_loss", tl / prob.r0)]
        rows += [row(method, "n/d", x[-1], k, v) for k, v in extra]
        return rows

    # ------------------------------------------------------------------ theory
    def theory(self, p: SamplesParams) -> list[dict[str, Any]]:
        with C.small_op_threads(torch.device("cpu")):
            lims = self.limits(p)
        xs = [s * p.batch_size / p.d for s in eval_steps(p.sgd_steps, p.eval_points)]
        return [row(name, "n/d", x, metric, v, kind="theory")
                for name, vals in lims.items() for metric, v in vals.items() for x in xs]

    # ------------------------------------------------------------------ claims
    def claims(self, p: SamplesParams, results: Results) -> list[Claim]:
        x_end = p.sgd_steps * p.batch_size / p.d
        out = []
        for m in METHODS:
            cid = f"{m}-converges"
            out.append(self._converges(cid, self.claim_statements[cid], results, m, x_end))
        out.append(self._gap(results, x_end))
        return out

    def _converges(self, cid: str, statement: str, results: Results, method: str,
                   x_end: float) -> Claim:
        st = sim_stats(results, method, sd_metric=None)
        if not st:
            return Claim(cid, statement, False, "no simulation rows", None, None)
        xs = np.array(sorted(st))
        # Checkpoints 1%, 10% and 100% of the run: the risk must fall from each to the next.
        checks = [float(xs[np.argmin(np.abs(xs - f * x_end))]) for f in (0.01, 0.1, 1.0)]
        path = [st[x][0] for x in checks]
        decreasing = path[0] > path[1] > path[2]
        if method == "NT(I)":  # its own W's exact limit, averaged like the simulations
            ref_x, ref_m, _, _ = results.series(method, "risk_population_limit")
            ref = float(ref_m[-1]) if len(ref_m) else math.nan
            ref_name = "exact NT risk of each run's W (n = infinity)"
        else:
            try:
                ref = results.value("lim NN", "risk_finite_d", x_end, kind="theory")
            except KeyError:
                ref = math.nan
            ref_name = "lim NN (finite-d)"
        final, se = st[checks[-1]]
        tol = K_SE * se + sgd_allowance(ref) + ABS_FLOOR
        held = decreasing and abs(final - ref) <= tol
        return Claim(cid, statement, bool(held),
                     {"risk_at_1%_10%_100%": [round(v, 5) for v in path],
                      "final": round(final, 5), "limit": round(ref, 5)},
                     f"decreasing, and |final - limit| <= tol ({ref_name})",
                     {"tol": round(tol, 5), "rule": "3 SE + SGD allowance 0.01 + 0.05 limit "
                                                    "+ 0.005"})

    def _gap(self, results: Results, x_end: float) -> Claim:
        st = {m: sim_stats(results, m, sd_metric=None) for m in METHODS}
        if not all(st.values()):
            return Claim("NN-below-NT", self.claim_statements["NN-below-NT"], False,
                         "missing simulations", None, None)
        (nn, se_nn), (nt, se_nt) = (st[m][max(st[m])] for m in METHODS)
        margin = K_SE * math.hypot(se_nn, se_nt)
        return Claim("NN-below-NT", self.claim_statements["NN-below-NT"], bool(nt - nn > margin),
                     {"NN_final": round(nn, 5), "NT_final": round(nt, 5)},
                     "NT - NN > 3 SE", {"3_se": round(margin, 5)})

    # ------------------------------------------------------------------ figure
    def plot(self, p: SamplesParams, results: Results):
        fig, ax = style.new_figure()
        shown_fd = False
        for m in METHODS:
            x, mean, sem, _ = results.series(m, "risk")
            if len(x):
                style.theory_line(ax, x, mean, m, linewidth=1.4)  # the SGD curve itself
                if np.any(sem > 0):
                    ax.fill_between(x, mean - sem, mean + sem, color=style.method_color(m),
                                    alpha=0.25, linewidth=0)
            lim = f"lim {m}"
            xl, yl, _, _ = results.series(lim, "risk", kind="theory")
            if len(yl):
                style.limit_line(ax, float(yl[0]), lim)
            _, yf, _, _ = results.series(lim, "risk_finite_d", kind="theory")
            if len(yf) and len(yl) and abs(float(yf[0]) - float(yl[0])) > 1e-3:
                ax.axhline(float(yf[0]), linestyle=":", linewidth=1.0,
                           color=style.method_color(m))
                shown_fd = True
        if shown_fd:
            ax.plot([], [], linestyle=":", linewidth=1.0, color="0.5", label="finite-d limit")
        N = self.width(p)
        style.finish(ax, xlabel="n/d", ylim=self.ylim,
                     title=f"{self.target_name}, d = {p.d}, N = {N} (one-pass SGD, batch "
                           f"{p.batch_size})")
        return fig
