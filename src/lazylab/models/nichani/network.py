"""Nichani, Bai & Lee (2022)'s network and its Taylor terms in closed form.

The network (Eq. (1)) with the symmetric initialization of Eqs. (8)-(9):

    f(x; W) = m^{-1/2} sum_r a_r sigma((w0_r + w_r) . x),
    a_r = +1 (r < m/2), -1 (r >= m/2),   w0_r ~ Unif(S^{d-1}(1)),   w0_{r+m/2} = w0_r,

so f(x; 0) = 0 exactly; W (rows w_r, the displacement) is trained from 0. The activation is the
shifted sigmoid sigma(z) = 1/(1 + exp(b - z)) of Sec. 2.1 with b = 1 as in the authors' code.
About W = 0 (Eqs. (11)-(12)):

    f_L(x; W) = m^{-1/2} sum_r a_r sigma'(w0_r.x) (x.w_r)            = <phi(x), W>,
    f_Q(x; W) = m^{-1/2} sum_r a_r sigma''(w0_r.x) (x.w_r)^2 / 2.

:func:`nichani_net` builds the :class:`~lazylab.models.TwoLayerNet` (its ``taylor_terms`` is the
generic closed form); :class:`TaylorFeatures` is the fast path for training: it caches
D1 = sigma'(X W0^T) diag(a)/sqrt(m) and D2 = sigma''(X W0^T) diag(a)/sqrt(m) for a fixed input
set, so that for a batch of displacements W (B, m, d) and Z = X W^T (B, n, m)

    f_L = (D1 * Z) 1,   f_Q = (D2 * Z * Z) 1 / 2,
    grad_W sum_i g_i (f_L + f_Q)(x_i) = [diag(g) (D1 + D2 * Z)]^T X,

two GEMMs of size n x m x d per step and no autodiff.

Example
-------
>>> import torch
>>> net = nichani_net(5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
>>> float(net(torch.randn(3, 5, dtype=torch.float64)).abs().max().detach())
0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch

from lazylab.activations import Activation
from lazylab.models.two_layer import TwoLayerNet


@dataclass(frozen=True)
class _ShiftedSigmoidDeriv:
    """The order-th derivative of z -> sigmoid(z - b), s = sigmoid(z - b):
    s, s(1-s), s(1-s)(1-2s), s(1-s)(1-6s+6s^2). A class (not a closure) so it pickles."""

    b: float
    order: int

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(u - self.b)
        if self.order == 0:
            return s
        q = s * (1 - s)
        if self.order == 1:
            return q
        if self.order == 2:
            return q * (1 - 2 * s)
        return q * (1 - 6 * s + 6 * s * s)


@lru_cache(maxsize=16)
def shifted_sigmoid(b: float = 1.0) -> Activation:
    """sigma(z) = 1 / (1 + exp(b - z)) with closed-form derivatives up to third order.

    Satisfies Assumption 2 (|sigma|, |sigma'|, |sigma''| < 1); a generic shift b != 0 makes
    the Gegenbauer coefficients of sigma' and sigma'' nonzero at every degree (the likely
    content of Assumption 3, which Sec. 2.1 only names). Cached, so equal b gives the same
    object.
    """
    b = float(b)
    if not math.isfinite(b):
        raise ValueError(f"b must be a finite number; got {b!r}")
    return Activation(f"sigmoid(z-{b:g})", _ShiftedSigmoidDeriv(b, 0),
                      tuple(_ShiftedSigmoidDeriv(b, j) for j in (1, 2, 3)))


def unit_sphere_rows(m: int, d: int, *, generator: torch.Generator,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(m, d) rows i.i.d. uniform on the unit sphere S^{d-1}(1) (normalised Gaussians)."""
    g = torch.randn(int(m), int(d), generator=generator, device=generator.device, dtype=dtype)
    return g / g.norm(dim=1, keepdim=True)


def nichani_net(d: int, m: int, *, b: float = 1.0, generator: torch.Generator,
                dtype: torch.dtype = torch.float32) -> TwoLayerNet:
    """The paper's symmetric-init network: a = (+1, ..., -1, ...), w0_r unit, paired rows.

    Rows r and r + m/2 share w0_r and have opposite a_r, so f(x; W0) = 0 exactly.
    """
    if int(m) != m or m < 2 or m % 2:
        raise ValueError(f"m must be an even integer >= 2; got {m!r}")
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")
    W0 = unit_sphere_rows(m // 2, d, generator=generator, dtype=dtype)
    a = torch.ones(m // 2, dtype=dtype, device=W0.device)
    return TwoLayerNet.from_weights(torch.cat([W0, W0]), torch.cat([a, -a]),
                                    activation=shifted_sigmoid(b), paired=True)


@dataclass
class TaylorFeatures:
    """Cached sigma'(X W0^T) and sigma''(X W0^T), scaled by a_r / sqrt(m), for inputs X.

    Attributes
    ----------
    X : (n, d) inputs.
    D1, D2 : (n, m) with D1_ir = a_r sigma'(w0_r.x_i)/sqrt(m) and
        D2_ir = a_r sigma''(w0_r.x_i)/sqrt(m).
    """

    X: torch.Tensor
    D1: torch.Tensor
    D2: torch.Tensor

    @classmethod
    def of(cls, net: TwoLayerNet, X: torch.Tensor) -> TaylorFeatures:
        """Features of ``net`` (its current W is the base point W0) at inputs X."""
        with torch.no_grad():
            X = X.to(net.W.dtype)
            Z0 = net.preactivation(X)
            sa = net.scale * net.a
            return cls(X, net.act.deriv(Z0, 1) * sa, net.act.deriv(Z0, 2) * sa)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def m(self) -> int:
        return self.D1.shape[1]

    def z(self, W: torch.Tensor) -> torch.Tensor:
        """Z = X W^T: (n, m) for W (m, d), (B, n, m) for a batch W (B, m, d)."""
        return self.X @ W.transpose(-1, -2)

    def f_L(self, W: torch.Tensor) -> torch.Tensor:
        """f_L(x_i; W) = sum_r D1_ir (x_i . w_r), shape (n,) or (B, n)."""
        return (self.D1 * self.z(W)).sum(-1)

    def f_Q(self, W: torch.Tensor) -> torch.Tensor:
        """f_Q(x_i; W) = sum_r D2_ir (x_i . w_r)^2 / 2, shape (n,) or (B, n)."""
        Z = self.z(W)
        return 0.5 * (self.D2 * Z * Z).sum(-1)

    def phi(self) -> torch.Tensor:
        """(n, m, d) NTK features phi(x_i) (Eq. (13)); memory n m d, for small problems."""
        return self.D1.unsqueeze(-1) * self.X.unsqueeze(1)

    def gram(self, other: TaylorFeatures | None = None) -> torch.Tensor:
        """Empirical NTK Gram K = Phi Phi'^T = (D1 D1'^T) * (X X'^T) (Phi as in Eq. (4))."""
        o = self if other is None else other
        return (self.D1 @ o.D1.T) * (self.X @ o.X.T)

    def pullback(self, G: torch.Tensor) -> torch.Tensor:
        """Phi^T-type product: for G (…, n, m), returns G^T X (…, m, d): the gradient in W
        of sum_{i,r} G_ir (x_i . w_r)."""
        return G.transpose(-1, -2) @ self.X

    def phi_t(self, h: torch.Tensor) -> torch.Tensor:
        """Phi^T h as an (…, m, d) matrix for h (…, n): sum_i h_i phi(x_i)."""
        return self.pullback(h.unsqueeze(-1) * self.D1)

    def to(self, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> TaylorFeatures:
        return TaylorFeatures(self.X.to(device=device, dtype=dtype),
                              self.D1.to(device=device, dtype=dtype),
                              self.D2.to(device=device, dtype=dtype))
