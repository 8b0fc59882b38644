"""Training losses, named as the papers write them.

- ``"mse"``: mean_i (y_i - f_i)^2, no 1/2 (Ghorbani et al. 2019: the risk E(f* - f)^2 and the
  companion code's loss).
- ``"half_mse"``: (1/2) mean_i (y_i - f_i)^2 (Bai & Lee 2020's l(y, z) = (y - z)^2 / 2; Nichani
  et al. 2022 use the mean of (y - f)^2, i.e. ``"mse"``).
- ``"half_sse"``: (1/2) sum_i (y_i - f_i)^2 (Arora et al. 2019, Phi(W) = 1/2 sum_i (y_i - u_i)^2,
  on which full-batch GD runs; their step sizes refer to this sum).
- ``"logistic"``: mean_i log(1 + exp(-y_i f_i)) for labels y_i in {-1, +1} (computed as
  softplus(-y f), stable for large margins).

For vector outputs the means run over all entries. A callable (pred, y) -> scalar may be used
instead of a name.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """mean (y - f)^2."""
    return (y - pred).square().mean()


def half_mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(1/2) mean (y - f)^2."""
    return 0.5 * (y - pred).square().mean()


def half_sse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(1/2) sum (y - f)^2."""
    return 0.5 * (y - pred).square().sum()


def logistic(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """mean log(1 + exp(-y f)), y in {-1, +1}."""
    return F.softplus(-y * pred).mean()


LOSSES: dict[str, LossFn] = {"mse": mse, "half_mse": half_mse, "half_sse": half_sse,
                             "logistic": logistic}


def _shape_checked(fn: LossFn, name: str) -> LossFn:
    def checked(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # Broadcasting (n,) against (n, 1) silently builds an n x n loss; refuse it.
        if pred.shape != y.shape:
            raise ValueError(f"loss {name!r}: model output shape {tuple(pred.shape)} does not "
                             f"match target shape {tuple(y.shape)}")
        return fn(pred, y)

    checked.__name__ = name
    checked.__doc__ = fn.__doc__
    return checked


def get_loss(loss: str | LossFn, *, check_shapes: bool = True) -> LossFn:
    """Resolve a loss name (mse, half_mse, half_sse, logistic) or pass a callable through.

    Named losses check that prediction and target shapes agree unless ``check_shapes=False``.
    """
    if callable(loss):
        return loss
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)} or a callable "
                         f"(pred, y) -> scalar; got {loss!r}")
    return _shape_checked(LOSSES[loss], loss) if check_shapes else LOSSES[loss]
