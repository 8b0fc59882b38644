"""Allen-Zhu & Li (2019) tasks T1-T3 on the Boolean cube, with exact reference levels.

* T1 (Sec. 8.1, Figs. 2-3): x uniform on {-1, 1}^d, k = d/2 outputs,
  H_i(x) = beta x_{2i-1} x_{2i} + alpha (-1)^i x_1 ... x_8
  (:class:`lazylab.data.HierarchicalParity`).
* T2 (Eq. 7.1, Thms 2-3): H_r(x) = x~_{i_r} + alpha prod_{j in S} x~_j
  (:class:`lazylab.data.HardInstance`).
* T3 (Sec. 8.2, Figs. 1/4): y = d^3 x_{i1} ... x_{i6} on {+-1/sqrt(d)}^d
  (:func:`lazylab.data.allenzhu_parity6`).

The reference levels follow from Fourier orthogonality of distinct parities
(E chi_S chi_S' = 1[S = S']): every output of T1 is a sum of two distinct parities, so
predicting beta F exactly leaves error k alpha^2 (the paper's threshold 1.35 for
k = 15, alpha = 0.3) and predicting 0 leaves k (beta^2 + alpha^2) (16.35). For T2 predicting
F alone leaves k alpha^2 (alpha^2 per output; divided by k with the Concept-1 scaling); for T3
predicting 0 leaves 1. :func:`exact_risk` checks these by enumerating the cube at small d.

>>> t1_reference_levels(k=15, alpha=0.3, beta=1.0)["F_only"]
1.35
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch


def t1_reference_levels(k: int, alpha: float, beta: float) -> dict[str, float]:
    """Exact T1 test errors E ||out - H||^2 (summed over the k outputs, no 1/2):
    ``F_only`` = k alpha^2 (out = beta F), ``zero`` = k (beta^2 + alpha^2) (out = 0)."""
    return {"F_only": round(k * alpha ** 2, 12), "zero": round(k * (beta ** 2 + alpha ** 2), 12)}


def t2_reference_levels(k: int, alpha: float, normalize: bool = False) -> dict[str, float]:
    """Exact T2 errors summed over the k outputs: ``F_only`` = k alpha^2, ``zero`` =
    k (1 + alpha^2); both divided by k under the Concept-1 scaling (labels / sqrt(k))."""
    s = 1.0 / k if normalize else 1.0
    return {"F_only": s * k * alpha ** 2, "zero": s * k * (1 + alpha ** 2)}


def t3_reference_levels() -> dict[str, float]:
    """T3: y in {-1, 1}, so predicting 0 has error E y^2 = 1 (Fig. 4's 'trivial' level)."""
    return {"zero": 1.0}


def all_cube_points(d: int, *, scale: float = 1.0, dtype: torch.dtype = torch.float64
                    ) -> torch.Tensor:
    """All 2^d points of {-scale, scale}^d (enumeration; d <= 20)."""
    if int(d) != d or not 1 <= d <= 20:
        raise ValueError(f"d must be an integer in [1, 20]; got {d!r}")
    return scale * torch.tensor(list(itertools.product([-1.0, 1.0], repeat=int(d))),
                                dtype=dtype)


def exact_risk(predict: Callable[[torch.Tensor], torch.Tensor],
               target: Callable[[torch.Tensor], torch.Tensor], d: int, *,
               scale: float = 1.0) -> float:
    """E_x ||predict(x) - target(x)||^2 over the uniform cube {-scale, scale}^d, exactly
    (sum over outputs, no 1/2)."""
    X = all_cube_points(d, scale=scale)
    diff = predict(X) - target(X)
    if diff.ndim == 1:
        diff = diff.unsqueeze(1)
    return float(diff.square().sum(dim=1).mean())
