"""Closed-form predictions of Bai & Lee (2020), "Beyond Linearization" (ICLR 2020).

Setting: f(x) = m^{-1/2} sum_r a_r sigma(w_r . x), symmetric init (Eq. (3)), w0_r ~ N(0, B_x^-2
I), ||x|| = B_x, so g = w0 . x ~ N(0, 1). Gaussian integration by parts gives
E[sigma^(k)(g)] = E[sigma(g) He_k(g)] = lambda_k, the Hermite coefficient of sigma (also for
relu^3/6, whose 4th derivative is a Dirac mass: lambda_4 = phi(0) = 1/sqrt(2 pi)).

* Coupling (Sec. 3), coherent W = m^{-1/4} v on the a = +1 half, t = v . x:
  |f^L_W| ~ m^{1/4} |lambda_1| |t| / 2,   |f^Q_W| -> |lambda_2| t^2 / 4,
  std_Sigma f ~ m^{-1/4} sqrt(E sigma'(g)^2 / 2) |t|,
  |E_Sigma f - f^Q| ~ m^{-1/2} |lambda_4| t^4 / 48,
  i.e. log-log slopes +1/4, 0, -1/4, -1/2 (:data:`COUPLING_SLOPES`). (The coefficients are our
  derivation, not the paper's: law of large numbers over the m/2 moved neurons; the even Taylor
  terms of E_Sigma f start at f^(4).)
* Order-k randomization (Sec. 6.1), w*_r = M^{-1/(2k)} v on M pairs, library prefactor
  (2M)^{-1/2}: f^(k) -> lambda_k t^k / (sqrt(2) k!), f^(j) = O_p(M^{-j/(2k)}) for j < k.
* ReLU random-feature kernel and its coefficients (proof of Lemma 9, App. A.2).
* Norms of the representers W* of Theorem 7 (App. C.4) and the init norm bound (Eq. (4),
  App. A.3).
* Sample complexities (Sec. 5.2): n* ~ d for the randomized / quadratic model and
  ~ d^2 for the NTK on 2-XOR.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from lazylab.activations import Activation, get_activation
from lazylab.data.harmonics import hermite_e
from lazylab.gauss import gauss_normal
from lazylab.models.bailee.constructions import relu_hermite_coefficient, representable_exponent
from lazylab.models.randomized import moment_matched_pair

#: Predicted log-log slopes in m of the coupling quantities (Sec. 3).
COUPLING_SLOPES: dict[str, float] = {"f_L": 0.25, "f_Q": 0.0, "std over signs": -0.25,
                                     "mean gap": -0.5}

#: Predicted slopes of log n* against log d on 2-XOR (Sec. 5.2): Theta~(d) samples for the
#: randomized / quadratic model (upper bound), Omega(d^2) for the NTK (Wei et al. 2019 lower
#: bound).
XOR_NSTAR_SLOPES: dict[str, float] = {"randomized net": 1.0, "QuadNTK": 1.0, "NTK": 2.0}


def _hermegauss(n: int) -> tuple[np.ndarray, np.ndarray]:
    return gauss_normal(n)


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
    """Predicted log-log slopes in m of |f^(j)|, j = 1..k+1 (Sec. 6.1).

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


def folded_normal_mean(mu: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """E|N(mu, sd^2)| = sd sqrt(2/pi) exp(-mu^2 / (2 sd^2)) + mu (1 - 2 Phi(-mu / sd))."""
    from scipy.special import ndtr

    mu, sd = np.broadcast_arrays(np.asarray(mu, float), np.asarray(sd, float))
    out = np.abs(mu).astype(float)
    pos = sd > 0
    z = mu[pos] / sd[pos]
    out[pos] = sd[pos] * math.sqrt(2 / math.pi) * np.exp(-z * z / 2) + mu[pos] * (1 - 2 * ndtr(-z))
    return out


def higher_order_term_stats(activation: str | Activation, k: int, j: int, t: np.ndarray,
                            pairs: float, prefactor_ratio: float = 1 / math.sqrt(2),
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of f^(j)(x) under the order-k randomization, per t = v . x.

    f^(j) = s sum_{r <= M} sigma^(j)(g_r) / j! Delta_{j,r} (M^{-1/(2k)} t)^j with g_r ~ N(0, 1)
    iid and Delta_j = z+^j - z-^j (z+ and z- independent, :func:`moment_matched_pair`), so with
    s sqrt(M) = ``prefactor_ratio``:

        mean = ratio sqrt(M) lambda_j E[Delta_j] / j! M^{-j/(2k)} t^j,
        var  = ratio^2 (E[sigma^(j)(g)^2] E[Delta_j^2] - lambda_j^2 E[Delta_j]^2) / j!^2
               M^{-j/k} t^{2j}.

    For j = k the mean is the limit of :func:`higher_order_limit` and the sd is O(M^{-1/2});
    for j < k the mean is 0 and the sd is O(M^{-j/(2k)}) (Sec. 6.1).
    """
    act = get_activation(activation)
    pair = moment_matched_pair(k)

    def law_moment(nodes: tuple[float, ...], probs: tuple[float, ...], q: int) -> float:
        return sum(pr * z**q for z, pr in zip(nodes, probs, strict=True))

    plus, minus = (pair.plus_nodes, pair.plus_probs), (pair.minus_nodes, pair.minus_probs)
    e_delta = pair.moment_gap(j)
    e_delta2 = (law_moment(*plus, 2 * j) + law_moment(*minus, 2 * j)
                - 2 * law_moment(*plus, j) * law_moment(*minus, j))
    lam = derivative_mean(act, j)
    e_d2 = gaussian_mean(lambda u: act.deriv(u, j) ** 2)
    t = np.asarray(t, float)
    fact = math.factorial(j)
    mean = prefactor_ratio * math.sqrt(pairs) * lam * e_delta / fact \
        * pairs ** (-j / (2 * k)) * t**j
    var = prefactor_ratio**2 * max(e_d2 * e_delta2 - (lam * e_delta) ** 2, 0.0) / fact**2 \
        * pairs ** (-j / k) * t ** (2 * j)
    return mean, np.sqrt(var)


def relu_kernel(u: np.ndarray | float) -> np.ndarray:
    """K(u) = E[relu(Z1) relu(Z2)] for corr(Z1, Z2) = u:
    (u (pi - arccos u) + sqrt(1 - u^2)) / (2 pi)."""
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
    return dfact**2 / math.factorial(p) / (2 * math.pi)  # int / int: no float overflow


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


def representer_norm_sd(p: int, alpha: float, beta_norm: float, B_x: float,
                        m: int) -> float:
    """Standard deviation over W0 of ||W*||_{2,4}^4 = 8 ||beta||^4 mean_{m/2 pairs} a(w0)^2:
    8 ||beta||^4 A^2 sd(He_q(G)^2) / sqrt(m/2), A = alpha (B_x ||beta||)^q / mu_q."""
    q = _check_rep(p) - 2
    A = alpha * (B_x * beta_norm) ** q / relu_hermite_coefficient(q)
    e4 = gaussian_mean(lambda u: hermite_e(q, u) ** 4)
    var = max(e4 - math.factorial(q) ** 2, 0.0)
    return 8 * beta_norm**4 * A**2 * math.sqrt(var / (m / 2))


def _gauss2(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], rho: np.ndarray,
            nodes: int = 96) -> np.ndarray:
    """E[fn(G1, G2)] for standard Gaussians with correlation rho (vector), by tensor
    Gauss-Hermite quadrature with G2 = rho G1 + sqrt(1 - rho^2) H."""
    x, w = _hermegauss(nodes)
    rho = np.asarray(rho, float)[:, None, None]
    g1 = x[None, :, None]
    g2 = rho * g1 + np.sqrt(np.clip(1 - rho * rho, 0, None)) * x[None, None, :]
    return np.einsum("i,j,nij->n", w, w, fn(np.broadcast_to(g1, g2.shape), g2))


def representer_errors(p: int, alpha: float, beta_norm: float, B_x: float, cos: np.ndarray,
                       m: float) -> tuple[float, float]:
    """Predicted RMS errors over test points of the Theorem 7 representer, sigma = relu^3/6.

    With c = beta_hat . x / B_x, t = beta . x, u = w0 . x, g = B_x beta_hat . w0 (corr(u, g) = c)
    and a = A He_q(g), q = p - 2:

    * f^Q_{W*}(x) - f*(x) = t^2 [(2/m) sum_pairs relu(u_r) a_r - alpha t^q] has mean 0 and
      variance (2/m) t^4 (A^2 E[relu(u)^2 He_q(g)^2] - alpha^2 t^{2q});
    * the randomized net adds Var_Sigma f ~ s^2 sum_r sigma'(u_r)^2 (w*_r . x)^2
      = 2 m^{-1/2} t^2 E[relu(u)^4 |a|] / 4 (the f^L noise, slope -1/4).

    Returns (rms of f^Q_{W*} - f*, rms over Sigma of f(W0 + W* Sigma) - f*), both averaged as
    sqrt(mean over x of the expected squared error).
    """
    q = _check_rep(p) - 2
    A = alpha * (B_x * beta_norm) ** q / relu_hermite_coefficient(q)
    c = np.asarray(cos, float)
    t = beta_norm * B_x * c
    relu = lambda u: np.maximum(u, 0.0)  # noqa: E731
    e_sq = _gauss2(lambda u, g: relu(u) ** 2 * hermite_e(q, g) ** 2, c)
    var_q = (2.0 / m) * t**4 * np.maximum(A**2 * e_sq - alpha**2 * t ** (2 * q), 0.0)
    e_lin = _gauss2(lambda u, g: relu(u) ** 4 * np.abs(hermite_e(q, g)), c)
    var_sign = 2.0 * m**-0.5 * t**2 * abs(A) * e_lin / 4.0
    return float(np.sqrt(var_q.mean())), float(np.sqrt((var_q + var_sign).mean()))


def init_norm_bound(d: int, m: int, delta: float) -> float:
    """max_r B_x ||w0_r|| <= sqrt(8 (d log 5 + log(m / delta))) w.p. >= 1 - delta (Eq. (4),
    App. A.3: a 1/2-net of the sphere and a union bound)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta!r}")
    return math.sqrt(8 * (d * math.log(5) + math.log(m / delta)))
