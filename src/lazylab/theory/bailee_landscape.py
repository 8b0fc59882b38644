"""Closed forms for Bai & Lee (2020) Sec. 4 (landscape, optimization) and Sec. 5 / App. C
(generalization): the predictions behind ``bailee-landscape`` and ``bailee-generalization``.

Landscape (Lemma 1, Theorems 2 and 4, Corollary 3). The planted W* is the Theorem 7
representer of f*(x) = alpha (beta.x)^2 (p = 2, sigma = relu^3/6, inputs on the sphere of
radius B_x): on the a = +1 half w*_r = 2 m^{-1/4} (2 pi)^{1/4} sqrt(alpha) beta, so

    ||W*||_{2,4}^4 = 8 ||beta||^4 * 2 pi alpha^2                      (App. C.4)
    E_Sigma term II (Lemma 1, l'' = 1, W = W*) = 8 pi alpha^2 mean_i (beta.x_i)^4 / m

(the second from s_m^2 sum_r sigma''(w0.x)^2 (w_r.x)^2 (w*_r.x)^2 with E relu(G)^2 = 1/2 over
the m/2 active rows). Corollary 3's regularizer form along W* Sigma' is App. B.5's closed form,
and Theorem 4's lambda recipe is lambda = (2 gamma OPT + eps) / (C ||W*||_{2,4}^8).

Generalization (Lemma 5, Theorem 6). For n i.i.d. inputs with covariance (B_x^2 / k) I_k on a
k-dimensional subspace (k = d: the sphere or the hypercube), the top eigenvalue of the sample
second-moment matrix X^T X / n tends to the Marchenko-Pastur edge (B_x^2 / k)(1 + sqrt(k/n))^2,
so

    M_x,op = (B_x^-2 ||X^T X / n||_op)^{1/2} -> (1 + sqrt(k / n)) / sqrt(k),

i.e. M ~ d^{-1/2} for isotropic data and flat in d for data on a fixed k-dimensional subspace
(Theorem 6: the O(1/sqrt d) factor behind the sample-complexity gain).
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: The absolute constant C of Corollary 3 from the proof's AM-GM step (App. B.5, alpha = 5/14):
#: 378 (14/5)^3 ~ 8.3e3.
COROLLARY3_C = 378.0 * (14.0 / 5.0) ** 3


def alpha_for_norm(norm_2_4: float, beta_norm: float) -> float:
    """alpha such that the p = 2 representer of alpha (beta.x)^2 has ||W*||_{2,4} = norm_2_4.

    ||W*||_{2,4}^4 = 16 pi alpha^2 ||beta||^4 (a(w0) = alpha sqrt(2 pi) is constant for p = 2),
    so alpha = norm_2_4^2 / (sqrt(16 pi) ||beta||^2).

    >>> round(alpha_for_norm(1.0, 1.0) ** 2 * 16 * math.pi, 12)
    1.0
    """
    if not (norm_2_4 > 0 and beta_norm > 0):
        raise ValueError("norm_2_4 and beta_norm must be > 0")
    return norm_2_4**2 / (math.sqrt(16 * math.pi) * beta_norm**2)


def lemma1_error_limit(alpha: float, t: np.ndarray, m: float) -> float:
    """E_{w0} of Lemma 1's error term at W = W* (squared loss, l'' = 1, p = 2 representer):

        E term II = 8 pi alpha^2 mean_i t_i^4 / m,   t_i = beta . x_i,

    from s_m^2 sum_{r: a_r = +1} relu(w0_r.x)^2 (w*_r.x)^4, E relu(G)^2 = 1/2 over m/2 rows and
    (w*_r.x)^4 = 32 pi alpha^2 t^4 / m (the representer of App. C.4).
    """
    return float(8 * math.pi * alpha**2 * np.mean(np.asarray(t, float) ** 4) / m)


def regularizer_sign_hessian_form(U: torch.Tensor, U_star: torch.Tensor) -> float:
    """E_Sigma' grad^2 R(U)[U* Sigma', U* Sigma'] / lam for R = lam ||U||_{2,4}^8 (App. B.5):

        sum_r [8 ||U||_{2,4}^4 (|u_r|^2 |u*_r|^2 + 2 <u_r, u*_r>^2) + 32 (|u_r|^2 <u_r, u*_r>)^2]

    (the Sigma' cross terms r != s average to 0).
    """
    U, S = U.detach().double(), U_star.detach().double()
    nu, ns = (U**2).sum(1), (S**2).sum(1)
    ip = (U * S).sum(1)
    n4 = float((nu**2).sum())
    return float((8 * n4 * (nu * ns + 2 * ip**2) + 32 * (nu * ip) ** 2).sum())


def theorem4_lambda(opt: float, eps: float, gamma: float, norm_star: float) -> float:
    """Theorem 4's regularization weight lambda = lambda_0 B_w*^-8 with C lambda_0 = 2 gamma OPT
    + eps (App. B.6)."""
    return (2 * gamma * opt + eps) / (COROLLARY3_C * norm_star**8)


def theorem4_norm_factor(opt: float, eps: float, gamma: float) -> float:
    """The proof's bound ||W_hat||_{2,4} <= factor * B_w* at an SOSP of L~_lam (App. B.6):
    lam ||W||^8 <= C lam B^8 + 2 OPT + eps with lam from :func:`theorem4_lambda` gives
    factor = (C (1 + (2 OPT + eps) / (2 gamma OPT + eps)))^{1/8}."""
    return (COROLLARY3_C * (1 + (2 * opt + eps) / (2 * gamma * opt + eps))) ** 0.125


def mp_operator_norm(k: int, n: int) -> float:
    """Marchenko-Pastur limit of M_x,op for isotropic data on k dimensions with n samples:
    (1 + sqrt(k / n)) / sqrt(k)."""
    return (1 + math.sqrt(k / n)) / math.sqrt(k)


def rademacher_bound(v: float, m: int, d: int) -> float:
    """Lemma 8 (matrix Rademacher maximal inequality, Tropp 2015):
    E max_{r <= m} ||sum_i sigma_i A_{r,i}||_op <= 4 sqrt(v log(2 m d)),
    v = max_r ||sum_i A_{r,i}^2||_op."""
    return 4 * math.sqrt(v * math.log(2 * m * d))
