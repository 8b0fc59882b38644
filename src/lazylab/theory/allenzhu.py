"""Allen-Zhu & Li (2019), closed forms: the kernel lower bounds, reference levels, Fig. 4 numbers.

* Theorem 2 (proof, App. D): with N kernel samples (or D features, Thm 3) fewer than 2N of the
  C(d, k) hard targets can be fitted to risk alpha^2/16, so the fitted fraction is
  < 2N / C(d, k) (:func:`thm2_fraction_bound`); the sharp leverage form of Lemma D.2 gives
  <= N / (0.9 C(d, k)) (:func:`leverage_fraction_bound`).
* The degrees of freedom of all monomials of degree <= k, sum_{j<=k} C(d, j)
  (:func:`degrees_of_freedom`): where a kernel whose spectrum decays with the degree starts to fit
  degree-k parities; and the N at which the leakage of a dot-product kernel into degrees > k has
  fallen below the absolute threshold alpha^2/16 (:func:`ridge_transition_n`,
  :func:`predicted_transition_n`).
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
from collections.abc import Sequence

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


def _leak_risk(N: float, lam: float, k1: float, kk: float, alpha: float) -> float:
    return alpha ** 2 * lam / (lam + N * kk) + lam / (lam + N * k1)


def ridge_transition_n(spectrum: Sequence[float], d: int, k: int, alpha: float) -> float:
    """N at which the diagonal ridge model of a dot-product kernel fits x_i + alpha chi_S to
    alpha^2/16.

    A kernel predictor f = sum_n w_n kappa(<x, x_n>) has Fourier coefficients
    f^(S') = kappa^_|S'| sum_n w_n chi_S'(x_n) (App. D, Eq. D.2). Its components of degree > k
    cost w^T (sum_{j>k} kappa^_j^2 Phi_j Phi_j^T) w in risk (Parseval, Lemma D.1), with
    (Phi_j Phi_j^T)_nn = C(d, j); keeping only that diagonal turns the best risk into ridge
    regression on the degree-<=k parities with penalty lam = sum_{j>k} kappa^_j^2 C(d, j). For N
    beyond the number of those parities, Phi^T Phi ~ N I, so the best risk of the target
    x_i + alpha chi_S is about

        R(N) = alpha^2 lam / (lam + N kappa^_k^2) + lam / (lam + N kappa^_1^2),

    decreasing in N; the result is the N with R(N) = alpha^2/16 (bisection in log N). The
    threshold alpha^2/16 is absolute, so the singleton x_i (weight 1, not alpha) must be fitted
    to alpha^2/16 too: this is why the transition moves past sum_{j<=k} C(d, j) for small alpha.

    >>> import math
    >>> kap = [math.exp(-2) * math.cosh(0.2) ** (10 - j) * math.sinh(0.2) ** j for j in range(11)]
    >>> round(ridge_transition_n(kap, 10, 2, 0.3))
    111
    """
    if not 1 <= k < d or len(spectrum) != d + 1:
        raise ValueError(f"need 1 <= k < d and d + 1 spectrum values; got k={k}, d={d}, "
                         f"{len(spectrum)} values")
    kap = [float(v) ** 2 for v in spectrum]
    lam = sum(kap[j] * math.comb(d, j) for j in range(k + 1, d + 1))
    target = alpha ** 2 / 16
    if lam <= 0:
        return 1.0
    if kap[k] <= 0 or kap[1] <= 0:
        return math.inf
    lo, hi = 0.0, 1.0
    while _leak_risk(math.exp(hi), lam, kap[1], kap[k], alpha) > target:
        lo, hi = hi, 2 * hi
    for _ in range(80):
        mid = (lo + hi) / 2
        if _leak_risk(math.exp(mid), lam, kap[1], kap[k], alpha) > target:
            lo = mid
        else:
            hi = mid
    return math.exp(hi)


def predicted_transition_n(spectrum: Sequence[float], d: int, k: int, alpha: float) -> float:
    """max(sum_{j<=k} C(d, j), :func:`ridge_transition_n`): a kernel needs N at least the number
    of degree-<=k parities to span the target's coefficients, and enough N that the
    degree->k leakage has fallen below alpha^2/16."""
    return max(float(degrees_of_freedom(d, k)), ridge_transition_n(spectrum, d, k, alpha))
