"""Allen-Zhu & Li (2019), closed forms: the kernel lower bounds, reference levels, Fig. 4 numbers.

* Theorem 2 (proof, App. D): with N kernel samples (or D features, Thm 3) fewer than 2N of the
  C(d, k) hard targets can be fitted to risk alpha^2/16, so the fitted fraction is
  < 2N / C(d, k) (:func:`thm2_fraction_bound`); the sharp leverage form of Lemma D.2 gives
  <= N / (0.9 C(d, k)) (:func:`leverage_fraction_bound`).
* The degrees of freedom of all monomials of degree <= k, sum_{j<=k} C(d, j)
  (:func:`degrees_of_freedom`): where a kernel whose spectrum decays with the degree starts to fit
  degree-k parities.
* T1 reference levels (k alpha^2 = 1.35; k (beta^2 + alpha^2) = 16.35),
  :func:`lazylab.data.hierarchical.t1_reference_levels`.
* Sec. 8.2 / Fig. 4: hand-built two-layer solutions of the six-parity with
  (||W||_F / sqrt(d), error) = (9.7, 0.12), (12.5, 0.037), (13.8, 0.011) (:data:`HAND_BUILT`), and
  the Rademacher bound 2 ||W||_F / sqrt(N) on the generalization gap.

>>> round(thm2_fraction_bound(10, 14, 3), 4)
0.0549
>>> degrees_of_freedom(14, 3)
470
"""

from __future__ import annotations

import math

from lazylab.data.hierarchical import t1_reference_levels

__all__ = [
    "HAND_BUILT",
    "SGD_FLOOR",
    "degrees_of_freedom",
    "leverage_fraction_bound",
    "rademacher_gap",
    "t1_reference_levels",
    "thm2_fraction_bound",
]

#: Sec. 8.2: hand-built solutions (norm / sqrt(d), population error) of the six-parity, valid for
#: every even m >= 200 and d >= 6 (footnote 16).
HAND_BUILT: tuple[tuple[float, float], ...] = ((9.7, 0.12), (12.5, 0.037), (13.8, 0.011))
#: Sec. 8.2: the best SGD test error at (d, N) = (40, 5000) and (100, 50000) is no better than this.
SGD_FLOOR: dict[tuple[int, int], float] = {(40, 5000): 0.69, (100, 50000): 0.98}


def thm2_fraction_bound(N: int, d: int, k: int) -> float:
    """2N / C(d, k): Thm 2's bound on the fraction of size-k sets S any kernel with N samples (or
    any D = N features) fits to risk <= alpha^2/16 (Lemma D.2 with R = C(d, k) columns)."""
    return min(1.0, 2.0 * N / math.comb(d, k))


def leverage_fraction_bound(N: int, d: int, k: int) -> float:
    """N / (0.9 C(d, k)): good sets need leverage >= 0.9 and the leverages sum to rank <= N."""
    return min(1.0, N / (0.9 * math.comb(d, k)))


def degrees_of_freedom(d: int, k: int) -> int:
    """sum_{j <= k} C(d, j): the number of parities (monomials) of degree <= k on {-1, 1}^d."""
    return sum(math.comb(d, j) for j in range(k + 1))


def rademacher_gap(norm: float, N: int) -> float:
    """2 ||W||_F / sqrt(N): the Rademacher bound on the generalization gap of the Fig. 4 network
    a^T sigma(W x), a in {+-1/sqrt(m)}^m, ||x|| = 1 (Sec. 8.2)."""
    return 2.0 * norm / math.sqrt(N)
