"""Target functions y = f(X): ridge polynomials, Hermite and Gegenbauer terms, parities,
quadratic forms, teacher networks and their sums.

A :class:`Target` maps an (n, d) tensor to an (n,) tensor (or (n, k) for vector-valued targets),
on X's device and in X's dtype. Targets add and scale: ``f + g``, ``0.5 * f``, ``f - g``.
Parameters are stored in float64 and cast to X's dtype at call time.

Example
-------
>>> import torch
>>> from lazylab.data.targets import Polynomial, Parity
>>> f = Polynomial([1.0, 0.0], p=2) + 3 * Parity([0, 1])
>>> f(torch.tensor([[2.0, -1.0]]))
tensor([-2.])
>>> f.name
'(beta.x)^2 + 3*parity(0,1)'
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import torch

from lazylab.data.harmonics import gegenbauer_q, hermite_e, num_harmonics

Fn = Callable[[torch.Tensor], torch.Tensor]
VectorLike = torch.Tensor | Sequence[float]


def as_vector(v: VectorLike, name: str = "beta") -> torch.Tensor:
    """A 1-d float64 CPU tensor from a sequence or tensor, with finite entries."""
    t = torch.as_tensor(v, dtype=torch.float64).detach().cpu()
    if t.ndim != 1 or t.numel() == 0 or not torch.isfinite(t).all():
        raise ValueError(f"{name} must be a non-empty 1-d vector of finite numbers")
    return t


def random_unit_vector(d: int, *, generator: torch.Generator) -> torch.Tensor:
    """beta uniform on the unit sphere S^{d-1} (float64, CPU), drawn from ``generator``."""
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")
    g = torch.randn(int(d), generator=generator, device=generator.device, dtype=torch.float64)
    return (g / g.norm()).cpu()


class Target(ABC):
    """A function X (n, d) -> y (n,) [or (n, k)] with a readable ``name``."""

    if TYPE_CHECKING:
        # Every target has a readable name; the subclasses here compute it in a property, a
        # subclass may also store it as a plain attribute.
        @property
        def name(self) -> str: ...

    @abstractmethod
    def __call__(self, X: torch.Tensor) -> torch.Tensor: ...

    def __add__(self, other: Target) -> Sum:
        if not isinstance(other, Target):
            return NotImplemented
        return Sum([self, other])

    def __mul__(self, c: float) -> Scaled:
        if not isinstance(c, int | float):
            return NotImplemented
        return Scaled(self, float(c))

    __rmul__ = __mul__

    def __neg__(self) -> Scaled:
        return Scaled(self, -1.0)

    def __sub__(self, other: Target) -> Sum:
        if not isinstance(other, Target):
            return NotImplemented
        return Sum([self, Scaled(other, -1.0)])


def _check_input(X: torch.Tensor, d: int | None = None) -> None:
    if not isinstance(X, torch.Tensor) or X.ndim != 2:
        raise ValueError("X must be a 2-d torch.Tensor of shape (n, d)")
    if d is not None and X.shape[1] != d:
        raise ValueError(f"X must have {d} columns for this target; got {X.shape[1]}")


def _check_degree(k: int, name: str) -> int:
    if int(k) != k or k < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {k!r}")
    return int(k)


@dataclass(eq=False)
class Sum(Target):
    """f(x) = sum_j f_j(x) (Arora et al. Cor. 6.2; Nichani et al.'s low-degree plus sparse)."""

    terms: list[Target]

    def __post_init__(self) -> None:
        if not self.terms or not all(isinstance(t, Target) for t in self.terms):
            raise ValueError("terms must be a non-empty list of Target")
        flat: list[Target] = []
        for t in self.terms:
            flat.extend(t.terms if isinstance(t, Sum) else [t])
        self.terms = flat

    @property
    def name(self) -> str:
        return " + ".join(t.name for t in self.terms)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        out = self.terms[0](X)
        for t in self.terms[1:]:
            out = out + t(X)
        return out


@dataclass(eq=False)
class Scaled(Target):
    """f(x) = c * g(x)."""

    target: Target
    c: float

    @property
    def name(self) -> str:
        inner = self.target.name
        return f"{self.c:g}*({inner})" if isinstance(self.target, Sum) else f"{self.c:g}*{inner}"

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return self.c * self.target(X)


@dataclass(eq=False)
class _Directional(Target):
    """Base of targets that read x only through the projection beta . x."""

    beta: VectorLike

    def __post_init__(self) -> None:
        self.beta = as_vector(self.beta)

    @property
    def _beta(self) -> torch.Tensor:
        """beta as the float64 tensor ``__post_init__`` made of it."""
        return cast(torch.Tensor, self.beta)

    def _proj(self, X: torch.Tensor) -> torch.Tensor:
        beta = self._beta
        _check_input(X, beta.numel())
        return X @ beta.to(device=X.device, dtype=X.dtype)


def _with_alpha(alpha: float, body: str) -> str:
    return body if alpha == 1.0 else f"{alpha:g}*{body}"


@dataclass(eq=False)
class Ridge(_Directional):
    """f(x) = alpha * g(beta . x) for any elementwise torch function g.

    Covers Arora et al.'s examples (Sec. 6): g(z) = cos(z) - 1 (Ex. 6.3), g(z) = z arctan(z/2)
    (Ex. 6.4), and the non-smooth control g = sign.
    """

    fn: Fn
    label: str = "g"
    alpha: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.fn):
            raise ValueError("fn must be a callable elementwise function of a tensor")

    @property
    def name(self) -> str:
        return _with_alpha(self.alpha, f"{self.label}(beta.x)")

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return self.alpha * self.fn(self._proj(X))


@dataclass(eq=False)
class Polynomial(_Directional):
    """f(x) = alpha (beta . x)^p (Arora et al. 2019, Thm 6.1; Bai & Lee 2020, Lemma 9).

    Arora et al. prove learnability by the NTK for p = 1 and even p with
    sqrt(y^T H^-1 y) <= 3 p |alpha| ||beta||^p; Bai & Lee's quadratic model needs p in
    {2, 3, 4, 6, ...}. On S^{d-1}(B_x), beta . x has standard deviation ||beta|| B_x / sqrt(d).
    """

    p: int = 1
    alpha: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.p = _check_degree(self.p, "p")

    @property
    def name(self) -> str:
        return _with_alpha(self.alpha, f"(beta.x)^{self.p}")

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return self.alpha * self._proj(X) ** self.p


@dataclass(eq=False)
class Hermite(_Directional):
    """f(x) = alpha He_k(beta . x), the probabilists' Hermite polynomial of degree k.

    For x ~ N(0, I_d) and ||beta|| = 1, E[He_j(beta.x) He_k(beta.x)] = k! delta_jk; with
    ``normalized=True`` the term is divided by sqrt(k!) so that E[f^2] = alpha^2 (Nichani et al.
    2022, Fig. 2 code: He_3(z)/sqrt(6)).
    """

    k: int = 1
    alpha: float = 1.0
    normalized: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.k = _check_degree(self.k, "k")

    @property
    def name(self) -> str:
        body = f"He_{self.k}(beta.x)" + (f"/sqrt({self.k}!)" if self.normalized else "")
        return _with_alpha(self.alpha, body)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        c = self.alpha / math.sqrt(math.factorial(self.k)) if self.normalized else self.alpha
        return c * hermite_e(self.k, self._proj(X))


@dataclass(eq=False)
class Gegenbauer(_Directional):
    """Degree-k zonal spherical harmonic along beta, with unit second moment on S^{d-1}(sqrt d):

        f(x) = alpha * sqrt(B(d, k)) * Q_k(sqrt(d) * u . x),   u = beta / ||beta||,

    where Q_k is the Gegenbauer polynomial normalised by Q_k(d) = 1 and B(d, k) the number of
    degree-k harmonics (:mod:`lazylab.data.harmonics`). For x ~ Unif(S^{d-1}(sqrt d)),
    E[f^2] = alpha^2 B(d,k) Q_k(d)/B(d,k) = alpha^2, and terms of different degree are orthogonal.
    Example: Q_2(t) = ((t/sqrt d)^2 - 1)/(d - 1) and B(d, 2) = (d+2)(d-1)/2, so k = 2 gives
    f(x) = alpha ((u.x)^2 - 1) / sqrt(2(d-1)/(d+2)); indeed Var((u.x)^2) = 2(d-1)/(d+2) on the
    sphere (not 2d/(d+2), which drops the -1).
    """

    k: int = 1
    alpha: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.k = _check_degree(self.k, "k")
        beta = self._beta
        d = beta.numel()
        if d < 2:
            raise ValueError(f"beta must have dimension d >= 2 for spherical harmonics; got {d}")
        if float(beta.norm()) == 0.0:
            raise ValueError("beta must be a non-zero vector (only its direction is used)")
        self.beta = beta / beta.norm()

    @property
    def name(self) -> str:
        return _with_alpha(self.alpha, f"Q_{self.k}(beta.x)")

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        d = self._beta.numel()
        t = math.sqrt(d) * self._proj(X)
        return self.alpha * math.sqrt(num_harmonics(d, self.k)) * gegenbauer_q(self.k, d, t)


@dataclass(eq=False)
class Parity(Target):
    """f(x) = scale * prod_{i in S} x_i, the k-XOR / parity on S when x is in {-1, +1}^d.

    Bai & Lee 2020's 2-XOR is ``Parity([0, 1])`` on {+-1}^d (x_1 x_2 =
    ((e1+e2).x)^2/4 - ((e1-e2).x)^2/4). Allen-Zhu & Li's Fig. 4 task is
    ``Parity(six indices, scale=d**3)`` on {+-1/sqrt(d)}^d. Indices are 0-based.
    """

    indices: Sequence[int]
    scale: float = 1.0

    def __post_init__(self) -> None:
        idx = [int(i) for i in self.indices]
        if not idx or len(set(idx)) != len(idx) or min(idx) < 0:
            raise ValueError("indices must be a non-empty list of distinct non-negative integers")
        self.indices = tuple(idx)

    @property
    def name(self) -> str:
        return _with_alpha(self.scale, "parity(" + ",".join(map(str, self.indices)) + ")")

    @classmethod
    def random(cls, d: int, k: int, *, generator: torch.Generator, scale: float = 1.0) -> Parity:
        """A parity on k distinct coordinates of [0, d) chosen uniformly at random."""
        if int(k) != k or not 1 <= k <= d:
            raise ValueError(f"k must be an integer in [1, d={d}]; got {k!r}")
        perm = torch.randperm(int(d), generator=generator, device=generator.device)
        return cls(sorted(perm[: int(k)].tolist()), scale)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        _check_input(X)
        if max(self.indices) >= X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} columns but the parity reads index "
                             f"{max(self.indices)}")
        return self.scale * X[:, list(self.indices)].prod(dim=1)


@dataclass(eq=False)
class QuadraticForm(Target):
    """f(x) = alpha (x^T A x + offset) for a symmetric (d, d) matrix A.

    Arora et al.'s Example 6.2 (x^T A x = sum_j lambda_j (v_j . x)^2) and Nichani et al.'s dense
    quadratic f_2. Centring needs offset = -tr(A) for x ~ N(0, I_d) or on S^{d-1}(sqrt d).
    """

    A: torch.Tensor
    offset: float = 0.0
    alpha: float = 1.0
    label: str = "x'Ax"

    def __post_init__(self) -> None:
        A = torch.as_tensor(self.A, dtype=torch.float64).detach().cpu()
        if A.ndim != 2 or A.shape[0] != A.shape[1] or not torch.isfinite(A).all():
            raise ValueError("A must be a finite square matrix")
        self.A = (A + A.T) / 2

    @property
    def name(self) -> str:
        return _with_alpha(self.alpha, self.label)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        _check_input(X, self.A.shape[0])
        A = self.A.to(device=X.device, dtype=X.dtype)
        return self.alpha * (((X @ A) * X).sum(dim=1) + self.offset)


def _cube(u: torch.Tensor) -> torch.Tensor:
    return u**3


#: Activations a teacher may use by name (data is the lowest layer, so these are standalone).
TEACHER_ACTIVATIONS: dict[str, Fn] = {
    "relu": torch.relu,
    "relu2": lambda u: torch.relu(u) ** 2,
    "relu3": lambda u: torch.relu(u) ** 3,
    "quad": torch.square,
    "cube": _cube,
    "linear": lambda u: u,
    "tanh": torch.tanh,
    "erf": torch.erf,
    "sigmoid": torch.sigmoid,
    "softplus": torch.nn.functional.softplus,
    "sin": torch.sin,
    "cos": torch.cos,
}


@dataclass(eq=False)
class TeacherNet(Target):
    """A fixed two-layer teacher f(x) = scale * sum_r a_r sigma(w_r . x).

    W is (m, d) with rows w_r, a is (m,); ``activation`` is a name of ``TEACHER_ACTIVATIONS`` or
    an elementwise callable. Use :func:`random_teacher` to draw one.
    """

    W: torch.Tensor
    a: torch.Tensor
    activation: str | Fn = "relu"
    scale: float = 1.0

    def __post_init__(self) -> None:
        W = torch.as_tensor(self.W, dtype=torch.float64).detach().cpu()
        a = torch.as_tensor(self.a, dtype=torch.float64).detach().cpu()
        if W.ndim != 2 or a.ndim != 1 or a.shape[0] != W.shape[0]:
            raise ValueError("W must be (m, d) and a must be (m,) with the same m")
        if isinstance(self.activation, str) and self.activation not in TEACHER_ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(TEACHER_ACTIVATIONS)} or a "
                             f"callable; got {self.activation!r}")
        if not isinstance(self.activation, str) and not callable(self.activation):
            raise ValueError("activation must be a name or a callable")
        self.W, self.a = W, a

    @property
    def sigma(self) -> Fn:
        act = self.activation
        return TEACHER_ACTIVATIONS[act] if isinstance(act, str) else act

    @property
    def name(self) -> str:
        act = self.activation if isinstance(self.activation, str) else "custom"
        return f"teacher({act}, m={self.W.shape[0]})"

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        _check_input(X, self.W.shape[1])
        W = self.W.to(device=X.device, dtype=X.dtype)
        a = self.a.to(device=X.device, dtype=X.dtype)
        return self.scale * (self.sigma(X @ W.T) @ a)


def random_teacher(d: int, width: int, *, generator: torch.Generator,
                   activation: str | Fn = "relu", weight_std: float | None = None,
                   second_layer: str = "gaussian") -> TeacherNet:
    """A random teacher f(x) = m^{-1/2} sum_r a_r sigma(w_r . x).

    w_r ~ N(0, s^2 I_d) with s = ``weight_std`` (default 1/sqrt(d), so w_r . x ~ N(0, 1) for
    x ~ N(0, I_d) or on S^{d-1}(sqrt d); use s = 1 for unit-norm inputs). a_r ~ N(0, 1)
    (``second_layer="gaussian"``) or uniform +-1 (``"sign"``). Over the draw of a, at any x,
    E[f(x)^2] = (1/m) sum_r sigma(w_r . x)^2, close to E[sigma(z)^2] (1/2 for relu) for any m.
    """
    if int(d) != d or d < 1 or int(width) != width or width < 1:
        raise ValueError(f"d and width must be positive integers; got d={d!r}, width={width!r}")
    if second_layer not in ("gaussian", "sign"):
        raise ValueError(f"second_layer must be 'gaussian' or 'sign'; got {second_layer!r}")
    s = 1.0 / math.sqrt(d) if weight_std is None else float(weight_std)
    if not (math.isfinite(s) and s > 0):
        raise ValueError(f"weight_std must be a positive finite number; got {weight_std!r}")
    W = s * torch.randn(int(width), int(d), generator=generator, device=generator.device,
                        dtype=torch.float64)
    if second_layer == "gaussian":
        a = torch.randn(int(width), generator=generator, device=generator.device,
                        dtype=torch.float64)
    else:
        a = 2.0 * torch.randint(0, 2, (int(width),), generator=generator,
                                device=generator.device).double() - 1.0
    return TeacherNet(W, a, activation, 1.0 / math.sqrt(width))
