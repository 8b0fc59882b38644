"""Closed-form predictions of Nichani, Bai & Lee (2022) from spherical harmonics (Secs. 1.1,
4.1 and 5; a reconstruction of App. A and Lemma 15, which the paper cites but does not print).

* :func:`ntk_eigenvalues`: the infinite-width NTK K(x, x') = (x.x') E_w[sigma'(w.x) sigma'(w.x')]
  (w uniform on the unit sphere, x on S^{d-1}(sqrt d)) has eigenvalue xi_l on the degree-l
  harmonics (multiplicity B(d, l)); with c_j = lambda_{d,j}(sigma')^2,

      xi_l = (d / B(d,l)) [ c_{l+1} B(d,l+1) (l+1)/(2l+d)
                            + 1{l>=1} c_{l-1} B(d,l-1) (l+d-3)/(2l+d-4) ].

  The sum telescopes: sum_l xi_l B(d,l) = d sum_j c_j B(d,j) = d E_{tau_d}[sigma'^2] (trace
  identity), which :func:`trace_identity` evaluates.
* :func:`ntk_eigenvalues_asymptotic`: xi_0 ~ mu_1(sigma')^2, xi_l ~ l mu_{l-1}(sigma')^2 d^{1-l}.
* :func:`effective_ridge`: gamma_{>k} = d E[sigma'^2] - sum_{l<=k} xi_l B(d,l), the flat part of
  the Gram spectrum (Montanari & Zhong 2020, as used in Sec. 1.1, Eq. (4)).
* :func:`gram_spectrum`: the predicted eigenvalues of K = Phi Phi^T for n training points with
  d^k << n << d^{k+1}: about n xi_l + gamma for the top n_k (per degree), gamma for the rest.
* :func:`ridgeless_risk`: the test MSE of kernel ridgeless regression with this spectrum on n
  noiseless samples, by the omniscient-risk / eigenlearning equations (Canatar, Bordelon &
  Pehlevan 2021; Simon et al. 2023): kappa solves sum_i lambda_i/(lambda_i + kappa) = n, the
  learnability of degree l is L_l = xi_l/(xi_l + kappa), and
  E = n/(n - sum_l B(d,l) L_l^2) * sum_l (1 - L_l)^2 ||P_l f*||^2.
* :func:`ntk_level`: ||P_{>k} f*||^2 for a ridge target g(beta.x), the test error the NTK
  plateaus at when n << d^{k+1} (Fig. 1: 2(d-1)/(3(d+2)) for (z + z^2 - 1)/sqrt 3).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from lazylab.activations import Activation
from lazylab.data.harmonics import num_harmonics
from lazylab.data.spherical import gegenbauer_coeffs, ridge_degree_norms, tau_expect


def _dsigma(act: Activation) -> Callable[[np.ndarray], np.ndarray]:
    def g(z: np.ndarray) -> np.ndarray:
        return act.deriv(torch.tensor(np.asarray(z, dtype=np.float64)), 1).numpy()

    return g


def ntk_eigenvalues(act: Activation, d: int, L: int) -> np.ndarray:
    """[xi_0, ..., xi_L] of the infinite-width first-layer NTK on S^{d-1}(sqrt d)."""
    c = gegenbauer_coeffs(_dsigma(act), d, int(L) + 1) ** 2
    B = [float(num_harmonics(d, j)) for j in range(int(L) + 2)]
    xi = np.zeros(int(L) + 1)
    for l in range(int(L) + 1):
        up = c[l + 1] * B[l + 1] * (l + 1) / (2 * l + d)
        down = c[l - 1] * B[l - 1] * (l + d - 3) / (2 * l + d - 4) if l >= 1 else 0.0
        xi[l] = d / B[l] * (up + down)
    return xi


def trace_identity(act: Activation, d: int, L: int = 60) -> tuple[float, float]:
    """(sum_{l<=L} xi_l B(d,l), d E_{tau_d}[sigma'^2]): equal up to the tail beyond degree L."""
    xi = ntk_eigenvalues(act, d, L)
    lhs = float(sum(xi[l] * num_harmonics(d, l) for l in range(int(L) + 1)))
    g = _dsigma(act)
    return lhs, d * tau_expect(lambda z: g(z) ** 2, d)


def ntk_eigenvalues_asymptotic(act: Activation, d: int, L: int) -> np.ndarray:
    """Large-d limits: xi_0 ~ mu_1(sigma')^2 and xi_l ~ l mu_{l-1}(sigma')^2 d^{1-l} (l >= 1),
    mu_j(g) = E[g(G) He_j(G)] (Gaussian, unnormalised Hermite)."""
    g = _dsigma(act)
    from lazylab.activations import _gauss_nodes  # shared Gauss-Legendre rule on R
    from lazylab.data.harmonics import hermite_e

    nodes, weights = _gauss_nodes()
    vals = g(nodes)
    mu = [float(np.sum(weights * vals * hermite_e(j, nodes))) for j in range(int(L) + 1)]
    out = [mu[1] ** 2]
    out += [l * mu[l - 1] ** 2 * float(d) ** (1 - l) for l in range(1, int(L) + 1)]
    return np.array(out)


def effective_ridge(act: Activation, d: int, k: int) -> float:
    """gamma_{>k} = d E[sigma'^2] - sum_{l<=k} xi_l B(d,l) (tau_d expectations)."""
    xi = ntk_eigenvalues(act, d, k)
    g = _dsigma(act)
    tot = d * tau_expect(lambda z: g(z) ** 2, d)
    return float(tot - sum(xi[l] * num_harmonics(d, l) for l in range(int(k) + 1)))


def gram_spectrum(act: Activation, d: int, n: int, k: int) -> dict[str, np.ndarray | float]:
    """Predicted Gram eigenvalues for n points: ``levels`` n xi_l + gamma (l <= k) with
    ``multiplicities`` B(d, l), and the ``ridge`` gamma_{>k} (the bottom n - n_k)."""
    xi = ntk_eigenvalues(act, d, k)
    gamma = effective_ridge(act, d, k)
    return {"levels": n * xi + gamma,
            "multiplicities": np.array([num_harmonics(d, l) for l in range(int(k) + 1)]),
            "ridge": gamma}


def ntk_level(g: Callable[[np.ndarray], np.ndarray], d: int, k: int, L: int = 12) -> float:
    """||P_{>k} g(beta.x)||^2 = E[g^2] - sum_{l<=k} lambda_{d,l}(g)^2 B(d,l) (|beta| = 1)."""
    norms = ridge_degree_norms(g, d, int(k))
    return float(tau_expect(lambda z: np.asarray(g(z)) ** 2, d) - norms.sum())


def ridgeless_risk(act: Activation, d: int, n: int, energies: np.ndarray, L: int = 8) -> float:
    """Predicted test MSE of NTK ridgeless regression on n samples (eigenlearning, see above).

    Parameters
    ----------
    act : the activation (the kernel is the infinite-width first-layer NTK).
    d, n : dimension and number of training samples (n >= 1).
    energies : ||P_l f*||^2 for l = 0, 1, ... (a target's degree-l energies; missing = 0).
    L : degrees treated exactly; the spectrum beyond degree L enters the equation for kappa
        through its trace, d E[sigma'^2] - sum_{l<=L} xi_l B(d,l) (each such eigenvalue is
        far below kappa).
    """
    from scipy.optimize import brentq

    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    xi = ntk_eigenvalues(act, d, L)
    B = np.array([float(num_harmonics(d, l)) for l in range(int(L) + 1)])
    lhs, tot = trace_identity(act, d, L)
    tail = max(tot - lhs, 0.0)

    def excess(kappa: float) -> float:
        return float((B * xi / (xi + kappa)).sum() + tail / kappa - n)

    kappa = brentq(excess, 1e-14, 1e6)
    learn = xi / (xi + kappa)
    e0 = n / (n - float((B * learn**2).sum()))
    en = np.zeros(int(L) + 1)
    en[: min(len(energies), int(L) + 1)] = np.asarray(energies, float)[: int(L) + 1]
    return float(e0 * ((1 - learn) ** 2 * en).sum())
