"""Nichani, Bai & Lee (2022)'s regularizers R1-R4 (Eqs. (16)-(19), r = n_k as Eqs. (24)-(27)),
each with its analytic gradient in W, never forming an md x md matrix (Sec. 3 and 4.1).

With phi the NTK features (f_L(x; W) = <phi(x), W>), Sigma = E phi phi^T and Pi_{<=r} / Pi_{>r}
the projectors on its top r / remaining eigenvectors:

    R1(W) = E_mu[f_L(x; Pi_{>r} W)^2],   R2(W) = E_mu[f_L(x; Pi_{<=r} W)^2],
    R3(W) = E_n [f_L(x; Pi_{>r} W)^2],   R4(W) = ||W||_{2,4}^8 = (sum_r ||w_r||^4)^2.

* :class:`R3Empirical` is the paper's experimental R3 (authors' code): Pi replaced by the top
  n_k right singular vectors V1 of the training feature matrix Phi (n x md). Since
  Phi (I - V1 V1^T) = U2 U2^T Phi with U2 the bottom n - n_k eigenvectors of K = Phi Phi^T,

      R3(W) = |U2^T f_L(X; W)|^2 / n,   grad_W R3 = (2/n) Phi^T P2 f_L(X; W),  P2 = U2 U2^T,

  an n x n projector applied to the training predictions.
* :class:`SigmaSplit` estimates Sigma from N' unlabeled points X' (Nystrom): with
  G = K(X', X')/N' = U Lambda U^T and U_r its top r eigenvectors,
  R2 = |U_r^T f_L(X')|^2 / N' and R1 = |(I - U_r U_r^T) f_L(X')|^2 / N' (both exact for the
  empirical Sigma-hat = Phi'^T Phi'/N'); gradients (2/N') Phi'^T (projected f_L).
* :class:`R1Stochastic` is the authors' stochastic R1: fresh inputs X_s each step and the
  training V1: f_L(x; V1 V1^T W) = K(x, X) U1 Lambda1^{-1} U1^T f_L(X; W).
* :class:`R1Harmonic` is the harmonic (infinite-width) R1 for k = 1 (Sec. 3 suggests the
  harmonic expansion of sigma' as an alternative to unlabeled data): the top
  n_1 = d + 1 eigenvectors of Sigma are the degree <= 1 functions, so R2 ~ ||P_{<=1} f_L||^2 =
  (E f_L)^2 + |E[f_L x]|^2 (the basis {1, x_1..x_d} is orthonormal on S^{d-1}(sqrt d)) in
  closed form, and R1 ~ E_mu f_L^2 - R2 with E_mu f_L^2 a Monte Carlo mean over fresh inputs.
* :func:`r4` and its gradient grad_{w_r} R4 = 8 (sum_s ||w_s||^4) ||w_r||^2 w_r.

All work for a single W (m, d) or a batch (B, m, d); values have the batch shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lazylab.data.spherical import tau_expect
from lazylab.models.nichani.network import TaylorFeatures
from lazylab.models.two_layer import TwoLayerNet


def _check_r(r: int, n: int, what: str) -> int:
    if int(r) != r or not 0 <= r <= n:
        raise ValueError(f"r must be an integer in [0, {n}] ({what}); got {r!r}")
    return int(r)


def _eig_desc(K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (descending) and eigenvectors of a symmetric matrix, in float64."""
    evals, evecs = torch.linalg.eigh(K.double())
    return evals.flip(0), evecs.flip(1)


@dataclass
class R3Empirical:
    """R3 with the empirical projector: P2 = U2 U2^T from the Gram matrix of the training set.

    Attributes
    ----------
    feats : training features.
    r : number n_k of top singular directions kept (the code uses n_k = d for k = 1).
    P2 : (n, n) projector on the bottom n - r eigenvectors of K = Phi Phi^T.
    evals : eigenvalues of K, descending.
    """

    feats: TaylorFeatures
    r: int
    P2: torch.Tensor
    evals: torch.Tensor

    @classmethod
    def build(cls, feats: TaylorFeatures, r: int) -> R3Empirical:
        r = _check_r(r, feats.n, "kept singular directions")
        evals, U = _eig_desc(feats.gram())
        U2 = U[:, r:]
        P2 = (U2 @ U2.T).to(feats.X.dtype)
        return cls(feats, r, P2, evals)

    def project(self, fl: torch.Tensor) -> torch.Tensor:
        """P2 f_L for training predictions fl (…, n)."""
        return fl @ self.P2

    def value(self, W: torch.Tensor) -> torch.Tensor:
        fl = self.feats.f_L(W)
        return (fl * self.project(fl)).sum(-1) / self.feats.n

    def grad(self, W: torch.Tensor) -> torch.Tensor:
        return self.feats.phi_t(2.0 * self.project(self.feats.f_L(W)) / self.feats.n)


@dataclass
class SigmaSplit:
    """Top-r eigenspace of Sigma-hat = Phi'^T Phi' / N' from unlabeled features (Nystrom).

    Attributes
    ----------
    feats : features of the unlabeled points X' (N').
    r : the split index (n_k).
    Ur : (N', r) top eigenvectors of G = K(X', X')/N'.
    evals : eigenvalues of G (= the nonzero eigenvalues of Sigma-hat), descending.
    """

    feats: TaylorFeatures
    r: int
    Ur: torch.Tensor
    evals: torch.Tensor

    @classmethod
    def build(cls, feats: TaylorFeatures, r: int) -> SigmaSplit:
        r = _check_r(r, feats.n, "Sigma eigen-directions")
        evals, U = _eig_desc(feats.gram() / feats.n)
        return cls(feats, r, U[:, :r].to(feats.X.dtype), evals)

    def _low(self, fl: torch.Tensor) -> torch.Tensor:
        return (fl @ self.Ur) @ self.Ur.T

    def r2(self, W: torch.Tensor) -> torch.Tensor:
        """R2(W) = vec(W)^T Sigma-hat_{<=r} vec(W)."""
        c = self.feats.f_L(W) @ self.Ur
        return (c * c).sum(-1) / self.feats.n

    def r1(self, W: torch.Tensor) -> torch.Tensor:
        """R1(W) = vec(W)^T Sigma-hat_{>r} vec(W)."""
        fl = self.feats.f_L(W)
        h = fl - self._low(fl)
        return (h * h).sum(-1) / self.feats.n

    def r2_grad(self, W: torch.Tensor) -> torch.Tensor:
        return self.feats.phi_t(2.0 * self._low(self.feats.f_L(W)) / self.feats.n)

    def r1_grad(self, W: torch.Tensor) -> torch.Tensor:
        fl = self.feats.f_L(W)
        return self.feats.phi_t(2.0 * (fl - self._low(fl)) / self.feats.n)


@dataclass
class R1Stochastic:
    """The authors' stochastic R1: mean over fresh X_s of f_L(x; W - V1 V1^T W)^2.

    With the training Gram K = U Lambda U^T, M = U1 Lambda1^{-1} U1^T (top r):
    h = f_L(X_s; W) - K(X_s, X) M f_L(X; W), R1 = |h|^2 / N_s,
    grad = (2/N_s) [Phi_s^T h - Phi^T M K(X, X_s) h].
    """

    train: TaylorFeatures
    r: int
    M: torch.Tensor

    @classmethod
    def build(cls, train: TaylorFeatures, r: int) -> R1Stochastic:
        r = _check_r(r, train.n, "kept singular directions")
        evals, U = _eig_desc(train.gram())
        if r and not float(evals[r - 1]) > 0:
            raise ValueError(f"the top {r} Gram eigenvalues must be positive")
        U1 = U[:, :r]
        return cls(train, r, ((U1 / evals[:r]) @ U1.T).to(train.X.dtype))

    def _h(self, fresh: TaylorFeatures, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        Ks = fresh.gram(self.train)  # (N_s, n)
        return fresh.f_L(W) - (self.train.f_L(W) @ self.M) @ Ks.T, Ks

    def value(self, fresh: TaylorFeatures, W: torch.Tensor) -> torch.Tensor:
        h, _ = self._h(fresh, W)
        return (h * h).sum(-1) / fresh.n

    def grad(self, fresh: TaylorFeatures, W: torch.Tensor) -> torch.Tensor:
        h, Ks = self._h(fresh, W)
        back = (h @ Ks) @ self.M
        return 2.0 / fresh.n * (fresh.phi_t(h) - self.train.phi_t(back))


@dataclass
class R1Harmonic:
    """Harmonic (infinite-width) R1 and R2 for k = 1, R2 in closed form (Eqs. (24)-(25)).

    With z = w0_r . x ~ tau_d (|w0_r| = 1), E[sigma'(z) x] = c0 w0_r and
    E[sigma'(z) x x^T] = alpha I + beta w0_r w0_r^T, where

        c0 = E[sigma'(z) z],   alpha = E[sigma'(z) (d - z^2)/(d - 1)],
        alpha + beta = E[sigma'(z) z^2]

    (x - z w0_r is uniform on the orthogonal sphere of squared radius d - z^2). Hence, with
    s_r = a_r / sqrt(m),

        E f_L = c0 sum_r s_r (w0_r . w_r),
        E[f_L x] = sum_r s_r (alpha w_r + beta (w0_r . w_r) w0_r),
        R2 = (E f_L)^2 + |E[f_L x]|^2,       R1 = E_mu f_L^2 - R2,

    and grad_{w_r} R2 = 2 s_r [c0 (E f_L) w0_r + alpha E[f_L x] + beta (w0_r . E[f_L x]) w0_r].
    E_mu f_L^2 is the mean over fresh inputs (:meth:`r1`), with gradient (2/N) Phi_s^T f_L(X_s).

    Attributes
    ----------
    W0 : (m, d) unit base rows; s : (m,) output weights a_r times the scale 1/sqrt(m).
    c0, alpha, beta : the tau_d moments above (Gauss-Jacobi quadrature, exact to ~1e-15).
    """

    W0: torch.Tensor
    s: torch.Tensor
    c0: float
    alpha: float
    beta: float

    @classmethod
    def build(cls, net: TwoLayerNet) -> R1Harmonic:
        W0 = net.W.detach()
        d = W0.shape[1]
        if d < 3 or not bool(torch.allclose(W0.norm(dim=1), torch.ones((), dtype=W0.dtype),
                                            atol=1e-5)):
            raise ValueError("R1Harmonic needs d >= 3 and unit base rows w0_r (nichani_net)")

        def dsig(z: np.ndarray) -> np.ndarray:
            return net.act.deriv(torch.tensor(z, dtype=torch.float64), 1).numpy()

        c0 = tau_expect(lambda z: dsig(z) * z, d)
        z2 = tau_expect(lambda z: dsig(z) * z * z, d)
        alpha = tau_expect(lambda z: dsig(z) * (d - z * z) / (d - 1), d)
        return cls(W0, (net.scale * net.a).detach(), c0, alpha, z2 - alpha)

    def low(self, W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(E f_L (…,), E[f_L x] (…, d)): the degree-0 and degree-1 coefficients of f_L."""
        W0, s = self.W0.to(W), self.s.to(W)
        proj = s * (W0 * W).sum(-1)                        # s_r (w0_r . w_r)
        mean = self.c0 * proj.sum(-1)
        lin = self.alpha * (s.unsqueeze(-1) * W).sum(-2) + self.beta * (proj @ W0)
        return mean, lin

    def r2(self, W: torch.Tensor) -> torch.Tensor:
        """||P_{<=1} f_L(.; W)||^2 = (E f_L)^2 + |E[f_L x]|^2."""
        mean, lin = self.low(W)
        return mean * mean + (lin * lin).sum(-1)

    def r2_grad(self, W: torch.Tensor) -> torch.Tensor:
        W0, s = self.W0.to(W), self.s.to(W)
        mean, lin = self.low(W)
        along = self.c0 * mean.unsqueeze(-1) + self.beta * (lin @ W0.T)   # (…, m)
        g = along.unsqueeze(-1) * W0 + self.alpha * lin.unsqueeze(-2)
        return 2.0 * s.unsqueeze(-1) * g

    def r1(self, fresh: TaylorFeatures, W: torch.Tensor) -> torch.Tensor:
        """mean over the fresh inputs of f_L^2, minus the closed-form R2."""
        fl = fresh.f_L(W)
        return (fl * fl).mean(-1) - self.r2(W)

    def r1_grad(self, fresh: TaylorFeatures, W: torch.Tensor) -> torch.Tensor:
        return fresh.phi_t(2.0 * fresh.f_L(W) / fresh.n) - self.r2_grad(W)


def r4(W: torch.Tensor) -> torch.Tensor:
    """R4(W) = ||W||_{2,4}^8 = (sum_r ||w_r||^4)^2 over the rows of W (…, m, d)."""
    return W.pow(2).sum(-1).pow(2).sum(-1).pow(2)


def r4_grad(W: torch.Tensor) -> torch.Tensor:
    """grad_{w_r} R4 = 8 (sum_s ||w_s||^4) ||w_r||^2 w_r."""
    sq = W.pow(2).sum(-1, keepdim=True)
    tot = sq.pow(2).sum(-2, keepdim=True)
    return 8.0 * tot * sq * W
