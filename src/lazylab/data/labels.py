"""Label transformations: signs, random labels, corruption and flips.

Example
-------
>>> import torch
>>> from lazylab.data.labels import corrupt_labels
>>> y = torch.ones(1000)
>>> y_new, mask = corrupt_labels(y, 0.4, torch.Generator().manual_seed(0), return_mask=True)
>>> int(mask.sum())                       # exactly round(0.4 * n) points are redrawn
400
>>> bool((y_new[~mask] == 1).all())       # the others keep their label
True
"""

from __future__ import annotations

import math

import torch

from lazylab.data.samplers import rademacher


def _check_prob(value: float, name: str) -> None:
    if not (isinstance(value, int | float) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a number in [0, 1]; got {value!r}")


def _check_labels(y: torch.Tensor) -> None:
    if not isinstance(y, torch.Tensor) or y.ndim != 1:
        raise ValueError("y must be a 1-d torch.Tensor of labels")


def sign_labels(y: torch.Tensor) -> torch.Tensor:
    """sign(y) in {-1, +1}, with sign(0) := +1 so every label is a valid class."""
    return torch.where(y >= 0, 1.0, -1.0).to(y.dtype)


def random_labels(n: int, *, generator: torch.Generator, device: torch.device | str | None = None,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """n i.i.d. labels uniform on {-1, +1} (Arora et al. 2019, Fig. 1 "random labels")."""
    if int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer; got {n!r}")
    return rademacher(int(n), generator=generator, device=device, dtype=dtype)


def corrupt_labels(y: torch.Tensor, fraction: float, generator: torch.Generator, *,
                   return_mask: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Redraw the labels of a random ``fraction`` of the points uniformly from {-1, +1}.

    Arora et al. 2019 (App. A, Fig. 2): "we choose a specific portion of the data uniformly at
    random, and change their labels y_i to unif({-1, 1})". We read "a specific portion" as an
    exact-size subset: k = round(fraction * n) distinct indices chosen uniformly (a random
    permutation), each given a fresh uniform sign. About half of the chosen points therefore keep
    their label: the expected fraction of changed labels of +-1 data is fraction / 2, with
    standard deviation sqrt(k/4)/n. Apply it to train and test labels separately, as the paper
    corrupts both.

    Parameters
    ----------
    y : (n,) labels in {-1, +1} (other values are allowed and are simply replaced).
    fraction : portion p in [0, 1] of points whose label is redrawn.
    generator : the torch Generator for the subset and the new labels (on y's device).
    return_mask : also return the boolean mask of chosen points.
    """
    _check_labels(y)
    _check_prob(fraction, "fraction")
    n = y.shape[0]
    k = int(math.floor(fraction * n + 0.5))
    chosen = torch.randperm(n, generator=generator, device=y.device)[:k]
    new = rademacher(k, generator=generator, device=y.device, dtype=y.dtype)
    out = y.clone()
    out[chosen] = new
    if not return_mask:
        return out
    mask = torch.zeros(n, dtype=torch.bool, device=y.device)
    mask[chosen] = True
    return out, mask


def flip_labels(y: torch.Tensor, prob: float, generator: torch.Generator) -> torch.Tensor:
    """Flip each label's sign independently with probability ``prob`` (label noise).

    The noisy 2-XOR of Bai & Lee 2020 (Sec. 5.2) is y = x_1 x_2 flipped with probability eta.
    Unlike :func:`corrupt_labels`, every selected label changes.
    """
    _check_labels(y)
    _check_prob(prob, "prob")
    u = torch.rand(y.shape, generator=generator, device=y.device, dtype=torch.float64)
    return torch.where(u < prob, -y, y)
