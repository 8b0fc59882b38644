"""Penalties R(model) added to the training loss: L(theta) + R(theta).

- :func:`l2_penalty`: (lam / 2) sum ||theta||^2 over the chosen parameters (its gradient is the
  weight decay lam * theta).
- :func:`norm_2_4_penalty`: lam ||W||_{2,4}^8 with ||W||_{2,4} = (sum_r ||w_r||_2^4)^{1/4}, the
  rows w_r of a weight matrix. Bai & Lee (2020), Eq. (9): L_lambda(W) = L(W) + lambda ||W||_{2,4}^8,
  which keeps SOSPs of the randomized quadratic model at bounded norm. The power is a parameter.
- :func:`distance_penalty`: (lam / 2) ||theta - theta_ref||^2, e.g. to a stored initialization.
- :func:`sum_penalties`: R_1 + ... + R_k.

Problem-specific penalties (e.g. Nichani et al. 2022's R_1..R_4, which need projectors built
from the data) are callables model -> scalar built by the caller; ``fit`` accepts any.

Each returned penalty is a picklable callable model -> scalar tensor.

Example
-------
>>> import torch
>>> from torch import nn
>>> lin = nn.Linear(3, 2, bias=False)
>>> with torch.no_grad():
...     _ = lin.weight.copy_(torch.ones(2, 3))
>>> float(norm_2_4_penalty(1.0, attr="weight")(lin).detach())  # ||w_r||^4 = 9: (9 + 9)^2
324.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

Regularizer = Callable[[nn.Module], torch.Tensor]


def _check_lam(lam: float) -> float:
    lam = float(lam)
    if not lam >= 0 or lam == float("inf"):
        raise ValueError(f"lam must be a finite number >= 0; got {lam!r}")
    return lam


def _get(model: nn.Module, attr: str) -> torch.Tensor:
    try:
        t = model.get_parameter(attr)
    except AttributeError:
        t = getattr(model, attr, None)
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"model has no tensor attribute {attr!r}")
    return t


@dataclass(frozen=True)
class L2Penalty:
    """(lam / 2) sum_attr ||model.attr||^2 (all trainable parameters when attrs is empty)."""

    lam: float
    attrs: tuple[str, ...] = ()

    def __call__(self, model: nn.Module) -> torch.Tensor:
        ts = ([_get(model, a) for a in self.attrs] if self.attrs
              else [p for p in model.parameters() if p.requires_grad])
        return 0.5 * self.lam * sum(t.square().sum() for t in ts)


@dataclass(frozen=True)
class Norm24Penalty:
    """lam * ||W||_{2,4}^power, ||W||_{2,4} = (sum_r ||w_r||^4)^{1/4}, rows w_r of model.attr."""

    lam: float
    attr: str = "W"
    power: float = 8.0

    def __call__(self, model: nn.Module) -> torch.Tensor:
        W = _get(model, self.attr)
        s4 = W.square().sum(dim=-1).square().sum()
        return self.lam * s4 ** (self.power / 4.0)


@dataclass(frozen=True)
class DistancePenalty:
    """(lam / 2) ||model.attr - reference||^2."""

    lam: float
    attr: str
    reference: torch.Tensor

    def __call__(self, model: nn.Module) -> torch.Tensor:
        return 0.5 * self.lam * (_get(model, self.attr) - self.reference).square().sum()


@dataclass(frozen=True)
class SumPenalties:
    """R_1(model) + ... + R_k(model)."""

    terms: tuple[Regularizer, ...]

    def __call__(self, model: nn.Module) -> torch.Tensor:
        return sum(r(model) for r in self.terms)


def l2_penalty(lam: float, attrs: Sequence[str] = ()) -> Regularizer:
    """(lam / 2) sum ||theta||^2 over the named parameters (default all trainable ones)."""
    return L2Penalty(_check_lam(lam), tuple(attrs))


def norm_2_4_penalty(lam: float, *, attr: str = "W", power: float = 8.0) -> Regularizer:
    """lam ||W||_{2,4}^power (Bai & Lee 2020, Eq. (9) with power 8) on the rows of model.attr."""
    power = float(power)
    if not power > 0:
        raise ValueError(f"power must be > 0; got {power!r}")
    return Norm24Penalty(_check_lam(lam), attr, power)


def distance_penalty(lam: float, attr: str, reference: torch.Tensor) -> Regularizer:
    """(lam / 2) ||model.attr - reference||^2 (reference is detached and copied)."""
    return DistancePenalty(_check_lam(lam), attr, reference.detach().clone())


def sum_penalties(*terms: Regularizer) -> Regularizer:
    """The sum of several penalties."""
    if not terms or not all(callable(t) for t in terms):
        raise ValueError("sum_penalties needs one or more callables model -> scalar")
    return SumPenalties(tuple(terms))
