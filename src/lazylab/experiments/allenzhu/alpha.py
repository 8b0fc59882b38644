"""allenzhu-alpha: Fig. 3, sensitivity to the base-signal weight beta (Sec. 8.1).

T1 with H = beta F + alpha G(F), alpha = 0.3 fixed and beta in {1, 0.5, 0.3, 0.2, 0} (beta varies
instead of alpha so the error scale stays fixed): 3resnet trained (a) on all layers with
N = ``n_all`` and (b) on the hidden layers with N = ``n_hidden``, same protocol and selection as
``allenzhu-performance``. For every beta, predicting beta F exactly leaves k alpha^2 (= 1.35 at
the paper's sizes; for beta = 0 that is predicting 0), so error / (k alpha^2) < 1 means part
of the composite signal was learned. The paper: for beta >~ alpha the ResNet goes well below its
reference; for beta <~ alpha learning the composite signal is "practically impossible".

As a stated extra (no claim uses it), "resnet(beta=..., NTK, infinite width)" is kernel ridge
on each beta's samples with the closed-form infinite-width NTK of the 3-layer ResNet of
Eq. (2.1) (:func:`lazylab.experiments.allenzhu.infinite.resnet3_ntk`, the m -> infinity limit
of the network's NTK at its init), with the ridge grid and selections of
``allenzhu-performance``'s kernel baselines: the figure draws it as a dotted line per beta.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from pydantic import Field, field_validator

from lazylab.experiments import register
from lazylab.experiments.allenzhu.common import PAPER
from lazylab.experiments.allenzhu.infinite import INFINITE
from lazylab.experiments.allenzhu.performance import (
    ERR,
    PANELS,
    T1Params,
    check_t1,
    fit_rows,
    fit_unit,
    infinite_rows,
    network_cost,
    panel_mode,
    panel_skipped,
    t1_peak_bytes,
)
from lazylab.experiments.base import Claim, Experiment, Results, row
from lazylab.experiments.style import finish
from lazylab.experiments.toolkit import K_SE
from lazylab.seeding import derive_seed
from lazylab.train.ensemble import decade_grid


class AlphaParams(T1Params):
    betas: list[float] = Field([1.0, 0.5, 0.3, 0.2, 0.0], min_length=2,
                               description="base-signal weights beta (need some > and < alpha)")
    widths: list[int] = Field([32, 128], min_length=1, description="widths m")

    @field_validator("betas")
    @classmethod
    def _betas(cls, v: list[float]) -> list[float]:
        if any(b < 0 or b > 10 for b in v):
            raise ValueError("every beta must be in [0, 10]")
        return sorted(set(v), reverse=True)


def method(beta: float, mode: str) -> str:
    return f"resnet(beta={beta:g}, {mode})"


@register
class Alpha(Experiment):
    id = "allenzhu-alpha"
    paper = PAPER
    figure = "Fig. 3(a)(b)"
    summary = ("3resnet (all) and (hidden) test error vs width for beta in {1, .5, .3, .2, 0} at "
               "alpha = 0.3, relative to the k alpha^2 reference")
    Params = AlphaParams
    scales = {"quick": {"panels": ["a"]}, "paper": {
        "widths": [20, 50, 100, 200, 500, 1000, 2000], "epochs": 800,
        "lrs": decade_grid(-4, 0), "n_val": 500, "n_test": 20000, "panels": ["a", "b"],
        "wds": [0.0, 1e-5, 1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2], "max_group": 150}}
    est_seconds = {"quick": 16.0}
    robustness_axes = {"epochs": [150, 200, 300], "n_test": [1000, 2000, 4000]}
    smoke = {"d": 10, "widths": [8], "epochs": 2, "n_all": 100, "n_hidden": 100, "n_val": 100,
             "n_test": 400, "lrs": [0.05], "wds": [0.0], "betas": [1.0, 0.0],
             "panels": ["a"]}

    def validate(self, p: AlphaParams) -> None:
        check_t1(p)

    def statements(self, p: AlphaParams) -> dict[str, str]:
        out = {}
        for panel in PANELS:
            mode, nkey = panel_mode(panel)
            out[f"beta-sensitivity-{panel}"] = (
                f"({panel}) N = {getattr(p, nkey)}, 3resnet({mode}), largest width: the error "
                f"relative to k alpha^2 is larger for beta < alpha = {p.alpha:g} than for "
                f"beta > alpha")
        return out

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"epochs": 1, "n_hidden": 1, "widths": 1}

    def cost(self, p: AlphaParams, scale: str = "quick") -> tuple[float, float | None]:
        return network_cost(self, p, scale)

    def peak_bytes(self, p: AlphaParams) -> float:
        """The 3resnet SGD grid at the largest width (:func:`t1_peak_bytes`): the G = |lrs| x
        |wds| stacked float32 parameters and about six (G, rows, m) activations of a
        prediction block (rows capped by ACTIVATION_ELEMENTS)."""
        return t1_peak_bytes(p, ["3resnet"], baselines=False)

    def units(self, p: AlphaParams) -> list[dict[str, Any]]:
        out = [{"panel": panel, "beta": b, "m": m}
               for panel in p.panels for b in p.betas for m in p.widths]
        # the infinite-width extras come last: the other units keep their order
        return out + [{"panel": panel, "beta": b, "infinite": "3resnet"}
                      for panel in p.panels for b in p.betas]

    def run_unit(self, p: AlphaParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        panel, beta = key["panel"], float(key["beta"])
        mode, nkey = panel_mode(panel)
        data_seed = derive_seed("allenzhu-t1", p.data_seed, panel, beta)
        ref = p.k * p.alpha ** 2
        if "infinite" in key:
            meth, n = method(beta, INFINITE), getattr(p, nkey)
            rows = infinite_rows(p, panel, "3resnet", n, beta, data_seed, device, meth,
                                 beta=beta)
            return rows + [row(meth, "N", n, "relative_error", r["value"] / ref, panel=panel,
                               beta=beta, mode=INFINITE, selection=r["selection"])
                           for r in rows if r["metric"] == ERR]
        m = int(key["m"])
        fit = fit_unit(p, "3resnet", mode, m, getattr(p, nkey), beta, seed, data_seed, device)
        rows = fit_rows(method(beta, mode), "m", m, fit, panel=panel, beta=beta, mode=mode)
        rows += [row(method(beta, mode), "m", m, "relative_error", fit.test[s] / ref,
                     panel=panel, beta=beta, mode=mode, selection=s) for s in ("test", "val")]
        return rows

    def theory(self, p: AlphaParams, prep: Any = None) -> list[dict[str, Any]]:
        return [row("k alpha^2", "m", m, ERR, p.k * p.alpha ** 2, kind="theory")
                for m in p.widths]

    def claims(self, p: AlphaParams, results: Results) -> list[Claim]:
        st = self.statements(p)
        ref = p.k * p.alpha ** 2
        mmax = max(p.widths)
        out = []
        for panel in PANELS:
            cid = f"beta-sensitivity-{panel}"
            if panel not in p.panels:
                out.append(Claim.not_applicable(cid, st, panel_skipped(panel)))
                continue
            mode = panel_mode(panel)[0]
            lo = [b for b in p.betas if b < p.alpha]
            hi = [b for b in p.betas if b > p.alpha]
            vals: dict[float, tuple[float, float]] = {}
            for b in lo + hi:
                e = results.select(kind="simulation", method=method(b, mode), metric=ERR,
                                   x=float(mmax), selection="test", panel=panel)
                s = results.select(kind="simulation", method=method(b, mode),
                                   metric="test_error_se", x=float(mmax), selection="test",
                                   panel=panel)
                if e:
                    vals[b] = (sum(r["value"] for r in e) / len(e) / ref,
                               math.sqrt(sum(r["value"] ** 2 for r in s)) / max(len(s), 1)
                               / ref)
            if not lo or not hi or any(b not in vals for b in lo + hi):
                out.append(Claim.not_applicable(cid, st,
                                                "needs betas on both sides of alpha"))
                continue
            m_lo = sum(vals[b][0] for b in lo) / len(lo)
            m_hi = sum(vals[b][0] for b in hi) / len(hi)
            se = math.sqrt(sum(vals[b][1] ** 2 for b in lo) / len(lo) ** 2
                           + sum(vals[b][1] ** 2 for b in hi) / len(hi) ** 2)
            diff = m_lo - m_hi
            out.append(Claim.test(
                cid, st, diff, "above", 0.0, K_SE * se,
                "Monte Carlo error of the test errors on n_test fresh samples (SE from the "
                "per-sample squared errors, combined over the betas); held iff mean relative "
                "error over beta < alpha exceeds the mean over beta > alpha by more than "
                "K_SE SE; paper selection",
                {"relative_error": {f"{b:g}": v[0] for b, v in vals.items()},
                 "comparison": "above"}))
        return out

    def plot(self, p: AlphaParams, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5.5 * len(p.panels), 4.2))
        ref = p.k * p.alpha ** 2
        colors = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
        for i, panel in enumerate(p.panels):
            ax = fig.add_subplot(1, len(p.panels), i + 1)
            mode, nkey = panel_mode(panel)
            for j, b in enumerate(p.betas):
                s = results.series(method(b, mode), ERR, panel=panel, selection="test")
                if len(s.x):
                    ax.plot(s.x, s.mean, "o-", ms=4, color=colors[j % len(colors)],
                            label=method(b, mode))
                v = results.select(method=method(b, INFINITE), metric=ERR, panel=panel,
                                   selection="test")
                if v:
                    ax.axhline(sum(r["value"] for r in v) / len(v), color=colors[j % len(colors)],
                               ls=(0, (1, 1)), lw=1.4, label=method(b, INFINITE))
            ax.axhline(ref, color="red", ls="--", lw=1.2, label=f"k alpha^2 = {ref:g}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            finish(ax, xlabel="m = number of hidden neurons", ylabel="test error",
                   title=f"({panel}) N = {getattr(p, nkey)}, alpha = {p.alpha:g} "
                         f"[paper selection]")
            ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        return fig
