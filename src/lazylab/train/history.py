"""What a training run records: losses and evaluations at logged steps."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class History:
    """Logged trajectory of a run.

    Attributes
    ----------
    steps : logged steps k (loss of the parameters after k updates; 0 is the initialization).
    train_loss : data loss at those steps (without the regularizer): the full training set for
        "gd" and "sgd", the fresh batch of that step for "one_pass" (an unbiased estimate of
        the population risk).
    evals : ``eval_fn(model)`` at those steps ({} when no eval_fn), aligned with ``steps``.
    lr : base learning rate.
    diverged : whether the run stopped on a non-finite loss or parameter.
    regularizer : regularizer value at those steps (empty when there is none).
    message : the divergence message, when diverged.
    stopped : whether a ``stop`` callback ended the run before its last step.
    """

    steps: list[int]
    train_loss: list[float]
    evals: list[dict[str, float]]
    lr: float
    diverged: bool = False
    regularizer: list[float] = field(default_factory=list)
    message: str = ""
    stopped: bool = False

    @property
    def final_loss(self) -> float:
        """The last logged training loss (nan when nothing was logged)."""
        return self.train_loss[-1] if self.train_loss else math.nan

    def as_rows(self) -> list[dict[str, float]]:
        """One dict per logged step: step, train_loss, regularizer (if any) and the evals."""
        rows = []
        for i, (s, loss) in enumerate(zip(self.steps, self.train_loss, strict=True)):
            row: dict[str, float] = {"step": s, "train_loss": loss}
            if self.regularizer:
                row["regularizer"] = self.regularizer[i]
            if i < len(self.evals):
                row.update(self.evals[i])
            rows.append(row)
        return rows


class TrainingDiverged(RuntimeError):
    """A non-finite loss or parameter stopped training.

    Attributes: ``step`` (where it was detected), ``lr`` (base learning rate), ``loss`` (the
    non-finite value seen) and ``history`` (the trajectory up to that step).
    """

    def __init__(self, message: str, *, step: int, lr: float, loss: float, history: History):
        super().__init__(message)
        self.step, self.lr, self.loss, self.history = step, lr, loss, history


def log_spaced_steps(steps: int, points: int = 30) -> list[int]:
    """Steps 0, round(geomspace(1, steps, points)) and steps, sorted and without repeats.

    >>> log_spaced_steps(1000, 4)
    [0, 1, 10, 100, 1000]
    """
    if isinstance(steps, bool) or int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0; got {steps!r}")
    if isinstance(points, bool) or int(points) != points or points < 1:
        raise ValueError(f"log_points must be an integer >= 1; got {points!r}")
    steps = int(steps)
    if steps == 0:
        return [0]
    grid = np.rint(np.geomspace(1, steps, int(points))).astype(np.int64).tolist()
    return sorted({0, steps, *grid})
