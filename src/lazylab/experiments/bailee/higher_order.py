"""bailee-higher-order: the order-k randomization extracts the k-th Taylor term (Bai & Lee 2020,
Sec. 6.1).

A symmetric net of M pairs (width 2M, lazylab prefactor (2M)^{-1/2}) moves pair r as
(w0_r + z+_r w*_r, w0_r + z-_r w*_r) with w*_r = M^{-1/(2k)} v, ||v|| = sqrt(d)/B_x, and
(z+, z-) the finite-difference laws of :func:`lazylab.models.moment_matched_pair` (first k-1
moments equal, k-th moments differing by 1). For k in ``ks`` and M on a log grid we draw
``n_draws`` multiplier vectors and report, averaged over draws and test points,

* ``f^(j)``: |f^(j)(x)| for j = 1..k+1 (Taylor terms of :meth:`TwoLayerNet.taylor_terms`);
* ``f^(k) - limit``: |f^(k)(x) - lambda_k (v.x)^k / (sqrt(2) k!)|;
* ``f - f^(k)``: |f(x; W0 + W) - f^(k)(x)|, everything but the k-th term.

Predictions: |f^(k)| is Theta(1) and tends to its limit (slope 0, gap ~ M^{-1/2}); f^(j) =
O_p(M^{-j/(2k)}) for j < k; f^(k+1) and the remainder are O(M^{-1/(2k)}) (they are even smaller
for this symmetric construction, whose (k+1)-th moments also match). Theory lines are the exact
mean and spread of each term (:func:`lazylab.theory.bailee.higher_order_term_stats`).

Activation: the default ``sin_shift`` = sin(u + pi/4) is analytic with E[sigma^(k)(g)] =
+-e^{-1/2}/sqrt(2) != 0 for every k (the paper names no analytic activation for Sec. 6). Plain
``sin`` has E[sin^(k)(g)] = 0 for even k, so its k = 2 and k = 4 limits vanish and the
Theta(1) claim does not apply.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, field_validator

from lazylab.experiments import register
from lazylab.experiments.bailee.common import (
    F64,
    PAPER,
    block_elems,
    input_chunks,
    make_net,
    resolve_activation,
    sphere_points_and_direction,
    width_grid,
)
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row
from lazylab.experiments.style import finish, series_line, series_points
from lazylab.experiments.toolkit import (
    NO_COMPETING_LAW,
    all_of,
    loglog_fit,
    match_claim,
    series_slope_claim,
    sub_generator,
)
from lazylab.models import HigherOrderRandomizedNet
from lazylab.theory.bailee import (
    folded_normal_mean,
    higher_order_limit,
    higher_order_term_stats,
)

GAP, REST = "f^(k) - limit", "f - f^(k)"
METRIC = "mean_abs"
#: Finite-width allowance on the slope of a single term: each term is a sum of M iid variables
#: whose mean |.| follows its exact law up to the O(M^{-1/2}) relative error of the normal
#: approximation (CLT), a tilt < 0.02 over the grid.
SLOPE_BIAS = 0.02
#: The remainder f - f^(k) mixes the powers -j/(2k) (j != k); its leading power -1/(2k) is
#: tilted by the next one, a relative O(M^{-1/(2k)}) correction: <= 0.05 over the grid.
REST_BIAS = 0.05
#: Relative allowance for the normal approximation of the k-th term's folded mean.
LEVEL_BIAS = 0.01
#: |limit| below this (relative to the largest term) means the activation has lambda_k = 0.
ZERO_LIMIT = 1e-8

LEVEL_MODEL = ("finite width: f^(k)(x) has the exact mean (the Theta(1) limit) and sd "
               "(O(M^-1/2)) of higher_order_term_stats; the mean over test points and draws of "
               "|f^(k)| is within 3 of that sd (bound for fully correlated points) plus 1% "
               "relative for the normal approximation of a sum of M terms")
SLOPE_MODEL = ("finite width: each term is a sum of M iid variables with the exact spread of "
               "higher_order_term_stats, so its mean |.| follows m^(-j/(2k)) up to O(M^-1/2) "
               "relative corrections (bias 0.02); draw and test-point scatter enter through "
               "the residual SE of the fit")
REST_MODEL = ("f - f^(k) is led by f^(1) ~ m^(-1/(2k)); the next power tilts the fit by <= 0.05 "
              "(bias); scatter through the residual SE of the fit")

_STATEMENTS = {
    "theta1": "k = {k}: the mean |f^({k})| matches its exact mean E|N(mu_k, sd_k)| (a Theta(1) "
              "limit plus an O(m^-1/2) spread) at every m",
    "lower": "k = {k}: |f^(j)| for j < k decays like m^(-j/(2k)) (two-sided slope)",
    "rest": "k = {k}: |f^({k1})| decays with the slope of its exact spread and |f - f^({k})| like "
            "m^(-1/(2k))",
}


def _term(j: int) -> str:
    return f"f^({j})"


class HigherOrderParams(ExperimentParams):
    d: int = Field(10, ge=2, le=1000, description="input dimension")
    ks: list[int] = Field([2, 3, 4], min_length=1, description="orders k extracted (1..6)")
    m_min: int = Field(100, ge=4, description="smallest number of pairs M")
    m_max: int = Field(20_000, ge=4, le=10_000_000, description="largest number of pairs M")
    m_points: int = Field(7, ge=3, le=40, description="widths on the log grid")
    n_test: int = Field(40, ge=5, le=100_000, description="test points on the sphere")
    n_draws: int = Field(10, ge=1, le=10_000, description="multiplier draws (z+, z-) per unit")
    B_x: float = Field(1.0, ge=1e-6, le=1e6, description="input radius B_x")
    activation: Literal["sin_shift", "sin", "tanh", "softplus"] = Field(
        "sin_shift", description="analytic sigma (sin_shift = sin(u + pi/4))")
    data_seed: int = Field(0, ge=0, description="seed of the test points and of v")

    @field_validator("ks")
    @classmethod
    def _ks(cls, v: list[int]) -> list[int]:
        if any(k < 1 or k > 6 for k in v) or len(set(v)) != len(v):
            raise ValueError("ks must hold distinct integers in 1..6")
        return sorted(v)


@register
class HigherOrder(Experiment):
    #: Its claims fit along m (slopes, crossings): at least three distinct values.
    min_distinct: ClassVar[dict[str, int]] = {"m": 3}
    id = "bailee-higher-order"
    paper = PAPER
    figure = "Sec. 6.1"
    summary = ("order-k randomization: |f^(j)| vs width for k = 2, 3, 4; the k-th term is "
               "Theta(1), the lower ones decay like m^{-j/(2k)}")
    Params = HigherOrderParams
    scales = {"quick": {}, "paper": {"m_max": 1_000_000, "m_points": 9, "n_test": 100,
                                     "n_draws": 20}}
    default_seeds = {"quick": 1, "paper": 3}
    # quick measured: 8.3 s of unit compute, 15 s wall (loaded 2-core machine)
    est_seconds = {"quick": 15.0}
    claim_statements = {f"k{k}-{kind}": _STATEMENTS[kind].format(k=k, k1=k + 1)
                        for k in (2, 3, 4) for kind in _STATEMENTS}
    robustness_axes = {"d": [5, 10, 20], "activation": ["sin_shift", "tanh", "softplus"],
                       "data_seed": [0, 1, 2]}
    smoke = {"ks": [2, 3], "m_max": 3000, "m_points": 5, "n_test": 20, "n_draws": 4}

    def statements(self, p: HigherOrderParams) -> dict[str, str]:
        return {f"k{k}-{kind}": _STATEMENTS[kind].format(k=k, k1=k + 1)
                for k in p.ks for kind in _STATEMENTS}

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"m_max": 1, "n_test": 1, "n_draws": 1, "d": 1}

    def peak_bytes(self, p: HigherOrderParams) -> float:
        """float64 arrays of the widest unit (width 2M, M = the largest number of pairs): about
        twelve (rows, 2M) input blocks (:func:`block_elems`: Z, V, the running derivative and
        power terms of taylor_terms, the full net's pre-activation) and eight (2M, d) matrices
        (W0 and the randomized net's copy, W* and its copy, the direction, z D, W0 + z D)."""
        width = 2 * max(width_grid(p.m_min, p.m_max, p.m_points))
        return 8.0 * (12 * block_elems(p.n_test, width) + 8 * width * p.d)

    def units(self, p: HigherOrderParams) -> list[dict[str, Any]]:
        return [{"k": k, "m": m} for k in p.ks for m in width_grid(p.m_min, p.m_max,
                                                                    p.m_points)]

    @staticmethod
    def _data(p: HigherOrderParams, device: torch.device | str = "cpu",
              ) -> tuple[torch.Tensor, torch.Tensor]:
        return sphere_points_and_direction("higher-order", p.d, p.n_test, p.B_x, p.data_seed,
                                           device)

    def run_unit(self, p: HigherOrderParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        k, M = int(key["k"]), int(key["m"])
        X, v = self._data(p, device)
        act = resolve_activation(p.activation)
        net = make_net(p.d, 2 * M, activation=act, B_x=p.B_x, seed=seed, device=device)
        W_star = (M ** (-1.0 / (2 * k)) * v).expand(M, p.d).clone()
        rnet = HigherOrderRandomizedNet(net, k, init=W_star)
        t = (X @ v).cpu().numpy()
        limit = torch.as_tensor(higher_order_limit(act, k, t), dtype=F64, device=device)
        z = rnet.sample_multipliers(p.n_draws, sub_generator(seed, "multipliers", device))
        names = [_term(j) for j in range(1, k + 2)] + [GAP, REST]
        sums = dict.fromkeys(names, 0.0)
        with torch.no_grad():
            for zi in z:
                start = 0
                for Xc in input_chunks(X, 2 * M):
                    terms = rnet.terms(Xc, k + 1, multipliers=zi)
                    full = rnet(Xc, zi)
                    for j in range(1, k + 2):
                        sums[_term(j)] += float(terms[j].abs().sum())
                    lim = limit[start:start + Xc.shape[0]]
                    sums[GAP] += float((terms[k] - lim).abs().sum())
                    sums[REST] += float((full - terms[k]).abs().sum())
                    start += Xc.shape[0]
        norm = p.n_draws * p.n_test
        return [row(name, "m", M, METRIC, s / norm, k=k) for name, s in sums.items()]

    def theory(self, p: HigherOrderParams, prep: Any = None) -> list[dict[str, Any]]:
        X, v = self._data(p)
        t = (X @ v).numpy()
        act = resolve_activation(p.activation)
        out = []
        for k in p.ks:
            for M in np.geomspace(p.m_min, p.m_max, 20):
                for j in range(1, k + 2):
                    mu, sd = higher_order_term_stats(act, k, j, t, float(M))
                    out.append(row(_term(j), "m", M, METRIC,
                                   float(np.mean(folded_normal_mean(mu, sd))), kind="theory", k=k))
                _, sd = higher_order_term_stats(act, k, k, t, float(M))
                out.append(row(GAP, "m", M, METRIC, float(np.mean(sd)) * math.sqrt(2 / math.pi),
                               kind="theory", k=k))
        return out

    def claims(self, p: HigherOrderParams, results: Results) -> list[Claim]:
        X, v = self._data(p)
        t = (X @ v).numpy()
        act = resolve_activation(p.activation)
        st = self.statements(p)
        out = []
        for k in p.ks:
            # k-th term: level against its exact folded mean, at every simulated M.
            x, fk, _, _ = results.series(_term(k), METRIC, k=k)
            lim = float(np.mean(np.abs(higher_order_limit(act, k, t))))
            cid = f"k{k}-theta1"
            if lim <= ZERO_LIMIT:
                out.append(Claim.not_applicable(cid, st, f"lambda_{k} = E sigma^({k})(g) = 0 "
                                                f"for {p.activation}: no Theta(1) limit"))
            else:
                exp, spread = [], []
                for M in x:
                    mu, sd = higher_order_term_stats(act, k, k, t, float(M))
                    exp.append(float(np.mean(folded_normal_mean(mu, sd))))
                    spread.append(float(np.mean(sd)))
                exp_a = np.array(exp)
                out.append(match_claim(cid, st, fk, exp_a, np.array(spread),
                                       bias=LEVEL_BIAS * exp_a, error_model=LEVEL_MODEL,
                                       x=list(x), x_name="m", details={"limit": lim}))
            # lower terms j < k: two-sided slopes -j/(2k).
            cid = f"k{k}-lower"
            parts = [series_slope_claim(f"f^({j})", "", results, _term(j), METRIC, -j / (2 * k),
                                        bias=SLOPE_BIAS, error_model=SLOPE_MODEL, k=k,
                                        resolution=NO_COMPETING_LAW)
                     for j in range(1, k)]
            out.append(all_of(cid, st, parts) if parts else
                       Claim.not_applicable(cid, st, "k = 1 has no lower terms"))
            # the (k+1)-th term: slope of its exact spread; the remainder: -1/(2k).
            cid = f"k{k}-rest"
            xs = results.series(_term(k + 1), METRIC, k=k).x
            if len(xs) >= 2:
                th = [float(np.mean(folded_normal_mean(*higher_order_term_stats(
                    act, k, k + 1, t, float(M))))) for M in xs]
                b_exp = loglog_fit(xs, th).slope
            else:
                b_exp = -(k + 1) / (2 * k)
            parts = [series_slope_claim(f"f^({k + 1})", "", results, _term(k + 1), METRIC,
                                        b_exp, bias=SLOPE_BIAS, error_model=SLOPE_MODEL, k=k,
                                        resolution=NO_COMPETING_LAW),
                     series_slope_claim("f - f^(k)", "", results, REST, METRIC, -1 / (2 * k),
                                        bias=REST_BIAS, error_model=REST_MODEL, k=k,
                                        resolution=NO_COMPETING_LAW)]
            out.append(all_of(cid, st, parts))
        return out

    def plot(self, p: HigherOrderParams, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(4.2 * len(p.ks), 3.9))
        axes = fig.subplots(1, len(p.ks), squeeze=False)[0]
        for ax, k in zip(axes, p.ks, strict=True):
            metric = METRIC
            for j in range(1, k + 2):
                series_line(ax, results, _term(j), metric, k=k,
                            label=rf"$|f^{{({j})}}|$, $m^{{{-j}/{2 * k}}}$" if j < k else
                            (rf"$|f^{{({j})}}|$" if j > k else rf"$|f^{{({k})}}|$ ($\Theta(1)$)"))
                series_points(ax, results, _term(j), metric, k=k)
            series_line(ax, results, GAP, metric, label=r"$|f^{(k)} - \lim|$",
                        linestyle="--", k=k)
            series_points(ax, results, GAP, metric, k=k)
            series_points(ax, results, REST, metric, label=r"$|f - f^{(k)}|$", k=k)
            ax.set_xscale("log")
            ax.set_yscale("log")
            finish(ax, xlabel="pairs m", ylabel=r"mean $|\cdot|$" if k == p.ks[0] else "",
                   title=f"order k = {k} ({p.activation})")
        fig.tight_layout()
        return fig
