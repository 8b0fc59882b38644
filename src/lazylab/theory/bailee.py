"""Closed-form predictions of Bai & Lee (2020), "Beyond Linearization" (spec bai-lee-2020.md).

Setting: f(x) = m^{-1/2} sum_r a_r sigma(w_r . x), symmetric init (Eq. (3)), w0_r ~ N(0, B_x^-2
I), ||x|| = B_x, so g = w0 . x ~ N(0, 1). Gaussian integration by parts gives
E[sigma^(k)(g)] = E[sigma(g) He_k(g)] = lambda_k, the Hermite coefficient of sigma (also for
relu^3/6, whose 4th derivative is a Dirac mass: lambda_4 = phi(0) = 1/sqrt(2 pi)).

* Coupling (Sec. 3, spec C4), coherent W = m^{-1/4} v on the a = +1 half, t = v . x:
  |f^L_W| ~ m^{1/4} |lambda_1| |t| / 2,          |f^Q_W| -> |lambda_2| t^2 / 4,
  std_Sigma f ~ m^{-1/4} sqrt(E sigma'(g)^2 / 2) |t|, |E_Sigma f - f^Q| ~ m^{-1/2} |lambda_4| t^4 / 48,
  i.e. log-log slopes +1/4, 0, -1/4, -1/2 (:data:`COUPLING_SLOPES`). [ADDED derivations: law of
  large numbers over the m/2 moved neurons; the even Taylor terms of E_Sigma f start at f^(4).]
* Order-k randomization (Sec. 6, spec C15), w*_r = M^{-1/(2k)} v on M pairs, library prefactor
  (2M)^{-1/2}: f^(k) -> lambda_k t^k / (sqrt(2) k!), f^(j) = O_p(M^{-j/(2k)}) for j < k.
* ReLU random-feature kernel and its coefficients (Lemma 9 proof, spec Sec. 2.8(a), C11).
* Norms of the representers W* of Theorem 7 (spec Sec. 2.9, C12) and the init norm bound
  (Eq. (4), spec C2).
* Sample complexities (Sec. 5.2, spec C14): n* ~ d for the randomized / quadratic model and
  ~ d^2 for the NTK on 2-XOR.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import torch

from lazylab.activations import Activation, get_activation
from lazylab.models.bailee_constructions import relu_hermite_coefficient, representable_exponent

__all__ = [
    "COUPLING_SLOPES",
    "XOR_NSTAR_SLOPES",
    "coupling_predictions",
    "derivative_mean",
    "gaussian_mean",
    "higher_order_limit",
    "higher_order_slopes",
    "init_norm_bound",
    "relu_kernel",
    "relu_kernel_coefficient",
    "relu_kernel_coefficient_lower_bound",
    "representer_norm_bound",
    "representer_norm_limit",
]

#: Predicted log-log slopes in m of the coupling quantities (Sec. 3; spec C4).
COUPLING_SLOPES: dict[str, float] = {"f_L": 0.25, "f_Q": 0.0, "std over signs": -0.25,
                                     "mean gap": -0.5}

#: Predicted slopes of log n* against log d on 2-XOR (Sec. 5.2): Theta~(d) samples for the
#: randomized / quadratic model (upper bound), Omega(d^2) for the NTK (Wei et al. 2019 lower
#: bound).
XOR_NSTAR_SLOPES: dict[str, float] = {"randomized": 1.0, "QuadNTK": 1.0, "NTK": 2.0}


@lru_cache(maxsize=4)
def _hermegauss(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite_e.hermegauss(n)
    return x, w / math.sqrt(2 * math.pi)


def gaussian_mean(fn: Callable[[torch.Tensor], torch.Tensor], nodes: int = 160) -> float:
    """E[fn(G)], G ~ N(0, 1), by Gauss-Hermite quadrature (exact for polynomials of degree
    < 2 * nodes; ~1e-6 for the piecewise-polynomial relu powers)."""
    x, w = _hermegauss(int(nodes))
    vals = fn(torch.from_numpy(x)).double().numpy()
    return float(np.sum(w * vals))


def derivative_mean(activation: str | Activation, k: int) -> float:
    """lambda_k = E[sigma^(k)(G)] = E[sigma(G) He_k(G)] (Stein's lemma), G ~ N(0, 1)."""
    act = get_activation(activation)
    return float(act.hermite(int(k))[int(k)])


def coupling_predictions(activation: str | Activation, t: np.ndarray,
                         m: float) -> dict[str, float]:
    """Leading-order mean |.| over the projections t = v . x of the four coupling quantities.

    For coherent W = m^{-1/4} v on the a = +1 half (m/2 neurons) and prefactor m^{-1/2}:
    f^L = m^{-3/4} sum sigma'(g_r) t -> m^{1/4} lambda_1 t / 2; f^Q -> lambda_2 t^2 / 4;
    Var_Sigma f ~ m^{-1} (m/2) E[sigma'^2] m^{-1/2} t^2; E_Sigma f - f^Q ~ f^(4)
    -> m^{-1/2} lambda_4 t^4 / 48. Keys as in :data:`COUPLING_SLOPES`.
    """
    act = get_activation(activation)
    t = np.asarray(t, dtype=float)
    lam = act.hermite(4)
    e_d1sq = gaussian_mean(lambda u: act.deriv(u, 1) ** 2)
    return {
        "f_L": m**0.25 * abs(lam[1]) / 2 * float(np.mean(np.abs(t))),
        "f_Q": abs(lam[2]) / 4 * float(np.mean(t**2)),
        "std over signs": m**-0.25 * math.sqrt(e_d1sq / 2) * float(np.mean(np.abs(t))),
        "mean gap": m**-0.5 * abs(lam[4]) / 48 * float(np.mean(t**4)),
    }


def higher_order_limit(activation: str | Activation, k: int, t: np.ndarray,
                       prefactor_ratio: float = 1 / math.sqrt(2)) -> np.ndarray:
    """lim f^(k)(x) = prefactor_ratio * lambda_k t^k / k! for the order-k randomization (Sec. 6.1).

    With M pairs, w*_r = M^{-1/(2k)} v and E[z+^k - z-^k] = 1, the law of large numbers gives
    s * M * M^{-1/2} E[sigma^(k)(g)] t^k / k!; ``prefactor_ratio`` = s sqrt(M) is 1 for the
    paper's 1/sqrt(M) and 1/sqrt(2) for lazylab's 1/sqrt(2M) (a net of width 2M).
    """
    return prefactor_ratio * derivative_mean(activation, k) * np.asarray(t, float) ** k \
        / math.factorial(int(k))


def higher_order_slopes(k: int) -> dict[int, float]:
    """Predicted log-log slopes in m of |f^(j)|, j = 1..k+1 (Sec. 6.1, spec C15).

    -j/(2k) for j < k (mean-zero terms of size M^{-j/(2k)}), 0 for j = k, and the upper bound
    -1/(2k) for j = k + 1 (faster when E[z+^{k+1} - z-^{k+1}] = 0, as in the symmetric
    finite-difference construction, where it is -(k+1)/(2k)).
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    out = {j: -j / (2 * k) for j in range(1, k)}
    out[k] = 0.0
    out[k + 1] = -1 / (2 * k)
    return out


def relu_kernel(u: np.ndarray | float) -> np.ndarray:
    """K(u) = E[relu(Z1) relu(Z2)], corr(Z1, Z2) = u: (u (pi - arccos u) + sqrt(1 - u^2)) / (2 pi)."""
    u = np.clip(np.asarray(u, dtype=float), -1.0, 1.0)
    return (u * (math.pi - np.arccos(u)) + np.sqrt(1 - u * u)) / (2 * math.pi)


def relu_kernel_coefficient(p: int) -> float:
    """c_p in K(u) = sum_p c_p u^p: c_0 = 1/(2 pi), c_1 = 1/4, c_{2l} = ((2l-3)!!)^2 /
    (2 pi (2l)!) for l >= 1, 0 for odd p >= 3 (Lemma 9 proof); equals mu_p^2 / p!."""
    if int(p) != p or p < 0:
        raise ValueError(f"p must be a non-negative integer; got {p!r}")
    p = int(p)
    if p == 0:
        return 1 / (2 * math.pi)
    if p == 1:
        return 0.25
    if p % 2:
        return 0.0
    ell = p // 2
    dfact = math.prod(range(2 * ell - 3, 0, -2)) if ell >= 2 else 1
    return dfact**2 / (2 * math.pi * math.factorial(p))


def relu_kernel_coefficient_lower_bound(p: int) -> float:
    """(2 pi (p v 1)^3)^{-1} <= c_p for p in {0, 1, 2, 4, ...} (Lemma 9)."""
    return 1 / (2 * math.pi * max(int(p), 1) ** 3)


def _check_rep(p: int) -> int:
    if int(p) != p or p < 2 or not representable_exponent(p - 2):
        raise ValueError(f"p must be one of 2, 3, 4, 6, 8, ...; got {p!r}")
    return int(p)


def representer_norm_limit(p: int, alpha: float, beta_norm: float, B_x: float = 1.0) -> float:
    """m -> infinity limit of ||W*||_{2,4}^4 = 8 ||beta||^4 E[a(w0)^2]
    = 8 alpha^2 ||beta||^4 (B_x ||beta||)^{2(p-2)} / c_{p-2} (Theorem 7 construction, C.4)."""
    q = _check_rep(p) - 2
    e_a2 = alpha**2 * (B_x * beta_norm) ** (2 * q) * math.factorial(q) \
        / relu_hermite_coefficient(q) ** 2
    return 8 * beta_norm**4 * e_a2


def representer_norm_bound(p: int, alpha: float, beta_norm: float, B_x: float = 1.0,
                           delta: float = 0.1) -> float:
    """Theorem 7's B_{w,*}^4 = 32 pi ((p-2)^3 v 1) alpha^2 B_x^{2(p-2)} ||beta||^{2p} / delta,
    the bound on ||W*||_{2,4}^4 holding with probability >= 1 - delta (Markov, App. C.4)."""
    q = _check_rep(p) - 2
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}")
    return 32 * math.pi * max(q**3, 1) * alpha**2 * B_x ** (2 * q) * beta_norm ** (2 * p) / delta


def init_norm_bound(d: int, m: int, delta: float) -> float:
    """max_r B_x ||w0_r|| <= sqrt(8 (d log 5 + log(m / delta))) w.p. >= 1 - delta (Eq. (4),
    App. A.3: a 1/2-net of the sphere and a union bound)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}")
    return math.sqrt(8 * (d * math.log(5) + math.log(m / delta)))
