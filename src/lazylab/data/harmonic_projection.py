"""Projections P_{<=k} of a target onto spherical harmonics of degree <= k on S^{d-1}(sqrt d)
(Nichani, Bai & Lee 2022, Secs. 1.1 and 4; their App. A, which the paper cites but does not
print, reconstructed from Ghorbani et al. 2021 and Montanari & Zhong 2020).

With mu uniform on S^{d-1}(sqrt d), L^2(mu) = sum_l V_l (degree-l harmonics, dim B(d, l)) and
P_l the orthogonal projector on V_l. By the addition formula its reproducing kernel is
B(d, l) Q_l(x.y) (Q_l the Gegenbauer polynomial with Q_l(d) = 1), so for any f in L^2(mu)

    P_l f(x) = B(d, l) E_y[ Q_l(x.y) f(y) ],
    ||P_l f||^2 = B(d, l) E_{y,y'}[ f(y) Q_l(y.y') f(y') ].

* Sums of ridge functions f(x) = sum_i g_i(beta_i.x), |beta_i| = 1, exactly
  (:class:`RidgeSum`): the zonal expansion g(beta.x) = sum_l lambda_{d,l}(g) B(d,l)
  Q_l(sqrt(d) beta.x) gives

      P_l f(x) = B(d,l) sum_i lambda_{d,l}(g_i) Q_l(sqrt(d) beta_i.x),
      ||P_l f||^2 = B(d,l) sum_{i,j} lambda_{d,l}(g_i) lambda_{d,l}(g_j) Q_l(d beta_i.beta_j)

  (Funk-Hecke: E_x[Q_l(x.y) Q_j(x.y')] = delta_lj Q_l(y.y') / B(d,l) for |y| = |y'| = sqrt d).
* Any callable f by Monte Carlo (:func:`project_mc`, :func:`projection_norm_mc`,
  :func:`residual_norm_mc`): the kernel formulas above with y, y' drawn from mu; the norms are
  unbiased U-statistics, their SE from the Hoeffding projection.

||P_{>k} f||^2 = ||f||^2 - ||P_{<=k} f||^2 is the error of any method that learns exactly the
degree <= k part (the NTK level when d^k << n << d^{k+1}).

Example
-------
>>> import numpy as np
>>> f = RidgeSum([lambda z: z + z**2 - 1], np.eye(5)[:1])     # z + (z^2 - 1) along e_1
>>> [round(float(v), 12) for v in f.degree_norms(3)]          # 1 and 2(d-1)/(d+2)
[0.0, 1.0, 1.142857142857, 0.0]
>>> x = np.sqrt(5) * np.eye(5)[1:2]                               # a point with x_1 = 0
>>> round(float(f.project(1, x)[0]), 12), round(float(f(x)[0]), 12)
(0.0, -1.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from lazylab.data.harmonics import gegenbauer_q, num_harmonics
from lazylab.data.spherical import gegenbauer_coeffs

ScalarFn = Callable[[np.ndarray], np.ndarray]


def _check_k(k: int) -> int:
    if isinstance(k, bool) or int(k) != k or k < 0:
        raise ValueError(f"k must be a non-negative integer; got {k!r}")
    return int(k)


def _points(x: np.ndarray, d: int) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    if x.shape[1] != d:
        raise ValueError(f"points must have {d} coordinates; got shape {x.shape}")
    return x


class RidgeSum:
    """f(x) = sum_i g_i(beta_i . x) on S^{d-1}(sqrt d), with exact harmonic projections.

    Parameters
    ----------
    funcs : the profiles g_i: R -> R (vectorised, numpy in and out).
    betas : (R, d) directions; rows are normalised to unit length.
    """

    def __init__(self, funcs: Sequence[ScalarFn], betas: np.ndarray) -> None:
        b = np.atleast_2d(np.asarray(betas, dtype=np.float64))
        if b.shape[0] != len(funcs) or b.shape[1] < 3:
            raise ValueError(f"betas must be (len(funcs), d >= 3); got {b.shape} for "
                             f"{len(funcs)} functions")
        norms = np.linalg.norm(b, axis=1, keepdims=True)
        if not np.all(norms > 0):
            raise ValueError("every beta_i must be nonzero")
        self.funcs = tuple(funcs)
        self.betas = b / norms
        self.d = int(b.shape[1])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """f at points x (N, d) on the sphere of radius sqrt(d)."""
        z = _points(x, self.d) @ self.betas.T
        return sum((np.asarray(g(z[:, i]), dtype=np.float64) for i, g in enumerate(self.funcs)),
                   np.zeros(z.shape[0]))

    def coeffs(self, L: int) -> np.ndarray:
        """(R, L + 1) Gegenbauer coefficients lambda_{d,l}(g_i) (Gauss-Jacobi quadrature)."""
        return np.stack([gegenbauer_coeffs(g, self.d, _check_k(L)) for g in self.funcs])

    def degree_norms(self, L: int) -> np.ndarray:
        """[||P_0 f||^2, ..., ||P_L f||^2] by Funk-Hecke (exact up to quadrature, ~1e-15)."""
        lam = self.coeffs(L)
        G = self.d * (self.betas @ self.betas.T)
        out = np.empty(_check_k(L) + 1)
        for l in range(out.size):
            out[l] = num_harmonics(self.d, l) * float(lam[:, l] @ gegenbauer_q(l, self.d, G)
                                                      @ lam[:, l])
        return out

    def project(self, k: int, x: np.ndarray, *, low: int = 0) -> np.ndarray:
        """(P_{low..k} f)(x) = sum_{low <= l <= k} P_l f(x); low = 0 gives P_{<=k} f."""
        k = _check_k(k)
        x = _points(x, self.d)
        lam = self.coeffs(k)
        t = math.sqrt(self.d) * (x @ self.betas.T)           # sqrt(d) beta_i . x
        out = np.zeros(x.shape[0])
        for l in range(_check_k(low), k + 1):
            out += num_harmonics(self.d, l) * (gegenbauer_q(l, self.d, t) @ lam[:, l])
        return out


def _kernel(d: int, k: int, G: np.ndarray) -> np.ndarray:
    """K_{<=k}(G) = sum_{l<=k} B(d,l) Q_l(G), the reproducing kernel of degree <= k."""
    return sum((num_harmonics(d, l) * gegenbauer_q(l, d, G) for l in range(_check_k(k) + 1)),
               np.zeros(np.shape(G)))


def project_mc(f: ScalarFn, k: int, x: np.ndarray, y: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo (P_{<=k} f)(x) = mean_i K_{<=k}(x . y_i) f(y_i) and its SE, for any f.

    Parameters
    ----------
    f : callable on (N, d) points (e.g. a target or a network).
    k : degree.
    x : (M, d) evaluation points; y : (N, d) i.i.d. uniform points on S^{d-1}(sqrt d).

    Returns
    -------
    (estimate (M,), standard error (M,)): sample std over the N terms / sqrt(N).
    """
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    d = y.shape[1]
    x = _points(x, d)
    terms = _kernel(d, k, x @ y.T) * np.asarray(f(y), dtype=np.float64)[None, :]
    n = terms.shape[1]
    return terms.mean(1), terms.std(1, ddof=1) / math.sqrt(n)


def _loo_projection(f: ScalarFn, k: int, y: np.ndarray, block: int,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(f(y_i), h_i) with h_i = sum_{j != i} K_{<=k}(y_i.y_j) f(y_j) / (N - 1), the leave-one-out
    Monte Carlo P_{<=k} f(y_i); the kernel is formed ``block`` rows at a time."""
    y = np.atleast_2d(np.asarray(y, dtype=np.float64))
    n, d = y.shape
    if n < 3:
        raise ValueError(f"need at least 3 points; got {n}")
    fy = np.asarray(f(y), dtype=np.float64)
    h = np.empty(n)
    for i in range(0, n, int(block)):
        yb = y[i:i + int(block)]
        diag = _kernel(d, k, (yb * yb).sum(1))          # K_ii (= n_k on the sphere)
        h[i:i + int(block)] = _kernel(d, k, yb @ y.T) @ fy - diag * fy[i:i + int(block)]
    return fy, h / (n - 1)


def projection_norm_mc(f: ScalarFn, k: int, y: np.ndarray, *,
                       block: int = 2048) -> tuple[float, float]:
    """Unbiased ||P_{<=k} f||^2 = (1/(N(N-1))) sum_{i != j} f_i K_{<=k}(y_i.y_j) f_j, and SE.

    The SE is the Hoeffding (first-order) one of a U-statistic of order 2:
    2 std_i(f_i h_i) / sqrt(N) with h_i the leave-one-out P_{<=k} f(y_i) (O(N^2) time,
    O(block N) memory).
    """
    fy, h = _loo_projection(f, k, y, block)
    g = fy * h
    return float(g.mean()), float(2.0 * g.std(ddof=1) / math.sqrt(len(g)))


def residual_norm_mc(f: ScalarFn, k: int, y: np.ndarray, *,
                     block: int = 2048) -> tuple[float, float]:
    """Unbiased ||P_{>k} f||^2 = E f^2 - ||P_{<=k} f||^2 as one U-statistic, and its SE.

    The kernel (f(y)^2 + f(y')^2)/2 - f(y) K_{<=k}(y.y') f(y') has Hoeffding projection
    f^2/2 - f P_{<=k} f + const, so SE = 2 std_i(f_i^2/2 - f_i h_i) / sqrt(N): small when f is
    mostly of low degree (the two terms cancel), unlike the difference of two separate means.
    """
    fy, h = _loo_projection(f, k, y, block)
    g = fy * fy - fy * h
    return float(g.mean()), float(2.0 * (0.5 * fy * fy - fy * h).std(ddof=1) / math.sqrt(len(g)))
