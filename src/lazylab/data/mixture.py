"""Mixture of two centred Gaussians of Ghorbani, Mei, Misiakiewicz, Montanari (2019), model (mg).

    y = +1 or -1 with probability 1/2,
    x | y = +1 ~ N(0, Sigma - Delta),    x | y = -1 ~ N(0, Sigma + Delta)       (paper Sec. 3)

with ||Delta||_op = Theta(1/sqrt(d)) (assumption M2).  The paper's Fig. 2 uses Sigma = I and
Delta = diag(v_j / sqrt(d)), v_j uniform on {1, 1.5, 2}.  Class +1 has the smaller variance
along the positive directions of Delta.

Exact risk of a quadratic predictor f(x) = c + x^T M x (Sec. 3; E y^2 = 1 = R0).  With
C_s = Sigma - s Delta,
    E[(s - c - x^T M x)^2 | y = s] = (s - c - Tr(M C_s))^2 + 2 Tr(M C_s M C_s),
and averaging over s = +-1 gives

    Q(M, c) = 1 + 2 Tr(M Delta) + (c + Tr(M Sigma))^2 + Tr(M Delta)^2
                + 2 Tr(M Sigma M Sigma) + 2 Tr(M Delta M Delta).

Bayes error (the "MMSE" line of Fig. 2): E[y | x] = tanh(LLR(x)/2) with
LLR(x) = log p_+(x)/p_-(x) = -1/2 x^T [(Sigma - Delta)^-1 - (Sigma + Delta)^-1] x
- 1/2 log det(Sigma - Delta)/det(Sigma + Delta), and MMSE = 1 - E tanh^2(LLR/2).
Asymptotically (CLT under M2) LLR | y ~ N(y m, 2m) with m = ||Sigma^-1/2 Delta Sigma^-1/2||_F^2,
so MMSE_inf(m) = 1 - E tanh(Z), Z ~ N(m/2, m/2) (Nishimori identity E tanh^2 = E tanh).

Example
-------
>>> import torch
>>> mix = GaussianMixture(diag_delta(50, seed=0))
>>> X, y = mix.sample(4, torch.Generator().manual_seed(0))
>>> sorted(set(y.tolist())) <= [-1.0, 1.0]
True
>>> mix.risk_of_quadratic(0 * mix.Delta, 0.0)
1.0
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lazylab.data.quadratic import as_matrix, is_symmetric, per_device, sampling_device
from lazylab.gauss import gauss_normal
from lazylab.seeding import numpy_rng, torch_generator

# Gauss-Hermite (probabilists') rule for E g(G), G ~ N(0,1); tanh is entire and bounded, so
# 121 nodes integrate it to machine precision for the m (< 50) of interest.
_GH_NODES, _GH_WEIGHTS = gauss_normal(121)

# Monte Carlo Bayes error is accumulated in chunks so memory stays at chunk * d doubles.
_MC_CHUNK = 20_000


def diag_delta(d: int, seed: int, *, values=(1.0, 1.5, 2.0)) -> np.ndarray:
    """The paper's Delta = diag(v_j / sqrt(d)) with v_j drawn uniformly from ``values``.

    Parameters
    ----------
    d : dimension (>= 1).
    seed : seed of the numpy Generator (``lazylab.seeding.numpy_rng``).
    values : the support of v_j (paper: {1, 1.5, 2}, so ||Delta||_F^2 -> 29/12 and
        Tr(Delta)^2/(2d) -> 9/8).  Sigma +- Delta must stay positive definite, i.e.
        max |v| < sqrt(d) when Sigma = I.

    Returns
    -------
    (d, d) float64 diagonal matrix.
    """
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")
    vals = np.asarray(values, dtype=np.float64).ravel()
    if vals.size == 0 or not np.all(np.isfinite(vals)):
        raise ValueError(f"values must be a non-empty sequence of finite numbers; got {values!r}")
    v = numpy_rng(seed).choice(vals, size=int(d))
    return np.diag(v / math.sqrt(d))


def mmse_asymptotic(m: float) -> float:
    """MMSE_inf(m) = 1 - E tanh(Z), Z ~ N(m/2, m/2), by Gauss-Hermite quadrature.

    m = ||Delta~||_F^2 is the whitened signal strength (Gaussian-LLR limit; the paper does not
    say how it computed the Bayes error of Fig. 2).
    """
    m = float(m)
    if not math.isfinite(m) or m < 0:
        raise ValueError(f"m must be a non-negative finite number; got {m!r}")
    z = m / 2 + math.sqrt(m / 2) * _GH_NODES
    return float(1.0 - np.sum(_GH_WEIGHTS * np.tanh(z)))


def _sym_sqrt_inv(S: np.ndarray) -> np.ndarray:
    ev, V = np.linalg.eigh(S)
    return (V / np.sqrt(ev)) @ V.T


class GaussianMixture:
    """Two centred Gaussians with covariances Sigma -+ Delta and labels +-1 (model (mg)).

    Parameters
    ----------
    Delta : (d, d) symmetric matrix (numpy or torch).
    Sigma : (d, d) symmetric positive definite matrix; default I_d.

    Raises ValueError unless Sigma - Delta and Sigma + Delta are both positive definite.

    Attributes
    ----------
    Delta, Sigma : float64 numpy arrays.
    d : dimension.
    """

    def __init__(self, Delta, Sigma=None) -> None:
        D = as_matrix("Delta", Delta)
        d = D.shape[0]
        S = np.eye(d) if Sigma is None else as_matrix("Sigma", Sigma, d)
        for name, A in (("Delta", D), ("Sigma", S)):
            if not is_symmetric(A):
                raise ValueError(f"{name} must be a symmetric matrix")
        self.Delta = 0.5 * (D + D.T)
        self.Sigma = 0.5 * (S + S.T)
        self.d = d
        chol = {}
        for s, name in ((1, "Sigma - Delta"), (-1, "Sigma + Delta")):
            try:
                chol[s] = np.linalg.cholesky(self.Sigma - s * self.Delta)
            except np.linalg.LinAlgError:
                raise ValueError(f"{name} must be positive definite (class covariance); "
                                 "reduce ||Delta||_op") from None
        self._chol = chol
        self._diagonal = bool(np.array_equal(self.Delta, np.diag(np.diag(self.Delta)))
                              and np.array_equal(self.Sigma, np.diag(np.diag(self.Sigma))))

    # ---------------------------------------------------------------- exact moments
    def delta_tilde(self) -> np.ndarray:
        """Whitened Delta~ = Sigma^-1/2 Delta Sigma^-1/2."""
        R = _sym_sqrt_inv(self.Sigma)
        return R @ self.Delta @ R

    def snr(self) -> float:
        """m = ||Delta~||_F^2, the whitened signal strength of Theorems 5-6 and the MMSE."""
        return float(np.sum(self.delta_tilde() ** 2))

    def risk_of_quadratic(self, M, c: float) -> float:
        """Exact E[(y - c - x^T M x)^2] = Q(M, c) (module docstring; includes the O(1/d) term
        2 Tr(M Delta M Delta)).  M is symmetrised first.  R0 = Q(0, 0) = 1."""
        Mm = as_matrix("M", M, self.d)
        Mm = 0.5 * (Mm + Mm.T)
        MD, MS = Mm @ self.Delta, Mm @ self.Sigma
        tD, tS = float(np.trace(MD)), float(np.trace(MS))
        return (1.0 + 2 * tD + (float(c) + tS) ** 2 + tD**2
                + 2 * float(np.sum(MS * MS.T)) + 2 * float(np.sum(MD * MD.T)))

    # ---------------------------------------------------------------- sampling
    def sample(self, n: int, generator: torch.Generator, *, device=None,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw n iid pairs (X (n, d), y (n,) in {+1, -1}) from ``generator``.

        Labels are drawn first (fair coin), then Z ~ N(0, I) and x = L_y z with
        L_y L_y^T = Sigma - y Delta.  ``device`` defaults to the generator's device.
        """
        if int(n) != n or n < 0:
            raise ValueError(f"n must be a non-negative integer; got {n!r}")
        dev = sampling_device(generator, device)
        n = int(n)
        y = torch.randint(0, 2, (n,), generator=generator, device=dev).to(dtype) * 2 - 1
        Z = torch.randn(n, self.d, generator=generator, device=dev, dtype=dtype)
        pos = (y > 0).unsqueeze(1)
        Lp, Lm = self._factors(dtype, dev)
        if self._diagonal:
            X = Z * torch.where(pos, Lp, Lm)
        else:
            X = torch.where(pos, Z @ Lp.T, Z @ Lm.T)
        return X, y

    def _factors(self, dtype: torch.dtype, device: torch.device,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """The class Cholesky factors (their diagonals when diagonal) as tensors, once per
        (dtype, device) (:func:`~lazylab.data.quadratic.per_device`)."""
        def make(s: int) -> torch.Tensor:
            L = np.diag(self._chol[s]).copy() if self._diagonal else self._chol[s]
            return torch.as_tensor(L, dtype=dtype, device=device)

        return per_device(self, "_factor_cache", dtype, device, lambda: (make(1), make(-1)))

    # ---------------------------------------------------------------- Bayes posterior
    def log_likelihood_ratio(self, X: torch.Tensor) -> torch.Tensor:
        """LLR(x) = log p_+(x)/p_-(x) row-wise (exact, finite d), in X's dtype and device."""
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must have shape (n, {self.d}); got {tuple(X.shape)}")
        Cp, Cm = self.Sigma - self.Delta, self.Sigma + self.Delta
        K = np.linalg.inv(Cp) - np.linalg.inv(Cm)
        K = 0.5 * (K + K.T)
        logdet = np.linalg.slogdet(Cp)[1] - np.linalg.slogdet(Cm)[1]
        if self._diagonal:
            k = torch.as_tensor(np.diag(K).copy(), dtype=X.dtype, device=X.device)
            q = (X * X) @ k
        else:
            Kt = torch.as_tensor(K, dtype=X.dtype, device=X.device)
            q = ((X @ Kt) * X).sum(dim=1)
        return -0.5 * q - 0.5 * float(logdet)

    def posterior_mean(self, X: torch.Tensor) -> torch.Tensor:
        """E[y | x] = tanh(LLR(x)/2), the Bayes-optimal predictor under square loss."""
        return torch.tanh(0.5 * self.log_likelihood_ratio(X))

    def bayes_mmse(self, method: str = "mc", *, n: int = 200_000, seed: int = 0,
                   device=None) -> float:
        """Bayes error MMSE = E[(y - E[y|x])^2] = 1 - E tanh^2(LLR/2) (R0 = 1).

        ``method="mc"``: Monte Carlo with the exact LLR on n float64 samples drawn from
        ``torch_generator(seed)`` (standard error ~ 0.5/sqrt(n)); ``"asymptotic"``: the
        Gaussian-LLR limit :func:`mmse_asymptotic` of m = ||Delta~||_F^2.
        """
        if method == "asymptotic":
            return mmse_asymptotic(self.snr())
        if method != "mc":
            raise ValueError(f"method must be 'mc' or 'asymptotic'; got {method!r}")
        if int(n) != n or n < 1:
            raise ValueError(f"n must be a positive integer; got {n!r}")
        gen = torch_generator(seed, "cpu" if device is None else device)
        total, done = 0.0, 0
        while done < n:
            k = min(_MC_CHUNK, int(n) - done)
            X, _ = self.sample(k, gen, dtype=torch.float64)
            total += float((self.posterior_mean(X) ** 2).sum())
            done += k
        return 1.0 - total / n

    def __repr__(self) -> str:
        return f"GaussianMixture(d={self.d}, snr={self.snr():.4g})"
