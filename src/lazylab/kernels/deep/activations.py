"""Elementwise activations as layers: their dual maps on the 2x2 covariance.

For a centred Gaussian pair (u, v) with Var u = k_a, Var v = k_b, Cov(u, v) = c, an
activation phi maps the layer's state by (Lee et al. 2018; Jacot et al. 2018; Arora et al.
2019, Eq. (9)-(10))

    K'     = E[phi(u) phi(v)],
    Theta' = Theta * E[phi'(u) phi'(v)].

Closed forms (rho = c / sqrt(k_a k_b) clamped to [-1, 1], theta = arccos rho):

* ``ABRelu(a, b)``: phi(u) = a min(u, 0) + b max(u, 0) = a u + (b - a) relu(u). With the
  arc-cosine kernels of Cho & Saul (2009), E[relu relu] = sqrt(k_a k_b)(sin theta +
  (pi - theta) cos theta) / (2 pi) and E[u relu(v)] = c / 2,

      K'  = (a^2 + b^2) c / 2 + (a - b)^2 sqrt(k_a k_b) (sin theta - theta cos theta) / (2 pi),
      dot = (a^2 + b^2) / 2 - (a - b)^2 theta / (2 pi).

  ``Relu`` is (0, 1), ``LeakyRelu(alpha)`` (alpha, 1), ``Abs`` (-1, 1).
* ``Erf(a, b, c0)``: phi(u) = a erf(b u) + c0 (Williams 1998, Eq. (11)):
      K' = a^2 (2/pi) arcsin(2 b^2 c / sqrt((1 + 2 b^2 k_a)(1 + 2 b^2 k_b))) + c0^2,
      dot = a^2 b^2 (4/pi) / sqrt((1 + 2 b^2 k_a)(1 + 2 b^2 k_b) - 4 b^4 c^2).
* ``Sin(a, b, c0)``: phi(u) = a sin(b u + c0), from E[cos(b(u -+ v))] = exp(-b^2 (k_a + k_b
  -+ 2c) / 2) and E[cos(b(u + v) + 2 c0)] = cos(2 c0) exp(-b^2 (k_a + k_b + 2c) / 2):
      K'  = a^2 / 2 (e_- - cos(2 c0) e_+),   dot = a^2 b^2 / 2 (e_- + cos(2 c0) e_+).
* ``Gelu``: phi(u) = u Phi(u) (exact, not the tanh approximation). With q = sqrt((1 + k_a)
  (1 + k_b)), D = q^2 - c^2 and r = c / q, writing Phi(u) = P(g <= u) for an independent
  g ~ N(0, 1) and integrating the Gaussian pieces of phi'(u) = Phi(u) + u N(u),

      dot = 1/4 + arcsin(r) / (2 pi) + c (1/(1 + k_a) + 1/(1 + k_b)) / (2 pi sqrt(D))
            + c / (2 pi D^(3/2)),

  and K' = E[phi(u)] E[phi(v)] + int_0^c dot dc' (Price's theorem: dK'/dc = dot), with
  E[u Phi(u)] = k / sqrt(2 pi (1 + k)):

      K' = c/4 + c arcsin(r) / (2 pi) + (k_a k_b / q + sqrt(D) - q
           + (q - sqrt(D)) (2 + k_a + k_b) / q^2 + 1/sqrt(D) - 1/q) / (2 pi).

* ``Elementwise(fn)``: any other activation, by a tensor-product Gauss-Hermite rule
  (:func:`lazylab.gauss.gauss_normal`) after the Cholesky factorisation u = sqrt(k_a) g1,
  v = sqrt(k_b) (rho g1 + sqrt(1 - rho^2) g2); phi' by autograd unless given. Exact for
  polynomials of degree < 2n; smooth activations converge fast, kinks only algebraically.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lazylab.kernels.deep.layers import Layer
from lazylab.kernels.deep.state import Block, KernelState, variances

Dual = tuple[torch.Tensor, "torch.Tensor | None"]


def _rho(c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """(sqrt(k_a k_b), rho clamped to [-1, 1]; 0 where a variance is 0, so no 0/0)."""
    s = (va * vb).sqrt()
    rho = torch.where(s > 0, c / torch.where(s > 0, s, 1), 0).clamp_(-1.0, 1.0)
    return s, rho


class Activation(Layer):
    """An elementwise layer: subclasses give the dual map :meth:`dual`."""

    cost_factor = 8

    def dual(self, c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor, need_dot: bool
             ) -> Dual:
        """(E[phi(u) phi(v)], E[phi'(u) phi'(v)] or None) for Cov = [[va, c], [c, vb]]."""
        raise NotImplementedError

    def apply(self, state: KernelState, need_out: bool) -> KernelState:
        if state.self2 is None and state.cross.batch == 2:
            # A symmetric tile's pairs (x_i, x_i): their covariance must be bit-for-bit the
            # paired block's, else rho = 1 - O(eps) and arccos turns the rounding into an
            # O(sqrt(eps)) error (and the kernel loses symmetry and PSD at depth).
            state.cross.nngp.diagonal(dim1=0, dim2=1).copy_(state.self1.nngp.movedim(0, -1))
        out = []
        for block in state.blocks():
            va, vb = variances(state, block)
            k, dot = self.dual(block.nngp, va, vb, block.ntk is not None)
            ntk = None if block.ntk is None or dot is None else dot.mul_(block.ntk)
            out.append(Block(k, ntk, block.batch))
        return state.with_blocks(out)


@dataclass(frozen=True)
class ABRelu(Activation):
    """phi(u) = a min(u, 0) + b max(u, 0) (arc-cosine kernels, Cho & Saul 2009)."""

    a: float = 0.0
    b: float = 1.0

    def dual(self, c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor, need_dot: bool
             ) -> Dual:
        a, b = self.a, self.b
        even, odd = (a * a + b * b) / 2, (a - b) ** 2 / (2 * math.pi)
        if not odd:  # linear
            return c * even, (torch.full_like(c, even) if need_dot else None)
        # rho = c / sqrt(k_a k_b), not c rsqrt(k_a) rsqrt(k_b): for coincident inputs
        # (c = k_a = k_b) the division gives rho = 1 exactly (sqrt(v * v) = v in IEEE)
        s = (va * vb).expand_as(c).sqrt()
        rho = torch.div(c, s).nan_to_num_(0.0).clamp_(-1.0, 1.0)  # 0/0: a zero input
        theta = torch.arccos(rho)
        k = torch.sin(theta).addcmul_(theta, rho, value=-1).mul_(s).mul_(odd)
        k.add_(c, alpha=even)
        dot = theta.mul_(-odd).add_(even) if need_dot else None
        return k, dot


def Relu() -> ABRelu:
    """max(u, 0)."""
    return ABRelu(0.0, 1.0)


def LeakyRelu(alpha: float = 0.01) -> ABRelu:
    """max(u, 0) + alpha min(u, 0)."""
    return ABRelu(float(alpha), 1.0)


def Abs() -> ABRelu:
    """|u|."""
    return ABRelu(-1.0, 1.0)


@dataclass(frozen=True)
class Erf(Activation):
    """phi(u) = a erf(b u) + c0 (Williams 1998)."""

    a: float = 1.0
    b: float = 1.0
    c0: float = 0.0

    def dual(self, c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor, need_dot: bool
             ) -> Dual:
        b2 = self.b * self.b
        prod = (1 + 2 * b2 * va) * (1 + 2 * b2 * vb)
        arg = (2 * b2 * c) * prod.rsqrt()
        k = arg.clamp_(-1.0, 1.0).asin_().mul_(self.a * self.a * 2 / math.pi)
        if self.c0:
            k.add_(self.c0 * self.c0)
        dot = None
        if need_dot:
            det = (prod - 4 * b2 * b2 * c * c).clamp_(min=torch.finfo(c.dtype).tiny)
            dot = det.rsqrt_().mul_(self.a * self.a * b2 * 4 / math.pi)
        return k, dot


@dataclass(frozen=True)
class Sin(Activation):
    """phi(u) = a sin(b u + c0)."""

    a: float = 1.0
    b: float = 1.0
    c0: float = 0.0

    def dual(self, c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor, need_dot: bool
             ) -> Dual:
        b2 = self.b * self.b
        e_minus = torch.exp(-b2 * (va + vb - 2 * c) / 2)
        e_plus = torch.exp(-b2 * (va + vb + 2 * c) / 2).mul_(math.cos(2 * self.c0))
        a2 = self.a * self.a
        k = (e_minus - e_plus).mul_(a2 / 2)
        dot = e_minus.add_(e_plus).mul_(a2 * b2 / 2) if need_dot else None
        return k, dot


@dataclass(frozen=True)
class Gelu(Activation):
    """phi(u) = u Phi(u), Phi the standard normal CDF (PyTorch's ``nn.GELU()``)."""

    def dual(self, c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor, need_dot: bool
             ) -> Dual:
        pa, pb = 1 + va, 1 + vb
        q = (pa * pb).sqrt()
        D = q * q - c * c  # >= 1 + k_a + k_b > 0: no clamp needed
        sD = D.sqrt()
        asin = (c / q).clamp(-1.0, 1.0).asin()
        two_pi = 2 * math.pi
        k = (va * vb / q + sD - q + (q - sD) * (pa + pb) / (q * q) + 1 / sD - 1 / q) / two_pi
        k = k + c / 4 + c * asin / two_pi
        dot = None
        if need_dot:
            dot = (0.25 + asin / two_pi + c * (1 / pa + 1 / pb) / (two_pi * sD)
                   + c / (two_pi * D * sD))
        return k, dot


def _autograd_deriv(fn: Callable[[torch.Tensor], torch.Tensor]
                    ) -> Callable[[torch.Tensor], torch.Tensor]:
    def deriv(t: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            t = t.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(fn(t).sum(), t)
        return g

    return deriv


@dataclass(frozen=True)
class Elementwise(Activation):
    """Any elementwise torch function, by Gauss-Hermite quadrature with ``nodes`` points per
    axis (``nodes``^2 evaluations per kernel entry); ``deriv`` defaults to autograd."""

    fn: Callable[[torch.Tensor], torch.Tensor] = field(default=torch.tanh)
    deriv: Callable[[torch.Tensor], torch.Tensor] | None = None
    nodes: int = 48
    name: str = ""

    @property
    def cost_factor(self) -> int:  # type: ignore[override]
        return 4 * self.nodes

    def __repr__(self) -> str:
        return f"Elementwise({self.name or getattr(self.fn, '__name__', 'fn')})"

    @classmethod
    def from_activation(cls, name: str, nodes: int = 48) -> Elementwise:
        """An activation of :mod:`lazylab.activations` by name (its closed derivative)."""
        from lazylab.activations import get_activation

        act = get_activation(name)
        return cls(act.fn, lambda u: act.deriv(u, 1), nodes, act.name)

    def _expect(self, f: Callable[[torch.Tensor], torch.Tensor], c: torch.Tensor,
                va: torch.Tensor, vb: torch.Tensor) -> torch.Tensor:
        from lazylab.gauss import gauss_normal

        x_np, w_np = gauss_normal(self.nodes)
        x = torch.as_tensor(x_np, dtype=c.dtype, device=c.device)
        w = torch.as_tensor(w_np, dtype=c.dtype, device=c.device)
        s, rho = _rho(c, va, vb)
        sa, sb = va.sqrt(), vb.sqrt()
        shape = torch.broadcast_shapes(c.shape, va.shape, vb.shape)
        perp = (sb * ((1 - rho) * (1 + rho)).clamp(min=0).sqrt()).expand(shape)[..., None]
        out = torch.zeros(shape, dtype=c.dtype, device=c.device)
        for xi, wi in zip(x, w, strict=True):
            fu = f(sa * xi)
            fv = f((sb * rho * xi).expand(shape)[..., None] + perp * x)
            out.add_(fu * (fv @ w), alpha=float(wi))
        return out

    def dual(self, c: torch.Tensor, va: torch.Tensor, vb: torch.Tensor, need_dot: bool
             ) -> Dual:
        k = self._expect(self.fn, c, va, vb)
        dot = None
        if need_dot:
            dot = self._expect(self.deriv or _autograd_deriv(self.fn), c, va, vb)
        return k, dot
