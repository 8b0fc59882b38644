"""bailee-generalization: the operator-norm quantities of Bai & Lee (2020), Lemma 5, Theorem 6
and Lemma 8 (Sec. 5.1 and App. A.1).

For n inputs on the sphere of radius B_x (n = n_per_d * d, so the sample-size ratio is fixed
as d grows) and four input laws,

* ``sphere`` (uniform), ``hypercube`` ({+-B_x/sqrt d}^d): isotropic;
* ``anisotropic``: x = B_x g / ||g||, g ~ N(0, diag(kappa, 1, ..., 1)) (Theorem 6's condition
  number kappa);
* ``subspace``: uniform on the unit sphere of a fixed k-dimensional subspace (degenerate data),

we measure

    M_x,op = (B_x^-2 ||X^T X / n||_op)^{1/2}                               (Theorem 6)
    R = E_sigma max_{r <= m} ||(1/n) sum_i sigma_i sigma''(w0_r.x_i) x_i x_i^T||_op   (Lemma 5)

with sigma = relu^3/6 (sigma'' = relu), w0_r ~ N(0, B_x^-2 I), Rademacher sigma_i (Monte Carlo
over ``n_sigma`` draws). Predictions: M -> (1 + sqrt(k/n)) / sqrt(k) (Marchenko-Pastur edge;
k = d for isotropic data, the subspace dimension for degenerate data), so M ~ d^-1/2 for
isotropic data and flat for degenerate data; R ~ B_x^2 M / sqrt(n) up to logs, i.e. with n ~ d
R ~ 1/d for isotropic data and ~ 1/sqrt(d) for degenerate data: the sqrt(d) advantage that
Theorem 6 turns into a d-fold smaller sample complexity. Lemma 8's bound 4 sqrt(v log(2 m d)) is
recorded next to R (a bound with slack: a consistency check).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from matplotlib.figure import Figure
from pydantic import Field

from lazylab.data import sphere
from lazylab.data.samplers import anisotropic_sphere, hypercube
from lazylab.experiments import register
from lazylab.experiments.bailee.common import F64, PAPER
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row, worst_at
from lazylab.experiments.toolkit import (
    NO_COMPETING_LAW,
    series_slope_claim,
    slope_claim,
    sub_generator,
)
from lazylab.theory.bailee_landscape import mp_operator_norm, rademacher_bound

DISTS = ("sphere", "hypercube", "anisotropic", "subspace")
#: Figure colours and markers per input law.
STYLE = {"sphere": ("tab:blue", "o"), "hypercube": ("tab:orange", "s"),
         "anisotropic": ("tab:purple", "^"), "subspace": ("tab:green", "D")}
Dist = Literal["sphere", "hypercube", "anisotropic", "subspace"]


class GeneralizationParams(ExperimentParams):
    ds: list[int] = Field([10, 14, 20, 28, 40, 56, 80], min_length=3,
                          description="input dimensions d (distinct, in [4, 500])")
    n_per_d: int = Field(10, ge=2, le=200, description="samples n = n_per_d * d")
    # Every quantity is scale-covariant in B_x (M is invariant, R ~ B_x^2); outside [1e-6, 1e6]
    # the float64 products X^T X and B_x^2 M under- or overflow (B_x = 1e308 failed in eigh).
    B_x: float = Field(1.0, ge=1e-6, le=1e6, description="input radius B_x")
    kappa: float = Field(10.0, ge=1.0, le=1e4, description="condition number (anisotropic)")
    k_sub: int = Field(2, ge=1, le=3, description="dimension of the degenerate subspace")
    m: int = Field(20, ge=2, le=2000, description="neurons w0_r in the Rademacher term")
    n_sigma: int = Field(10, ge=2, le=1000, description="Rademacher sign draws")
    dists: list[Dist] = Field(list(DISTS), min_length=1, description="input laws")


def _inputs(dist: str, n: int, d: int, p: GeneralizationParams, g: torch.Generator,
            device: torch.device) -> torch.Tensor:
    if dist == "sphere":
        X = sphere(n, d, radius=p.B_x, generator=g, dtype=F64)
    elif dist == "hypercube":
        X = hypercube(n, d, radius=p.B_x, generator=g, dtype=F64)
    elif dist == "anisotropic":
        X = anisotropic_sphere(n, d, kappa=p.kappa, radius=p.B_x, generator=g, dtype=F64)
    else:
        X = torch.zeros(n, d, dtype=F64)
        X[:, :p.k_sub] = sphere(n, p.k_sub, radius=p.B_x, generator=g, dtype=F64)
    return X.to(device)


def operator_norm_terms(X: torch.Tensor, W0: torch.Tensor, B_x: float, n_sigma: int,
                        g: torch.Generator) -> dict[str, float]:
    """M_x,op, the Rademacher term R (mean and SE over sign draws) and Lemma 8's bound.

    Y_r = (1/n) X^T diag(sigma * relu(X w0_r)) X for each neuron r; R = mean over draws of
    max_r ||Y_r||_op; v = max_r ||(1/n^2) sum_i relu(w0_r.x_i)^2 ||x_i||^2 x_i x_i^T||_op.
    """
    n, d = X.shape
    M = math.sqrt(float(torch.linalg.eigvalsh(X.T @ X / n)[-1]) / B_x**2)
    R = X @ W0.T                                        # (n, m)
    Rl = R.clamp_min(0)
    sq = (X**2).sum(1)
    V = torch.einsum("ir,i,ia,ib->rab", Rl**2, sq, X, X) / n**2
    v = float(torch.linalg.eigvalsh(V)[:, -1].max())
    vals = []
    for _ in range(int(n_sigma)):
        s = 2.0 * torch.randint(0, 2, (n,), generator=g, device=g.device).to(X.dtype) - 1
        Y = torch.einsum("ir,ia,ib->rab", Rl * s[:, None], X, X) / n
        ev = torch.linalg.eigvalsh(Y)
        vals.append(float(ev.abs().max()))
    t = torch.tensor(vals, dtype=F64)
    se = float(t.std() / math.sqrt(len(vals))) if len(vals) > 1 else 0.0
    return {"M": M, "R": float(t.mean()), "R_se": se,
            "v": v, "bound": rademacher_bound(v, W0.shape[0], d)}


@register
class Generalization(Experiment):
    #: Its claims fit along d (slopes, crossings): at least three distinct values.
    min_distinct: ClassVar[dict[str, int]] = {"d": 3}
    id = "bailee-generalization"
    paper = PAPER
    figure = "Lemma 5 / Thm 6 / Lemma 8"
    summary = ("M_x,op and the Rademacher operator-norm term vs d for sphere, hypercube, "
               "anisotropic and degenerate data: the sqrt(d) advantage of isotropic inputs")
    Params = GeneralizationParams
    scales = {"quick": {}, "paper": {"ds": [10, 14, 20, 28, 40, 56, 80, 113, 160],
                                     "n_per_d": 20, "m": 200, "n_sigma": 50}}
    default_seeds = {"quick": 2, "paper": 5}
    est_seconds = {"quick": 15.0}
    robustness_axes = {"n_per_d": [5, 10, 20], "k_sub": [1, 2, 3], "m": [10, 20, 40]}
    smoke = {"ds": [8, 12, 16, 24, 32], "n_sigma": 4, "m": 8}
    claim_statements = {
        "M-sphere-slope": "M_x,op ~ d^-1/2 for the sphere (n = n_per_d d)",
        "M-hypercube-slope": "M_x,op ~ d^-1/2 for the hypercube",
        "M-subspace-slope": ("M_x,op is flat in d for data on a fixed k-dim subspace "
                             "(slope of (1 + sqrt(k/n)) / sqrt(k))"),
        "R-sphere-slope": "the Rademacher operator-norm term ~ 1/d for the sphere (n ~ d)",
        "R-subspace-slope": ("the Rademacher term ~ 1/sqrt(d) for subspace data (n ~ d): "
                             "isotropic data gain a factor sqrt(d)"),
        "lemma8-bound": "consistency: R <= Lemma 8's 4 sqrt(v log(2 m d)) for every law and d",
        "M-at-most-1": "consistency: M_x,op <= 1 for every law and d",
    }

    def validate(self, p: GeneralizationParams) -> None:
        from lazylab.errors import InputError

        if len(set(p.ds)) != len(p.ds) or min(p.ds) < 4 or max(p.ds) > 500:
            raise InputError(f"--set ds: distinct dimensions in [4, 500]; got {p.ds}")
        if min(p.ds) <= p.k_sub:
            raise InputError(f"--set ds: every d must exceed k_sub = {p.k_sub}")

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"n_per_d": 1, "m": 1, "n_sigma": 1}

    def peak_bytes(self, p: GeneralizationParams) -> float:
        """float64 arrays of the largest unit (d = max ds, n = n_per_d d): the (n, m, d) outer
        product each einsum of operator_norm_terms builds before its batched matmul, four
        (m, d, d) matrices (V, the previous and the new Y, the einsum's output before the
        division by n) and X, R (n x d, n x m)."""
        d = max(p.ds)
        n = p.n_per_d * d
        return 8.0 * (n * p.m * d + 4 * p.m * d * d + n * (d + 2 * p.m))

    def units(self, p: GeneralizationParams) -> list[dict[str, Any]]:
        return [{"dist": dist, "d": d} for dist in p.dists for d in sorted(p.ds)]

    def run_unit(self, p: GeneralizationParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        dist, d = key["dist"], int(key["d"])
        n = p.n_per_d * d
        X = _inputs(dist, n, d, p, sub_generator(seed, "x", device), device)
        W0 = torch.randn(p.m, d, generator=sub_generator(seed, "w0", device), device=device,
                         dtype=F64) / p.B_x
        t = operator_norm_terms(X, W0, p.B_x, p.n_sigma, sub_generator(seed, "sigma", device))
        return [row(dist, "d", d, "M_x_op", t["M"]),
                row(dist, "d", d, "rademacher", t["R"]),
                row(dist, "d", d, "rademacher_se", t["R_se"]),
                row(dist, "d", d, "lemma8_bound", t["bound"]),
                row(dist, "d", d, "rademacher_over_M", t["R"] * math.sqrt(n) / (p.B_x**2 * t["M"]))]

    def theory(self, p: GeneralizationParams, prep: Any = None) -> list[dict[str, Any]]:
        out = []
        for d in np.geomspace(min(p.ds), max(p.ds), 25):
            n = p.n_per_d * d
            for dist in ("sphere", "hypercube"):
                if dist in p.dists:
                    out.append(row(dist, "d", d, "M_x_op", mp_operator_norm(d, n), kind="theory"))
            if "subspace" in p.dists:
                out.append(row("subspace", "d", d, "M_x_op", mp_operator_norm(p.k_sub, n),
                               kind="theory"))
            if "anisotropic" in p.dists:
                out.append(row("anisotropic", "d", d, "M_x_op",
                               math.sqrt(p.kappa) * mp_operator_norm(d, n), kind="theory"))
        return out

    def claims(self, p: GeneralizationParams, results: Results) -> list[Claim]:
        st = self.claim_statements
        d0 = min(p.ds)
        n0 = p.n_per_d * d0
        # Tracy-Widom: the top sample eigenvalue sits O(d^-2/3) (relative) below the MP edge;
        # a relative correction c d^-2/3 with |c| <= 1 tilts the slope of M = sqrt(lambda) by
        # at most (1/2)(2/3) d_min^-2/3.
        tw = (1 / 3) * d0 ** (-2 / 3)
        em_tw = ("finite d: the top eigenvalue of X^T X / n sits a relative O(d^-2/3) "
                 "(Tracy-Widom) off the Marchenko-Pastur edge; |c| d^-2/3 with |c| <= 1 tilts "
                 f"the slope of M by at most (1/3) d_min^-2/3 = {tw:.3f}; seed noise from "
                 "seeds / residuals")
        out = []
        for dist, cid in (("sphere", "M-sphere-slope"), ("hypercube", "M-hypercube-slope")):
            if dist not in p.dists:
                out.append(Claim.not_applicable(cid, st, f"{dist} not in dists"))
                continue
            out.append(series_slope_claim(cid, st, results, dist, "M_x_op", -0.5, bias=tw,
                                          error_model=em_tw, resolution=NO_COMPETING_LAW))
        if "subspace" in p.dists:
            x, mean, sem, _ = results.series("subspace", "M_x_op")
            xs = np.asarray(x, float)
            pred = [mp_operator_norm(p.k_sub, p.n_per_d * d) for d in xs]
            lx = np.log(xs)
            exp_slope = (float(np.polyfit(lx, np.log(pred), 1)[0]) if len(xs) >= 2
                         else 0.0)
            bias = 0.5 * math.sqrt(p.k_sub / n0)
            out.append(slope_claim(
                "M-subspace-slope", st, x, mean, exp_slope, bias=bias, sem=sem,
                error_model=("finite n at fixed k: the top eigenvalue of a k x k sample "
                             "covariance deviates from the MP edge by a relative "
                             "O(sqrt(k/n)); its change over the grid tilts the slope by at most "
                             f"(1/2) sqrt(k / n_min) = {bias:.3f}; seed noise from seeds"),
                resolution=NO_COMPETING_LAW))
        else:
            out.append(Claim.not_applicable("M-subspace-slope", st, "subspace not in dists"))
        # Rademacher term: the op norm of a signed sum of n rank-one terms in d (or k)
        # dimensions; same Tracy-Widom-type edge correction (relative O(d^-2/3), slope tilt
        # <= (2/3) d_min^-2/3) plus the max over m neurons, whose relative spread shrinks
        # with d like the edge fluctuation (same order).
        bias_r = (2 / 3) * d0 ** (-2 / 3)
        em_r = ("finite d: relative O(d^-2/3) edge corrections to the op norm and to the "
                "spread of the max over the m neurons tilt the slope by at most (2/3) "
                f"d_min^-2/3 = {bias_r:.3f}; Monte Carlo over signs and seeds")
        if "sphere" in p.dists:
            out.append(series_slope_claim("R-sphere-slope", st, results,
                                          "sphere", "rademacher", -1.0, bias=bias_r,
                                          error_model=em_r, resolution=NO_COMPETING_LAW))
        else:
            out.append(Claim.not_applicable("R-sphere-slope", st, "sphere not in dists"))
        if "subspace" in p.dists:
            out.append(series_slope_claim("R-subspace-slope", st, results,
                                          "subspace", "rademacher", -0.5, bias=bias_r,
                                          error_model=em_r, resolution=NO_COMPETING_LAW))
        else:
            out.append(Claim.not_applicable("R-subspace-slope", st, "subspace not in dists"))
        return out + _bound_checks(st, results)

    def plot(self, p: GeneralizationParams, results: Results):
        fig = Figure(figsize=(10.5, 4.2))
        a1, a2 = fig.subplots(1, 2)
        labels = {"sphere": "sphere", "hypercube": "hypercube",
                  "anisotropic": rf"anisotropic ($\kappa$={p.kappa:g})",
                  "subspace": f"subspace (k={p.k_sub})"}
        for dist in p.dists:
            c, mk = STYLE[dist]
            x, mean, sem, _ = results.series(dist, "M_x_op")
            a1.errorbar(x, mean, yerr=sem, fmt=mk, color=c, label=labels[dist])
            xt, mt, _, _ = results.series(dist, "M_x_op", kind="theory")
            if len(xt):
                a1.plot(xt, mt, "-" if dist != "anisotropic" else ":", color=c,
                        label=(f"MP edge ({dist})" if dist != "anisotropic"
                               else r"$\sqrt{\kappa}\,\times$ MP (Thm 6 bound scale)"))
            x, mean, sem, _ = results.series(dist, "rademacher")
            a2.errorbar(x, mean, yerr=sem, fmt=mk + "-", color=c, label=labels[dist])
            x, b, _, _ = results.series(dist, "lemma8_bound")
            a2.plot(x, b, "--", color=c, alpha=0.6)
        x, mean, _, _ = results.series("sphere", "rademacher")
        if len(x):
            a2.plot(x, mean[0] * (x / x[0]) ** -1.0, "k:", label=r"slope $-1$ (guide)")
            a2.plot(x, mean[0] * (x / x[0]) ** -0.5, "k-.", label=r"slope $-1/2$ (guide)")
        for ax in (a1, a2):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("input dimension d")
            ax.legend(fontsize=7)
        a1.set_ylabel(r"$M_{x,op} = (B_x^{-2}\|X^TX/n\|_{op})^{1/2}$")
        a1.set_title(f"Theorem 6: M vs d (n = {p.n_per_d} d)")
        a2.set_ylabel(r"$E_\sigma \max_r \|\frac{1}{n}\sum_i \sigma_i "
                      r"\sigma''(w_r^Tx_i) x_ix_i^T\|_{op}$")
        a2.set_title(f"Lemma 5 / 8: Rademacher term (dashed: Lemma 8 bound), m={p.m}")
        fig.tight_layout()
        return fig


def _bound_checks(st: dict[str, str], results: Results) -> list[Claim]:
    """``lemma8-bound`` and ``M-at-most-1``: the largest value over every law, d and seed,
    named in ``details["worst_at"]``."""
    def at(r: dict[str, Any]) -> str:
        return worst_at(**{"law": r["method"], str(r["x_name"]): float(r["x"])})

    out = []
    ratios = [(float(r["value"]) / float(b["value"]), at(r))
              for r in results.select(metric="rademacher")
              for b in results.select(metric="lemma8_bound", method=r["method"],
                                      x=r["x"], seed=r.get("seed"))]
    if ratios:
        worst = max(ratios, key=lambda t: t[0])
        out.append(Claim.test("lemma8-bound", st, worst[0], "<=", 1.0, 0.0,
                              error_model="a bound (Tropp 2015) in expectation over "
                              "signs; Monte Carlo mean per seed",
                              details={"kind": "consistency", "worst_at": worst[1]}))
    ms = [(float(r["value"]), at(r)) for r in results.select(metric="M_x_op",
                                                             kind="simulation")]
    if ms:
        worst = max(ms, key=lambda t: t[0])
        out.append(Claim.test("M-at-most-1", st, worst[0], "<=", 1.0, 0.0,
                              error_model="exact",
                              details={"kind": "consistency", "worst_at": worst[1]}))
    return out
