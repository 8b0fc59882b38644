"""Precision as policy: an experiment's TF32 declaration, --precision, and what is recorded."""

from __future__ import annotations

import pytest
import torch

from lazylab.errors import InputError
from lazylab.experiments import all_experiments
from lazylab.runner import ExecutionPolicy
from lazylab.runner.params import with_precision

CUDA, CPU = torch.device("cuda"), torch.device("cpu")


class Declares:
    precision = {"paper": "tf32"}


class Silent:
    precision: dict[str, str] = {}


@pytest.mark.parametrize(("exp", "scale", "device", "asked", "tf32"), [
    (Declares, "paper", CUDA, "auto", True),     # the declaration applies on a GPU
    (Declares, "quick", CUDA, "auto", False),    # only at the scale it names
    (Declares, "paper", CUDA, "fp32", False),    # --precision fp32 restores float32
    (Declares, "paper", CPU, "auto", False),     # no TF32 on a CPU: identity unchanged
    (Declares, "paper", CPU, "tf32", False),
    (Silent, "paper", CUDA, "auto", False),
    (Silent, "paper", CUDA, "tf32", True),       # asked for explicitly
])
def test_precision_resolution(exp, scale, device, asked, tf32):
    pol = with_precision(ExecutionPolicy(threads=1), exp, scale, device, asked)
    assert pol.allow_tf32 is tf32
    assert pol.threads == 1


def test_precision_refuses_other_values():
    with pytest.raises(InputError, match="--precision must be one of auto, fp32, tf32"):
        with_precision(ExecutionPolicy(threads=1), Silent, "paper", CUDA, "bf16")


def test_declarations_name_known_scales_and_values():
    for exp in all_experiments():
        assert set(exp.precision) <= set(exp.scales), exp.id
        assert set(exp.precision.values()) <= {"fp32", "tf32"}, exp.id
