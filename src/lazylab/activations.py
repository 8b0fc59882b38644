"""Activation functions with derivatives and Hermite coefficients.

Every activation is an elementwise map sigma: R -> R with derivatives available in closed form
up to third order (and by nested autograd beyond), plus its Hermite coefficients

    lambda_k = E_{G ~ N(0,1)}[ sigma(G) He_k(G) ],

with He_k the probabilists' (unnormalised) Hermite polynomials He_0 = 1, He_1 = u,
He_2 = u^2 - 1, He_3 = u^3 - 3u.  Then sigma = sum_k (lambda_k / k!) He_k in L2(N(0,1)) and
E[sigma(G)^2] = sum_k lambda_k^2 / k!  (Ghorbani et al. 2019, Sec. 2; O'Donnell, Ch. 11).

Example
-------
>>> from lazylab.activations import get_activation
>>> act = get_activation("quad_centered")          # u^2 - 1
>>> [round(v, 12) for v in act.hermite(4)]
[0.0, 0.0, 2.0, 0.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

from lazylab.data.harmonics import hermite_e
from lazylab.duals.arccos import relu_power_nngp
from lazylab.duals.dual import erf_dual, poly_derivative, poly_dual, sin_dual

Fn = Callable[[torch.Tensor], torch.Tensor]
#: A closed-form Gaussian dual kernel (X, Z or None) -> (n, n') matrix of E_w[f(w.x) g(w.z)].
Dual = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]


# Piecewise-smooth activations have at most a kink at 0, so a Gauss-Legendre rule on
# [-L, 0] and [0, L] separately integrates them against the Gaussian density to ~1e-13;
# L = 14 leaves a tail mass below 1e-40 even for polynomial growth of degree 10.
_QUAD_L = 14.0
_QUAD_NODES = 400


@lru_cache(maxsize=1)
def _gauss_nodes() -> tuple[np.ndarray, np.ndarray]:
    from lazylab.gauss import gauss_normal_split

    return gauss_normal_split(_QUAD_NODES, _QUAD_L)


@dataclass(frozen=True)
class Activation:
    """An elementwise activation sigma with derivatives.

    Parameters
    ----------
    name : registry name.
    fn : sigma, a torch elementwise function.
    derivs : closed-form derivatives (sigma', sigma'', sigma'''), as many as are known.
    poly : coefficients (c_0, c_1, ...) when sigma is a polynomial sum_j c_j u^j; kernels use
        them for exact formulas.
    relu_power : k when sigma(u) = scale * max(u, 0)^k (arc-cosine kernels of order k).
    relu_scale : the scale in front of max(u, 0)^k.
    nth : optional closed form of every derivative, ``nth(u, order)``.
    dual : optional closed form of the dual kernel (X, Z) -> E_w[sigma(w.x) sigma(w.z)],
        w ~ N(0, I_d) (the NNGP kernel); :func:`lazylab.kernels.nngp` uses it, else quadrature.
    derivative_dual : optional closed form of (X, Z) -> E_w[sigma'(w.x) sigma'(w.z)] (the
        first-layer NTK factor); :func:`lazylab.kernels.ntk` uses it, else quadrature.

    The registry sets both hooks for relu powers (arc-cosine kernels, Cho & Saul 2009),
    polynomials (Gaussian moments), erf (Williams 1998) and sin; a user activation with a
    known dual passes its own.
    """

    name: str
    fn: Fn
    derivs: tuple[Fn, ...] = field(default=())
    poly: tuple[float, ...] | None = None
    relu_power: int | None = None
    relu_scale: float = 1.0
    #: a closed form of every derivative, (u, order) -> sigma^(order)(u), when one exists.
    nth: Callable[[torch.Tensor, int], torch.Tensor] | None = None
    dual: Dual | None = None
    derivative_dual: Dual | None = None

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        return self.fn(u)

    def __reduce__(self):
        """A registered activation pickles as its name (its closures do not pickle), so
        models and estimators built on it do; a user activation pickles field by field."""
        if ACTIVATIONS.get(self.name) is self:
            return (get_activation, (self.name,))
        return super().__reduce__()

    def deriv(self, u: torch.Tensor, order: int = 1) -> torch.Tensor:
        """The ``order``-th derivative sigma^(order)(u); order 0 is sigma itself.

        Closed form up to third order (and at every order for polynomials and relu powers);
        beyond that, nested autograd of the elementwise function.
        """
        if order < 0:
            raise ValueError(f"order must be >= 0, got {order}")
        if order == 0:
            return self.fn(u)
        if self.poly is not None:
            return _poly_deriv(self.poly, order, u)
        if self.relu_power is not None:
            return _relu_power_deriv(self.relu_power, self.relu_scale, order, u)
        if self.nth is not None:
            return self.nth(u, order)
        if order <= len(self.derivs):
            return self.derivs[order - 1](u)
        return _autograd_deriv(self.fn, order, u)

    def hermite(self, kmax: int) -> list[float]:
        """[lambda_0, ..., lambda_kmax] with lambda_k = E[sigma(G) He_k(G)] (unnormalised He_k)."""
        return list(_hermite_coeffs(self, kmax))

    def second_moment(self) -> float:
        """E[sigma(G)^2] for G ~ N(0, 1)."""
        nodes, weights = _gauss_nodes()
        vals = self.fn(torch.from_numpy(nodes)).numpy()
        return float(np.sum(weights * vals**2))

    def lambda_tilde(self) -> float:
        """E[sigma(G)^2] - lambda_1^2 (Ghorbani et al. 2019, Theorem 1)."""
        return self.second_moment() - self.hermite(1)[1] ** 2


@lru_cache(maxsize=256)
def _hermite_coeffs(act: Activation, kmax: int) -> tuple[float, ...]:
    nodes, weights = _gauss_nodes()
    vals = act.fn(torch.from_numpy(nodes)).numpy()
    out = []
    for k in range(kmax + 1):
        c = float(np.sum(weights * vals * hermite_e(k, nodes)))
        out.append(0.0 if abs(c) < 1e-13 else c)
    return tuple(out)


def _poly_deriv(coef: tuple[float, ...], order: int, u: torch.Tensor) -> torch.Tensor:
    # d^order/du^order sum_j c_j u^j = sum_{j >= order} j!/(j-order)! c_j u^(j-order), by Horner.
    dcoef = [math.perm(j, order) * coef[j] for j in range(order, len(coef))]
    out = torch.zeros_like(u)
    for c in reversed(dcoef):
        out = out * u + c
    return out


def _relu_power_deriv(k: int, scale: float, order: int, u: torch.Tensor) -> torch.Tensor:
    # d^j/du^j max(u,0)^k = k!/(k-j)! max(u,0)^(k-j) for j < k, k! 1{u>0} for j = k, 0 after.
    if order > k:
        return torch.zeros_like(u)
    c = scale * math.perm(k, order)
    out = (u > 0).to(u.dtype) if order == k else torch.clamp(u, min=0)
    if k - order > 1:
        out = out ** (k - order)
    # Skip the multiply for relu itself: empirical NTKs call this on (n, m) matrices.
    return out if c == 1 else out.mul_(c)


def _autograd_deriv(fn: Fn, order: int, u: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():
        x = u.detach().requires_grad_(True)
        y = fn(x)
        for _ in range(order):
            (y,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    return y.detach()


def _sig(u: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(u)


def _dsig(u: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(u)
    return s * (1 - s)


def _d2sig(u: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(u)
    return s * (1 - s) * (1 - 2 * s)


def _d3sig(u: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(u)
    return s * (1 - s) * (1 - 6 * s + 6 * s * s)


_ERF_C = 2.0 / math.sqrt(math.pi)


def _tanh_d1(u: torch.Tensor) -> torch.Tensor:
    return 1 - torch.tanh(u) ** 2


def _tanh_d2(u: torch.Tensor) -> torch.Tensor:
    t = torch.tanh(u)
    return -2 * t * (1 - t * t)


def _tanh_d3(u: torch.Tensor) -> torch.Tensor:
    t = torch.tanh(u)
    return (1 - t * t) * (6 * t * t - 2)


def _erf_d1(u: torch.Tensor) -> torch.Tensor:
    return _ERF_C * torch.exp(-u * u)


def _erf_d2(u: torch.Tensor) -> torch.Tensor:
    return -2 * u * _ERF_C * torch.exp(-u * u)


def _erf_d3(u: torch.Tensor) -> torch.Tensor:
    return (4 * u * u - 2) * _ERF_C * torch.exp(-u * u)


def _poly(coef: tuple[float, ...]) -> Fn:
    def f(u: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(u)
        for c in reversed(coef):
            out = out * u + c
        return out

    return f


def _relu_pow(k: int, scale: float) -> Fn:
    def f(u: torch.Tensor) -> torch.Tensor:
        return scale * torch.clamp(u, min=0) ** k

    return f


# Dual-kernel hooks: the closed forms of lazylab.duals.


def _relu_power_activation(name: str, k: int, scale: float = 1.0) -> Activation:
    """scale * max(u, 0)^k with its arc-cosine duals (sigma' = scale k relu^(k-1))."""

    def dual(X: torch.Tensor, Z: torch.Tensor | None) -> torch.Tensor:
        return relu_power_nngp(X, Z, power=k, scale=scale)

    def derivative_dual(X: torch.Tensor, Z: torch.Tensor | None) -> torch.Tensor:
        return relu_power_nngp(X, Z, power=k - 1, scale=scale * k)

    fn = torch.relu if (k, scale) == (1, 1.0) else _relu_pow(k, scale)
    return Activation(name, fn, relu_power=k, relu_scale=scale, dual=dual,
                      derivative_dual=derivative_dual)


def _poly_activation(name: str, coef: tuple[float, ...]) -> Activation:
    """sum_j coef[j] u^j with its exact Gaussian-moment duals."""

    def dual(X: torch.Tensor, Z: torch.Tensor | None) -> torch.Tensor:
        return poly_dual(coef, coef, X, Z)

    def derivative_dual(X: torch.Tensor, Z: torch.Tensor | None) -> torch.Tensor:
        dp = poly_derivative(coef)
        return poly_dual(dp, dp, X, Z)

    return Activation(name, _poly(coef), poly=coef, dual=dual, derivative_dual=derivative_dual)


def _closed_form_hook(kind: str, derivative: bool) -> Dual:
    """The erf (Williams 1998) or sin dual of :mod:`lazylab.duals.dual`."""
    fn = erf_dual if kind == "erf" else sin_dual

    def hook(X: torch.Tensor, Z: torch.Tensor | None) -> torch.Tensor:
        return fn(X, Z, derivative=derivative)

    return hook


ACTIVATIONS: dict[str, Activation] = {
    a.name: a
    for a in [
        _relu_power_activation("relu", 1),
        _relu_power_activation("relu2", 2),
        _relu_power_activation("relu3", 3),
        # Bai & Lee (2020) use relu^3/6 so that sigma''' = 1{u > 0}.
        _relu_power_activation("relu3_6", 3, 1 / 6),
        _poly_activation("quad", (0.0, 0.0, 1.0)),
        _poly_activation("quad_centered", (-1.0, 0.0, 1.0)),
        _poly_activation("linear", (0.0, 1.0)),
        Activation("tanh", torch.tanh, (_tanh_d1, _tanh_d2, _tanh_d3)),
        Activation("erf", torch.erf, (_erf_d1, _erf_d2, _erf_d3),
                   dual=_closed_form_hook("erf", False),
                   derivative_dual=_closed_form_hook("erf", True)),
        Activation("sigmoid", _sig, (_dsig, _d2sig, _d3sig)),
        Activation("softplus", torch.nn.functional.softplus, (_sig, _dsig, _d2sig)),
        # sin^(j)(u) = sin(u + j pi / 2), exact at every order.
        Activation("sin", torch.sin, nth=lambda u, j: torch.sin(u + j * (math.pi / 2)),
                   dual=_closed_form_hook("sin", False),
                   derivative_dual=_closed_form_hook("sin", True)),
    ]
}

# Friendly aliases used in the papers' notation.
_ALIASES = {"u2": "quad", "x2": "quad", "u2m1": "quad_centered", "x2m1": "quad_centered",
            "relu^2": "relu2", "relu^3": "relu3", "relu3/6": "relu3_6", "identity": "linear"}


def get_activation(name: str | Activation) -> Activation:
    """Look an activation up by name (or pass an :class:`Activation` through).

    Raises ``ValueError`` naming the allowed values for an unknown name.
    """
    if isinstance(name, Activation):
        return name
    key = _ALIASES.get(name, name)
    if key not in ACTIVATIONS:
        allowed = ", ".join(sorted(ACTIVATIONS))
        raise ValueError(f"activation must be one of {allowed}; got {name!r}")
    return ACTIVATIONS[key]
