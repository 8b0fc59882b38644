"""Exact Gaussian expectations E[f(u) g(v)] for polynomial, erf and sine activations.

Here (u, v) = (w.x, w.z) with w ~ N(0, I_d), i.e. a centred bivariate normal with
Var u = a = |x|^2, Var v = b = |z|^2 and Cov(u, v) = c = x.z.

* Polynomials (Isserlis / Wick): pairing the j copies of u and l copies of v with k cross
  pairs,

      E[u^j v^l] = sum_k C(j,k) C(l,k) k! (j-k-1)!! (l-k-1)!! c^k a^((j-k)/2) b^((l-k)/2),

  over k <= min(j, l) with j - k and l - k even ((-1)!! = 1). E.g. E[u^2 v^2] = ab + 2c^2.
  Then E[f(u) g(v)] = sum_{j,l} f_j g_l E[u^j v^l] for f = sum f_j u^j, g = sum g_l u^l.
* erf (Williams 1998, "Computation with infinite neural networks", Eq. (11)):
      E[erf(u) erf(v)] = (2/pi) arcsin( 2c / sqrt((1 + 2a)(1 + 2b)) ),
  and with erf'(u) = (2/sqrt(pi)) exp(-u^2), E[exp(-u^2 - v^2)] = det(I + 2 Sigma)^(-1/2):
      E[erf'(u) erf'(v)] = (4/pi) / sqrt((1 + 2a)(1 + 2b) - 4c^2).
* sine: from E[cos(u -+ v)] = exp(-(a + b -+ 2c)/2),
      E[sin u sin v] = exp(-(a + b)/2) sinh(c),   E[cos u cos v] = exp(-(a + b)/2) cosh(c).

Example
-------
>>> import torch
>>> x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
>>> float(poly_dual((0.0, 0.0, 1.0), (0.0, 0.0, 1.0), x)[0, 0])   # E[u^4] = 3
3.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from lazylab.duals._inputs import check_pair, gram_stats


def _double_factorial_odd(m: int) -> int:
    # (m)!! for odd m >= -1, with (-1)!! = 1
    out = 1
    while m > 1:
        out *= m
        m -= 2
    return out


def gaussian_moment(j: int, l: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor
                    ) -> torch.Tensor:
    """E[u^j v^l] for centred (u, v) with Var u = a, Var v = b, Cov = c (broadcasting)."""
    out = torch.zeros_like(c)
    for k in range(min(j, l) + 1):
        if (j - k) % 2 or (l - k) % 2:
            continue
        count = (math.comb(j, k) * math.comb(l, k) * math.factorial(k)
                 * _double_factorial_odd(j - k - 1) * _double_factorial_odd(l - k - 1))
        out = out + count * c**k * a ** ((j - k) // 2) * b ** ((l - k) // 2)
    return out


def poly_derivative(coef: Sequence[float]) -> tuple[float, ...]:
    """Coefficients of p' for p(u) = sum_j coef[j] u^j."""
    return tuple(j * coef[j] for j in range(1, len(coef))) or (0.0,)


def _moments(X: torch.Tensor, Z: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    st = gram_stats(*check_pair(X, Z))
    return (st.nx**2)[:, None], (st.nz**2)[None, :], st.G


def poly_dual(f: Sequence[float], g: Sequence[float], X: torch.Tensor,
              Z: torch.Tensor | None = None) -> torch.Tensor:
    """E_w[f(w.x) g(w.z)] for polynomials f, g given by coefficients (c_0, c_1, ...)."""
    a, b, c = _moments(X, Z)
    out = torch.zeros_like(c)
    for j, fj in enumerate(f):
        for l, gl in enumerate(g):
            if fj and gl:
                out = out + (fj * gl) * gaussian_moment(j, l, a, b, c)
    return out


def erf_dual(X: torch.Tensor, Z: torch.Tensor | None = None, *, derivative: bool = False
             ) -> torch.Tensor:
    """E_w[erf(w.x) erf(w.z)], or E_w[erf'(w.x) erf'(w.z)] when ``derivative`` (Williams 1998)."""
    a, b, c = _moments(X, Z)
    den = (1 + 2 * a) * (1 + 2 * b)
    if derivative:
        # det(I + 2 Sigma) >= 1 for PSD Sigma; the clamp only absorbs rounding at c^2 = ab.
        return (4 / math.pi) / (den - 4 * c * c).clamp_min(1.0).sqrt()
    return (2 / math.pi) * torch.asin((2 * c / den.sqrt()).clamp(-1.0, 1.0))


def sin_dual(X: torch.Tensor, Z: torch.Tensor | None = None, *, derivative: bool = False
             ) -> torch.Tensor:
    """E_w[sin(w.x) sin(w.z)] = e^{-(a+b)/2} sinh(c), or with cos (``derivative``) cosh(c)."""
    a, b, c = _moments(X, Z)
    # exp(-|x - z|^2 / 2) and exp(-|x + z|^2 / 2) never overflow, unlike cosh(c) for large c
    minus, plus = torch.exp(-(a + b - 2 * c) / 2), torch.exp(-(a + b + 2 * c) / 2)
    return (minus + plus) / 2 if derivative else (minus - plus) / 2
