"""Risk vs number of SGD samples n/d (Figs. 1 and 2, right, of Ghorbani et al. 2019).

NT(I) and NN at one width N = round(rho d) are trained by one-pass minibatch SGD (a fresh
batch every step, so n = steps x batch samples are seen) with the companion code's schedule
(lr, then lr/10 and lr/15 over the last two ``tail_fraction`` blocks).  The paper does not state
N for these panels (Sec. 4); each experiment states its choice of rho.

Units ``{"method": "NN"}`` and ``{"method": "NT(I)"}`` (times the seeds) return, at log- and
linearly-spaced steps, rows with x_name "n/d", x = step * batch / d:

* ``risk``: the exact population risk R/R0 of the model at that step;
* ``train_loss``: the loss of that step's fresh batch / R0 (an unbiased estimate of the risk);

and at the last x ``lr`` (the step size kept among ``lr_factors``) and, for NT,
``risk_population_limit``, the exact n = infinity NT risk for its own W (the finite-d limit its
SGD converges to).  Theory rows: ``lim NN`` and ``lim NT(I)``
(the dashed large-n limits of the paper's legend) with metric ``risk`` (the paper's formulas)
and ``risk_finite_d`` (exact finite-d values), constant in x.

The figure draws, per method, the asymptotic limit (dashed) and the finite-d limit the claims
compare against (dotted: ``risk_finite_d`` for NN, the mean of the runs' own-W limits for
NT(I)), named in the legend as the claims' statements name them.  The step down in both
curves at n/d = (1 - 2 tail_fraction) x sgd_steps x batch / d (26,250 for the quadratic target
and 23,333 for the mixture at quick scale) is the schedule's first cut, lr -> lr/10: the
excess risk of constant-step SGD over its limit (its noise floor, about proportional to the
step) falls with it.  The figure marks both cuts and says so in its title.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from matplotlib.axes import Axes
from pydantic import Field

from lazylab.experiments import style
from lazylab.experiments.base import Claim, Experiment, Results, row, worst_at
from lazylab.experiments.ghorbani import common as C
from lazylab.experiments.ghorbani.verdicts import (
    ABS_FLOOR,
    K_SE,
    implied,
    sgd_allowance,
    sim_stats,
)
from lazylab.experiments.toolkit import match_claim as toolkit_match
from lazylab.seeding import torch_generator
from lazylab.train import log_spaced_steps

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
        "NN-converges": "NN's one-pass SGD risk ends within tolerance of its finite-d limit "
                        "(the exact n -> infinity risk at this d; legend: lim NN: finite d)",
        "NT(I)-converges": "NT(I)'s one-pass SGD risk ends within tolerance of its finite-d "
                           "limit for its own W (the exact n -> infinity risk of each run's W, "
                           "mean over seeds; legend: lim NT(I): finite d, own W)",
        "NN-monotone": "NN's risk decreases with n at every evaluation point (no rise beyond "
                       "3 SE + 0.005)",
        "NT(I)-monotone": "NT(I)'s risk decreases with n at every evaluation point (no rise "
                          "beyond 3 SE + 0.005)",
        "NN-learns-before-cut": "NN covers at least half of the drop from R0 to its finite-d "
                                "limit before the first step-size cut (the shape comes from "
                                "learning)",
        "NT(I)-learns-before-cut": "NT(I) covers at least half of the drop from R0 to its "
                                   "finite-d limit for its own W before the first step-size "
                                   "cut (the shape comes from learning)",
        "NN-below-NT": "at the end NN's risk is below NT(I)'s by more than 3 SE (N < d)",
    }
    robustness_axes = {"d": [20, 30, 40], "target_seed": [100, 101, 102]}
    #: d range of the quick scale. The SGD step count does not grow with d, so the horizon
    #: n/d = steps x batch / d shrinks as d grows and the claims were checked only over this
    #: range (smoke d = 12, robustness axis 20..40); ``validate`` refuses another d at quick
    #: (exit 2).
    quick_d_range: ClassVar[tuple[int, int]] = (12, 40)
    #: Size exponents of the cost guard (:func:`lazylab.experiments.cost.scaled_cost`).
    cost_sizes: ClassVar[dict[str, float]] = {"sgd_steps": 1, "batch_size": 1, "d": 1}

    def validate(self, p: SamplesParams, scale: str | None = None) -> None:
        """At ``--scale quick``, refuse a d outside :attr:`quick_d_range` (InputError, exit 2;
        the runner passes the scale, :func:`lazylab.runner.params.validate`)."""
        from lazylab.errors import InputError

        lo, hi = self.quick_d_range
        if scale == "quick" and not lo <= p.d <= hi:
            raise InputError(
                f"--set d: quick scale supports {lo} <= d <= {hi} for {self.id}; got d = "
                f"{p.d}. Its SGD step count is fixed, so the sample horizon n/d shrinks with d "
                f"and its claims were checked only in that range. Use --scale paper (with "
                f"--set d=... and sgd_steps=...) for other d")

    def peak_bytes(self, p: SamplesParams) -> float:
        """A unit's arrays: the step sizes' N x d float32 parameters (held three times) and
        N x batch activations, and the d x d float64 matrices of each exact risk (the target's
        and the model's quadratic forms and their products, about eight)."""
        N, F = self.width(p), len(p.lr_factors)
        return 4.0 * F * (3 * N * p.d + 4 * N * p.batch_size) + 8.0 * 8 * p.d * p.d

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
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        """Train ``method`` at every step size ``base x lr_factors`` from one initialization on
        one sample stream, all factors at once as one packed network
        (:mod:`lazylab.train.packed`), and keep the factor with the lowest final risk (ties:
        the first; diverged runs are skipped). Equal to one :func:`lazylab.train.fit` run per
        factor to rounding (tests/test_packed.py)."""
        method = key["method"]
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
        prob, N = self.problem(p), self.width(p)
        gen = torch_generator(seed, device)
        nn = method == "NN"
        base = (C.nn_lr(p.d, p.batch_size, p.nn_lr, self.nn_lr_coef) if nn
                else C.nt_lr_learning(p.d, N, p.batch_size, p.nt_lr))
        F = len(p.lr_factors)
        res = C.train_lr_grid(prob, N, C.SGDConfig(p.sgd_steps, p.batch_size, base,
                                                   p.tail_fraction),
                              p.lr_factors, p.init_scale if nn else None, gen, device,
                              log_steps=eval_steps(p.sgd_steps, p.eval_points))
        assert res.log_eval is not None and res.log_loss is not None
        finals = [math.inf if bool(res.diverged[k]) else float(res.log_eval[k, -1])
                  for k in range(F)]
        k = int(np.argmin(finals))
        if not math.isfinite(finals[k]):
            raise RuntimeError(f"{method} at N = {N}: training diverged at every step size "
                               f"({base:g} x {p.lr_factors}); lower "
                               f"{'nn_lr' if nn else 'nt_lr'}")
        extra = [("lr", base * p.lr_factors[k])]
        if not nn:
            extra.append(("risk_population_limit", self.nt_limit(res.W[k], prob)))
        x = [s * p.batch_size / p.d for s in res.log_steps]
        rows = []
        for xi, r, tl in zip(x, res.log_eval[k].tolist(), res.log_loss[k].tolist(),
                             strict=True):
            rows += [row(method, "n/d", xi, "risk", r),
                     row(method, "n/d", xi, "train_loss", tl / prob.r0)]
        rows += [row(method, "n/d", x[-1], k_, v) for k_, v in extra]
        return rows

    # ------------------------------------------------------------------ theory
    def theory(self, p: SamplesParams, prep: Any = None) -> list[dict[str, Any]]:
        lims = self.limits(p)
        xs = [s * p.batch_size / p.d for s in eval_steps(p.sgd_steps, p.eval_points)]
        return [row(name, "n/d", x, metric, v, kind="theory")
                for name, vals in lims.items() for metric, v in vals.items() for x in xs]

    # ------------------------------------------------------------------ claims
    def claims(self, p: SamplesParams, results: Results) -> list[Claim]:
        x_end = p.sgd_steps * p.batch_size / p.d
        x_cut = (1 - 2 * p.tail_fraction) * x_end
        out = []
        for m in METHODS:
            cid = f"{m}-converges"
            out.append(self._converges(cid, self.claim_statements[cid], results, m, x_end))
        for m in METHODS:
            cid = f"{m}-monotone"
            out.append(self._monotone(cid, self.claim_statements[cid], results, m))
        for m in METHODS:
            cid = f"{m}-learns-before-cut"
            out.append(self._before_cut(cid, self.claim_statements[cid], results, m, x_end,
                                        x_cut))
        gap = self._gap(results, x_end)
        conv = {c.id: c for c in out[:len(METHODS)]}
        nn, nt = conv["NN-converges"], conv["NT(I)-converges"]
        worst = (nt.expected - nt.tolerance) - (nn.expected + nn.tolerance)
        out.append(implied(gap, list(conv), nn.held and nt.held and gap.held
                           and worst > gap.tolerance))
        return out

    def _limit(self, results: Results, method: str, x_end: float) -> float:
        if method == "NT(I)":  # its own W's exact limit, averaged like the simulations
            ref_m = results.series(method, "risk_population_limit").mean
            return float(ref_m[-1]) if len(ref_m) else math.nan
        try:
            return results.value("lim NN", "risk_finite_d", x_end, kind="theory")
        except KeyError:
            return math.nan

    def _converges(self, cid: str, statement: str, results: Results, method: str,
                   x_end: float) -> Claim:
        model = ("seed noise: 3 SE over seeds + SGD convergence allowance 0.01 + 0.05 limit "
                 "+ 0.005 (float32)")
        st = sim_stats(results, method, sd_metric=None)
        if not st:
            return Claim.missing(cid, statement, "no simulation rows", error_model=model)
        ref = self._limit(results, method, x_end)
        final, se = st[max(st)]
        return toolkit_match(cid, statement, final, ref, se,
                             bias=sgd_allowance(ref) + ABS_FLOOR, error_model=model,
                             x=[max(st)])

    def _monotone(self, cid: str, statement: str, results: Results, method: str) -> Claim:
        model = ("seed noise: a rise between consecutive evaluation points counts only beyond "
                 "3 SE of the difference + 0.005; the SE is the larger of the two points' SEs "
                 "over seeds combined and the SE of the per-seed rise pooled over all pairs "
                 "(a two-seed SE alone has one degree of freedom and is often far too small)")
        st = sim_stats(results, method, sd_metric=None)
        xs = sorted(st)
        n_seeds = results.series(method, "risk").n
        if len(n_seeds) and int(n_seeds.min()) < 2:
            return Claim.not_applicable(cid, statement, "needs >= 2 seeds: the SGD noise of a "
                                        "point is estimated over seeds")
        if len(xs) < 2:
            return Claim.missing(cid, statement, "fewer than 2 points", expected=0.0,
                                 error_model=model)
        pooled = _pooled_rise_se(results, method, xs)
        rises = [(st[b][0] - st[a][0],
                  K_SE * max(math.hypot(st[a][1], st[b][1]), pooled) + ABS_FLOOR, b)
                 for a, b in zip(xs, xs[1:], strict=False)]
        worst = max(rises, key=lambda t: t[0] - t[1])
        return Claim.test(cid, statement, worst[0], "<=", 0.0, worst[1], model,
                          {"at_x": worst[2], "points": len(xs), "pooled rise SE": pooled,
                           "worst_at": worst_at(**{"n/d": worst[2]})})

    def _before_cut(self, cid: str, statement: str, results: Results, method: str,
                    x_end: float, x_cut: float) -> Claim:
        model = ("protocol check: with a step size in the learning regime the risk just before "
                 "the first cut has covered >= 1/2 of the drop R0 -> limit; 3 SE seed noise")
        st = sim_stats(results, method, sd_metric=None)
        ref = self._limit(results, method, x_end)
        before = [x for x in st if x <= x_cut + 1e-9]
        if not before or not math.isfinite(ref):
            return Claim.missing(cid, statement, "no point before the cut", expected=0.5,
                                 error_model=model)
        x0 = max(before)
        r, se = st[x0]
        drop = 1.0 - ref
        frac = (1.0 - r) / drop if drop > 0 else math.nan
        tol = K_SE * se / drop if drop > 0 else math.nan
        return Claim.test(cid, statement, frac, ">=", 0.5, tol, model,
                          {"x_before_cut": x0, "risk": r, "limit": ref,
                           "test": "held iff measured + tolerance >= 0.5"})

    def _gap(self, results: Results, x_end: float) -> Claim:
        model = "seed noise: 3 SE of the difference of the final risks (SE over seeds)"
        st = {m: sim_stats(results, m, sd_metric=None) for m in METHODS}
        if not all(st.values()):
            return Claim.missing("NN-below-NT", self.claim_statements, "missing simulations",
                                 expected=0.0, error_model=model)
        (nn, se_nn), (nt, se_nt) = (st[m][max(st[m])] for m in METHODS)
        margin = K_SE * math.hypot(se_nn, se_nt)
        return Claim.test("NN-below-NT", self.claim_statements, nt - nn, "above", 0.0, margin,
                          model, {"NN_final": nn, "NT_final": nt, "comparison": "above"})

    # ------------------------------------------------------------------ figure
    def plot(self, p: SamplesParams, results: Results):
        """Each method's SGD curve (mean over seeds, SEM band), its asymptotic large-n limit
        (dashed, the paper's formula) and the finite-d limit its claims compare against
        (dotted, :meth:`_limit`; one dashed line when the two agree to 1e-3), and the
        schedule's step-size cuts (grey verticals: the drop after the first is the SGD noise
        floor falling with the step size, not new learning)."""
        fig, ax = style.new_figure()
        x_end = p.sgd_steps * p.batch_size / p.d
        for m in METHODS:
            x, mean, sem, _ = results.series(m, "risk")
            if len(x):
                style.theory_line(ax, x, mean, m, linewidth=1.4,  # the SGD curve itself
                                  label=f"{m}, one-pass SGD")
                if np.any(sem > 0):
                    ax.fill_between(x, mean - sem, mean + sem, color=style.method_color(m),
                                    alpha=0.25, linewidth=0)
            self._plot_limits(ax, results, m, x_end)
        for i, xc in enumerate(self.cuts(p)):
            ax.axvline(xc, linestyle=(0, (1, 3)), color="0.55", linewidth=1.0,
                       label="step-size cuts: lr/10, then lr/15" if i == 0 else None)
        N = self.width(p)
        risks = [float(r["value"]) for r in results.select(kind="simulation", metric="risk")]
        top = max([1.0, *[v for v in risks if math.isfinite(v)]])
        title = f"{self.target_name}, d = {p.d}, N = {N} (one-pass SGD, batch {p.batch_size})"
        if self.cuts(p):  # the visible step of the curves: say where it comes from
            title += (f"\nthe drop at n/d = {self.cuts(p)[0]:,.0f} is the step-size cut lr -> "
                      "lr/10 (less SGD noise)")
        style.finish(ax, xlabel="n/d", ylim=(0.0, 1.05 * top),  # the full range of the risk
                     title=title)
        return fig

    def cuts(self, p: SamplesParams) -> list[float]:
        """n/d of the schedule's step-size cuts, lr -> lr/10 -> lr/15
        (:meth:`lazylab.experiments.ghorbani.common.SGDConfig.schedule`: each tail is
        round(tail_fraction x sgd_steps) steps; none when that is 0)."""
        tail = round(p.tail_fraction * p.sgd_steps)
        if tail == 0:
            return []
        return [(p.sgd_steps - 2 * tail) * p.batch_size / p.d,
                (p.sgd_steps - tail) * p.batch_size / p.d]

    def _plot_limits(self, ax: Axes, results: Results, m: str, x_end: float) -> None:
        """Method ``m``'s asymptotic limit (dashed) and the finite-d one its claims use
        (dotted), labelled as the claims' statements name them."""
        lim = r"$\lim_{n\to\infty}$ " + m
        _, ya, _, _ = results.series(f"lim {m}", "risk", kind="theory")
        asym = float(ya[0]) if len(ya) else math.nan
        ref = self._limit(results, m, x_end)
        own = ", own W" if m == "NT(I)" else ""
        color = style.method_color(m)
        if math.isfinite(asym) and math.isfinite(ref) and abs(asym - ref) <= 1e-3:
            ax.axhline(asym, linestyle="--", color=color, linewidth=1.4,
                       label=f"{lim}: asymptotic = finite d{own}")
            return
        if math.isfinite(asym):
            ax.axhline(asym, linestyle="--", color=color, linewidth=1.4,
                       label=f"{lim}: asymptotic ($d\\to\\infty$)")
        if math.isfinite(ref):
            ax.axhline(ref, linestyle=":", color=color, linewidth=1.6,
                       label=f"{lim}: finite d{own}")


def _pooled_rise_se(results: Results, method: str, xs: list[float]) -> float:
    """SE of the mean rise r(b) - r(a) over seeds, from the per-seed rises of every pair of
    consecutive points pooled (sum of squared deviations over sum of degrees of freedom)."""
    per_seed: dict[Any, dict[float, float]] = {}
    for r in results.select(method=method, metric="risk", kind="simulation"):
        per_seed.setdefault(r["seed"], {})[float(r["x"])] = float(r["value"])
    ss, dof = 0.0, 0
    for a, b in zip(xs, xs[1:], strict=False):
        d = [v[b] - v[a] for v in per_seed.values() if a in v and b in v]
        if len(d) >= 2 and all(math.isfinite(x) for x in d):
            mean = sum(d) / len(d)
            ss += sum((x - mean) ** 2 for x in d)
            dof += len(d) - 1
    return math.sqrt(ss / dof / len(per_seed)) if dof else 0.0
