"""Checks shared by the kernels of an arbitrary ``torch.nn.Module`` (the empirical NTK, the
implicit NTK operator): the module must be a deterministic function of its inputs, and give
one tensor.

An empirical NTK K(x, z) = <df(x)/dtheta, df(z)/dtheta> is defined for a fixed function f.
In training mode dropout draws a new mask on every forward pass (so every evaluation of K is a
different random matrix: differences up to 9.1 between two calls were measured), and batch
normalization normalizes by the statistics of the batch at hand (so K(x, z) depends on which
other rows share the chunk) and updates its running statistics. In eval mode both are fixed
functions, and the kernel is well defined.

Example
-------
>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.Dropout(0.5))
>>> check_deterministic(net.eval(), "NTKOperator")
>>> train_mode_randomness(net.train())
['1 -> Dropout']
>>> check_deterministic(net, "NTKOperator")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: NTKOperator needs a deterministic network, ... call net.eval() first ...
"""

from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import nn

#: Modules whose output in training mode is random (dropout, RReLU's random slope) or
#: depends on the other rows of the batch (batch normalization).
_RANDOM_IN_TRAINING: tuple[type[nn.Module], ...] = (
    nn.modules.dropout._DropoutNd, nn.RReLU, nn.modules.batchnorm._BatchNorm)


def train_mode_randomness(net: nn.Module) -> list[str]:
    """``"name -> Class"`` of every submodule of ``net`` (itself included) that is in training
    mode and random there (dropout, RReLU) or batch-dependent (batch norm), in module order."""
    return [f"{name or '(the net itself)'} -> {type(m).__name__}"
            for name, m in net.named_modules()
            if m.training and isinstance(m, _RANDOM_IN_TRAINING)]


def check_deterministic(net: nn.Module, who: str, name: str = "net") -> None:
    """Refuse a network whose forward pass is random or batch-dependent (module docstring),
    including batch normalization built with ``track_running_stats=False``, which normalizes
    by the batch's statistics in eval mode too."""
    found = train_mode_randomness(net)
    if found:
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise ValueError(f"{who} needs a deterministic network, but {name} is in training mode "
                         f"with {', '.join(found[:3])}{more}; call {name}.eval() first "
                         "(dropout and batch normalization are then fixed functions)")
    batch = [f"{n or '(the net itself)'} -> {type(m).__name__}" for n, m in net.named_modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm) and not m.track_running_stats]
    if batch:
        raise ValueError(f"{who} needs a function of each example alone, but {name} has "
                         f"{', '.join(batch[:3])} with track_running_stats=False, which "
                         "normalizes by the batch's statistics even in eval mode")


def check_tensor_output(out: Any, who: str, name: str = "net") -> torch.Tensor:
    """``out`` when it is a floating-point tensor, else one ValueError naming ``name``: a
    model returning a tuple or dict (logits plus extras) must be wrapped to return one."""
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{who} needs {name} to return one tensor; it returned a "
                         f"{type(out).__name__} (wrap {name} in a module whose forward "
                         "returns the one output whose kernel you want)")
    if not out.is_floating_point():
        raise ValueError(f"{who} needs {name} to return a floating-point tensor; it returned "
                         f"dtype {out.dtype}")
    return out


def check_chunk(chunk: Any, name: str = "chunk") -> int | None:
    """``chunk`` as a positive int, or None; a ValueError naming ``name`` otherwise (0 and
    negative values are refused, not clamped)."""
    if chunk is None:
        return None
    if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1:
        raise ValueError(f"{name} must be a positive integer (rows per pass) or None (all "
                         f"rows); got {chunk!r}")
    return int(chunk)
