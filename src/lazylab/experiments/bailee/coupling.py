"""bailee-coupling: sign randomization kills the NTK term (Bai & Lee 2020, Sec. 3).

Coherent movement W = m^{-1/4} v on the a = +1 half (||v|| = sqrt(d)/B_x, so t = v.x = O(1)),
relu^3/6 by default. For each width m on a log grid and every test point x we measure

* ``f_L``: |f^L_W(x)| without randomization, growing like m^{+1/4};
* ``f_Q = f_Q(W Sigma)``: |f^Q_W(x)| = |f^Q_{W Sigma}(x)|, flat (Theta(1));
* ``std over signs``: sqrt(Var_Sigma f(x; W0 + W Sigma)), exact, shrinking like m^{-1/4};
* ``mean over signs - f_Q``: |E_Sigma f(x; W0 + W Sigma) - f^Q_W(x)|, exact, ~ m^{-1/2};
* ``f_L (one Sigma)``: |f^L_{W Sigma}(x)| for one sign draw (~ sqrt(2/pi) std over signs),

averaged over the test points. Theory lines are the leading-order laws of
:func:`lazylab.theory.bailee.coupling_predictions` (coefficients included, not only slopes).
The test points and v are drawn once from ``data_seed``; seeds vary W0 and Sigma.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field

from lazylab.experiments import register
from lazylab.experiments.bailee.common import (
    PAPER,
    block_elems,
    fit_tilt,
    input_chunks,
    make_net,
    resolve_activation,
    sphere_points_and_direction,
    width_grid,
)
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row
from lazylab.experiments.style import finish, new_figure, series_line, series_points
from lazylab.experiments.toolkit import (
    NO_COMPETING_LAW,
    match_claim,
    series_slope_claim,
    sub_generator,
)
from lazylab.models import SignRandomizedNet
from lazylab.models.bailee.constructions import coherent_direction
from lazylab.theory.bailee import COUPLING_SLOPES, coupling_predictions
from lazylab.train.bailee.randomized_risk import sign_moments

# Method names (results.csv); chosen so that style.method_color gives five distinct colours.
FL, FQ, STD, GAP = "f_L", "f_Q = f_Q(W Sigma)", "std over signs", "mean over signs - f_Q"
ONE_SIGMA = "f_L (one Sigma)"
#: Keys of COUPLING_SLOPES / coupling_predictions -> method names.
NAMES = {"f_L": FL, "f_Q": FQ, "std over signs": STD, "mean gap": GAP}
METRIC = "mean_abs"
#: Finite-width allowance on each slope, derived from the size of the relative correction to
#: each leading-order law (stated at m = 100, decaying like m^-gamma) as the tilt it gives a
#: log-log fit over the widths actually run (:func:`fit_tilt`; 0.010 / 0.010 / 0.012 / 0.023
#: on the quick grid m = 100..1e5):
#: * f_L and f_Q: |mean of m/2 iid neuron terms| (coefficient of variation CV <= NEURON_CV):
#:   E|X| - |E X| <= Var X / (2 |E X|), a relative bias CV^2 (2/m) / 2 <= 9/m: 9% at m = 100,
#:   gamma = 1 (the O(m^-1/2) fluctuation itself is seed noise, in the fit's residual SE);
#: * std over signs: the next odd Taylor term, relative O(h^2), h = m^-1/4 t: 10% at m = 100,
#:   gamma = 1/2;
#: * mean gap: its O(m^-7/8) fluctuation and the f^(6) term over the m^-1/2 mean: 20% at
#:   m = 100, gamma = 3/8.
CORRECTIONS = {"f_L": (0.09, 1.0), "f_Q": (0.09, 1.0), "std over signs": (0.10, 0.5),
               "mean gap": (0.20, 0.375)}
#: Coefficient of variation bound of a per-neuron term (sd/mean of sigma', sigma'' at w0.x,
#: 2.2 for relu^3/6, smaller for softplus and the shifted sine), rounded up.
NEURON_CV = 3.0
SLOPE_ERROR_MODEL = ("finite width: the leading-order law holds up to a relative correction "
                     "{rel:.0%} at m = 100 decaying like m^-{gamma:g}, whose tilt of the fit "
                     "over the widths run is the bias {bias:.3f}; seed and test-point scatter "
                     "enter through the residual SE of the fit (t-widened)")
LIMIT_ERROR_MODEL = ("finite width (law of large numbers over the m/2 moved neurons): relative "
                     "SE sqrt(2/m) x CV with CV <= 3 for f_L, f_Q and the std over signs; "
                     "O(m^-3/8) for the mean gap (its m^-7/8 fluctuation over the m^-1/2 "
                     "mean); divided by sqrt(seeds); tolerance 3 SE at m_max")


class CouplingParams(ExperimentParams):
    d: int = Field(10, ge=2, le=1000, description="input dimension")
    m_min: int = Field(100, ge=4, description="smallest width m")
    m_max: int = Field(100_000, ge=4, le=10_000_000, description="largest width m")
    m_points: int = Field(7, ge=3, le=40, description="widths on the log grid")
    n_test: int = Field(100, ge=10, le=100_000, description="test points x on the sphere")
    B_x: float = Field(1.0, ge=1e-6, le=1e6, description="input radius B_x (w0 ~ N(0, B_x^-2 I))")
    activation: Literal["relu3_6", "softplus", "sin_shift"] = Field(
        "relu3_6", description="sigma; needs nonzero E sigma', E sigma'', E sigma''''")
    data_seed: int = Field(0, ge=0, description="seed of the test points and of v")


@register
class Coupling(Experiment):
    #: Its claims fit along m (slopes, crossings): at least three distinct values.
    min_distinct: ClassVar[dict[str, int]] = {"m": 3}
    id = "bailee-coupling"
    paper = PAPER
    figure = "Sec. 3"
    summary = ("sign randomization: |f_L|, |f_Q|, std over signs and |E f - f_Q| vs width m "
               "(log-log slopes +1/4, 0, -1/4, -1/2)")
    Params = CouplingParams
    scales = {"quick": {}, "paper": {"m_max": 1_000_000, "m_points": 9, "n_test": 1000}}
    default_seeds = {"quick": 1, "paper": 5}
    # quick measured: 2.9 s of unit compute, 14.7 s wall with theory, claims and figure (loaded
    # 2-core machine)
    est_seconds = {"quick": 10.0}
    claim_statements = {
        "slope-f_L": "without randomization |f_L| grows like m^{+1/4}",
        "slope-f_Q": "|f_Q| = |f_Q(W Sigma)| is flat in m (Theta(1))",
        "slope-std": "the std over signs of the randomized net shrinks like m^{-1/4}",
        "slope-gap": "|E_Sigma f - f_Q| shrinks like m^{-1/2}",
        "limits": "at the largest m all four match their leading-order laws (coefficients "
                  "included) within 3 finite-width standard errors",
    }
    robustness_axes = {"d": [5, 10, 20], "activation": ["relu3_6", "softplus", "sin_shift"],
                       "data_seed": [0, 1, 2]}
    smoke = {"m_max": 3000, "m_points": 4, "n_test": 30}

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"m_max": 1, "n_test": 1, "d": 1}

    def peak_bytes(self, p: CouplingParams) -> float:
        """float64 arrays of the widest unit: about twelve (rows, m) input blocks
        (:func:`block_elems`) live in taylor_terms / sign_moments (Z, V, Z +- V, their sigma,
        derivatives and powers), and six (m, d) matrices (W0 and the randomized net's copy, U
        and its copy, Sigma U, the init's temporaries)."""
        m = max(width_grid(p.m_min, p.m_max, p.m_points))
        return 8.0 * (12 * block_elems(p.n_test, m) + 6 * m * p.d)

    def units(self, p: CouplingParams) -> list[dict[str, Any]]:
        return [{"m": m} for m in width_grid(p.m_min, p.m_max, p.m_points)]

    @staticmethod
    def _data(p: CouplingParams, device: torch.device | str = "cpu",
              ) -> tuple[torch.Tensor, torch.Tensor]:
        return sphere_points_and_direction("coupling", p.d, p.n_test, p.B_x, p.data_seed, device)

    def run_unit(self, p: CouplingParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        m = int(key["m"])
        X, v = self._data(p, device)
        net = make_net(p.d, m, activation=resolve_activation(p.activation), B_x=p.B_x,
                       seed=seed, device=device)
        U = coherent_direction(net, v, m ** -0.25)
        rnet = SignRandomizedNet(net, init=U)
        signs = rnet.sample_signs(generator=sub_generator(seed, "signs", device))
        sums = dict.fromkeys([FL, FQ, STD, GAP, ONE_SIGMA], 0.0)
        with torch.no_grad():
            for Xc in input_chunks(X, m):
                _, fl, fq = net.taylor_terms(Xc, U, 2)
                mean, var = sign_moments(rnet, Xc)
                fl_sigma = net.taylor_terms(Xc, signs.unsqueeze(1) * U, 1)[1]
                sums[FL] += float(fl.abs().sum())
                sums[FQ] += float(fq.abs().sum())
                sums[STD] += float(var.clamp_min(0).sqrt().sum())
                sums[GAP] += float((mean - fq).abs().sum())
                sums[ONE_SIGMA] += float(fl_sigma.abs().sum())
        return [row(k, "m", m, METRIC, s / p.n_test) for k, s in sums.items()]

    def theory(self, p: CouplingParams, prep: Any = None) -> list[dict[str, Any]]:
        X, v = self._data(p)
        t = (X @ v).numpy()
        out = []
        for m in np.geomspace(p.m_min, p.m_max, 25):
            pred = coupling_predictions(resolve_activation(p.activation), t, float(m))
            out += [row(NAMES[k], "m", m, METRIC, val, kind="theory") for k, val in pred.items()]
            out.append(row(ONE_SIGMA, "m", m, METRIC,
                           math.sqrt(2 / math.pi) * pred["std over signs"], kind="theory"))
        return out

    def claims(self, p: CouplingParams, results: Results) -> list[Claim]:
        ids = {"f_L": "slope-f_L", "f_Q": "slope-f_Q", "std over signs": "slope-std",
               "mean gap": "slope-gap"}
        ms = width_grid(p.m_min, p.m_max, p.m_points)
        out = []
        for key, cid in ids.items():
            rel, gamma = CORRECTIONS[key]
            bias = fit_tilt(ms, rel, gamma)
            out.append(series_slope_claim(
                cid, self.claim_statements, results, NAMES[key], METRIC,
                COUPLING_SLOPES[key], bias=bias,
                error_model=SLOPE_ERROR_MODEL.format(rel=rel, gamma=gamma, bias=bias),
                resolution=NO_COMPETING_LAW))
        names, ratios, ses = [], [], []
        for key in ids:
            x, mean, _, count = results.series(NAMES[key], METRIC)
            if len(x) == 0:
                ratios.append(math.nan)
                ses.append(0.0)
                names.append(NAMES[key])
                continue
            m = float(x[-1])
            names.append(NAMES[key])
            ratios.append(float(mean[-1]) / _theory_at(p, key, m))
            # the fluctuations are over W0 (and signs): independent across seeds
            rel = m ** -0.375 if key == "mean gap" else NEURON_CV * math.sqrt(2 / m)
            ses.append(rel / math.sqrt(max(int(count[-1]), 1)))
        out.append(match_claim("limits", self.claim_statements, ratios, 1.0, ses,
                               error_model=LIMIT_ERROR_MODEL, x=list(range(len(names))),
                               details={"quantities": names}))
        return out

    def plot(self, p: CouplingParams, results: Results):
        fig, ax = new_figure(5.6, 4.2)
        labels = {FL: r"$|f^L_W|$ (no signs), $m^{1/4}$",
                  FQ: r"$|f^Q_W| = |f^Q_{W\Sigma}|$, $m^0$",
                  STD: r"std$_\Sigma f$, $m^{-1/4}$",
                  ONE_SIGMA: r"$|f^L_{W\Sigma}|$ (one $\Sigma$)",
                  GAP: r"$|E_\Sigma f - f^Q_W|$, $m^{-1/2}$"}
        for meth, lab in labels.items():
            series_line(ax, results, meth, METRIC, label=lab,
                        linestyle=":" if meth == ONE_SIGMA else "-")
            series_points(ax, results, meth, METRIC)
        ax.set_xscale("log")
        ax.set_yscale("log")
        finish(ax, xlabel="width m", ylabel=r"mean over test points of $|\cdot|$",
               title=f"Sign randomization, {p.activation}, d = {p.d}, B_x = {p.B_x:g}")
        return fig


def _theory_at(p: CouplingParams, key: str, m: float) -> float:
    X, v = Coupling._data(p)
    return coupling_predictions(resolve_activation(p.activation), (X @ v).numpy(), m)[key]
