"""Gauss quadrature rules, computed once and cached (the one helper every layer uses).

* :func:`gauss_legendre`: nodes and weights on [-1, 1] (exact for polynomials of degree
  < 2n).
* :func:`gauss_normal`: probabilists' Gauss-Hermite rule for E g(G), G ~ N(0, 1): the weights
  sum to 1, exact for polynomials of degree < 2n.
* :func:`gauss_normal_split`: E g(G) by Gauss-Legendre on [-L, 0] and [0, L] with the Gaussian
  density folded into the weights; splitting at 0 resolves kinks there (relu^k), where a
  Hermite rule converges only algebraically.

The arrays are shared by the cache: callers must not modify them in place. (They are not
flagged read-only because ``torch.from_numpy`` warns on read-only arrays.)

Example
-------
>>> x, w = gauss_normal(10)
>>> round(float((w * x**4).sum()), 12)      # E G^4 = 3
3.0
>>> x, w = gauss_normal_split(200, 14.0)
>>> round(float((w * np.maximum(x, 0) ** 2).sum()), 12)   # E relu(G)^2 = 1/2
0.5
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=16)
def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1] (``numpy.polynomial.legendre.leggauss``)."""
    x, w = np.polynomial.legendre.leggauss(int(n))
    return x, w


@lru_cache(maxsize=16)
def gauss_normal(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights with sum_i w_i g(x_i) ~ E g(G), G ~ N(0, 1) (Gauss-Hermite_e rule,
    weights divided by sqrt(2 pi))."""
    x, w = np.polynomial.hermite_e.hermegauss(int(n))
    return x, w / math.sqrt(2 * math.pi)


@lru_cache(maxsize=8)
def gauss_normal_split(n: int, L: float) -> tuple[np.ndarray, np.ndarray]:
    """E g(G) by an n-node Gauss-Legendre rule on each of [-L, 0] and [0, L] (2n nodes),
    weights times the N(0, 1) density; the tail mass beyond L is dropped (< 1e-40 at L = 14
    even for polynomial growth of degree 10)."""
    x, w = gauss_legendre(int(n))
    half = float(L) / 2
    pos = half * (x + 1)
    nodes = np.concatenate([-pos[::-1], pos])
    weights = np.concatenate([w[::-1], w]) * half
    weights = weights * np.exp(-nodes**2 / 2) / math.sqrt(2 * math.pi)
    return nodes, weights
