"""Training: losses, regularizers, learning-rate schedules and the gradient loop
(GD, minibatch SGD, one-pass SGD, momentum, weight decay, noisy GD)."""

from lazylab.train.batches import Batch, Batches, Sampler, steps_per_epoch
from lazylab.train.capture import Probe, capture_works, fell_back, register_probe
from lazylab.train.ensemble import GridRun, best_index, decade_grid, train_grid
from lazylab.train.fused_update import fused_works, momentum_update_, triton_launcher
from lazylab.train.history import History, TrainingDiverged, log_spaced_steps
from lazylab.train.loop import fit
from lazylab.train.losses import LOSSES, LossFn, get_loss, half_mse, half_sse, logistic, mse
from lazylab.train.meter import (
    Segment,
    StepMeter,
    capped,
    evaluation,
    extrapolate,
    loop_steps,
    per_evaluation,
    per_step,
    sampled_blocks,
)
from lazylab.train.mlp_gd import gd_relu_mlp, gd_relu_mlps
from lazylab.train.packed import (
    PackedQuadResult,
    aligned_rows,
    chunk_bounds,
    train_packed_nt,
    train_packed_quad,
)
from lazylab.train.regularizers import (
    Regularizer,
    distance_penalty,
    l2_penalty,
    norm_2_4_penalty,
    sum_penalties,
)
from lazylab.train.rowspace import RowSpace, reduce_rows
from lazylab.train.schedules import (
    Schedule,
    constant,
    cosine,
    ghorbani_paper,
    piecewise,
    step_decay,
    warmup,
)
from lazylab.train.step import ParamGroup, SGDStep

__all__ = [
    # the gradient loop (train.loop, train.history, train.batches)
    "fit", "steps_per_epoch", "History", "TrainingDiverged", "log_spaced_steps", "Batch",
    "Sampler", "Batches",
    # one optimizer step over parameter groups (train.step)
    "ParamGroup", "SGDStep",
    # losses (train.losses)
    "LOSSES", "LossFn", "get_loss", "mse", "half_mse", "half_sse", "logistic",
    # regularizers (train.regularizers)
    "Regularizer", "l2_penalty", "norm_2_4_penalty", "distance_penalty", "sum_penalties",
    # learning-rate schedules (train.schedules)
    "Schedule", "constant", "piecewise", "ghorbani_paper", "step_decay", "cosine", "warmup",
    # grids of runs (train.ensemble, train.mlp_gd)
    "GridRun", "decade_grid", "train_grid", "best_index", "gd_relu_mlp", "gd_relu_mlps",
    # many configurations as one network (train.packed, train.rowspace)
    "PackedQuadResult", "aligned_rows", "chunk_bounds", "train_packed_nt", "train_packed_quad",
    "RowSpace", "reduce_rows",
    # step timing (train.meter)
    "Segment", "StepMeter", "capped", "evaluation", "extrapolate", "loop_steps", "per_evaluation",
    "per_step", "sampled_blocks",
    # CUDA-graph capture and the fused update (train.capture, train.fused_update)
    "Probe", "capture_works", "fell_back", "register_probe", "fused_works", "momentum_update_",
    "triton_launcher",
]
