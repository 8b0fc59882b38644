"""nichani-spectrum: the NTK feature covariance splits by spherical-harmonic degree (Nichani, Bai
& Lee 2022, Secs. 1.1 and 4.1, Lemma 15).

Two panes, both from one initialization of the symmetric-init sigmoid(z - 1) network:

* Sigma-hat = (1/N) sum_i phi(x_i) phi(x_i)^T, x_i uniform on S^{d-1}(sqrt d): its sorted
  eigenvalues have plateaus at the exact infinite-width eigenvalues xi_l
  (:func:`lazylab.theory.nichani.ntk_eigenvalues`) with multiplicities B(d, l) (degree 1 first,
  then the constant, then degree 2, ...), and half the spectrum is exactly zero (the pairing).
  The pairing is used to halve the work: phi = (psi, -psi) with psi_r = sigma'(w0_r.x) x /
  sqrt(m), so the nonzero eigenvalues of Sigma-hat are twice those of (1/N) Psi^T Psi, a
  (m/2) d square matrix.
* the Gram matrix K = Phi Phi^T of n = d^1.5 training points: its top d eigenvalues sit near
  n xi_1 + gamma, then one near n xi_0 + gamma, and the remaining n - n_1 form a flat ridge at
  the effective ridge gamma_{>1} = d E[sigma'^2] - xi_0 - d xi_1 (Montanari & Zhong 2020; Sec.
  1.1, Eq. (4)).

Claims: the group means of Sigma-hat over the predicted index ranges match xi_0, xi_1, xi_2;
the trace equals d E_{tau_d}[sigma'^2] (an identity, reported as a consistency check); the
Gram ridge (median of the bottom n - n_1 eigenvalues) matches gamma_{>1} and the top-d mean
matches n xi_1 + gamma.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field

from lazylab.data.harmonics import num_harmonics
from lazylab.errors import InputError
from lazylab.experiments import register
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row
from lazylab.experiments.nichani.common import PAPER, draw_inputs
from lazylab.experiments.toolkit import K_SE, match_claim, sub_generator
from lazylab.models.nichani import TaylorFeatures, nichani_net, shifted_sigmoid
from lazylab.theory.nichani import effective_ridge, ntk_eigenvalues, trace_identity

SIGMA, GRAM = "Sigma-hat", "Gram K"
#: Finite-width / estimation allowance on each Sigma-hat group mean, relative: the group sums
#: are traces over the top invariant subspaces, exact in expectation for any m by rotation
#: invariance (each w0_r.x has the same law tau_d), up to leakage between degrees through the
#: finite-width off-diagonal blocks, O(sqrt(n_l/(m/2))) relative ...
LEAK = {0: 0.10, 1: 0.05, 2: 0.15}
#: ... and the sample-covariance bias of eigenvalues near a gap, O(D/N) relative.
#: Gram ridge: the bottom n - n_1 eigenvalues are gamma (1 + Delta) with ||Delta|| ~
#: sqrt(n / B(d,2)) spread (Marchenko-Pastur-like); the median is biased by the degree-2 part
#: (n xi_2 over B(d,2) directions) and finite m: 15% relative.
RIDGE_BIAS = 0.15
#: Top-d Gram eigenvalues: mean of a Marchenko-Pastur bulk at n xi_1 + gamma, exact in
#: expectation up to O(1/d) (the degree-1 functions are not exactly orthonormal on n points).
TOP_BIAS = 0.10
#: Largest |b|. The features are sigma'(z) = s (1 - s), s = sigmoid(z - b), at z = w0.x ~ tau_d
#: (about N(0, 1); |z| > 6 has probability < 2e-9). For b < 0, 1 - s ~ exp(b - z) is a
#: difference of nearly equal numbers with relative error ~ eps exp(|b| + z); it becomes
#: exactly 0 once |b| + z > -log(eps / 2) = 36.7 (and for b > 0, sigma'^2 ~ exp(2 (z - b))
#: underflows float64 past b ~ 370): every eigenvalue and every prediction is then 0 and
#: "0 within 0 +- 0" would hold vacuously (b = 1e308 did). At |b| <= 20 the relative error
#: of the features is at most eps exp(26) ~ 4e-5, far inside the 5-15% allowances, and the
#: claims hold at the quick scale at b = +-20.
B_MAX = 20.0
#: Smallest |b|. At b = 0, sigma' is even, so the odd-degree part vanishes: xi_0 = xi_2 = 0
#: and the sorted-order groups (d at xi_1, then xi_0, then B(d,2) at xi_2) no longer hold;
#: xi_1 > xi_0 > xi_2 > xi_3 > 0 fails for |b| <= 0.35 at d = 4 (0.3 at d = 8, less for
#: larger d) and holds for |b| >= 0.4 at every d >= 4 (checked on a grid of b and d).
B_MIN = 0.5


class SpectrumParams(ExperimentParams):
    d: int = Field(8, ge=4, le=200, description="input dimension d (Sigma-hat pane)")
    m: int = Field(300, ge=20, le=20_000, multiple_of=2, description="width m (Sigma-hat pane)")
    N: int = Field(20_000, ge=200, le=2_000_000, description="samples estimating Sigma-hat")
    d_gram: int = Field(30, ge=5, le=1000, description="input dimension of the Gram pane")
    m_gram: int = Field(3000, ge=100, le=100_000, multiple_of=2, description="Gram-pane width")
    n_exponent: float = Field(1.5, gt=1.0, lt=2.0, description="Gram pane: n = d^n_exponent")
    b: float = Field(1.0, ge=-B_MAX, le=B_MAX,
                     description=f"sigmoid shift: sigma(z) = 1/(1 + exp(b - z)); "
                                 f"{B_MIN:g} <= |b| <= {B_MAX:g}")


@register
class Spectrum(Experiment):
    id = "nichani-spectrum"
    paper = PAPER
    figure = "Secs. 1.1, 4.1, Lemma 15"
    summary = ("spectrum of the NTK feature covariance grouped by spherical-harmonic degree, and "
               "the Gram-matrix gap after n_1 with its flat ridge")
    Params = SpectrumParams
    scales = {"quick": {}, "paper": {"d": 10, "m": 400, "N": 100_000, "d_gram": 100,
                                      "m_gram": 10_000}}
    default_seeds = {"quick": 1, "paper": 3}
    est_seconds = {"quick": 5.0, "paper": 30.0}
    robustness_axes = {"m": [200, 300, 400], "d_gram": [20, 30, 40]}
    smoke = {"d": 5, "m": 40, "N": 2000, "d_gram": 10, "m_gram": 400}
    claim_statements = {
        "xi-levels": "Sigma-hat has plateaus at xi_1 (d eigenvalues), xi_0 (1) and xi_2 "
                     "(B(d,2)): each group mean matches the exact harmonic eigenvalue",
        "trace": "trace Sigma-hat = d E_tau[sigma'^2] (consistency)",
        "gram-ridge": "the bottom n - n_1 Gram eigenvalues form a flat ridge at the effective "
                      "ridge gamma_{>1}",
        "gram-top": "the top d Gram eigenvalues sit at n xi_1 + gamma_{>1}",
    }

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"N": 1, "m": 1, "m_gram": 1}

    def units(self, p: SpectrumParams) -> list[dict[str, Any]]:
        return [{"pane": "Sigma-hat"}, {"pane": "Gram"}]

    def peak_bytes(self, p: SpectrumParams) -> float:
        """The larger pane, float64: Sigma-hat's D x D matrix (D = m d / 2) with its
        eigensolver's two copies and three chunk-sized feature arrays (chunks of at most 2^23
        elements); the Gram pane's n x m_gram derivative features (three) and n x n Gram with
        two copies."""
        D = (p.m // 2) * p.d
        chunk = max(1, min(p.N, (1 << 23) // D))
        sigma = 8.0 * (3 * D * D + 3 * chunk * D + 3 * chunk * p.m)
        n = self.n_gram(p)
        gram = 8.0 * (3 * n * p.m_gram + 3 * n * n)
        return max(sigma, gram)

    def validate(self, p: SpectrumParams) -> None:
        """Refuse a shift too close to 0 for the degree plateaus to be in their sorted order
        (:data:`B_MIN`; the bound |b| <= :data:`B_MAX` is on the field)."""
        if abs(p.b) < B_MIN:
            raise InputError(f"--set b: must satisfy {B_MIN:g} <= |b| <= {B_MAX:g} (at b near 0 "
                             "sigma' is nearly even, xi_0 and xi_2 vanish and the eigenvalue "
                             f"groups change order); got {p.b:g}")

    @staticmethod
    def n_gram(p: SpectrumParams) -> int:
        return int(round(p.d_gram ** p.n_exponent))

    def run_unit(self, p: SpectrumParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        if key["pane"] == "Gram":
            return self._gram(p, seed, device)
        return self._sigma(p, seed, device)

    def _sigma(self, p: SpectrumParams, seed: int, device: torch.device) -> list[dict[str, Any]]:
        dtype = torch.float64
        net = nichani_net(p.d, p.m, b=p.b, generator=sub_generator(seed, "init", device),
                          dtype=dtype)
        h = p.m // 2
        D = h * p.d
        S = torch.zeros(D, D, dtype=dtype, device=device)
        tr = torch.zeros((), dtype=dtype, device=device)
        tr2 = torch.zeros((), dtype=dtype, device=device)
        chunk = max(1, min(p.N, (1 << 23) // D))
        g = sub_generator(seed, "inputs", device)
        done = 0
        while done < p.N:
            c = min(chunk, p.N - done)
            X = draw_inputs(c, p.d, "sphere", g, dtype).to(device)
            feats = TaylorFeatures.of(net, X)
            psi = (feats.D1[:, :h].unsqueeze(-1) * X.unsqueeze(1)).reshape(c, D)
            S.addmm_(psi.T, psi)
            q = 2 * (psi * psi).sum(1)  # |phi(x)|^2 = 2 |psi(x)|^2
            tr += q.sum()
            tr2 += (q * q).sum()
            done += c
        S /= p.N
        ev = 2 * torch.linalg.eigvalsh(S).flip(0).cpu().numpy()
        mean_tr = float(tr) / p.N
        se_tr = math.sqrt(max(float(tr2) / p.N - mean_tr**2, 0.0) / p.N)
        out = [row(SIGMA, "index", i + 1, "eigenvalue", float(v)) for i, v in
               enumerate(ev[: self._shown(p.d)])]
        out.append(row(SIGMA, "index", 1, "trace", mean_tr))
        out.append(row(SIGMA, "index", 1, "trace_se", se_tr))
        return out

    @staticmethod
    def _shown(d: int) -> int:
        """Eigenvalues stored: through degree 3 (n_3) plus a margin."""
        return int(sum(num_harmonics(d, l) for l in range(4)) * 1.5)

    def _gram(self, p: SpectrumParams, seed: int, device: torch.device) -> list[dict[str, Any]]:
        n = self.n_gram(p)
        dtype = torch.float64
        net = nichani_net(p.d_gram, p.m_gram, b=p.b,
                          generator=sub_generator(seed, "gram-init", device), dtype=dtype)
        X = draw_inputs(n, p.d_gram, "sphere", sub_generator(seed, "gram-inputs", device),
                        dtype).to(device)
        ev = torch.linalg.eigvalsh(TaylorFeatures.of(net, X).gram()).flip(0).cpu().numpy()
        return [row(GRAM, "index", i + 1, "eigenvalue", float(v)) for i, v in enumerate(ev)]

    def theory(self, p: SpectrumParams, prep: Any = None) -> list[dict[str, Any]]:
        act = shifted_sigmoid(p.b)
        out = []
        xi = ntk_eigenvalues(act, p.d, 3)
        for lo, hi, l in self.groups(p.d, with_three=True):
            out += [row(SIGMA, "index", i, "eigenvalue", xi[l], kind="theory", degree=l)
                    for i in range(lo, hi + 1)]
        out.append(row(SIGMA, "index", 1, "trace", trace_identity(act, p.d, 2)[1],
                       kind="theory"))
        n, dg = self.n_gram(p), p.d_gram
        xg = ntk_eigenvalues(act, dg, 1)
        gam = effective_ridge(act, dg, 1)
        out += [row(GRAM, "index", i, "eigenvalue", n * xg[1] + gam, kind="theory", degree=1)
                for i in range(1, dg + 1)]
        out.append(row(GRAM, "index", dg + 1, "eigenvalue", n * xg[0] + gam, kind="theory",
                       degree=0))
        out += [row(GRAM, "index", i, "eigenvalue", gam, kind="theory", degree=2)
                for i in range(dg + 2, n + 1)]
        return out

    @staticmethod
    def groups(d: int, with_three: bool = False) -> list[tuple[int, int, int]]:
        """1-based inclusive index ranges (lo, hi, degree) in sorted order: d eigenvalues at
        xi_1, then 1 at xi_0, then B(d,2) at xi_2 (and B(d,3) at xi_3)."""
        b2 = num_harmonics(d, 2)
        out = [(1, d, 1), (d + 1, d + 1, 0), (d + 2, d + 1 + b2, 2)]
        if with_three:
            out.append((d + 2 + b2, d + 1 + b2 + num_harmonics(d, 3), 3))
        return out

    # ---- claims ----------------------------------------------------------------------------
    def claims(self, p: SpectrumParams, results: Results) -> list[Claim]:
        """The level claim, the trace identity, then the two Gram-pane claims."""
        return [self._xi_claim(p, results), self._trace_claim(results),
                *self._gram_claims(p, results)]

    def _xi_claim(self, p: SpectrumParams, results: Results) -> Claim:
        """Covariance eigenvalues grouped by degree against the NTK levels xi_l."""
        st = self.claim_statements
        s = results.series(SIGMA, "eigenvalue")
        ev = dict(zip(s.x.tolist(), zip(s.mean.tolist(), s.sem.tolist(), strict=True),
                      strict=True))
        xi = ntk_eigenvalues(shifted_sigmoid(p.b), p.d, 2)
        meas, exp, ses, bias, xs = [], [], [], [], []
        D = p.m // 2 * p.d
        for lo, hi, l in self.groups(p.d):
            vals = [ev.get(float(i), (math.nan, 0.0)) for i in range(lo, hi + 1)]
            mean = float(np.mean([v[0] for v in vals]))
            # sampling SE of a group mean of eigenvalues of a sample covariance: each
            # eigenvalue lambda has SE ~ lambda sqrt(2/N); the group averages hi - lo + 1 of them
            se = mean * math.sqrt(2.0 / p.N / (hi - lo + 1))
            seed_sem = float(np.sqrt(np.mean([v[1] ** 2 for v in vals])))
            meas.append(mean)
            exp.append(xi[l])
            ses.append(max(se, seed_sem))
            bias.append((LEAK[l] + D / p.N) * xi[l])
            xs.append(l)
        return match_claim(
            "xi-levels", st, meas, exp, ses, bias=bias, x=xs, x_name="degree",
            error_model="sampling SE of the group mean (lambda sqrt(2/N) per eigenvalue) or the "
                        f"seed SEM, K_SE = {K_SE:g}, plus finite-width leakage between degrees "
                        "(5%, 10%, 15% for degrees 1, 0, 2) and the O(D/N) bias of "
                        "sample-covariance eigenvalues, D = m d / 2")

    def _trace_claim(self, results: Results) -> Claim:
        """The trace of the feature covariance against its exact expectation."""
        st = self.claim_statements
        tr = results.series(SIGMA, "trace")
        tr_se = results.series(SIGMA, "trace_se")
        th = results.series(SIGMA, "trace", kind="theory")
        if len(tr.x) and len(th.x):
            se = max(float(tr.sem[0]), float(tr_se.mean[0]) / math.sqrt(max(tr.n[0], 1)))
            return match_claim(
                "trace", st, float(tr.mean[0]), float(th.mean[0]), se,
                error_model="Monte Carlo SE of (1/N) sum |phi(x_i)|^2 over the N inputs; the "
                            "identity is exact in expectation for every m",
                details={"kind": "consistency"})
        return Claim.missing("trace", st, "no trace rows", tolerance=0.0,
                             error_model="none", details={"kind": "consistency"})

    def _gram_claims(self, p: SpectrumParams, results: Results) -> list[Claim]:
        """Gram pane: the ridge (median of the tail) and the d top eigenvalues."""
        st = self.claim_statements
        out = []
        g = results.series(GRAM, "eigenvalue")
        n, dg = self.n_gram(p), p.d_gram
        gam = effective_ridge(shifted_sigmoid(p.b), dg, 1)
        xg = ntk_eigenvalues(shifted_sigmoid(p.b), dg, 1)
        tail = g.mean[dg + 1:] if len(g.x) >= n else np.array([])
        med = float(np.median(tail)) if len(tail) else math.nan
        # SE of a median of k values with relative spread s: ~1.25 s med / sqrt(k), and seeds
        k = max(len(tail), 1)
        spread = float(np.std(tail) / med) if len(tail) and med > 0 else math.nan
        se_med = 1.25 * spread * med / math.sqrt(k) / math.sqrt(max(int(g.n.min()), 1)) \
            if len(g.x) else math.nan
        out.append(match_claim(
            "gram-ridge", st, med, gam, se_med, bias=RIDGE_BIAS * gam,
            error_model="SE of the median of the ridge eigenvalues (1.25 x spread / sqrt(count), "
                        f"and seeds), K_SE = {K_SE:g}, plus {RIDGE_BIAS:.0%} for the degree-2 "
                        "part and finite m (Montanari-Zhong: gamma (1 + Delta), Delta -> 0)",
            details={"tail_count": int(len(tail)), "relative_spread": spread}))
        top = g.mean[:dg] if len(g.x) >= dg else np.array([])
        top_mean = float(np.mean(top)) if len(top) else math.nan
        se_top = float(np.std(top) / math.sqrt(len(top))) if len(top) > 1 else math.nan
        pred_top = n * xg[1] + gam
        out.append(match_claim(
            "gram-top", st, top_mean, pred_top, se_top, bias=TOP_BIAS * pred_top,
            error_model="SE of the mean of the d top eigenvalues (Marchenko-Pastur spread "
                        f"/ sqrt(d)), K_SE = {K_SE:g}, plus {TOP_BIAS:.0%} for O(1/d) and "
                        "finite-m corrections",
            details={"gap_ratio": float(g.mean[dg - 1] / g.mean[dg])
                     if len(g.x) > dg and g.mean[dg] != 0 else math.nan}))
        return out

    # ---- figure --------------------------------------------------------------------------------
    def plot(self, p: SpectrumParams, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(11, 4.0))
        colors = ["#D55E00", "#0072B2", "#009E73", "#CC79A7"]
        for j, (meth, title) in enumerate(
                ((SIGMA, f"Sigma-hat, d = {p.d}, m = {p.m}, N = {p.N}"),
                 (GRAM, f"Gram K, d = {p.d_gram}, n = {self.n_gram(p)}, m = {p.m_gram}"))):
            ax = fig.add_subplot(1, 2, j + 1)
            s = results.series(meth, "eigenvalue")
            if len(s.x):
                ax.plot(s.x, s.mean, "o", ms=2.5, color="0.3", label="empirical")
            for l in range(4):
                th = results.series(meth, "eigenvalue", kind="theory", degree=l)
                if len(th.x):
                    lab = (rf"$\xi_{l}$, multiplicity B(d,{l})" if meth == SIGMA else
                           (r"$n\xi_1+\gamma$" if l == 1 else r"$n\xi_0+\gamma$" if l == 0
                            else r"ridge $\gamma_{>1}$"))
                    ax.plot(th.x, th.mean, "-" if len(th.x) > 1 else "_", lw=2, ms=14,
                            mew=2, color=colors[l], label=lab)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("index i (sorted)")
            ax.set_ylabel("eigenvalue")
            ax.set_title(title, fontsize=9)
            ax.legend(fontsize=7, frameon=False)
            ax.spines["top"].set_visible(False)
            ax.spines["right"].set_visible(False)
        fig.tight_layout()
        return fig
