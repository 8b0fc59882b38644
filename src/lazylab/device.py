"""Choose the compute device once and pass it down."""

from __future__ import annotations

import torch

__all__ = ["resolve_device"]


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("device 'cuda' was requested but no CUDA GPU is available; "
                             "use --device cpu or auto")
        return torch.device("cuda")
    raise ValueError(f"device must be one of auto, cpu, cuda; got {name!r}")
