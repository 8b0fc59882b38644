"""Seeds derived from names, so results never depend on scheduling.

A work unit's seed is a 63-bit integer hashed from (experiment id, canonical unit key, seed
index). Every random draw in a unit comes from a ``torch.Generator`` or ``numpy`` Generator
built from it.

>>> derive_seed("ghorbani-qf-width", {"method": "NN", "N": 45}, 0) == derive_seed(
...     "ghorbani-qf-width", {"N": 45, "method": "NN"}, 0)
True
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported lazily: the CLI checks arguments before importing torch
    import numpy as np
    import torch


def canonical_key(key: dict[str, Any]) -> str:
    """A unit key as canonical JSON (sorted keys, no spaces)."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def derive_seed(*parts: Any) -> int:
    """A 63-bit seed from any JSON-able parts (dicts are canonicalised)."""
    text = "|".join(canonical_key(p) if isinstance(p, dict) else json.dumps(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


def torch_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch Generator on ``device`` seeded with ``seed``."""
    import torch

    g = torch.Generator(device=torch.device(device))
    g.manual_seed(int(seed))
    return g


def numpy_rng(seed: int) -> np.random.Generator:
    """A numpy Generator (PCG64) seeded with ``seed``."""
    import numpy as np

    return np.random.default_rng(int(seed))
