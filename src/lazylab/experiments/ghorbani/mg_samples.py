"""Fig. 2 (right) of Ghorbani et al. (2019): NT(I) and NN risk vs n/d on the Gaussian mixture.

"Evolution of the risk for NT and NN with the number of samples."  One-pass SGD, batch 100
(see :mod:`.samples`); the NN is f = sum_i a_i (w_i.x)^2 + c with a trained from 0.  The paper
does not state N; its y-range (>= 0.5) suggests rho <~ 0.5 and we take rho = 0.4, where
Theorems 5-6 give NN ~ 0.57 and NT ~ 0.67 for the paper's Delta.

Limits: ``lim NN`` = Theorem 6, 2/(2 + sum_{i<=N} lambda_i(Delta)^2) (``risk``), and the exact
finite-d value with the O(1/d) term 2 Tr(M Delta M Delta) kept (best scaled rank-N truncation,
``risk_finite_d``); ``lim NT(I)`` = Theorem 5's kappa form (``risk``) and the Monte Carlo mean
over ``theory_draws`` draws of W of the exact NT optimum (``risk_finite_d``).  The NT claim
compares each run with the exact limit of its own W.
"""

from __future__ import annotations

import numpy as np
import torch
from pydantic import Field

from lazylab.experiments import register
from lazylab.experiments.ghorbani import common as C
from lazylab.experiments.ghorbani.samples import SamplesExperiment, SamplesParams
from lazylab.seeding import derive_seed, torch_generator
from lazylab.theory.ghorbani import nn_mg, nt_mg
from lazylab.theory.ghorbani_population import nn_mg_population, nt_mg_population


class MGSamplesParams(SamplesParams):
    d: int = Field(30, ge=4, le=4000, description="input dimension (paper: 450)")
    rho: float = Field(0.4, gt=0, le=4, description="width N = round(rho d); the paper does "
                       "not state N, we take rho = 0.4")
    sgd_steps: int = Field(10_000, ge=10, le=10**7, description="one-pass SGD steps")
    nn_lr: float | None = Field(None, gt=0, le=10, description="NN step size; default "
                                "0.36/(sqrt(d)(1 + d/batch_size))")
    init_scale: float = Field(0.5, gt=0, le=10, description="NN init w_i ~ N(0, s^2 "
                              "I/max(N,d)); a starts at 0, so f starts at 0 for any s")


@register
class MGSamples(SamplesExperiment):
    id = "ghorbani-mg-samples"
    paper = "ghorbani"
    figure = "Fig. 2 (right)"
    summary = ("NT(I) and NN risk vs number of one-pass SGD samples n/d on the mixture of two "
               "Gaussians, with the large-n limits (Thms 5-6)")
    Params = MGSamplesParams
    scales = {"quick": {}, "paper": {"d": 450, "sgd_steps": 140_000, "tail_fraction": 0.1,
                                     "theory_draws": 0, "lr_factors": [0.5, 1.0, 2.0, 4.0]}}
    default_seeds = {"quick": 2, "paper": 1}
    smoke = {"d": 12, "sgd_steps": 6000, "eval_points": 8, "theory_draws": 5}
    est_seconds = {"quick": 12.0}  # quick: the packed lr search, 2 seeds
    nn_lr_coef = 0.36
    ylim = (0.4, 1.0)
    target_name = "mixture of Gaussians"


    def problem(self, p: MGSamplesParams) -> C.Problem:
        return C.mg_problem(p.d, p.target_seed)

    def nt_limit(self, W: torch.Tensor, prob: C.Problem) -> float:
        return nt_mg_population(W.T, prob.model.Delta)

    def limits(self, p: MGSamplesParams) -> dict[str, dict[str, float]]:
        D, N = self.problem(p).model.Delta, self.width(p)
        nt = {"risk": nt_mg(N / p.d, D)}
        if p.theory_draws:
            nt["risk_finite_d"] = float(np.mean([nt_mg_population(C.draw_weights(
                p.d, N, torch_generator(derive_seed(self.id, "theory", N, k))).T, D)
                for k in range(p.theory_draws)]))
        return {"lim NN": {"risk": nn_mg(N, D), "risk_finite_d": nn_mg_population(N, D)},
                "lim NT(I)": nt}
