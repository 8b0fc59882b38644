"""Closed-form risks of Ghorbani, Mei, Misiakiewicz, Montanari (2019), "Limitations of lazy
training of two-layers neural networks" (NeurIPS 2019).

All risks are normalised, R / R0: R0 = ||f*||^2 = 2||B||_F^2 for the centred quadratic target
(qf) and R0 = E y^2 = 1 for the Gaussian mixture (mg).  rho = N/d.  Conventions follow the
paper: Hermite coefficients
lambda_k = E[sigma(G) He_k(G)] (unnormalised He_k), lambda~ = E sigma(G)^2 - lambda_1^2, first
layer weights w_i ~ N(0, Gamma) with Tr Gamma = 1 (qf, A2) or Tr(Gamma Sigma) = 1 (mg, B2),
W = (w_1, ..., w_N) of shape (d, N).

qf (f*(x) = b0 + x^T B x, x ~ N(0, I)):
    RF   Theorem 1 / Eq. (10), Corollary 1 / Eq. (12), Eq. (11)   rf_qf, rf_qf_quadratic, ...
    NT   Theorem 2 (and its exact finite-d Haar expectation)        nt_qf, nt_qf_finite
    NN   Theorem 3: 1 - sum_{i<=N} lambda_i(B)^2 / ||B||_F^2        nn_qf, nn_qf_exponential
mg (x | y=+-1 ~ N(0, Sigma -+ Delta)):
    RF   Theorem 4 / Eq. (15)                                       rf_mg, rf_mg_iso
    NT   Theorem 5 (realised W and the asymptotic kappa form)       nt_mg_given_W, nt_mg
    NN   Theorem 6                                                  nn_mg, nn_mg_limit
    Bayes error (dotted line of Fig. 2)                             mmse_mg

Example
-------
>>> round(rf_qf_iso(1.0, 0.5), 4), round(nt_qf(0.5, 0.5), 4), round(nn_qf_exponential(0.5), 4)
(0.75, 0.375, 0.0333)
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from lazylab.activations import Activation, get_activation
from lazylab.data.mixture import GaussianMixture, mmse_asymptotic
from lazylab.solve.spectral import span_complement


# ----------------------------------------------------------------------------- helpers
def _mat(name: str, M, d: int | None = None, *, symmetric: bool = True) -> np.ndarray:
    A = np.asarray(M.detach().cpu().double().numpy() if hasattr(M, "detach") else M,
                   dtype=np.float64)
    if A.ndim != 2 or (symmetric and A.shape[0] != A.shape[1]):
        raise ValueError(f"{name} must be a {'square ' if symmetric else ''}matrix; "
                         f"got shape {A.shape}")
    if d is not None and A.shape[0] != d:
        raise ValueError(f"{name} must have {d} rows; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must have finite entries")
    if symmetric:
        scale = max(1.0, float(np.abs(A).max()))
        if not np.allclose(A, A.T, rtol=0.0, atol=1e-10 * scale):
            raise ValueError(f"{name} must be symmetric")
        A = 0.5 * (A + A.T)
    return A


def _rho(rho) -> np.ndarray:
    r = np.asarray(rho, dtype=np.float64)
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"rho must be a non-negative finite number (or array); got {rho!r}")
    return r


def _tau_arg(name: str, t) -> np.ndarray:
    t = np.asarray(t, dtype=np.float64)
    if not np.all(np.isfinite(t)) or np.any(t < -1e-12) or np.any(t > 1 + 1e-12):
        raise ValueError(f"{name} must lie in [0, 1]; got {t!r}")
    return t


def _out(x: np.ndarray):
    """A Python float for 0-d results, the array otherwise."""
    x = np.asarray(x, dtype=np.float64)
    return float(x) if x.ndim == 0 else x


def _hermite_params(activation: str | Activation) -> tuple[float, float, float]:
    """(lambda_1, lambda_2, lambda~) of sigma; Theorems 1 and 4 need lambda_0 = E sigma(G) = 0."""
    act = get_activation(activation)
    lam = act.hermite(2)
    scale = math.sqrt(max(act.second_moment(), 1e-300))
    if abs(lam[0]) > 1e-9 * max(1.0, scale):
        raise ValueError(f"activation must have lambda_0 = E sigma(G) = 0 (Theorems 1, 4 assume a "
                         f"centred sigma; use 'quad_centered' rather than 'quad'); "
                         f"{act.name!r} has lambda_0 = {lam[0]:.4g}")
    lam_t = act.lambda_tilde()
    if lam_t <= 1e-12 * max(1.0, scale**2):
        raise ValueError(f"activation must be nonlinear (lambda~ > 0, assumption A1); "
                         f"{act.name!r} has lambda~ = {lam_t:.3g}")
    return lam[1], lam[2], lam_t


def tau(M) -> float:
    """tau(M) = Tr(M)^2 / (d ||M||_F^2) in [0, 1] (tau_B of Theorem 2, tau_Delta of Thm 5)."""
    A = _mat("M", M)
    f2 = float(np.sum(A**2))
    if f2 == 0:
        raise ValueError("M must be nonzero")
    return float(np.trace(A)) ** 2 / (A.shape[0] * f2)


def solve_psi(rho: float, lam1: float, lam_tilde: float, atoms) -> float:
    """The unique psi > 0 of Eq. (9) / (14):

        -lambda~ = -rho/psi + int lambda_1^2 t / (1 + lambda_1^2 t psi) D(dt),

    with D the empirical law of ``atoms`` (finite-d plug-in: the eigenvalues of d*Gamma, or of
    d*Gamma^1/2 Sigma Gamma^1/2 for mg).  With x_t = lambda_1^2 t psi the equation reads
    lambda~ psi = rho - mean(x_t/(1 + x_t)); the right side decreases in psi, so the root is
    bracketed by [rho/(lambda~ + lambda_1^2 mean t), rho/lambda~] and found by brentq.
    When lambda_1 = 0, psi = rho/lambda~.
    """
    if not (math.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be positive; got {rho!r}")
    if not lam_tilde > 0:
        raise ValueError(f"lam_tilde must be positive; got {lam_tilde!r}")
    t = np.asarray(atoms, dtype=np.float64).ravel()
    if t.size == 0 or np.any(t < -1e-12) or not np.all(np.isfinite(t)):
        raise ValueError("atoms must be a non-empty array of non-negative finite numbers")
    a = lam1**2 * np.clip(t, 0, None)
    hi = rho / lam_tilde
    if a.max() == 0:
        return hi
    lo = rho / (lam_tilde + a.mean())

    def h(psi: float) -> float:
        return lam_tilde * psi - rho + float(np.mean(a * psi / (1 + a * psi)))

    if h(lo) >= 0:
        return lo
    if h(hi) <= 0:
        return hi
    return brentq(h, lo, hi, xtol=1e-15, rtol=1e-14, maxiter=500)


# ----------------------------------------------------------------------------- qf: RF
def _gamma(Gamma, d: int, trace_with: np.ndarray | None = None) -> np.ndarray:
    """Gamma (default isotropic), checked: PSD with Tr(Gamma) = 1, or Tr(Gamma Sigma) = 1 when
    ``trace_with`` = Sigma is given."""
    if Gamma is None:
        return np.eye(d) / (d if trace_with is None else float(np.trace(trace_with)))
    G = _mat("Gamma", Gamma, d)
    ref = G if trace_with is None else G @ trace_with
    tr = float(np.trace(ref))
    what = "Tr(Gamma)" if trace_with is None else "Tr(Gamma Sigma)"
    if abs(tr - 1) > 1e-8:
        raise ValueError(f"Gamma must satisfy {what} = 1 (assumption A2/B2); got {tr:.6g}")
    if np.linalg.eigvalsh(G)[0] < -1e-12 * max(1.0, float(np.abs(G).max())):
        raise ValueError("Gamma must be positive semidefinite")
    return G


def rf_qf(rho, B, Gamma=None, activation: str | Activation = "quad_centered"):
    """Theorem 1 / Eq. (10): RF risk for the centred quadratic target (R/R0):

        R/R0 = 1 - (d <Gamma, B>^2 / ||B||_F^2) * s / (2 + s d ||Gamma||_F^2),  s = psi lambda_2^2,

    psi from Eq. (9) with D = ESD of d*Gamma (finite-d plug-in).  Invariant under
    sigma -> k sigma (psi ~ 1/k^2, lambda_2^2 ~ k^2).  For sigma = u^2 - 1, psi lambda_2^2 = 2 rho
    and this is Eq. (12) (:func:`rf_qf_quadratic`).

    Parameters
    ----------
    rho : N/d (> 0), scalar or array.
    B : (d, d) symmetric target matrix.
    Gamma : (d, d) weight covariance with Tr Gamma = 1; default I/d (isotropic, "RF(I)").
    activation : name or :class:`Activation` with lambda_0 = 0.
    """
    Bm = _mat("B", B)
    d = Bm.shape[0]
    G = _gamma(Gamma, d)
    lam1, lam2, lam_t = _hermite_params(activation)
    r = _rho(rho)
    atoms = d * np.linalg.eigvalsh(G)
    align = d * float(np.sum(G * Bm)) ** 2 / float(np.sum(Bm**2))
    gnorm = d * float(np.sum(G**2))

    def one(x: float) -> float:
        if x == 0:
            return 1.0
        s = solve_psi(x, lam1, lam_t, atoms) * lam2**2
        return 1.0 - align * s / (2 + s * gnorm)

    return _out(np.vectorize(one, otypes=[float])(r))


def rf_qf_quadratic(rho, B, Gamma=None):
    """Corollary 1 / Eq. (12), sigma = u^2 - 1:
    R/R0 = 1 - rho d <B, Gamma>^2 / (||B||_F^2 (1 + rho d ||Gamma||_F^2)).  Gamma default I/d."""
    Bm = _mat("B", B)
    d = Bm.shape[0]
    G = _gamma(Gamma, d)
    r = _rho(rho)
    align = d * float(np.sum(G * Bm)) ** 2 / float(np.sum(Bm**2))
    return _out(1.0 - r * align / (1.0 + r * d * float(np.sum(G**2))))


def rf_qf_limit(B, Gamma) -> float:
    """Eq. (11), rho -> infinity: 1 - <Gamma, B>^2 / (||Gamma||_F^2 ||B||_F^2); > 0 unless
    Gamma is proportional to B."""
    Bm = _mat("B", B)
    G = _mat("Gamma", Gamma, Bm.shape[0])
    return 1.0 - float(np.sum(G * Bm)) ** 2 / (float(np.sum(G**2)) * float(np.sum(Bm**2)))


def rf_qf_iso(rho, tau_B):
    """Eq. (12) with Gamma = I/d: R/R0 = 1 - rho/(1 + rho) tau_B."""
    r, t = _rho(rho), _tau_arg("tau_B", tau_B)
    return _out(1.0 - r / (1.0 + r) * t)


def rf_qf_opt(rho, tau_B):
    """Eq. (12) with Gamma* = B / Tr B ("RF(Gamma*)"): R/R0 = tau_B / (rho + tau_B)."""
    r, t = _rho(rho), _tau_arg("tau_B", tau_B)
    if np.any(t <= 0):
        raise ValueError("tau_B must be positive for Gamma* = B/Tr B (needs Tr B != 0)")
    return _out(t / (r + t))


# ----------------------------------------------------------------------------- qf: NT
def nt_qf(rho, tau_B):
    """Theorem 2 (sigma = u^2, w_i ~ N(0, I/d)): E R_NT / R0 = (1-rho)_+^2 (1 - tau_B)
    + (1-rho)_+ tau_B = (1-rho)_+^2 + rho (1-rho)_+ tau_B; exactly 0 for rho >= 1."""
    r, t = _rho(rho), _tau_arg("tau_B", tau_B)
    p = np.clip(1.0 - r, 0.0, None)
    return _out(p**2 * (1.0 - t) + p * t)


def haar_projection_moments(d: int, k: int) -> tuple[float, float]:
    """(A, C) with E ||P B P||_F^2 = (A + C) ||B||_F^2 + C Tr(B)^2 for a Haar-random rank-k
    orthogonal projector P in R^d and any symmetric B (Weingarten calculus):
    C = k(d - k) / (d (d + 2)(d - 1)),  A = (k^2/d - 2C)/d."""
    if int(d) != d or d < 1 or int(k) != k or not 0 <= k <= d:
        raise ValueError(f"need integers d >= 1 and 0 <= k <= d; got d={d!r}, k={k!r}")
    if d == 1:
        return float(k), 0.0
    C = k * (d - k) / (d * (d + 2) * (d - 1))
    return (k * k / d - 2 * C) / d, C


def nt_qf_finite(d: int, N: int, B) -> float:
    """Exact finite-d E_W[R_NT(W)] / R0 for w_i iid N(0, I/d) (Theorem 2, in expectation over W):
    R_NT(W) = 2 ||P_perp B P_perp||_F^2 with P_perp Haar of rank k = (d - N)_+, so
    E R_NT / R0 = (A + C) + C Tr(B)^2 / ||B||_F^2 (:func:`haar_projection_moments`)."""
    Bm = _mat("B", B, d)
    if int(N) != N or N < 0:
        raise ValueError(f"N must be a non-negative integer; got {N!r}")
    A, C = haar_projection_moments(d, max(d - int(N), 0))
    return A + C + C * float(np.trace(Bm)) ** 2 / float(np.sum(Bm**2))


# ----------------------------------------------------------------------------- qf: NN
def nn_qf(N: int, B) -> float:
    """Theorem 3 (B PSD, sigma = u^2, second layer 1): inf_{W,c} L / R0 =
    1 - sum_{i <= N} lambda_i(B)^2 / ||B||_F^2 (top-N eigenvalues); 0 for N >= d."""
    Bm = _mat("B", B)
    if int(N) != N or N < 0:
        raise ValueError(f"N must be a non-negative integer; got {N!r}")
    ev = np.linalg.eigvalsh(Bm)[::-1]
    if ev[-1] < -1e-10 * max(1.0, abs(ev[0])):
        raise ValueError("B must be positive semidefinite (Theorem 3); "
                         f"its smallest eigenvalue is {ev[-1]:.3g}")
    n = min(int(N), ev.size)
    if n == ev.size:
        return 0.0
    return float(np.sum(ev[n:] ** 2) / np.sum(ev**2))


def nn_qf_exponential(rho):
    """Theorem 3 for B's spectrum iid Exp(1), d -> inf: with q = ln(1/rho),
    NN(rho) = 1 - rho (q^2 + 2q + 2)/2 for rho < 1 and 0 for rho >= 1
    (the top rho-fraction are the b > q, and int_q^inf x^2 e^-x dx = e^-q (q^2 + 2q + 2))."""
    r = _rho(rho)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.log(1.0 / np.clip(r, 1e-300, None))
        val = 1.0 - r * (q**2 + 2 * q + 2) / 2
    return _out(np.where(r >= 1, 0.0, np.where(r == 0, 1.0, val)))


# ----------------------------------------------------------------------------- mg: RF
def rf_mg(rho, Delta, Gamma=None, Sigma=None, activation: str | Activation = "quad_centered"):
    """Theorem 4 / Eq. (15): R/R0 = (1 + zeta_1 s) / (1 + (zeta_1 + zeta_2) s), s = lambda_2^2 psi,
    with zeta_1 = d Tr(Sigma Gamma Sigma Gamma)/2, zeta_2 = d Tr(Delta Gamma)^2 / 4 and psi from
    Eq. (14), D = ESD of d Gamma^1/2 Sigma Gamma^1/2.  Gamma defaults to I / Tr(Sigma)
    (isotropic, Tr(Gamma Sigma) = 1).  Sigma = I, Gamma = I/d, sigma = u^2 - 1 gives
    R = 1 / (1 + rho/(1+rho) Tr(Delta)^2/(2d)) (:func:`rf_mg_iso`; rho/(1+rho), not the
    rho/(1+2rho) that Eq. (17) prints: the exact population risk confirms rho/(1+rho))."""
    D = _mat("Delta", Delta)
    d = D.shape[0]
    S = np.eye(d) if Sigma is None else _mat("Sigma", Sigma, d)
    G = _gamma(Gamma, d, trace_with=S)
    lam1, lam2, lam_t = _hermite_params(activation)
    r = _rho(rho)
    ev, V = np.linalg.eigh(G)
    Gh = (V * np.sqrt(np.clip(ev, 0, None))) @ V.T
    atoms = d * np.linalg.eigvalsh(Gh @ S @ Gh)
    SG = S @ G
    z1 = d * float(np.sum(SG * SG.T)) / 2
    z2 = d * float(np.sum(D * G)) ** 2 / 4

    def one(x: float) -> float:
        if x == 0:
            return 1.0
        s = solve_psi(x, lam1, lam_t, atoms) * lam2**2
        return (1 + z1 * s) / (1 + (z1 + z2) * s)

    return _out(np.vectorize(one, otypes=[float])(r))


def rf_mg_iso(rho, trace_sq_over_2d):
    """Eq. (17), RF line: 1 / (1 + rho/(1+rho) * t) with t = Tr(Delta)^2 / (2d)
    (paper's Delta: t -> 9/8, limit rho -> inf 1/(1 + t) = 0.4706)."""
    r = _rho(rho)
    t = np.asarray(trace_sq_over_2d, dtype=np.float64)
    if np.any(t < 0):
        raise ValueError("trace_sq_over_2d must be non-negative")
    return _out(1.0 / (1.0 + r / (1.0 + r) * t))


# ----------------------------------------------------------------------------- mg: NT
def kappa(rho, tau_delta):
    """kappa(rho, Delta) = 1 - (1-rho)_+^2 (1 - tau_Delta) - (1-rho)_+ tau_Delta (Theorem 5)."""
    return _out(1.0 - np.asarray(nt_qf(rho, tau_delta)))


def nt_mg_asymptotic(rho, fro2, tau_delta):
    """Theorem 5 (Sigma = I, w_i ~ N(0, I/d)): R = 2 / (2 + kappa(rho, tau_Delta) ||Delta||_F^2)
    with fro2 = ||Delta||_F^2; 1/(1 + fro2/2) for rho >= 1."""
    f = np.asarray(fro2, dtype=np.float64)
    if np.any(f < 0):
        raise ValueError("fro2 must be non-negative")
    return _out(2.0 / (2.0 + np.asarray(kappa(rho, tau_delta)) * f))


def nt_mg(rho, Delta):
    """Theorem 5 asymptotic form for a given Delta (Sigma = I, isotropic W):
    2 / (2 + kappa(rho, tau_Delta) ||Delta||_F^2)."""
    D = _mat("Delta", Delta)
    return nt_mg_asymptotic(rho, float(np.sum(D**2)), tau(D))


def nt_mg_given_W(W, Delta, Sigma=None) -> float:
    """Theorem 5 for a realised W (d, N):
    R = 2 / (2 + ||Delta~||_F^2 - ||P_perp Delta~ P_perp||_F^2),
    Delta~ = Sigma^-1/2 Delta Sigma^-1/2, P_perp the projector onto span(Sigma^1/2 W)^perp
    (0 when that span is R^d).  This is the exact minimum of the mg risk over the NT class once
    the O(1/d) term 2 Tr(M Delta M Delta) is dropped."""
    D = _mat("Delta", Delta)
    d = D.shape[0]
    Wm = _mat("W", W, d, symmetric=False)
    if Sigma is None:
        Dt, SW = D, Wm
    else:
        mix = GaussianMixture(D, Sigma)
        Dt = mix.delta_tilde()
        ev, V = np.linalg.eigh(mix.Sigma)
        SW = (V * np.sqrt(ev)) @ V.T @ Wm
    U = span_complement(SW)
    perp = float(np.sum((U.T @ Dt @ U) ** 2)) if U.shape[1] else 0.0
    return 2.0 / (2.0 + float(np.sum(Dt**2)) - perp)


# ----------------------------------------------------------------------------- mg: NN, MMSE
def nn_mg(N: int, Delta, Sigma=None) -> float:
    """Theorem 6: R = 2 / (2 + sum_{i <= N ^ d} lambda_i(Delta~)^2), lambda_i the singular
    values (|eigenvalues|) of Delta~ in decreasing order."""
    if int(N) != N or N < 0:
        raise ValueError(f"N must be a non-negative integer; got {N!r}")
    D = _mat("Delta", Delta)
    Dt = D if Sigma is None else GaussianMixture(D, Sigma).delta_tilde()
    s2 = np.sort(np.linalg.eigvalsh(Dt) ** 2)[::-1]
    return 2.0 / (2.0 + float(np.sum(s2[: int(N)])))


def nn_mg_limit(rho, values=(1.0, 1.5, 2.0), weights=None):
    """Theorem 6 for Delta = diag(v_j/sqrt(d)), v_j iid from ``values`` with probabilities
    ``weights`` (default uniform), d -> inf: R = 2/(2 + S(rho)) with S(rho) = E[v^2; top
    rho-fraction of v^2] (paper: S = 4 rho for rho <= 1/3, ..., 29/12 for rho >= 1).  With the
    realised frequencies as ``weights`` it equals :func:`nn_mg` exactly at rho = N/d."""
    r = _rho(rho)
    v2 = np.asarray(values, dtype=np.float64).ravel() ** 2
    p = (np.full(v2.size, 1.0 / v2.size) if weights is None
         else np.asarray(weights, dtype=np.float64).ravel())
    if p.shape != v2.shape or np.any(p < 0) or abs(p.sum() - 1) > 1e-9:
        raise ValueError("weights must be non-negative, sum to 1 and match values")
    order = np.argsort(-v2)
    v2, p = v2[order], p[order]
    cum = np.concatenate([[0.0], np.cumsum(p)])
    mass = np.clip(r[..., None] - cum[:-1], 0.0, None)
    S = np.sum(v2 * np.minimum(mass, p), axis=-1)
    return _out(2.0 / (2.0 + S))


def mmse_mg(Delta, Sigma=None, method: str = "asymptotic", n: int = 200_000,
            seed: int = 0) -> float:
    """Bayes error of the mixture (R0 = 1): ``"asymptotic"`` is 1 - E tanh Z, Z ~ N(m/2, m/2),
    m = ||Delta~||_F^2; ``"mc"`` averages 1 - tanh^2(LLR/2) over n exact samples (seeded).
    See :meth:`lazylab.data.mixture.GaussianMixture.bayes_mmse`."""
    mix = GaussianMixture(Delta, Sigma)
    if method == "asymptotic":
        return mmse_asymptotic(mix.snr())
    return mix.bayes_mmse(method, n=n, seed=seed)
