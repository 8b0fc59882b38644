"""Fig. 1 (right) of Ghorbani et al. (2019): NT(I) and NN risk vs n/d on the quadratic target.

"Evolution of the risk for NT and NN with the number of samples. Dashed lines are our analytic
prediction for the large n limit."  One-pass SGD, batch 100 (see :mod:`.samples`).  The paper
does not state N; we take rho = N/d = 1/2, where the gap is large:
Theorem 3 gives NN ~ 0.03 and Theorem 2 NT ~ 0.37 for the Exp(1) spectrum.

Limits: ``lim NN`` = Theorem 3's infimum 1 - sum_{i<=N} lambda_i(B)^2/||B||_F^2 of the realised B
(exact at finite d, so ``risk`` = ``risk_finite_d``); ``lim NT(I)`` = Theorem 2,
(1-rho)^2 (1 - tau_B) + (1-rho) tau_B (``risk``), and its exact finite-d expectation over W
(``risk_finite_d``, Weingarten).  The NT claim compares each run with the exact limit of its own
W, 2||P_perp B P_perp||_F^2 / R0.
"""

from __future__ import annotations

import torch
from pydantic import Field

from lazylab.experiments import register
from lazylab.experiments.ghorbani import common as C
from lazylab.experiments.ghorbani.samples import SamplesExperiment, SamplesParams
from lazylab.theory.ghorbani import nn_qf, nt_qf, nt_qf_finite, tau
from lazylab.theory.ghorbani_population import nt_qf_population


class QFSamplesParams(SamplesParams):
    rho: float = Field(0.5, gt=0, le=4, description="width N = round(rho d); the paper does "
                       "not state N, we take rho = 1/2")


@register
class QFSamples(SamplesExperiment):
    id = "ghorbani-qf-samples"
    paper = "ghorbani"
    figure = "Fig. 1 (right)"
    summary = ("NT(I) and NN risk vs number of one-pass SGD samples n/d on the quadratic "
               "target, with the large-n limits (Thms 2-3)")
    Params = QFSamplesParams
    scales = {"quick": {}, "paper": {"d": 450, "sgd_steps": 200_000, "tail_fraction": 0.075,
                                     "lr_factors": [0.5, 1.0, 2.0, 4.0]}}
    default_seeds = {"quick": 2, "paper": 1}
    smoke = {"d": 12, "sgd_steps": 3000, "eval_points": 8}
    est_seconds = {"quick": 14.0}  # quick: the packed lr search, 2 seeds
    ylim = (0.0, 1.0)
    target_name = "quadratic target"


    def problem(self, p: QFSamplesParams) -> C.Problem:
        return C.qf_problem(p.d, p.target_seed)

    def nt_limit(self, W: torch.Tensor, prob: C.Problem) -> float:
        return nt_qf_population(W.T, prob.model.B)

    def limits(self, p: QFSamplesParams) -> dict[str, dict[str, float]]:
        B, N = self.problem(p).model.B, self.width(p)
        nn = nn_qf(N, B)
        return {"lim NN": {"risk": nn, "risk_finite_d": nn},
                "lim NT(I)": {"risk": nt_qf(N / p.d, tau(B)),
                              "risk_finite_d": nt_qf_finite(p.d, N, B)}}
