"""Training: losses, regularizers, learning-rate schedules and the gradient loop
(GD, minibatch SGD, one-pass SGD, momentum, weight decay, noisy GD)."""

from lazylab.train.history import History, TrainingDiverged, log_spaced_steps
from lazylab.train.loop import fit, steps_per_epoch
from lazylab.train.losses import LOSSES, get_loss
from lazylab.train.regularizers import (
    distance_penalty,
    l2_penalty,
    norm_2_4_penalty,
    sum_penalties,
)
from lazylab.train.schedules import (
    constant,
    cosine,
    ghorbani_paper,
    piecewise,
    step_decay,
    warmup,
)

__all__ = [
    "fit", "History", "TrainingDiverged", "log_spaced_steps", "steps_per_epoch",
    "LOSSES", "get_loss",
    "l2_penalty", "norm_2_4_penalty", "distance_penalty", "sum_penalties",
    "constant", "piecewise", "ghorbani_paper", "step_decay", "cosine", "warmup",
]
