"""Harmonic analysis on the sphere S^{d-1}(sqrt d): the law tau_d, Gegenbauer coefficients,
degree-l projections of ridge functions (Nichani, Bai & Lee 2022, App. A, which the paper
cites but does not print, reconstructed from Ghorbani et al. 2021 and Montanari & Zhong 2020).

For x ~ Unif(S^{d-1}(sqrt d)) and a unit vector w, z = w.x has the law tau_d with density

    p_d(z) = Gamma(d/2) / (sqrt(pi d) Gamma((d-1)/2)) (1 - z^2/d)^{(d-3)/2},  |z| <= sqrt(d),

so s = z / sqrt(d) has the Jacobi weight (1 - s^2)^{(d-3)/2} on [-1, 1]; expectations under
tau_d are computed exactly for polynomials (and to ~1e-15 for smooth g) by Gauss-Jacobi
quadrature. The zonal (Gegenbauer) expansion of g(w.x) is

    g(w.x) = sum_l lambda_{d,l}(g) B(d,l) Q_l(sqrt(d) w.x),
    lambda_{d,l}(g) = E_{z ~ tau_d}[ g(z) Q_l(sqrt(d) z) ],

so the degree-l part P_l of the ridge function x -> g(beta.x) (|beta| = 1) has squared L2 norm
lambda_{d,l}(g)^2 B(d,l), and sum_l lambda_{d,l}(g)^2 B(d,l) = E_{tau_d}[g^2] (Parseval).

Example
-------
>>> import numpy as np
>>> from lazylab.data.spherical import tau_expect, ridge_degree_norms
>>> round(tau_expect(lambda z: z**4, 10), 12)      # E z^4 = 3d/(d+2)
2.5
>>> norms = ridge_degree_norms(lambda z: z**2 - 1, 10, 3)   # purely degree 2 on the sphere
>>> [round(float(v), 12) for v in norms]                       # 2(d-1)/(d+2) = 1.5
[0.0, 0.0, 1.5, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
from scipy.linalg import eigh_tridiagonal

from lazylab.data.harmonics import gegenbauer_q, num_harmonics

ScalarFn = Callable[[np.ndarray], np.ndarray]

#: Gauss-Jacobi nodes: exact for polynomials of degree < 2 * _NODES in z.
_NODES = 400


def _check_d(d: int) -> int:
    if int(d) != d or d < 3:
        raise ValueError(f"d must be an integer >= 3; got {d!r}")
    return int(d)


@lru_cache(maxsize=64)
def tau_nodes(d: int, nodes: int = _NODES) -> tuple[np.ndarray, np.ndarray]:
    """Nodes z_i and weights w_i (summing to 1) with E_{tau_d}[g] ~= sum_i w_i g(z_i).

    Gauss rule for the weight (1 - s^2)^{(d-3)/2} on [-1, 1], mapped by z = sqrt(d) s.
    """
    d = _check_d(d)
    # Golub-Welsch for the Gegenbauer weight (1 - s^2)^{lam - 1/2}, lam = (d - 2)/2: the monic
    # recurrence p_{j+1} = s p_j - beta_j p_{j-1}, beta_j = j (j + 2 lam - 1) / (4 (j + lam)
    # (j + lam - 1)); nodes are the eigenvalues of the Jacobi matrix, weights the squared first
    # components of its eigenvectors (stable for any d, unlike Newton on the polynomials).
    lam = (d - 2) / 2
    j = np.arange(1, int(nodes), dtype=np.float64)
    beta = j * (j + 2 * lam - 1) / (4 * (j + lam) * (j + lam - 1))
    s, vecs = eigh_tridiagonal(np.zeros(int(nodes)), np.sqrt(beta))
    w = vecs[0] ** 2
    w = w / w.sum()
    s.setflags(write=False)
    w.setflags(write=False)
    return math.sqrt(d) * s, w


def tau_expect(g: ScalarFn, d: int) -> float:
    """E_{z ~ tau_d}[g(z)] for a vectorised g: R -> R (numpy in, numpy out)."""
    z, w = tau_nodes(_check_d(d))
    return float(np.dot(w, np.asarray(g(z), dtype=np.float64)))


def gegenbauer_coeffs(g: ScalarFn, d: int, L: int) -> np.ndarray:
    """[lambda_{d,0}(g), ..., lambda_{d,L}(g)], lambda_{d,l}(g) = E_{tau_d}[g(z) Q_l(sqrt(d) z)].

    As d -> infinity, lambda_{d,l}(g) sqrt(B(d,l) l!) -> mu_l(g) = E_{N(0,1)}[g(G) He_l(G)].
    """
    d = _check_d(d)
    if int(L) != L or L < 0:
        raise ValueError(f"L must be a non-negative integer; got {L!r}")
    z, w = tau_nodes(d)
    gz = np.asarray(g(z), dtype=np.float64) * w
    t = math.sqrt(d) * z
    return np.array([float(np.dot(gz, gegenbauer_q(l, d, t))) for l in range(int(L) + 1)])


def ridge_degree_norms(g: ScalarFn, d: int, L: int) -> np.ndarray:
    """||P_l g(beta.x)||_{L2}^2 = lambda_{d,l}(g)^2 B(d,l) for l = 0..L (any unit beta)."""
    lam = gegenbauer_coeffs(g, d, L)
    B = np.array([float(num_harmonics(d, l)) for l in range(int(L) + 1)])
    return lam**2 * B
