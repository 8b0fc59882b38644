"""Orthogonal polynomials for Gaussian and spherical inputs.

* Probabilists' Hermite polynomials He_k, orthogonal under N(0, 1):
  E[He_j(G) He_k(G)] = k! delta_jk.
* Normalised Gegenbauer polynomials Q_l^{(d)} on [-d, d], orthogonal for x uniform on the
  sphere S^{d-1}(sqrt d) (the conventions of Ghorbani et al. 2021 that Nichani et al. 2022,
  App. A, use):

      Q_l(t) = C_l^{((d-2)/2)}(t/d) / C_l^{((d-2)/2)}(1),   so Q_l(d) = 1,
      E_x[Q_l(x.y) Q_j(x.y')] = delta_lj Q_l(y.y') / B(d, l)   for |y| = |y'| = sqrt(d),

  with B(d, l) the dimension of the degree-l spherical harmonics. Hence for a unit vector u,
  sqrt(B(d, l)) Q_l(sqrt(d) u.x) has unit second moment on S^{d-1}(sqrt d).

Example
-------
>>> from lazylab.data.harmonics import gegenbauer_q, num_harmonics
>>> [num_harmonics(10, l) for l in range(5)]
[1, 10, 54, 210, 660]
>>> float(gegenbauer_q(3, 10, 10.0))
1.0
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import torch

ArrayT = TypeVar("ArrayT", torch.Tensor, np.ndarray, float)


def _check_degree(k: int, name: str = "k") -> None:
    if int(k) != k or k < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {k!r}")


def hermite_e(k: int, u: ArrayT) -> ArrayT:
    """He_k(u) by the recurrence He_0 = 1, He_1 = u, He_{j+1}(u) = u He_j(u) - j He_{j-1}(u).

    Works elementwise on tensors, arrays and floats (e.g. He_2 = u^2 - 1, He_3 = u^3 - 3u).
    """
    _check_degree(k)
    h_prev, h = u * 0 + 1, u
    if k == 0:
        return h_prev
    for j in range(1, int(k)):
        h_prev, h = h, u * h - j * h_prev
    return h


def num_harmonics(d: int, l: int) -> int:
    """B(d, l) = (2l + d - 2) (l + d - 3)! / (l! (d - 2)!) for l >= 1, and B(d, 0) = 1.

    The dimension of the space of degree-l spherical harmonics in d >= 2 variables;
    B(d, 1) = d, B(d, 2) = (d + 2)(d - 1)/2, and B(d, l) ~ d^l / l! for fixed l.
    """
    _check_degree(l, "l")
    if int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2; got {d!r}")
    if l == 0:
        return 1
    # (l+d-3)!/(l!(d-2)!) = C(l+d-3, d-2)/l, and the product below is divisible by l.
    return (2 * l + d - 2) * math.comb(l + d - 3, d - 2) // l


def dim_poly_leq(d: int, k: int) -> int:
    """n_k = sum_{l <= k} B(d, l): the dimension of polynomials of degree <= k on the sphere."""
    _check_degree(k)
    return sum(num_harmonics(d, l) for l in range(int(k) + 1))


def gegenbauer_q(l: int, d: int, t: ArrayT) -> ArrayT:
    """Q_l^{(d)}(t), the Gegenbauer polynomial normalised so that Q_l(d) = 1, for t in [-d, d].

    Three-term recurrence in s = t/d (the standard one for Gegenbauer polynomials):
    Q_0 = 1, Q_1 = s, Q_{j+1} = [(2j + d - 2) s Q_j - j Q_{j-1}] / (j + d - 2).
    For d = 3 this is the Legendre polynomial P_l(t/3).
    """
    _check_degree(l, "l")
    if int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2; got {d!r}")
    s = t / d
    q_prev, q = s * 0 + 1, s
    if l == 0:
        return q_prev
    for j in range(1, int(l)):
        q_prev, q = q, ((2 * j + d - 2) * s * q - j * q_prev) / (j + d - 2)
    return q
