"""allenzhu-kernel-bound: Thms 2-3, exactly: how many hard targets can a kernel fit? (App. D)

For the single-output hard target t_S(x) = x_i + alpha chi_S(x) on x uniform on {-1, 1}^d
(|S| = k, i = min S; App. D's simplification of Eq. 7.1), the best risk any kernel predictor
sum_n w_n K(x, x_n) with N samples can reach is computed exactly by Parseval
(:func:`lazylab.kernels.walsh.best_risk`, no Monte Carlo):

    R*(S, i) = 1 + alpha^2 - v^T (M M^T)^+ v,   M_{n,S'} = E_x K(x, x_n) chi_S'(x).

For every kernel, d, k, alpha and N on a log grid we store the fraction of the C(d, k) sets
with R* <= alpha^2 / 16, the median R*, and the fraction whose degree-k leverage is >= 0.9
(Lemma D.2, sharp form). Kernels: Gaussian exp(-||x - y||^2 / d), arcsin(<x, y> / d), the
closed-form two-layer ReLU NTK on (x / sqrt(d), 1) / sqrt(2) (both layers; the bias avoids a
trivial obstruction: without it the ReLU NTK has no odd-degree components >= 3), the empirical
NTK (output 0, all parameters) of a random bottleneck ResNet at width ``resnet_width``; and,
for Thm 3, D random ReLU features sigma(<u, x> / sqrt(d) + b) with N read as D. The last two
need the 2^d x P Jacobian and run for d <= ``general_max_d``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, field_validator

from lazylab.errors import InputError
from lazylab.experiments import register
from lazylab.experiments.allenzhu.common import PAPER, n_grid
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row, worst_at
from lazylab.experiments.style import finish, method_color, new_figure
from lazylab.experiments.toolkit import sub_generator
from lazylab.kernels import ntk
from lazylab.kernels.walsh import (
    FourierSystem,
    best_risk,
    cube_points,
    dot_product_spectrum,
    fraction_good,
    fwht,
    leverage_scores,
    subsets,
)
from lazylab.models.resnet import ResNet3
from lazylab.theory.allenzhu import (
    degrees_of_freedom,
    leverage_fraction_bound,
    predicted_transition_n,
    thm2_fraction_bound,
)

KernelName = Literal["gaussian", "arcsin", "relu-ntk", "resnet-entk", "relu-features"]
DOT_PRODUCT = ("gaussian", "arcsin", "relu-ntk")
#: The transition claim uses the Gaussian kernel, whose Fourier weights kappa^_j decay
#: geometrically in the degree j (kappa^_j / kappa^_{j-1} = tanh(2/d)).
TRANSITION_KERNEL = "gaussian"
#: Tolerance of the transition claim: N_half / N_pred within [1/2, 2], N_pred =
#: max(sum_{j<=k} C(d, j), N_ridge(alpha)) (:func:`lazylab.theory.allenzhu.predicted_transition_n`).
#: Error model: exact computation, the only randomness is the N centres. The lower side: the
#: leverage bound forces N_half >= 0.45 C(d, k), and a kernel cannot fit a degree-k coefficient
#: before its N centres span the degree-<=k parities. The upper side: the diagonal ridge model
#: of the degree->k leakage (it drops the off-diagonal Krawtchouk terms of the leakage Gram and
#: uses Phi^T Phi ~ N I, both O(1) relative errors near the transition). A factor 2 in N covers
#: both, and the grid spacing is resolved by log interpolation (half a grid step allowed).
#: (The previous predictor, sum_{j<=k} C(d, j) alone, ignored that the threshold alpha^2/16 is
#: absolute, so the singleton x_i must be fitted to alpha^2/16 as well; it failed at alpha = 0.1.)
TRANSITION_FACTOR = 2.0


class KernelBoundParams(ExperimentParams):
    ds: list[int] = Field([12], min_length=1, description="cube dimensions d (<= 16)")
    ks: list[int] = Field([2, 3, 4], min_length=1, description="parity sizes k (2 <= k <= d/2)")
    alphas: list[float] = Field([0.3, 0.1], min_length=1, description="composite weights alpha")
    kernels: list[KernelName] = Field(
        ["gaussian", "arcsin", "relu-ntk", "resnet-entk", "relu-features"], min_length=1,
        description="kernels / feature maps")
    n_points: int = Field(12, ge=3, le=40, description="N values on the log grid per d")
    n_max_factor: float = Field(
        1.6, ge=1.0, le=4.0,
        description="largest N = this x sum_{j<=max k} C(d, j), at least twice the predicted "
                    "transition (capped at 2^d - 1)")
    resnet_width: int = Field(48, ge=2, le=4096, description="width m of the random ResNet")
    general_max_d: int = Field(12, ge=4, le=14,
                               description="largest d for resnet-entk and relu-features")

    @field_validator("ds")
    @classmethod
    def _ds(cls, v: list[int]) -> list[int]:
        if any(not 4 <= d <= 16 for d in v):
            raise ValueError("every d must be in [4, 16] (2^d cube points are enumerated)")
        return sorted(set(v))

    @field_validator("alphas")
    @classmethod
    def _alphas(cls, v: list[float]) -> list[float]:
        if any(not 0 < a < 1 for a in v):
            raise ValueError("every alpha must be in (0, 1)")
        return sorted(set(v), reverse=True)


@register
class KernelBound(Experiment):
    #: Its claims fit along N (slopes, crossings): at least three distinct values.
    min_distinct: ClassVar[dict[str, int]] = {"N": 3}
    id = "allenzhu-kernel-bound"
    paper = PAPER
    figure = "Thms 2-3 (exact)"
    summary = ("fraction of the C(d,k) hard parity targets any kernel (or feature map) with N "
               "samples fits below alpha^2/16, vs N, with the bounds 2N/C(d,k), N/(0.9 C(d,k))")
    Params = KernelBoundParams
    scales = {"quick": {}, "paper": {"ds": [12, 14, 16], "n_points": 14, "n_max_factor": 2.0,
                                     "resnet_width": 128, "general_max_d": 14}}
    est_seconds = {"quick": 30.0}
    robustness_axes = {"resnet_width": [24, 48, 96], "n_max_factor": [1.3, 1.6, 2.0]}
    smoke = {"ds": [8], "ks": [2, 3], "n_points": 6, "kernels": ["gaussian", "relu-features"]}
    claim_statements = {
        "thm2-bound": "at every N, d, k, alpha and kernel the fraction of sets S with best risk "
                      "<= alpha^2/16 is at most 2N/C(d,k) (Thm 2 / Thm 3)",
        "leverage-bound": "the fraction of degree-k columns with leverage >= 0.9 is at most "
                          "N/(0.9 C(d,k)), and so is the fitted fraction (Lemma D.2, sharp form)",
        "transition": "the Gaussian kernel fits half the sets at N within a factor 2 of "
                      "N_pred = max(sum_{j<=k} C(d,j), N_ridge(alpha)): the number of "
                      "monomials of degree <= k, or where its leakage into higher degrees falls "
                      "below alpha^2/16",
    }

    def validate(self, p: KernelBoundParams) -> None:
        for d in p.ds:
            bad = [k for k in p.ks if not 2 <= k <= d // 2]
            if bad:
                raise InputError(f"--set ks: every k must be in [2, d/2] for d = {d}; got {bad}")

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"resnet_width": 1}

    def peak_bytes(self, p: KernelBoundParams) -> float:
        """float64 arrays of the largest unit (N = top of the grid): the N x N Gram with its
        symmetrised copy, eigenvectors, eigensolver workspace and pseudo-inverse factor (six);
        for d <= general_max_d also the 2^d x N relu features or the 2^d x P ResNet Jacobian
        (P = m (d + 6)) with their Walsh-Hadamard copies (3.5 of them) and the P x P C C^T."""
        peak = 0.0
        for d in p.ds:
            N = self._grid(p, d)[-1]
            feats = [0.0]
            if d <= p.general_max_d and "relu-features" in p.kernels:
                feats.append(3.5 * 2 ** d * N)
            if d <= p.general_max_d and "resnet-entk" in p.kernels:
                P = p.resnet_width * (d + 6)
                feats.append(3.5 * 2 ** d * P + P * P + N * P)
            peak = max(peak, 8.0 * (6 * N * N + max(feats)))
        return peak

    def units(self, p: KernelBoundParams) -> list[dict[str, Any]]:
        out = []
        for d in p.ds:
            for kern in p.kernels:
                if kern not in DOT_PRODUCT and d > p.general_max_d:
                    continue
                out += [{"kernel": kern, "d": d, "N": n} for n in self._grid(p, d)]
        return out

    @staticmethod
    def _grid(p: KernelBoundParams, d: int) -> list[int]:
        """N from 5 to max(n_max_factor x sum_{j<=max k} C(d, j), 2 x the largest predicted
        transition), capped at 2^d - 1, on a log grid."""
        spec = _spectrum(TRANSITION_KERNEL, d)
        pred = max(predicted_transition_n(spec, d, k, a) for k in p.ks for a in p.alphas)
        top = min(2 ** d - 1, int(max(p.n_max_factor * degrees_of_freedom(d, max(p.ks)),
                                      2 * pred)))
        return n_grid(5, top, p.n_points)

    def run_unit(self, p: KernelBoundParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        kern, d, N = key["kernel"], int(key["d"]), int(key["N"])
        system = _system(kern, d, N, p.resnet_width, seed)
        factor = system.pinv_factor()
        out = []
        for k in p.ks:
            sets = subsets(d, k)
            lev = leverage_scores(system, sets)
            out.append(row(kern, "N", N, "fraction_leverage",
                           float((lev >= 0.9).double().mean()), d=d, k=k))
            for a in p.alphas:
                r = best_risk(system, sets, [s[0] for s in sets], a, factor=factor)
                out.append(row(kern, "N", N, "fraction_good", fraction_good(r, a),
                               d=d, k=k, alpha=a))
                out.append(row(kern, "N", N, "median_risk", float(r.median()), d=d, k=k,
                               alpha=a))
        return out

    def theory(self, p: KernelBoundParams, prep: Any = None) -> list[dict[str, Any]]:
        out = []
        for d in p.ds:
            for k in p.ks:
                for n in self._grid(p, d):
                    out.append(row("2N/C(d,k)", "N", n, "fraction_bound",
                                   thm2_fraction_bound(n, d, k), kind="theory", d=d, k=k))
                    out.append(row("N/(0.9 C(d,k))", "N", n, "fraction_bound",
                                   leverage_fraction_bound(n, d, k), kind="theory", d=d, k=k))
                if TRANSITION_KERNEL in p.kernels:
                    spec = _spectrum(TRANSITION_KERNEL, d)
                    for a in p.alphas:
                        out.append(row("N_pred", "alpha", a, "n_transition",
                                       predicted_transition_n(spec, d, k, a), kind="theory",
                                       d=d, k=k))
        return out

    def claims(self, p: KernelBoundParams, results: Results) -> list[Claim]:
        st = self.statements(p)
        out = _bound_claims(st, results)
        ratios, steps, preds = {}, {}, {}
        for d in p.ds:
            for k in p.ks:
                for a in p.alphas:
                    s = results.series(TRANSITION_KERNEL, "fraction_good", d=d, k=k, alpha=a)
                    if len(s.x) == 0:
                        continue
                    nh, step = _half_crossing(s.x, s.mean)
                    cell = f"d={d},k={k},alpha={a:g}"
                    pred = results.select(kind="theory", metric="n_transition", d=d, k=k,
                                          x=a)
                    npred = (float(pred[0]["value"]) if pred else
                             predicted_transition_n(_spectrum(TRANSITION_KERNEL, d), d, k, a))
                    ratios[cell] = nh / npred
                    preds[cell] = npred
                    steps[cell] = step
        if not ratios:
            out.append(Claim.not_applicable("transition", st,
                                            f"kernel {TRANSITION_KERNEL!r} not in kernels"))
            return out
        # Allowed |log(N_half / DoF)|: log 2 (the math, see TRANSITION_FACTOR) plus half a grid
        # step in log N (the crossing is only resolved to within the bracketing grid points).
        allow = {c: math.log(TRANSITION_FACTOR) + 0.5 * math.log(steps[c]) for c in ratios}
        dev = {c: abs(math.log(v)) if math.isfinite(v) and v > 0 else math.inf
               for c, v in ratios.items()}
        worst = max(ratios, key=lambda c: dev[c] / allow[c])
        # |log(N_half / N_pred)| <= allow, on the ratio scale: the side the ratio lies on
        side = 1.0 if not ratios[worst] < 1.0 else -1.0
        out.append(Claim.test(
            "transition", st, float(ratios[worst]), "within", 1.0,
            side * (math.exp(side * allow[worst]) - 1.0),
            "exact computation; randomness only in the N centres; N_pred = max(DoF, N_ridge) "
            "from the span argument and the diagonal ridge model of the degree->k leakage "
            "(O(1) relative model error), so N_half within a factor 2 of N_pred, plus half the "
            "N-grid step of resolution (measured: the worst N_half / N_pred; tolerance: "
            "allowed ratio - 1; NaN = never reached)",
            {"ratios": ratios, "n_pred": preds, "grid_steps": steps,
             "factor": TRANSITION_FACTOR,
             "worst_at": worst.replace(",", ", ").replace("=", " = ")}))
        return out

    def plot(self, p: KernelBoundParams, results: Results):
        d = max(p.ds)
        k = max(p.ks)
        a = p.alphas[0]
        fig, ax = new_figure(6.0, 4.2)
        for kern in p.kernels:
            s = results.series(kern, "fraction_good", d=d, k=k, alpha=a)
            if len(s.x):
                ax.plot(s.x, s.mean, "o-", color=method_color(kern), label=kern, ms=4)
        for meth, ls in (("2N/C(d,k)", "--"), ("N/(0.9 C(d,k))", ":")):
            s = results.series(meth, "fraction_bound", kind="theory", d=d, k=k)
            ax.plot(s.x, s.mean, ls, color="black", label=meth)
        ax.axvline(degrees_of_freedom(d, k), color="grey", ls="-.", lw=1,
                   label=r"$\sum_{j\leq k}\binom{d}{j}$")
        pred = results.select(kind="theory", metric="n_transition", d=d, k=k, x=a)
        if pred:
            ax.axvline(float(pred[0]["value"]), color=method_color(TRANSITION_KERNEL), ls="--",
                       lw=1, label=r"$N_{pred}$ (" + TRANSITION_KERNEL + ")")
        ax.set_xscale("log")
        finish(ax, xlabel="N (samples; features D for relu-features)",
               ylabel=r"fraction of S with $R^*\leq\alpha^2/16$", ylim=(-0.02, 1.05),
               title=f"Thm 2 exact: d = {d}, k = {k}, alpha = {a:g}")
        return fig


def _half_crossing(ns: np.ndarray, frac: np.ndarray) -> tuple[float, float]:
    """(N_half, step): the first N with fraction >= 1/2, log N interpolated linearly in the
    fraction between the bracketing grid points, and their ratio (inf, nan if never)."""
    for i, f in enumerate(frac):
        if f >= 0.5:
            if i == 0:
                return float(ns[0]), float(ns[1] / ns[0]) if len(ns) > 1 else 1.0
            f0, n0, n1 = float(frac[i - 1]), float(ns[i - 1]), float(ns[i])
            t = (0.5 - f0) / (float(f) - f0)
            return math.exp(math.log(n0) + t * math.log(n1 / n0)), n1 / n0
    return math.nan, 1.0


def _system(kern: str, d: int, N: int, width: int, seed: int) -> FourierSystem:
    """The Fourier system of one kernel at N centres drawn without replacement from the cube."""
    idx = torch.randperm(2 ** d, generator=sub_generator(seed, "centres"))[:N]
    pts = cube_points(d)
    if kern in DOT_PRODUCT:
        return FourierSystem.dot_product(dot_product_spectrum(_kappa(kern, d), d), pts[idx])
    if kern == "relu-features":
        g = sub_generator(seed, "features")
        U = torch.randn(d, N, generator=g, dtype=torch.float64)
        b = torch.randn(N, generator=g, dtype=torch.float64)
        phi = torch.relu(pts @ U / math.sqrt(d) + b)            # (2^d, D), D = N
        return FourierSystem.features(fwht(phi, dim=0).T)
    J = _resnet_jacobian(d, width, seed, pts / math.sqrt(d))      # (2^d, P)
    return FourierSystem.features(fwht(J, dim=0).T, J[idx])


def _spectrum(kern: str, d: int) -> list[float]:
    """kappa^_0..kappa^_d of a dot-product kernel on {-1, 1}^d."""
    return dot_product_spectrum(_kappa(kern, d), d).tolist()


def _kappa(kern: str, d: int):
    """kappa(t), t = <x, y> on {-1, 1}^d, of a dot-product kernel."""
    if kern == "gaussian":
        return lambda t: torch.exp(-(2.0 * d - 2.0 * t) / d)
    if kern == "arcsin":
        return lambda t: torch.arcsin((t / d).clamp(-1, 1))

    def relu_ntk(t: torch.Tensor) -> torch.Tensor:
        # unit vectors (x/sqrt(d), 1)/sqrt(2): cosine rho = (t/d + 1)/2, realised in 2-D.
        rho = ((t / d + 1) / 2).clamp(-1, 1)
        u = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
        v = torch.stack([rho, (1 - rho.square()).clamp_min(0).sqrt()], dim=1)
        return ntk(u, v, activation="relu", trained="both")[0]
    return relu_ntk


def _resnet_jacobian(d: int, width: int, seed: int, X: torch.Tensor) -> torch.Tensor:
    """d out_0 / d theta at every row of X for a random bottleneck ResNet (2 outputs):
    per-sample gradients, vmap(grad) over the rows."""
    from torch.func import functional_call, grad, vmap

    net = ResNet3(d, 2, width, generator=sub_generator(seed, "resnet"), dtype=torch.float64)
    params = {n: p.detach() for n, p in net.named_parameters()}

    def out0(q: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(net, q, (x.unsqueeze(0),))[0, 0]

    jac = vmap(grad(out0), in_dims=(None, 0))(params, X)
    return torch.cat([j.reshape(X.shape[0], -1) for j in jac.values()], dim=1)


def _bound_claims(st: dict[str, str], results: Results) -> list[Claim]:
    """``thm2-bound`` and ``leverage-bound``: the largest fraction / bound over every cell."""
    # (fraction / bound, its cell): the cell closest to the bound
    worst2, worstL, cells = (0.0, ""), (0.0, ""), 0
    for r in results.select(kind="simulation", metric=["fraction_good", "fraction_leverage"]):
        d, k, n, f = int(r["d"]), int(r["k"]), float(r["x"]), float(r["value"])
        cells += 1
        at = worst_at(d=d, k=k, N=n)
        worstL = max(worstL, (f / leverage_fraction_bound(n, d, k), at), key=lambda t: t[0])
        if r["metric"] == "fraction_good":
            worst2 = max(worst2, (f / thm2_fraction_bound(n, d, k), at), key=lambda t: t[0])
    exact = ("exact Parseval computation in float64; the only slack is rounding in "
             "(M M^T)^+ (eigenvalues below 1e-10 x max dropped), far below the threshold "
             "alpha^2/16; tolerance 0 on the ratio fraction / bound")
    if cells == 0:
        return [Claim.missing(cid, st, "no fraction rows", expected=1.0, tolerance=0.0,
                              error_model=exact, op="<=", details={"kind": "consistency"})
                for cid in ("thm2-bound", "leverage-bound")]
    return [
        Claim.test("thm2-bound", st, worst2[0], "<=", 1.0, 0.0, exact,
                   {"cells": cells, "measured": "max fraction / bound",
                    # N / (0.9 C(d, k)) <= 2 N / C(d, k)
                    "kind": "consistency", "implied_by": "leverage-bound",
                    "worst_at": worst2[1]}),
        Claim.test("leverage-bound", st, worstL[0], "<=", 1.0, 0.0, exact,
                   {"kind": "consistency", "measured": "max fraction / bound",
                    "worst_at": worstL[1]}),
    ]
