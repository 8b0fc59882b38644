"""bailee-expressivity: the explicit W* of Theorem 7 for alpha (beta . x)^p (Bai & Lee 2020,
Lemma 9, Lemma 15, Theorem 7 and App. C.4).

For p in ``ps`` and widths m on a log grid, sigma = relu^3/6, we build W* with
:func:`lazylab.models.bailee.constructions.quadratic_representer` (rows 2 m^{-1/4}
sqrt(a_+-(w0_r)) beta, a(.) the Lemma 9 Hermite coefficient) and measure on test points of the
sphere of radius B_x:

* ``f_Q(W*)``: RMSE of f^Q_{W*} - f*, predicted sqrt(2/m) (exact variance, slope -1/2);
* ``randomized net``: RMS over Sigma of f(W0 + W* Sigma) - f* (exact, via the sign moments),
  dominated by the f^L noise, slope -1/4;
* ``norm``: ||W*||_{2,4}^4, which tends to 8 ||beta||^4 E a^2 and must stay below Theorem 7's
  B_{w,*}^4 = 32 pi ((p-2)^3 v 1) alpha^2 B_x^{2(p-2)} ||beta||^{2p} / delta.

Defaults: d = 10, B_x = 1 (the paper's single-polynomial example, Sec. 5.2), ||beta|| = 1,
alpha = 1. With ||beta|| = sqrt(d)/B_x
(O(1) targets) the rows 2 m^{-1/4} sqrt|a| ||beta|| stay O(1) up to m ~ 1e7 for p = 4, outside
the small-movement regime in which the randomized net is close to f^Q + f^L.
Each unit averages ``n_init`` independent initializations W0: the error of one W0 is a random
function of x whose RMS over test points scatters by tens of percent.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field, field_validator

from lazylab.data import Polynomial, sphere
from lazylab.experiments import register
from lazylab.experiments.bailee.common import (
    F64,
    PAPER,
    block_elems,
    data_generator,
    input_chunks,
    make_net,
    random_direction,
    width_grid,
)
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row, worst_at
from lazylab.experiments.style import finish, series_line, series_points
from lazylab.experiments.toolkit import (
    NO_COMPETING_LAW,
    all_of,
    level_claim,
    loglog_fit,
    match_claim,
    series_slope_claim,
)
from lazylab.models import SignRandomizedNet
from lazylab.models.bailee.constructions import quadratic_representer, representable_exponent
from lazylab.seeding import derive_seed
from lazylab.theory.bailee import (
    representer_errors,
    representer_norm_bound,
    representer_norm_limit,
    representer_norm_sd,
)
from lazylab.train.bailee.randomized_risk import sign_moments

FQ, RAND, NORM, LIMIT, BOUND = "f_Q(W*)", "randomized net", "norm", "norm limit", "bound"
# Finite-width allowance on the slopes (common.py): the f^Q error is an average of m/2 iid
# terms, exactly sqrt(Var/m) in expectation, so only the scatter of one draw of W0 remains
# (in se); the randomized error mixes m^{-1/2} and m^{-1/4} parts, which tilts a fit started at
# m = 1000 by ~0.03. Both slopes are compared with the slope of the exact prediction
# (representer_errors) over the same widths, so only that 0.03 of unmodelled tilt remains.
SLOPE_BIAS = 0.03
#: Relative (log) allowance of the level test: the predictions are exact expectations of the
#: mean square; the RMS of a finite sample is biased low by ~Var/(8 mean^2) per draw, < 2%.
LEVEL_BIAS = 0.02
RMSE, NORM4 = "rmse", "norm4"
SLOPE_MODEL = ("finite width: the f_Q error is an average of m/2 iid terms (exact variance, "
               "slope -1/2); the randomized error adds the m^-1/4 sign noise, whose mixture "
               "slope is the prediction's over the same widths; unmodelled tilt <= 0.03 (bias); "
               "W0 and test-point scatter through the residual SE of the fit")
LEVEL_MODEL = ("Monte Carlo over W0 and test points: the units (one per width, own seed) are "
               "independent, so the scatter of log(measured / predicted RMS) across widths "
               "estimates the error (t test); 2% bias for the RMS of a finite sample")
NORM_MODEL = ("Monte Carlo over W0: ||W*||_{2,4}^4 is a mean of m/2 iid a(w0)^2, sd from "
              "representer_norm_sd / sqrt(n_init x seeds); 3 SE at the largest m (float64 "
              "rounding 1e-9 relative covers p = 2, where the norm is exact)")


class ExpressivityParams(ExperimentParams):
    d: int = Field(10, ge=2, le=1000, description="input dimension")
    ps: list[int] = Field([2, 3, 4], min_length=1, description="degrees p in {2, 3, 4, 6, 8}")
    m_min: int = Field(1000, ge=4, description="smallest width m")
    m_max: int = Field(100_000, ge=4, le=10_000_000, description="largest width m")
    m_points: int = Field(5, ge=3, le=40, description="widths on the log grid")
    n_test: int = Field(100, ge=10, le=100_000, description="test points on the sphere")
    B_x: float = Field(1.0, gt=0, description="input radius B_x")
    alpha: float = Field(1.0, description="target coefficient alpha (nonzero)")
    beta_norm: float = Field(1.0, gt=0, description="||beta|| (the paper: 1)")
    n_init: int = Field(4, ge=1, le=1000, description="draws of W0 per unit (errors are RMS "
                        "over draws and test points)")
    delta: float = Field(0.1, gt=0, lt=1, description="failure probability in Theorem 7's bound")
    data_seed: int = Field(0, ge=0, description="seed of the test points and of beta")

    @field_validator("ps")
    @classmethod
    def _ps(cls, v: list[int]) -> list[int]:
        if any(p < 2 or p > 8 or not representable_exponent(p - 2) for p in v) \
                or len(set(v)) != len(v):
            raise ValueError("ps must hold distinct degrees among 2, 3, 4, 6, 8")
        return sorted(v)

    @field_validator("alpha")
    @classmethod
    def _alpha(cls, v: float) -> float:
        if v == 0 or not math.isfinite(v):
            raise ValueError("alpha must be a nonzero finite number")
        return v


@register
class Expressivity(Experiment):
    #: Its claims fit along m (slopes, crossings): at least three distinct values.
    min_distinct: ClassVar[dict[str, int]] = {"m": 3}
    id = "bailee-expressivity"
    paper = PAPER
    figure = "Thm 7 / Lemma 15"
    summary = ("explicit W* for alpha (beta.x)^p: approximation error of f_Q(W*) and of the "
               "randomized net vs m, and ||W*||_{2,4}^4 vs its limit and Theorem 7's bound")
    Params = ExpressivityParams
    scales = {"quick": {}, "paper": {"ps": [2, 3, 4, 6], "m_max": 1_000_000, "m_points": 7,
                                     "n_test": 1000}}
    default_seeds = {"quick": 1, "paper": 5}
    est_seconds = {"quick": 40.0}
    claim_statements = {
        "error-decreases": "the RMSE of f_Q(W*) - f* decreases like m^{-1/2} for every p "
                           "(two-sided slope)",
        "randomized-decreases": "the randomized net's RMS error decreases with the slope of "
                                "its exact prediction (m^{-1/4} sign noise plus the m^{-1/2} "
                                "f_Q error) for every p",
        "error-level": "both RMS errors match their exact predicted values (Lemma 15 variance "
                       "and the sign-noise variance) across widths, for every p",
        "norm-limit": "||W*||_{2,4}^4 at the largest m matches 8 ||beta||^4 E a^2 within 3 "
                      "Monte Carlo SE, for every p",
        "norm-bound": "consistency: ||W*||_{2,4}^4 stays below Theorem 7's bound at every m and p",
    }
    robustness_axes = {"d": [5, 10, 20], "data_seed": [0, 1, 2], "n_init": [2, 4, 8]}
    smoke = {"ps": [2, 3], "m_min": 500, "m_max": 8000, "m_points": 5, "n_test": 40,
             "n_init": 2}

    def validate(self, p: ExpressivityParams) -> None:
        """Refuse sizes whose float64 arithmetic would overflow inside a unit (an input error up
        front rather than an inf or NaN in the results).

        Targets, errors and norms scale with the amplitude ``|alpha| (B_x ||beta||)^p`` and
        Theorem 7's bound with ``alpha^2 B_x^(2(p-2)) ||beta||^(2p) / delta``; squares and sums
        of them must stay finite, so the amplitude must lie in [1e-100, 1e100] and the bound
        below 1e250 (``B_x = 1e308`` overflowed in a unit before).
        """
        from lazylab.errors import InputError

        lb, la = math.log10(p.B_x * 1.0), math.log10(abs(p.alpha))
        lbeta = math.log10(p.beta_norm)
        for q in p.ps:
            amp = la + q * (lb + lbeta)
            bound = (math.log10(32 * math.pi * max((q - 2) ** 3, 1) / p.delta) + 2 * la
                     + 2 * (q - 2) * lb + 2 * q * lbeta)
            if not -100 <= amp <= 100 or not -250 <= bound <= 250:
                raise InputError(
                    f"--set alpha/B_x/beta_norm: at p = {q} the target amplitude |alpha| "
                    f"(B_x ||beta||)^p = 1e{amp:.0f} and Theorem 7's bound 1e{bound:.0f} must "
                    "lie in [1e-100, 1e100] and [1e-250, 1e250] (float64 squares and sums of "
                    f"them must stay finite; alpha = {p.alpha:g}, B_x = {p.B_x:g}, beta_norm = "
                    f"{p.beta_norm:g})")

    def units(self, p: ExpressivityParams) -> list[dict[str, Any]]:
        return [{"p": q, "m": m} for q in p.ps for m in width_grid(p.m_min, p.m_max, p.m_points)]

    def cost(self, p: ExpressivityParams, scale: str = "quick") -> tuple[float, float | None]:
        """Estimated ``(seconds, peak bytes)`` of one seed, scaled from the sizes.

        Work of a unit of width m: ``n_init m (n_test (d + 40) / 50 + 3 d)`` (the (n_test, m)
        activation blocks, whose cost grows slowly with d, plus drawing W0 and W*, O(m d));
        seconds = ``est_seconds[scale]`` per seed x (work at p) / (work at the scale's own
        parameters). Fitted on single units (m = 1e5..1e7, d = 10, 100: within 1.6x) and
        calibrated on the quick run (45 s wall, 16.5 CPU s, 1.0 GB peak RSS on a loaded 2-core
        CPU). Peak: :meth:`peak_bytes` (the runner adds the interpreter's resident memory,
        ``PROCESS_BYTES``); measured 0.9 GB at the quick sizes, 3.8 GB at m = 1e6, d = 100 and
        4.1 GB at m = 1e7, d = 10.
        """

        def work(q: ExpressivityParams) -> float:
            return sum(q.n_init * u["m"] * (q.n_test * (q.d + 40) / 50 + 3 * q.d)
                       for u in self.units(q))

        base = self.resolve(scale) if scale in self.scales else self.resolve("quick")
        per_seed = self.est_seconds.get(scale, self.est_seconds["quick"]) / max(
            1, self.default_seeds.get(scale, 1))
        return per_seed * work(p) / work(base), self.peak_bytes(p)

    def peak_bytes(self, p: ExpressivityParams) -> float:
        """float64 arrays of the widest unit: 20 numbers per element of one (rows, m) input
        block (:func:`block_elems`: f*, the Taylor terms, the sign moments' Z +- V and their
        sigma) and four (m, d) matrices (W0, W*, the randomized net's copies of both)."""
        m = max(width_grid(p.m_min, p.m_max, p.m_points))
        return 8.0 * (20 * block_elems(p.n_test, m) + 4 * m * p.d)

    @staticmethod
    def _data(p: ExpressivityParams, device: torch.device | str = "cpu",
              ) -> tuple[torch.Tensor, torch.Tensor]:
        g = data_generator(p.data_seed, "expressivity", p.d, p.n_test)
        X = sphere(p.n_test, p.d, radius=p.B_x, generator=g, dtype=F64)
        beta = random_direction(p.d, p.beta_norm, g)
        return X.to(device), beta.to(device)

    def run_unit(self, p: ExpressivityParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        deg, m = int(key["p"]), int(key["m"])
        X, beta = self._data(p, device)
        target = Polynomial(beta, p=deg, alpha=p.alpha)
        sq_q = sq_r = norm4 = 0.0
        for i in range(p.n_init):
            net = make_net(p.d, m, activation="relu3_6", B_x=p.B_x,
                           seed=derive_seed(seed, f"init-{i}"), device=device)
            rep = quadratic_representer(net, p.alpha, beta, deg, p.B_x)
            rnet = SignRandomizedNet(net, init=rep.W)
            norm4 += rep.norm_2_4 ** 4
            with torch.no_grad():
                for Xc in input_chunks(X, m):
                    fstar = target(Xc)
                    fq = net.taylor_terms(Xc, rep.W, 2)[2]
                    mean, var = sign_moments(rnet, Xc)
                    sq_q += float(((fq - fstar) ** 2).sum())
                    sq_r += float(((mean - fstar) ** 2 + var).sum())
        cnt = p.n_test * p.n_init
        return [row(FQ, "m", m, RMSE, math.sqrt(sq_q / cnt), p=deg),
                row(RAND, "m", m, RMSE, math.sqrt(sq_r / cnt), p=deg),
                row(NORM, "m", m, NORM4, norm4 / p.n_init, p=deg)]

    def theory(self, p: ExpressivityParams, prep: Any = None) -> list[dict[str, Any]]:
        X, beta = self._data(p)
        cos = ((X @ beta) / (beta.norm() * p.B_x)).numpy()
        out = []
        grid = np.geomspace(p.m_min, p.m_max, 15)
        for deg in p.ps:
            lim = representer_norm_limit(deg, p.alpha, p.beta_norm, p.B_x)
            bound = representer_norm_bound(deg, p.alpha, p.beta_norm, p.B_x, p.delta)
            for m in grid:
                e_q, e_r = representer_errors(deg, p.alpha, p.beta_norm, p.B_x, cos, float(m))
                out += [row(FQ, "m", m, RMSE, e_q, kind="theory", p=deg),
                        row(RAND, "m", m, RMSE, e_r, kind="theory", p=deg),
                        row(LIMIT, "m", m, NORM4, lim, kind="theory", p=deg),
                        row(BOUND, "m", m, NORM4, bound, kind="theory", p=deg)]
        return out

    def _predicted(self, p: ExpressivityParams, deg: int, ms) -> tuple[list[float],
                                                                       list[float]]:
        X, beta = self._data(p)
        cos = ((X @ beta) / (beta.norm() * p.B_x)).numpy()
        pairs = [representer_errors(deg, p.alpha, p.beta_norm, p.B_x, cos, float(m)) for m in ms]
        return [a for a, _ in pairs], [b for _, b in pairs]

    def claims(self, p: ExpressivityParams, results: Results) -> list[Claim]:
        st = self.claim_statements
        slopes_q, slopes_r, levels, limits, bounds = [], [], [], [], []
        for deg in p.ps:
            sq = results.series(FQ, RMSE, p=deg)
            sr = results.series(RAND, RMSE, p=deg)
            pq, pr = self._predicted(p, deg, sq.x)
            _, pr_r = self._predicted(p, deg, sr.x)
            slopes_q.append(series_slope_claim(f"p={deg}", "", results, FQ, RMSE, -0.5,
                                               bias=SLOPE_BIAS, error_model=SLOPE_MODEL, p=deg,
                                               resolution=NO_COMPETING_LAW))
            b_r = loglog_fit(sr.x, pr_r).slope if len(sr.x) >= 2 else -0.25
            slopes_r.append(series_slope_claim(f"p={deg}", "", results, RAND, RMSE, b_r,
                                               bias=SLOPE_BIAS, error_model=SLOPE_MODEL, p=deg,
                                               resolution=NO_COMPETING_LAW))
            levels.append(level_claim(f"f_Q p={deg}", "", sq.mean, pq, bias=LEVEL_BIAS,
                                      error_model=LEVEL_MODEL, x=sq.x))
            levels.append(level_claim(f"randomized p={deg}", "", sr.mean, pr_r,
                                      bias=LEVEL_BIAS, error_model=LEVEL_MODEL, x=sr.x))
            sn = results.series(NORM, NORM4, p=deg)
            lim = representer_norm_limit(deg, p.alpha, p.beta_norm, p.B_x)
            bound = representer_norm_bound(deg, p.alpha, p.beta_norm, p.B_x, p.delta)
            if len(sn.x):
                sd = representer_norm_sd(deg, p.alpha, p.beta_norm, p.B_x, int(sn.x[-1])) \
                    / math.sqrt(sn.n[-1] * p.n_init)
                limits.append(match_claim(f"p={deg}", "", float(sn.mean[-1]), lim, sd,
                                          bias=1e-9 * lim, error_model=NORM_MODEL))
                worst = int(np.argmax(sn.mean / bound))
                bounds.append(Claim.test(f"p={deg}", "", float(sn.mean[worst]), "<=", bound,
                                         0.0, "a high-probability bound",
                                         {"worst_at": worst_at(m=float(sn.x[worst]))}))
            else:
                limits.append(Claim.missing(f"p={deg}", "", "no norm rows", expected=lim,
                                            error_model=NORM_MODEL))
        return [all_of("error-decreases", st, slopes_q),
                all_of("randomized-decreases", st, slopes_r),
                all_of("error-level", st, levels),
                all_of("norm-limit", st, limits),
                all_of("norm-bound", st, bounds,
                       error_model="Theorem 7 bounds the norm with probability 1 - delta via "
                                   "Markov's inequality: 20-80x slack, so a consistency check",
                       details={"kind": "consistency"})]

    def plot(self, p: ExpressivityParams, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(4.2 * len(p.ps), 6.4))
        axes = fig.subplots(2, len(p.ps), squeeze=False)
        for i, deg in enumerate(p.ps):
            ax = axes[0, i]
            for meth, lab in ((FQ, r"$f^Q_{W_*}$, $m^{-1/2}$"),
                              (RAND, r"randomized $f_{W_0+W_*\Sigma}$, $m^{-1/4}$")):
                series_line(ax, results, meth, RMSE, p=deg, label=lab)
                series_points(ax, results, meth, RMSE, p=deg)
            ax.set_xscale("log")
            ax.set_yscale("log")
            finish(ax, xlabel="width m", ylabel="RMS error vs f*" if i == 0 else "",
                   title=rf"$\alpha(\beta^\top x)^{deg}$, d = {p.d}")
            ax = axes[1, i]
            series_points(ax, results, NORM, NORM4, p=deg,
                          label=r"$\|W_*\|_{2,4}^4$")
            series_line(ax, results, LIMIT, NORM4, p=deg, label="limit",
                        linestyle="--")
            series_line(ax, results, BOUND, NORM4, p=deg,
                        label=rf"Thm 7 bound ($\delta$ = {p.delta:g})", linestyle=":")
            ax.set_xscale("log")
            ax.set_yscale("log")
            finish(ax, xlabel="width m", ylabel=r"$\|W_*\|_{2,4}^4$" if i == 0 else "")
        fig.tight_layout()
        return fig
