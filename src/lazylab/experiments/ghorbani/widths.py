"""Risk vs width N (Figs. 1 and 2, left, of Ghorbani et al. 2019): the shared experiment.

Units: ``{"method": "NN", "N": N}``, ``{"method": "NT(I)", "N": N, "rep": r}`` (``nt_reps``
draws of W for N < d; one for N >= d, where the NT class holds every quadratic form whatever W
is) and ``{"method": "RF(...)", "N": N, "rep": r}`` (``rf_reps`` draws of W, the paper's 10
RF repetitions at paper scale).  Each unit trains on samples (see :mod:`.common`) and returns,
with x_name "N":

* ``risk``: the exact population risk R/R0 of the trained model (what the theory predicts);
* ``test_risk``: mean squared error on ``test_samples`` fresh samples / R0 (the paper's test
  error; heavy-tailed, so noisier than ``risk``);
* ``train_loss``: final training loss / R0;
* ``risk_population_limit`` (RF, NT): the exact n = infinity optimum over the class for the same
  W, so ``risk - risk_population_limit`` is the training/estimation error.

Asymptotic-gap units ``{"method": m, "d": d, "target": j}`` (d in 20, 40, 80; j <
``gap_targets``; only methods with an asymptotic formula) measure how far the exact finite-d
risk (mean over ``gap_draws`` draws of W, or the exact expectation where one is known) sits
from the paper's asymptotic formula at rho = 1/2 and 2, for target seed ``target_seed + j``:
rows (x_name "d") ``finite_minus_asymptotic`` (facet rho) and ``asymptotic_gap``; the claim
``asymptotic-gap-shrinks`` fits log gap against log d (slope -1, the O(rho/d) correction).

Quick-scale protocol rules (stated in the parameters' descriptions and ``lazylab show``): NT by
streamed CG least squares (``nt_protocol=cg``) on nt_samples = max(default, 20 (d(d+1)/2 + 1))
samples, RF least squares on rf_samples = max(default, 50 N_max), NN and NT-SGD step sizes from
:mod:`.common`, sgd_steps from :meth:`WidthParams.default_steps`; d above the experiment's
``quick_max_d`` is refused at --scale quick (exit 2) by :meth:`WidthExperiment.validate`.

The width grid is "N in {45, ..., 4500}" at d = 450 in the paper (rho from 0.1 to 10) on a log
axis; the exact grid is not given, so we take a geometric grid plus N = d.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, model_validator

from lazylab.errors import InputError
from lazylab.experiments import style
from lazylab.experiments.base import Experiment, Results, geomspace_int, row
from lazylab.experiments.cost import grid_of
from lazylab.experiments.ghorbani import common as C
from lazylab.experiments.ghorbani.verdicts import (
    gap_claim,
    lstsq_allowance,
    risk_match_claim,
    sgd_allowance,
)
from lazylab.experiments.toolkit import grid_search
from lazylab.seeding import derive_seed, torch_generator
from lazylab.solve import nt_least_squares


def width_grid(d: int, rho_min: float, rho_max: float, n: int) -> list[int]:
    """Integers on geomspace(rho_min d, rho_max d, n), plus N = d; all >= 1."""
    lo = max(1, round(rho_min * d))
    hi = max(lo + 1, round(rho_max * d))
    return geomspace_int(lo, hi, n, extra=[d])


def width_statements(methods: Sequence[str], asymptotic: Sequence[str]) -> dict[str, str]:
    """Statements of the match claims: finite-d for every method, asymptotic for some."""
    out = {f"{m}-matches-finite-d": f"{m} simulations match the exact finite-d population "
                                    f"risk at every N" for m in methods}
    out.update({f"{m}-matches-asymptotic": f"{m} simulations match the paper's asymptotic "
                                           f"formula within the O(rho/d) finite-d correction at "
                                           f"every N" for m in asymptotic})
    out["asymptotic-gap-shrinks"] = (
        f"the gap between the exact finite-d risk and the paper's asymptotic formula (mean over "
        f"rho = N/d in {{1/2, 2}}) falls like 1/d over d = 20, 40, 80 for {', '.join(asymptotic)} "
        f"(log-log slope -1)")
    return out


#: Least-squares samples per RF feature at the largest width (rule of WidthParams).
RF_SAMPLES_PER_FEATURE = 50
#: Least-squares samples per NT basis column at N >= d (rule of WidthParams).
NT_SAMPLES_PER_COLUMN = 20
#: Largest NT least-squares basis accepted (d(d+1)/2 + 1 <= this: d <= 61). Beyond it the
#: n = 20 p normal equations (~ 20 p^3 flops per unit) leave the quick time contract;
#: ``nt_protocol=sgd`` (the paper's protocol, used at paper scale) has no such limit.
NT_LSTSQ_MAX_BASIS = 1900


class WidthParams(C.GhorbaniParams):
    """Parameters of a risk-vs-width figure (subclasses change defaults)."""

    rho_min: float = Field(0.1, gt=0, le=1, description="smallest N/d of the width grid")
    rho_max: float = Field(10.0, ge=1, le=100, description="largest N/d of the width grid")
    n_widths: int = Field(11, ge=3, le=60, description="geometric grid size (N = d is added)")
    rf_samples: int = Field(25_000, ge=100, le=10**8,
                            description="samples of the RF least-squares fit (paper: 5e5)")
    rf_reps: int = Field(3, ge=1, le=100, description="independent draws of W per RF point "
                         "(paper: 10)")
    nt_protocol: Literal["lstsq", "sgd", "cg"] = Field(
        "cg", description="NT training: least squares on nt_samples samples (cg: streamed "
        "conjugate gradients, any d, 6-20x faster than lstsq at d = 30-60, bench_ghorbani_nt; "
        "lstsq: normal equations in a basis of S_W, d <= 61), or one-pass SGD (the paper's "
        "protocol, which stalls above the limit at d = 450)")
    nt_reps: int = Field(3, ge=1, le=100, description="independent draws of W per NT point with "
                         "N < d (for N >= d the NT class does not depend on W)")
    nt_samples: int = Field(20_000, ge=100, le=10**8,
                            description="samples of the NT least-squares fit")
    test_samples: int = Field(10_000, ge=100, le=10**8,
                              description="fresh samples of the reported test risk")
    sgd_steps: int = Field(3000, ge=10, le=10**7,
                           description="one-pass SGD steps for NN (and NT with sgd); unless "
                           "set, round(54 d (1 + d/batch_size)) (qf) or 100 d (mixture), since "
                           "the default step size shrinks with d (paper: 2e5 for qf, 1.4e5 "
                           "for mg)")
    theory_draws: int = Field(20, ge=0, le=10_000, description="draws of W for the finite-d "
                              "Monte Carlo references of RF (and NT on the mixture); 0: use the "
                              "exact population limits of the simulated W's instead (no "
                              "minutes-long Gram solves at d = 450 when assembling)")
    chunk: int = Field(8192, ge=64, le=10**7, description="rows per least-squares chunk")
    gap_targets: int = Field(6, ge=0, le=100, description="target draws (target_seed, "
                             "target_seed + 1, ...) at each d in 20, 40, 80 for the "
                             "asymptotic-gap claim; 0: no gap units (claim not applicable)")
    gap_draws: int = Field(20, ge=1, le=1000, description="draws of W per (d, target, rho) "
                           "point of the asymptotic-gap units")

    #: sgd_steps when not given: steps_per_d * d (the step size falls like d^-1/2 (1 + d/b)^-1).
    steps_per_d: ClassVar[int] = 75

    @classmethod
    def default_steps(cls, d: int, batch_size: int) -> int:
        """``sgd_steps`` when not given: ``steps_per_d`` d (subclasses state their own rule)."""
        return cls.steps_per_d * d

    @model_validator(mode="before")
    @classmethod
    def _default_sizes(cls, data: Any) -> Any:
        """Protocol sizes that scale with d unless set (the stated rules):

        * ``sgd_steps`` = :meth:`default_steps` (the default step size falls like
          d^-1/2 (1 + d/b)^-1);
        * ``rf_samples`` = max(default, RF_SAMPLES_PER_FEATURE N_max): least squares with N
          features has excess risk ~ R N / (n - N), so n / N_max >= 50 keeps it <= 2% of R;
        * ``nt_samples`` = max(default, NT_SAMPLES_PER_COLUMN p_max) with p_max = d(d+1)/2 + 1
          the largest NT basis (every quadratic form): excess <= 2 R p/(n - p) ~ 10% of R.
        """
        if not isinstance(data, dict):
            return data
        d = data.get("d", cls.model_fields["d"].default)
        try:
            d = int(d) if not isinstance(d, bool) and float(d) == int(float(d)) else None
        except (TypeError, ValueError):
            d = None
        if d is None:
            return data  # pydantic reports the bad d
        data = dict(data)
        if "sgd_steps" not in data:
            try:
                b = int(data.get("batch_size", cls.model_fields["batch_size"].default))
            except (TypeError, ValueError):
                return data  # pydantic reports the bad batch size
            data["sgd_steps"] = cls.default_steps(d, max(b, 1))
        if "rf_samples" not in data:
            try:  # the grid's largest width does not depend on its size, and n_widths is
                # not validated yet here (a huge one must not allocate): two points suffice
                n_max = max(width_grid(d, float(data.get("rho_min", cls.model_fields[
                    "rho_min"].default)), float(data.get("rho_max", cls.model_fields[
                        "rho_max"].default)), 2))
                data["rf_samples"] = max(cls.model_fields["rf_samples"].default,
                                         RF_SAMPLES_PER_FEATURE * n_max)
            except (TypeError, ValueError):
                pass
        data.setdefault("nt_samples", max(cls.model_fields["nt_samples"].default,
                                          NT_SAMPLES_PER_COLUMN * (d * (d + 1) // 2 + 1)))
        return data

    @model_validator(mode="after")
    def _check(self) -> WidthParams:
        n_max = max(width_grid(self.d, self.rho_min, self.rho_max, self.n_widths))
        if self.rf_samples <= 2 * n_max:
            raise ValueError(f"rf_samples must exceed 2 N_max = {2 * n_max} (least squares "
                             f"with N_max features); got {self.rf_samples}")
        p = C.nt_basis_size(self.d, n_max)
        if self.nt_protocol in ("lstsq", "cg") and self.nt_samples <= 2 * p:
            raise ValueError(f"nt_samples must exceed twice the NT basis size {p} at d = "
                             f"{self.d}; got {self.nt_samples} (or use nt_protocol=sgd)")
        return self


#: The asymptotic-gap units (does the finite-d risk approach the paper's asymptotic formula as
#: d grows?): input dimensions and width ratios rho = N/d.
GAP_DS = (20, 40, 80)
GAP_RHOS = (0.5, 2.0)
#: Stated allowance on the gap's log-log slope: relative O(1/d^2) corrections c/d to the
#: O(1/d) gap, |c| <= 4 (the exact NT(I) gap of Theorem 2 has |c| ~ 1-2, the RF gap's leading
#: term goes like 1/(d + 1)), tilt a power-law fit over d in [20, 80] by at most 0.027 |c|.
#: An RF method whose weights have covariance Gamma sees its corrections in Gamma's effective
#: dimension (:meth:`WidthExperiment.gap_bias`).
GAP_SLOPE_BIAS = 0.11


def dimension_ratio(Gamma: np.ndarray) -> float:
    """d / d_eff of a covariance, d_eff = (tr Gamma)^2 / tr Gamma^2 (the participation ratio:
    d for I, less where a few directions carry the weight).

    >>> round(dimension_ratio(np.eye(5)), 12), round(dimension_ratio(np.diag([1.0, 0, 0, 0])), 12)
    (1.0, 4.0)
    """
    ev = np.linalg.eigvalsh(Gamma)
    return float(len(ev) * (ev ** 2).sum() / ev.sum() ** 2)


class WidthExperiment(Experiment):
    """Shared grid, training and per-method claims of the two risk-vs-N figures."""
    #: Its claims fit along N (slopes, crossings): at least three distinct values.
    min_distinct: ClassVar[dict[str, int]] = {"N": 3}

    methods: ClassVar[tuple[str, ...]]
    #: Default NN step size is nn_lr_coef / (sqrt(d) (1 + d/b)) (see :func:`.common.nn_lr`).
    nn_lr_coef: ClassVar[float] = 0.18
    #: whether NN trains its second layer (mixture); where it is fixed (qf) a width above d
    #: trains as d units (:mod:`lazylab.train.rowspace`), which the cost model counts.
    nn_trains_second: ClassVar[bool] = False

    def problem(self, p: WidthParams) -> C.Problem:
        raise NotImplementedError

    def validate(self, p: WidthParams, scale: str | None = None) -> None:
        """Refuse a d at which the NT least-squares protocol would not fit the time contract,
        and at ``--scale quick`` a d above :attr:`quick_max_d` (InputError, exit 2; the runner
        passes the scale, :func:`lazylab.runner.params.validate`)."""
        if scale == "quick" and p.d > self.quick_max_d:
            raise InputError(
                f"--set d: quick scale supports d <= {self.quick_max_d} for {self.id}; got "
                f"d = {p.d}. {self.quick_range_reason} Use --scale paper (with --set d=...) "
                f"for larger d")
        basis = C.nt_basis_size(p.d, p.d)
        if p.nt_protocol == "lstsq" and basis > NT_LSTSQ_MAX_BASIS:
            d_max = max(d for d in range(4, p.d) if C.nt_basis_size(d, d) <= NT_LSTSQ_MAX_BASIS)
            raise InputError(
                f"--set d: NT least squares at d = {p.d} needs a {basis}-column basis and "
                f"{p.nt_samples} samples (minutes per unit); with nt_protocol=lstsq d must be "
                f"<= {d_max}. Use --set nt_protocol=cg (streamed conjugate gradients) or "
                f"nt_protocol=sgd (the paper's protocol), or --scale paper, for larger d")

    # ------------------------------------------------------------------ cost and quick range
    #: Largest d of the quick scale: beyond it the quick protocol either leaves the 2-minute
    #: contract or its NN does not converge within the d-scaled step rule (see
    #: :attr:`quick_range_reason`); ``validate`` refuses such a d at ``--scale quick`` (exit 2).
    quick_max_d: ClassVar[int] = 60
    quick_range_reason: ClassVar[str] = ""

    def unit_seconds(self, p: WidthParams, key: dict[str, Any]) -> float:
        """CPU seconds of one unit (one torch thread), a model with constants measured on the
        2-core development CPU: SGD 4.3e-4 s per step + 1.15e-8 s per (step, N d); NT by CG
        2e-9 n d min(N, d) (about 30 passes of three GEMMs), by lstsq 6.5e-11 n p^2 (normal
        equations of the p-column basis); RF 7.2e-11 n N^2 (normal equations)."""
        if "d" in key:  # asymptotic-gap unit: exact risks of gap_draws W's per rho
            return 2e-8 * p.gap_draws * len(GAP_RHOS) * int(key["d"]) ** 3
        N, d, method = int(key["N"]), p.d, key["method"]

        def sgd() -> float:
            rows = N if self.nn_trains_second or method != "NN" else min(N, d)
            return len(p.lr_factors) * p.sgd_steps * (4.3e-4 + 1.15e-8 * rows * d)

        if method.startswith("RF"):
            return 7.2e-11 * p.rf_samples * N * N
        if method == "NT(I)":
            if p.nt_protocol == "cg":
                return 2e-9 * p.nt_samples * d * min(N, d)
            if p.nt_protocol == "lstsq":
                return 6.5e-11 * p.nt_samples * C.nt_basis_size(d, N) ** 2
        return sgd()

    def cost(self, p: WidthParams, scale: str = "quick") -> tuple[float, float | None]:
        """``est_seconds[scale]`` scaled by the modelled work (:meth:`unit_seconds` summed over
        the units) at ``p`` over that at the scale's own parameters, and :meth:`peak_bytes`
        (the quick d range is :meth:`validate`'s)."""
        est = float(self.est_seconds.get(scale, 60.0)) / max(1, self.default_seeds.get(scale, 1))
        try:
            base = self.resolve(scale)
        except ValueError:
            return est, self.peak_bytes(p)

        def work(q: WidthParams) -> float:
            return sum(self.unit_seconds(q, k) for k in grid_of(self, q))

        ref = work(base)
        return (est * work(p) / ref if ref > 0 else est), self.peak_bytes(p)

    def rf_covariance(self, method: str, prob: C.Problem) -> np.ndarray | None:
        """Gamma of an RF method (None: I/d)."""
        return None

    def gap_bias(self, p: WidthParams, method: str) -> float:
        """The slope allowance of ``method``'s gap: :data:`GAP_SLOPE_BIAS` for weights of
        covariance I/d; for an RF method of covariance Gamma the finite-d corrections are
        those of a model in d_eff = (tr Gamma)^2 / tr Gamma^2 dimensions, relative c/d_eff =
        (c d/d_eff)/d, so the allowance scales by the largest d/d_eff over the gap's
        dimensions and targets (:func:`dimension_ratio`; RF(Gamma*) on the quadratic target:
        about 2, 2.15 at the largest)."""
        ratios = [dimension_ratio(G) for d in GAP_DS for j in range(p.gap_targets)
                  if (G := self.rf_covariance(method, self.problem_at(
                      d, p.target_seed + j))) is not None]
        return GAP_SLOPE_BIAS * max([1.0, *ratios])

    def rf_limit(self, W: torch.Tensor, prob: C.Problem) -> float:
        """Exact population RF risk for first layer W (N, d)."""
        raise NotImplementedError

    def nt_limit(self, W: torch.Tensor, prob: C.Problem) -> float:
        """Exact population NT risk for first layer W (N, d)."""
        raise NotImplementedError

    def peak_bytes(self, p: WidthParams) -> float:
        """The largest unit's arrays: RF least squares at the largest width (its N x N Gram
        and Cholesky factor and a chunk of features, float64, about three copies each), the NT
        fit (``lstsq``: the same for its basis; ``cg``: the samples it caches, at most 1 GiB
        on a CPU, twice while the chunks are joined, and float32 chunks), and the packed NN
        grid (the P x d float32 parameters held three times, P the hidden units of every width
        and step size, and P x batch activations)."""
        widths, d, c = self.widths(p), p.d, p.chunk
        n_max = max(widths)
        rf = 8.0 * 3 * (n_max * n_max + c * n_max) if any(
            m.startswith("RF") for m in self.methods) else 0.0
        if p.nt_protocol == "lstsq":
            b = C.nt_basis_size(d, n_max)
            nt = 8.0 * 3 * (b * b + c * b)
        elif p.nt_protocol == "cg":
            nt = 2 * min(4.0 * p.nt_samples * (d + 1), 2.0 ** 30) + 4.0 * 4 * c * d
        else:
            nt = 0.0
        P = sum(widths) * len(p.lr_factors)
        nn = 4.0 * (3 * P * d + 4 * P * p.batch_size)
        return max(rf, nt, nn)

    # ------------------------------------------------------------------ grid
    def widths(self, p: WidthParams) -> list[int]:
        return width_grid(p.d, p.rho_min, p.rho_max, p.n_widths)

    def units(self, p: WidthParams) -> list[dict[str, Any]]:
        rf = [m for m in self.methods if m.startswith("RF")]
        out: list[dict[str, Any]] = []
        for N in self.widths(p):
            out.append({"method": "NN", "N": N})
            out += [{"method": "NT(I)", "N": N, "rep": r}
                    for r in range(p.nt_reps if N < p.d else 1)]
            out += [{"method": m, "N": N, "rep": r} for m in rf for r in range(p.rf_reps)]
        out += [{"method": m, "d": d, "target": j} for m in self.asymptotic_methods
                for d in GAP_DS for j in range(p.gap_targets)]
        return out

    # ------------------------------------------------------------------ one unit
    def run_unit(self, p: WidthParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        method = key["method"]
        if method not in self.methods:
            raise ValueError(f"unknown method {method!r}; allowed: {', '.join(self.methods)}")
        if "d" in key:
            return self.gap_unit(p, method, int(key["d"]), int(key["target"]), seed)
        N = int(key["N"])
        prob = self.problem(p)
        gen = torch_generator(seed, device)
        extra: dict[str, float] = {}
        if method.startswith("RF"):
            cov = self.rf_covariance(method, prob)
            W = C.draw_weights(p.d, N, gen, covariance=cov).to(device)
            q, train = C.fit_rf(W, prob.sampler(torch.float64), p.rf_samples, p.chunk, gen)
            extra["risk_population_limit"] = self.rf_limit(W, prob)
        elif method == "NT(I)" and p.nt_protocol == "lstsq":
            W = C.draw_weights(p.d, N, gen).to(device)
            q, train = C.fit_nt_lstsq(W, prob.sampler(torch.float64), p.nt_samples, p.chunk, gen)
            extra["risk_population_limit"] = self.nt_limit(W, prob)
        elif method == "NT(I)" and p.nt_protocol == "cg":
            # Same least-squares fit as lstsq, by CG over streamed samples (lazylab.solve).
            W = C.draw_weights(p.d, N, gen).to(device)
            nt = nt_least_squares(W, prob.sampler(), p.nt_samples, seed=seed, chunk=p.chunk,
                                  device=device)
            q, train = C.QuadForm(nt.M.double().numpy(), float(nt.c)), nt.train_mse
            extra["risk_population_limit"] = self.nt_limit(W, prob)
        elif method == "NT(I)":
            def run(lr: float) -> tuple:
                cfg = C.SGDConfig(p.sgd_steps, p.batch_size, lr, p.tail_fraction)
                return C.train_nt_sgd(prob, N, cfg, gen, device)

            best = grid_search(run, C.nt_lr(p.d, N, p.batch_size, p.nt_lr), p.lr_factors,
                               score=lambda o: prob.risk(o[0]), generator=gen)
            (q, hist, W), lr = best.best, best.value
            train = hist.final_loss
            extra["risk_population_limit"] = self.nt_limit(W, prob)
            extra["lr"] = lr
        else:  # NN: a group of one member, its own seed seeding the sample stream
            return self.run_group(p, [(key, seed)], seed, device)[0]
        return self.unit_rows(p, prob, method, N, q, train, extra, gen, device)

    def unit_rows(self, p: WidthParams, prob: C.Problem, method: str, N: int, q: C.QuadForm,
                  train: float, extra: dict[str, float], gen: torch.Generator,
                  device: torch.device) -> list[dict[str, Any]]:
        """A unit's rows: exact risk, test risk on fresh samples from ``gen``, train loss and
        the method's extras."""
        test = C.test_risk(q, prob.sampler(), p.test_samples, p.chunk, gen, prob.r0, device)
        rows = [row(method, "N", N, "risk", prob.risk(q)),
                row(method, "N", N, "test_risk", test),
                row(method, "N", N, "train_loss", train / prob.r0)]
        rows += [row(method, "N", N, k, v) for k, v in extra.items()]
        return rows

    # ------------------------------------------------------------------ the NN grid, batched
    def group(self, p: WidthParams, key: dict[str, Any]) -> str | None:
        """Every NN width (with every step size of ``lr_factors``) is one packed network."""
        return "NN" if key["method"] == "NN" and "N" in key else None

    def run_group(self, p: WidthParams, members: Sequence[tuple[dict[str, Any], int]],
                  group_seed: int, device: torch.device,
                  prep: Any = None) -> list[list[dict[str, Any]]]:
        """Train every (width, step size) of the NN grid as one block-diagonal network on one
        sample stream (:func:`lazylab.train.packed.train_packed_quad`), each width initialized
        from its unit's seed, and keep each width's lowest-risk step size (ties: the first
        factor; diverged runs are skipped). Batched and alone, a width's risk agrees to
        float32 rounding amplified by the SGD steps (tests/test_packed.py: 1e-9 in float64).
        With the second layer fixed (qf) a width N > d trains as its d-unit equivalent
        (:mod:`lazylab.train.rowspace`, exact: tests/test_rowspace.py, 1e-10 in float64)."""
        from lazylab.train.packed import train_packed_quad

        if any(self.group(p, key) != "NN" for key, _ in members):
            return super().run_group(p, members, group_seed, device, prep=prep)
        prob = self.problem(p)
        mg = prob.kind == "mg"
        base = C.nn_lr(p.d, p.batch_size, p.nn_lr, self.nn_lr_coef)
        gens = [torch_generator(seed, device) for _, seed in members]
        nets = [C.nn_init(prob, int(key["N"]), p.init_scale, g, device)
                for (key, _), g in zip(members, gens, strict=True)]
        F = len(p.lr_factors)
        cfg = C.SGDConfig(p.sgd_steps, p.batch_size, base, p.tail_fraction)
        res = train_packed_quad(
            [net.W for net in nets for _ in range(F)],
            [base * f for _ in nets for f in p.lr_factors],
            a0=[net.scale * net.a.detach() for net in nets for _ in range(F)],
            train_second=mg, sampler=prob.sampler(), steps=p.sgd_steps,
            batch_size=p.batch_size, schedule=cfg.schedule(),
            generator=torch_generator(group_seed, device))
        out = []
        for i, ((key, _), gen) in enumerate(zip(members, gens, strict=True)):
            N = int(key["N"])
            best: tuple[float, int, C.QuadForm] | None = None
            for k in range(i * F, (i + 1) * F):
                if bool(res.diverged[k]):
                    continue
                q = C.quad_form(res.W[k], res.a[k], float(res.c[k]))
                r = prob.risk(q)
                if best is None or r < best[0]:
                    best = (r, k, q)
            if best is None:
                raise RuntimeError(f"NN at N = {N}: training diverged at every step size "
                                   f"({base:g} x {p.lr_factors}); lower nn_lr")
            _, k, q = best
            extra = {"lr": base * p.lr_factors[k - i * F]}
            out.append(self.unit_rows(p, prob, "NN", N, q, float(res.final_loss[k]), extra,
                                      gen, device))
        return out

    # ------------------------------------------------------------------ asymptotic gap
    def problem_at(self, d: int, target_seed: int) -> C.Problem:
        """The data model at another d (and target seed), for the asymptotic-gap units."""
        raise NotImplementedError

    def asymptotic(self, method: str, prob: C.Problem, N: int) -> float:
        """The paper's asymptotic formula for ``method`` at width N on ``prob``."""
        raise NotImplementedError

    def exact_risk(self, method: str, prob: C.Problem, N: int,
                   gen: torch.Generator) -> float:
        """The exact finite-d population risk of ``method`` at width N for one draw of W
        (RF, NT: the optimum over the class for W; NN: the finite-d value, no W)."""
        if method.startswith("RF"):
            W = C.draw_weights(prob.d, N, gen, covariance=self.rf_covariance(method, prob))
            return self.rf_limit(W, prob)
        if method == "NT(I)":
            return self.nt_limit(C.draw_weights(prob.d, N, gen), prob)
        raise NotImplementedError

    def gap_random(self, method: str, N: int, d: int) -> bool:
        """Whether :meth:`exact_risk` depends on the draw of W (RF always; NT(I) for N < d)."""
        return method.startswith("RF") or (method == "NT(I)" and N < d)

    def gap_unit(self, p: WidthParams, method: str, d: int, target: int,
                 seed: int) -> list[dict[str, Any]]:
        """One point of the asymptotic-gap claim: at input dimension d (one of
        :data:`GAP_DS`) and target ``target_seed + target``, the mean over ``gap_draws`` draws
        of W of the exact finite-d risk minus the paper's asymptotic formula, at each rho in
        :data:`GAP_RHOS`; rows (x_name "d") ``finite_minus_asymptotic`` (facet rho) and
        ``asymptotic_gap`` = |mean over rho| (points where both are exactly 0, NT(I) on the
        quadratic target at N >= d, are left out)."""
        prob = self.problem_at(d, p.target_seed + target)
        gen = torch_generator(seed)
        diffs = []
        rows = []
        for rho in GAP_RHOS:
            N = max(1, round(rho * d))
            asym = float(self.asymptotic(method, prob, N))
            draws = p.gap_draws if self.gap_random(method, N, d) else 1
            finite = float(np.mean([self.exact_risk(method, prob, N, gen)
                                    for _ in range(draws)]))
            if finite == 0.0 and asym == 0.0:
                continue
            diffs.append(finite - asym)
            rows.append(row(method, "d", d, "finite_minus_asymptotic", finite - asym,
                            target=target, rho=rho))
        if diffs:
            rows.append(row(method, "d", d, "asymptotic_gap", abs(float(np.mean(diffs))),
                            target=target))
        return rows

    # ------------------------------------------------------------------ theory
    def theory(self, p: WidthParams, prep: Any = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def theory_grids(self, p: WidthParams) -> tuple[list[float], list[int], list[int]]:
        """(fine real grid, integer grid, simulated N), all including the simulated N.  The
        integer grid (for formulas of N itself, each an eigendecomposition) is coarser."""
        sim = self.widths(p)
        fine = sorted(set(np.geomspace(min(sim), max(sim), 150).tolist()) | set(sim))
        geo = np.round(np.geomspace(min(sim), max(sim), 60))
        ints = sorted(set(np.unique(geo).astype(int).tolist()) | set(sim))
        return fine, ints, sim

    def mc_rows(self, p: WidthParams, method: str, N: int, fn, covariance=None,
                draws: int | None = None) -> list[dict[str, Any]]:
        """``risk_finite_d`` and ``risk_finite_d_sd``: mean and spread of fn(W) over draws of W."""
        k = p.theory_draws if draws is None else draws
        vals = [fn(C.draw_weights(p.d, N, torch_generator(derive_seed(self.id, "theory",
                                                                          method, N, j)),
                                  covariance=covariance))
                for j in range(k)]
        sd = float(np.std(vals, ddof=1)) if k > 1 else 0.0
        return [row(method, "N", N, "risk_finite_d", float(np.mean(vals)), kind="theory"),
                row(method, "N", N, "risk_finite_d_sd", sd, kind="theory")]

    # ------------------------------------------------------------------ claims helpers
    #: Methods whose theory line (the paper's formula) differs from the finite-d reference and
    #: therefore get a ``<method>-matches-asymptotic`` claim.
    asymptotic_methods: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def width_statements(cls) -> dict[str, str]:
        """The match claims' statements (finite-d for every method, asymptotic for some)."""
        return width_statements(cls.methods, cls.asymptotic_methods)

    def match_claims(self, p: WidthParams, results: Results, nt_exact_ref: bool) -> list:
        """``<method>-matches-finite-d`` claims against the finite-d reference
        (``risk_finite_d`` theory rows, or with ``theory_draws = 0`` the mean exact population
        limit of the simulated W's), then ``<method>-matches-asymptotic`` claims against the
        paper's formulas (theory rows ``risk``) for :attr:`asymptotic_methods`."""
        st = self.width_statements()
        mc = p.theory_draws > 0
        src = {"ref_metric": "risk_finite_d"} if mc else {
            "ref_metric": "risk_population_limit", "ref_kind": "simulation"}
        specs = {}
        for m in self.methods:
            if m.startswith("RF"):
                ref_txt = (f"the {p.theory_draws}-draw reference" if mc
                           else "the exact limits of the same W's")
                specs[m] = dict(
                    ref_draws=p.theory_draws or None, **src,
                    allowance=lambda N, ref: lstsq_allowance(ref, int(N), p.rf_samples),
                    rule=f"seed noise: 3 SE (over {p.rf_reps} W draws and {ref_txt}) + "
                         f"least squares: 2 ref N/(n-N-1) excess (n = {p.rf_samples}) + 0.005")
            elif m == "NT(I)":
                nt_src = {"ref_metric": "risk_finite_d"} if nt_exact_ref else src
                draws = None if nt_exact_ref else (p.theory_draws or None)
                if p.nt_protocol in ("lstsq", "cg"):
                    def allow(N: float, ref: float) -> float:
                        return lstsq_allowance(ref, C.nt_basis_size(p.d, int(N)), p.nt_samples)
                    rule = (f"seed noise: 3 SE (W fluctuation) + least squares: 2 ref p/(n-p-1) "
                            f"excess (p = NT basis size, n = {p.nt_samples}) + 0.005")
                else:
                    def allow(N: float, ref: float) -> float:
                        return sgd_allowance(ref)
                    rule = ("seed noise: 3 SE (W fluctuation) + SGD convergence allowance "
                            "0.01 + 0.05 ref + 0.005")
                specs[m] = dict(ref_draws=draws, allowance=allow, rule=rule, **nt_src)
            else:
                specs[m] = dict(ref_metric="risk_finite_d",
                                allowance=lambda N, ref: sgd_allowance(ref),
                                rule="seed noise: 3 SE + SGD convergence allowance 0.01 + "
                                     "0.05 ref + 0.005")
        out = [risk_match_claim(f"{m}-matches-finite-d", st[f"{m}-matches-finite-d"], results,
                                m, **specs[m]) for m in self.methods]
        out += [risk_match_claim(f"{m}-matches-asymptotic", st[f"{m}-matches-asymptotic"],
                                 results, m, asymptotic=True, **specs[m])
                for m in self.asymptotic_methods]
        out.append(gap_claim("asymptotic-gap-shrinks", st["asymptotic-gap-shrinks"], results,
                             self.asymptotic_methods,
                             bias={m: self.gap_bias(p, m) for m in self.asymptotic_methods}))
        return out


def width_plot(results: Results, methods: Sequence[str], d: int, *, title: str,
               ylim: tuple[float, float], bayes: float | None = None,
               no_finite_d: Sequence[str] = ()):
    """R/R0 vs N: theory lines (the paper's formulas), thin dashed finite-d references,
    simulation dots with SEM bars, the N = d line and (mixture) the dotted Bayes error.
    ``no_finite_d``: methods whose finite-d reference is their theory line (qf NN)."""
    fig, ax = style.new_figure()
    shown_fd = False
    for m in methods:
        style.series_line(ax, results, m, "risk")
        x, y, _, _ = results.series(m, "risk_finite_d", kind="theory")
        if len(x) and m not in no_finite_d:
            style.theory_line(ax, x, y, m, label="", linestyle="--", linewidth=0.9, alpha=0.6)
            shown_fd = True
        style.series_points(ax, results, m, "risk")
    if shown_fd:  # one grey legend entry for all the thin dashed references
        ax.plot([], [], linestyle="--", linewidth=0.9, color="0.5",
                label=f"dashed: {style.FINITE_D}")
    if bayes is not None:
        style.bayes_line(ax, bayes)
    style.width_axis(ax, d)
    style.finish(ax, ylim=ylim, title=title, theory=style.ASYMPTOTIC)
    return fig
