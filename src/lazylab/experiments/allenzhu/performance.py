"""allenzhu-performance: Fig. 2, test error vs width m on T1 (Allen-Zhu & Li 2019, Sec. 8.1).

T1: x uniform on {-1, 1}^d, k = d/2 outputs, H = beta F + alpha G(F) with F the k pair products
and G the signed product of F_1..F_4 (a degree-8 parity of x); test error E ||out - H||^2 summed
over outputs. Predicting beta F exactly leaves k alpha^2 = 1.35 (the dashed line): below it, a
learner has learned part of the composite signal alpha G(F).

Panels: (a) N = ``n_all`` samples, training all layers; (b) N = ``n_hidden``, training the hidden
layers (3resnet: W, V; 3layer: W, U; 2layer: W). Learners 3resnet (bottleneck ResNet, Sec. 6),
3layer and 2layer MLPs at each width, each also as kernels: "(last)" = ridge on the frozen random
last hidden layer (conjugate kernel; the ResNet's inner A untied) and "(NTK)" = the network
linearized at its init, trained by the same SGD grid. Width-free baselines: kernel ridge with the
Gaussian kernel exp(-||x - y||^2 / (2d)) and the closed-form two-layer ReLU NTK on (x, 1).
As a stated extra (no claim uses them), "3layer(NTK, infinite width)" and "3resnet(NTK, infinite
width)" are kernel ridge with the closed-form infinite-width NTK of the 3layer network and of
the 3-layer ResNet of Eq. (2.1) (:mod:`lazylab.experiments.allenzhu.infinite`, built with
:mod:`lazylab.kernels.deep`), the m -> infinity limit of the "(NTK)" rows' kernel at the same
init, on the same samples and with the same ridge grid and selections as the baselines.

Protocol (Sec. 8.1): SGD, momentum 0.9, batch 50, lr / 10 at half the epochs, the {1, 2, 5} x
10^k grid of lr x weight decay trained as one batched ensemble
(:func:`lazylab.train.ensemble.train_grid`), init N(0, 1/m) for every entry with biases.
The samples come from ``data_seed`` (shared by every learner of a panel); the unit seed varies
the initialization and the batch order. Selection: the paper's (best *test* error) and a
held-out validation set of ``n_val`` fresh samples; both are stored (facet ``selection``),
the figure shows the paper's.

Scales. ``paper``: 800 epochs, lr in {1, 2, 5} x 10^k for k = -4..0 and ten weight decays,
widths 20..2000, both panels (a GPU job). ``quick`` keeps the paper's task (d = 30,
k = 15, N = 500), batch 50 and init and shrinks the search: widths 32 and 128, 400 epochs,
lr in {0.01, 0.05, 0.1} x wd in {0.005, 0.01, 0.02, 0.05} (0.01 keeps the linearized ResNet
stable at m = 32), panel (a) only: at 400 epochs 3resnet(all) is well below the other
learners in every seed tried (at 200 it had not left its plateau in some), while panel (b)
(hidden layers, N = 1000) needs more, so its claims are not applicable at quick and say so.
The exploration behind these numbers is in the documentation page
docs/protocols/allenzhu-performance.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, field_validator

from lazylab.errors import InputError
from lazylab.experiments import register
from lazylab.experiments.allenzhu.common import (
    ACTIVATIONS,
    ARCHS,
    PAPER,
    fit_kernel,
    fit_ridge,
    fit_sgd,
    grid_peak_bytes,
    kernel_peak_bytes,
    learner_params,
    make_learner,
    ridge_peak_bytes,
    t1_data,
)
from lazylab.experiments.allenzhu.infinite import INFINITE, infinite_ntk
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row, worst_at
from lazylab.experiments.cost import scaled_cost
from lazylab.experiments.style import finish, method_color
from lazylab.experiments.toolkit import K_SE, sub_generator
from lazylab.seeding import derive_seed
from lazylab.train.ensemble import decade_grid

KERNEL_BASELINES = ("gaussian kernel", "ReLU NTK kernel")
ERR = "test_error"
#: Learners whose closed-form infinite-width NTK is fitted as a stated extra.
INF_ARCHS = ("3resnet", "3layer")


def _sorted_within(values: list, ok: Callable[[Any], bool], message: str) -> list:
    """``values`` sorted without repeats, or ValueError(message) if any fails ``ok``."""
    if not all(ok(v) for v in values):
        raise ValueError(message)
    return sorted(set(values))


class T1Params(ExperimentParams):
    """The T1 task and the Sec. 8.1 training protocol (shared with allenzhu-alpha)."""

    d: int = Field(30, ge=8, le=200, description="input dimension (even); k = d/2 outputs")
    alpha: float = Field(0.3, gt=0, le=1, description="composite weight alpha")
    n_all: int = Field(500, ge=50, le=1_000_000, description="N for panel (a), all layers")
    n_hidden: int = Field(1000, ge=50, le=1_000_000,
                          description="N for panel (b), hidden layers")
    n_val: int = Field(250, ge=50, le=1_000_000,
                       description="fresh validation samples (validation selection)")
    n_test: int = Field(2000, ge=200, le=1_000_000, description="fresh test samples")
    widths: list[int] = Field([32, 128], min_length=1, description="widths m")
    epochs: int = Field(200, ge=2, le=10_000, description="SGD epochs (lr / 10 at half)")
    batch_size: int = Field(50, ge=1, le=100_000, description="mini-batch size")
    lrs: list[float] = Field(
        [0.01, 0.05, 0.1], min_length=1,
        description="learning rates of the grid (paper: every {1,2,5} x 10^k, k = -4..0)")
    wds: list[float] = Field([0.005, 0.01, 0.02, 0.05], min_length=1,
                             description="weight decays of the grid")
    init: Literal["normal", "fan"] = Field(
        "normal", description="N(0, 1/m) entries (Sec. 8.1) or std 1/(sqrt fan_in + sqrt fan_out)")
    panels: list[Literal["a", "b"]] = Field(["a", "b"], min_length=1,
                                            description="(a) all layers, (b) hidden layers")
    data_seed: int = Field(0, ge=0, description="seed of the training/validation/test samples")
    max_group: int = Field(64, ge=1, le=10_000,
                           description="configurations trained at once (memory)")

    @field_validator("d")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("d must be even (k = d/2 pair products)")
        return v

    @field_validator("widths")
    @classmethod
    def _widths(cls, v: list[int]) -> list[int]:
        return _sorted_within(v, lambda m: 2 <= m <= 100_000, "every width must be in [2, 100000]")

    @field_validator("wds")
    @classmethod
    def _wds(cls, v: list[float]) -> list[float]:
        return _sorted_within(v, lambda w: 0 <= w <= 10, "weight decays must be in [0, 10]")

    @field_validator("lrs")
    @classmethod
    def _lrs(cls, v: list[float]) -> list[float]:
        return _sorted_within(v, lambda lr: 0 < lr <= 100, "learning rates must be in (0, 100]")

    @property
    def k(self) -> int:
        return self.d // 2


def check_t1(p: T1Params) -> None:
    """Parameter combinations T1Params cannot express field by field."""
    for panel in p.panels:
        nkey = panel_mode(panel)[1]
        if p.batch_size > getattr(p, nkey):
            raise InputError(f"--set batch_size: at most {nkey} = {getattr(p, nkey)} (a batch "
                             f"larger than the training set is not mini-batch SGD)")


PANELS = ("a", "b")


def panel_skipped(panel: str) -> str:
    """Why a panel's claims are not applicable when it is not in ``panels``."""
    if panel == "b":
        return ("panel (b) not run at this setting (quick runs (a) only): training the hidden "
                "layers at N = n_hidden = 1000 needs 300 epochs or more (measured on this CPU "
                "at m = 128: 3resnet(hidden) 1.29 after 200 epochs and 0.98 after 300 for one "
                "seed, 1.74 after 300 for the experiment's seed), and panel (b) at 300 epochs "
                "and one width took 142 CPU s, beyond the 2-minute quick budget; run --scale "
                "paper or --set panels=a,b --set epochs=300 (or more)")
    return f"panel ({panel}) not in panels"


def panel_mode(panel: str) -> tuple[str, str]:
    """Panel -> (training mode, name of the N parameter)."""
    return ("all", "n_all") if panel == "a" else ("hidden", "n_hidden")


def t1_peak_bytes(p: T1Params, archs: Sequence[str], baselines: bool) -> float:
    """Peak bytes of the largest unit at the largest width m and the larger panel's N: the SGD
    grid of each architecture (:func:`grid_peak_bytes` with its parameter count and
    activations, G = |lrs| x |wds| configurations, ``max_group`` at a time, predictions on up to
    max(N, n_val, n_test) points), with ``baselines`` the "(last)" ridge fit and the kernel
    baselines (:func:`ridge_peak_bytes`, :func:`kernel_peak_bytes`), and the closed-form
    infinite-width kernel units of both experiments (:func:`infinite_peak_bytes`)."""
    m = max(p.widths)
    n = max(getattr(p, panel_mode(panel)[1]) for panel in p.panels)
    n_eval = max(n, p.n_val, p.n_test)
    configs = len(p.lrs) * len(p.wds)
    peaks = [grid_peak_bytes(learner_params(arch, p.d, p.k, m), max(m, p.d, p.k), configs,
                             p.max_group, n_eval, min(p.batch_size, n), ACTIVATIONS[arch])
             for arch in archs]
    if baselines:
        peaks += [ridge_peak_bytes(n, p.n_val, p.n_test, m),
                  kernel_peak_bytes(n, p.n_val, p.n_test)]
    return max(peaks + [infinite_peak_bytes(n, p.n_val, p.n_test)])


def infinite_peak_bytes(n: int, n_val: int, n_test: int) -> float:
    """Peak float64 bytes of an infinite-width kernel unit (:func:`infinite_rows`): the kernel
    ridge fit's (:func:`kernel_peak_bytes`) plus the pieces of the ResNet's largest
    cross-kernel alive at once (the two branches' NNGP and NTK, their sum and the result: six
    n_test x n matrices)."""
    return kernel_peak_bytes(n, n_val, n_test) + 8.0 * 6 * max(n_val, n_test) * n


def fit_unit(p: T1Params, arch: str, mode: str, m: int, n: int, beta: float, seed: int,
             data_seed: int, device: torch.device) -> Any:
    """Train one learner in one mode (SGD grid or ridge) and return its Fit."""
    data = t1_data(p.d, p.alpha, beta, n, p.n_val, p.n_test, data_seed, device)
    net = make_learner(arch, p.d, p.k, m, untied=(mode == "last"), init=p.init,
                       generator=sub_generator(seed, "init"), device=device)
    if mode == "last":
        with torch.no_grad():
            return fit_ridge(net.features(data.X), net.features(data.Xv),
                             net.features(data.Xt), data)
    return fit_sgd(net, data, mode=mode, lrs=p.lrs, wds=p.wds, epochs=p.epochs,
                   batch_size=p.batch_size, seed=seed, max_group=p.max_group)


def network_cost(exp: Experiment, p: T1Params, scale: str) -> tuple[float, float | None]:
    """:func:`lazylab.experiments.cost.scaled_cost` counting only the units without
    ``"infinite"`` in their key: the closed-form infinite-width kernel units cost about 1% of a
    network unit (measured at quick: 0.17-0.2 CPU s each against 35 s for the panel), so the
    unit-count rule would otherwise dilute the per-unit time they are priced at."""
    secs, peak = scaled_cost(exp, p, scale, exp.cost_sizes, peak=exp.peak_bytes)
    ref = exp.resolve(scale if scale in exp.scales else "quick")

    def share(q: Any) -> float:
        units = exp.units(q)
        return sum("infinite" not in u for u in units) / max(1, len(units))

    return secs * share(p) / share(ref), peak


def infinite_method(arch: str) -> str:
    """The method name of ``arch``'s infinite-width NTK rows."""
    return f"{arch}({INFINITE})"


def infinite_rows(p: T1Params, panel: str, learner: str, n: int, base: float, data_seed: int,
                  device: torch.device, method: str | None = None,
                  **facets: Any) -> list[dict]:
    """Kernel ridge with ``learner``'s closed-form infinite-width NTK
    (:func:`lazylab.experiments.allenzhu.infinite.infinite_ntk`) on the panel's samples with
    base-signal weight ``base``: test / SE / train rows at x = N under ``method`` (default
    :func:`infinite_method`), mode INFINITE, with ``facets``."""
    data = t1_data(p.d, p.alpha, base, n, p.n_val, p.n_test, data_seed, device)
    fit = fit_kernel(infinite_ntk(learner), data)
    return fit_rows(method or infinite_method(learner), "N", n, fit, panel=panel,
                    mode=INFINITE, **facets)


def fit_rows(method: str, x_name: str, x: float, fit: Any, **facets: Any) -> list[dict]:
    """test_error / test_error_se / train_error rows for both selections."""
    out = []
    for sel in ("test", "val"):
        f = dict(facets, selection=sel)
        out += [row(method, x_name, x, ERR, fit.test[sel], **f),
                row(method, x_name, x, "test_error_se", fit.se[sel], **f),
                row(method, x_name, x, "train_error", fit.train[sel], **f)]
    return out


@register
class Performance(Experiment):
    id = "allenzhu-performance"
    paper = PAPER
    figure = "Fig. 2(a)(b)"
    summary = ("test error vs width for 3resnet / 3layer / 2layer trained (all) and (hidden) and "
               "as kernels (last, NTK), with ridge baselines and the k alpha^2 = 1.35 line")
    Params = T1Params
    #: Quick runs 400 epochs: at 200 the 3resnet's final error was bimodal across seeds
    #: (0.31-1.66 over data_seed 0-4 x 2 seeds, one above k alpha^2), at 400 it is 0.13-0.57
    #: in all ten (docs/protocols/allenzhu-performance.md).
    scales = {"quick": {"panels": ["a"], "epochs": 400}, "paper": {
        "widths": [20, 50, 100, 200, 500, 1000, 2000], "epochs": 800,
        "lrs": decade_grid(-4, 0), "n_val": 500, "n_test": 20000, "panels": ["a", "b"],
        "wds": [0.0, 1e-5, 1e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2],
        "max_group": 150}}
    est_seconds = {"quick": 35.0}
    robustness_axes = {"epochs": [300, 400, 600], "n_test": [1000, 2000, 4000]}
    smoke = {"d": 10, "widths": [8], "epochs": 2, "n_all": 100, "n_hidden": 100,
             "n_val": 100, "n_test": 400, "lrs": [0.05], "wds": [0.0],
             "panels": ["a"]}

    def validate(self, p: T1Params) -> None:
        check_t1(p)

    def statements(self, p: T1Params) -> dict[str, str]:
        thr = p.k * p.alpha ** 2
        out = {}
        for panel in PANELS:
            mode, nkey = panel_mode(panel)
            n = getattr(p, nkey)
            out[f"kernels-above-{panel}"] = (
                f"({panel}) N = {n}: every kernel method ((last), (NTK) at every width, Gaussian "
                f"and ReLU-NTK ridge) has test error >= k alpha^2 = {thr:g}")
            out[f"resnet-lowest-{panel}"] = (
                f"({panel}) N = {n}: 3resnet({mode}) has the lowest test error of all learners at "
                f"the largest width m = {max(p.widths)}")
            out[f"resnet-below-{panel}"] = (
                f"({panel}) N = {n}: 3resnet({mode}) goes below k alpha^2 = {thr:g} at the "
                f"largest width (learns part of alpha G(F); open at reduced scale)")
        return out

    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"epochs": 1, "n_hidden": 1, "widths": 1}

    def cost(self, p: T1Params, scale: str = "quick") -> tuple[float, float | None]:
        return network_cost(self, p, scale)

    def peak_bytes(self, p: T1Params) -> float:
        """The largest of the three learners' SGD grids at the largest width (float32 stacked
        parameters, dominated by the 3layer's m x m U, and about six (G, rows, m) activations
        of a prediction block), the "(last)" ridge features and the kernel baselines' Gram
        matrices (:func:`t1_peak_bytes`)."""
        return t1_peak_bytes(p, ARCHS, baselines=True)

    def units(self, p: T1Params) -> list[dict[str, Any]]:
        out = []
        for panel in p.panels:
            mode = panel_mode(panel)[0]
            for arch in ARCHS:
                for mm in (mode, "last", "NTK"):
                    out += [{"panel": panel, "arch": arch, "mode": mm, "m": m} for m in p.widths]
            out += [{"panel": panel, "kernel": kern} for kern in KERNEL_BASELINES]
        # the infinite-width extras come last: the other units keep their order
        out += [{"panel": panel, "infinite": arch} for panel in p.panels for arch in INF_ARCHS]
        return out

    def run_unit(self, p: T1Params, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        panel = key["panel"]
        n = getattr(p, panel_mode(panel)[1])
        # Every learner of a panel sees the same samples (drawn from data_seed and the panel);
        # the unit seed varies the initialization and the mini-batch order.
        data_seed = derive_seed("allenzhu-t1", p.data_seed, panel)
        if "infinite" in key:
            arch = key["infinite"]
            return infinite_rows(p, panel, arch, n, 1.0, data_seed, device, arch=arch)
        if "kernel" in key:
            data = t1_data(p.d, p.alpha, 1.0, n, p.n_val, p.n_test, data_seed, device)
            fit = fit_kernel("gaussian" if key["kernel"] == KERNEL_BASELINES[0] else "relu-ntk",
                             data)
            return fit_rows(key["kernel"], "N", n, fit, panel=panel, arch="kernel",
                            mode="ridge")
        arch, mode, m = key["arch"], key["mode"], int(key["m"])
        fit = fit_unit(p, arch, mode, m, n, 1.0, seed, data_seed, device)
        return fit_rows(f"{arch}({mode})", "m", m, fit, panel=panel, arch=arch, mode=mode)

    def theory(self, p: T1Params, prep: Any = None) -> list[dict[str, Any]]:
        thr = p.k * p.alpha ** 2
        return [row("k alpha^2", "m", m, ERR, thr, kind="theory") for m in p.widths]

    def claims(self, p: T1Params, results: Results) -> list[Claim]:
        st = self.statements(p)
        thr = p.k * p.alpha ** 2
        out = []
        mc = (f"Monte Carlo error of the test error on n_test fresh samples (SE from the "
              f"per-sample squared errors); tolerance K_SE = {K_SE:g} SE; paper selection")
        for panel in PANELS:
            if panel not in p.panels:
                out += [Claim.not_applicable(f"{cid}-{panel}", st, panel_skipped(panel))
                        for cid in ("kernels-above", "resnet-lowest", "resnet-below")]
                continue
            mode = panel_mode(panel)[0]
            cells = _cells(results, panel)
            kern = {k: v for k, v in cells.items() if k[1] in ("last", "NTK", "ridge")}
            if kern:
                (meth, _, x), (err, se) = min(kern.items(),
                                              key=lambda kv: kv[1][0] + K_SE * kv[1][1])
                out.append(Claim.test(
                    f"kernels-above-{panel}", st, err, ">=", thr, K_SE * se,
                    mc + "; measured = the lowest kernel error (" + f"{meth} at {x:g})",
                    {"method": meth, "x": x, "worst_at": worst_at(**{
                        "method": meth, _x_name(results, meth): x})}))
            else:
                out.append(Claim.not_applicable(f"kernels-above-{panel}", st,
                                                "no kernel rows"))
            mmax = max(p.widths)
            learners = {k: v for k, v in cells.items() if k[2] == mmax}
            res_key = (f"3resnet({mode})", mode, mmax)
            if res_key not in learners:
                for cid in ("resnet-lowest", "resnet-below"):
                    out.append(Claim.not_applicable(f"{cid}-{panel}", st,
                                                    "no 3resnet row at the largest width"))
                continue
            err, se = learners.pop(res_key)
            others = {k: v for k, v in learners.items()}
            others.update({k: v for k, v in cells.items() if k[1] == "ridge"})
            (omin, _, _), (oerr, ose) = min(others.items(), key=lambda kv: kv[1][0])
            tol = K_SE * math.hypot(se, ose)
            out.append(Claim.test(
                f"resnet-lowest-{panel}", st, err - oerr, "<=", 0.0, tol,
                mc + "; measured = 3resnet error - best other learner's error (" + omin + "), "
                "tolerance K_SE x SE of the difference",
                {"best_other": omin, "other": oerr, "worst_at": worst_at(learner=omin)}))
            out.append(Claim.test(
                f"resnet-below-{panel}", st, err, "below", thr, K_SE * se,
                mc + "; held iff the error is below k alpha^2 by more than K_SE SE",
                {"threshold": thr, "comparison": "below"}))
        return out

    def plot(self, p: T1Params, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5.5 * len(p.panels), 4.2))
        thr = p.k * p.alpha ** 2
        for i, panel in enumerate(p.panels):
            ax = fig.add_subplot(1, len(p.panels), i + 1)
            mode, nkey = panel_mode(panel)
            for arch in ARCHS:
                for mm, ls in ((mode, "-"), ("last", ":"), ("NTK", "--")):
                    meth = f"{arch}({mm})"
                    s = results.series(meth, ERR, panel=panel, selection="test")
                    if len(s.x):
                        ax.errorbar(s.x, s.mean, yerr=K_SE * s.sem if s.n.min() > 1 else None,
                                    fmt="o" + ls, ms=4, color=method_color(arch), label=meth)
            for arch in INF_ARCHS:
                v = results.select(method=infinite_method(arch), metric=ERR, panel=panel,
                                   selection="test")
                if v:
                    ax.axhline(sum(r["value"] for r in v) / len(v), color=method_color(arch),
                               ls=(0, (1, 1)), lw=1.6, label=infinite_method(arch))
            for kern, c in zip(KERNEL_BASELINES, ("grey", "black"), strict=True):
                v = results.select(method=kern, metric=ERR, panel=panel, selection="test")
                if v:
                    ax.axhline(sum(r["value"] for r in v) / len(v), color=c, ls="-.", lw=1,
                               label=kern)
            ax.axhline(thr, color="red", ls="--", lw=1.2, label=f"k alpha^2 = {thr:g}")
            ax.set_xscale("log")
            ax.set_yscale("log")
            # a learner whose whole grid diverged can leave a huge finite error: keep the axis
            # on the scale of the problem (10 x the error of predicting 0; values are in the CSV)
            ax.set_ylim(top=10 * p.k * (1 + p.alpha ** 2))
            finish(ax, xlabel="m = number of hidden neurons", ylabel="test error",
                   title=f"({panel}) N = {getattr(p, nkey)}, {mode} layers vs kernels "
                         f"[paper selection: best test error]")
            ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        return fig


def _cells(results: Results, panel: str) -> dict[tuple[str, str, float], tuple[float, float]]:
    """(method, mode, x) -> (mean test error, SE) under the paper's selection, over seeds."""
    out = {}
    for r in results.select(kind="simulation", metric=ERR, panel=panel, selection="test"):
        key = (r["method"], r["mode"], float(r["x"]))
        out.setdefault(key, []).append(float(r["value"]))
    se: dict[tuple[str, str, float], list[float]] = {}
    for r in results.select(kind="simulation", metric="test_error_se", panel=panel,
                            selection="test"):
        se.setdefault((r["method"], r["mode"], float(r["x"])), []).append(float(r["value"]))
    return {k: (sum(v) / len(v),
                math.sqrt(sum(s * s for s in se.get(k, [0.0]))) / len(se.get(k, [0.0])))
            for k, v in out.items()}


def _x_name(results: Results, method: str) -> str:
    """The x axis of ``method``'s rows (``N`` for the kernels, ``m`` for the networks)."""
    return next((str(r["x_name"]) for r in results.select(kind="simulation", method=method,
                                                         metric=ERR)), "x")
