"""Nichani, Bai & Lee (NeurIPS 2022) specific training: the regularizers R1-R4 with analytic
gradients (:mod:`~lazylab.train.nichani.regularizers`) and batched (perturbed) GD on the Taylor
model f_L + f_Q + lambda3 R3 (:mod:`~lazylab.train.nichani.gd`)."""

from lazylab.train.nichani.gd import (
    TaylorRun,
    fused_for,
    fused_path,
    taylor_step_grad,
    train_taylor,
)
from lazylab.train.nichani.regularizers import (
    R1Harmonic,
    R1Stochastic,
    R3Empirical,
    SigmaSplit,
    r4,
    r4_grad,
)

__all__ = [
    "R1Harmonic",
    "R1Stochastic",
    "R3Empirical",
    "SigmaSplit",
    "TaylorRun",
    "fused_for",
    "fused_path",
    "r4",
    "r4_grad",
    "taylor_step_grad",
    "train_taylor",
]
