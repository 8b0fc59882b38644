"""The papers' concrete targets, built from :mod:`lazylab.data.targets`.

* Arora et al. 2019, Sec. 6: ``arora_example`` (linear, (beta.x)^2, cos(beta.x) - 1,
  (beta.x) arctan(beta.x / 2), sign(beta.x)).
* Bai & Lee 2020, Sec. 5.2: ``xor2`` (y = x_1 x_2 on {+-1}^d).
* Nichani, Bai & Lee 2022, Sec. 4: ``dense_quadratic``, ``DenseHarmonic``, ``random_sparse``,
  ``low_degree_plus_sparse``, ``nichani_fig1_target``, ``nichani_fig2_target``.
* Allen-Zhu & Li 2019, Sec. 8 and Eq. (7.1): ``HierarchicalParity`` (T1), ``HardInstance`` (T2),
  ``allenzhu_parity6`` (T3).

Example
-------
>>> import torch
>>> from lazylab.data.paper_targets import HierarchicalParity
>>> H = HierarchicalParity(alpha=0.3, beta=1.0)           # Allen-Zhu & Li, Sec. 8.1
>>> H(torch.ones(2, 30)).shape                             # 15 outputs
torch.Size([2, 15])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lazylab.data.harmonics import gegenbauer_q, num_harmonics
from lazylab.data.targets import (
    Gegenbauer,
    Hermite,
    Parity,
    Polynomial,
    QuadraticForm,
    Ridge,
    Scaled,
    Sum,
    Target,
    random_unit_vector,
)

# ----------------------------------------------------------------------------- Arora et al.

def _z_arctan(z: torch.Tensor) -> torch.Tensor:
    return z * torch.atan(z / 2)


def _cos_minus_one(z: torch.Tensor) -> torch.Tensor:
    return torch.cos(z) - 1


def _sign(z: torch.Tensor) -> torch.Tensor:
    return torch.where(z >= 0, 1.0, -1.0).to(z.dtype)


#: Arora et al. 2019, Sec. 6 examples (and a non-smooth control), as ridge functions of beta.x.
ARORA_EXAMPLES = ("linear", "square", "cos", "zarctan", "sign")


def arora_example(name: str, beta: Sequence[float] | torch.Tensor, alpha: float = 1.0) -> Target:
    """One of Arora et al.'s learnable functions g(beta . x) (Sec. 6):

    ``linear``: beta.x (Ex. 6.1); ``square``: (beta.x)^2 (Thm 6.1, p = 2); ``cos``:
    cos(beta.x) - 1 (Ex. 6.3, bound 3 ||beta|| sinh ||beta||); ``zarctan``: z arctan(z/2) with
    z = beta.x (Ex. 6.4, ||beta|| <= 1); ``sign``: sign(beta.x), a non-smooth control whose
    complexity sqrt(y^T H^-1 y) grows with n.
    """
    if name == "linear":
        return Polynomial(beta, p=1, alpha=alpha)
    if name == "square":
        return Polynomial(beta, p=2, alpha=alpha)
    fns = {"cos": (_cos_minus_one, "(cos-1)"), "zarctan": (_z_arctan, "zarctan"),
           "sign": (_sign, "sign")}
    if name not in fns:
        raise ValueError(f"name must be one of {', '.join(ARORA_EXAMPLES)}; got {name!r}")
    fn, label = fns[name]
    return Ridge(beta, fn, label, alpha)


# ----------------------------------------------------------------------------- Bai & Lee

def xor2(i: int = 0, j: int = 1) -> Parity:
    """Bai & Lee 2020's 2-XOR: y = x_i x_j on x ~ Unif{+-1}^d (0-based, default x_1 x_2).

    The paper (Sec. 5.2) takes its training distribution from Wei et al. (2019) without
    describing it; we read it as the uniform cube with d - 2 noise coordinates. Add label noise with
    :func:`lazylab.data.labels.flip_labels`.
    """
    return Parity([i, j])


# ----------------------------------------------------------------------------- Nichani et al.

def dense_quadratic(d: int, *, generator: torch.Generator, inputs: str = "sphere") -> QuadraticForm:
    """A random centred quadratic with unit variance, a dense f_2 of Nichani et al. 2022's
    Assumption 1 (Sec. 2.1):

        f_2(x) = (x^T A x - tr A) / s,   A = (G + G^T)/2,  G_ij ~ N(0, 1),

    s^2 = (2d/(d+2)) (||A||_F^2 - (tr A)^2/d) for x ~ Unif(S^{d-1}(sqrt d)) (``inputs="sphere"``)
    and s^2 = 2 ||A||_F^2 for x ~ N(0, I_d) (``"gaussian"``).
    """
    if inputs not in ("sphere", "gaussian"):
        raise ValueError(f"inputs must be 'sphere' or 'gaussian'; got {inputs!r}")
    if int(d) != d or d < 2:
        raise ValueError(f"d must be an integer >= 2; got {d!r}")
    G = torch.randn(d, d, generator=generator, device=generator.device, dtype=torch.float64)
    A = ((G + G.T) / 2).cpu()
    fro2, tr = float((A**2).sum()), float(A.trace())
    s2 = 2 * d / (d + 2) * (fro2 - tr**2 / d) if inputs == "sphere" else 2 * fro2
    return QuadraticForm(A, offset=-tr, alpha=1 / math.sqrt(s2), label="dense_quad")


@dataclass(eq=False)
class DenseHarmonic(Target):
    """A random dense degree-l harmonic with unit second moment on S^{d-1}(sqrt d):

        h(x) = c sum_{j=1}^M g_j sqrt(B(d,l)) Q_l(sqrt(d) u_j . x),  g_j ~ N(0,1), u_j unit,

    with c = (g^T K g)^{-1/2}, K_jj' = Q_l(d u_j . u_j'), because E[Q_l(x.y) Q_l(x.y')] =
    Q_l(y.y')/B(d,l) for y = sqrt(d) u_j, y' = sqrt(d) u_j'. M defaults to B(d, l) directions,
    enough to span the degree-l space. (An extra factor B(d, l) in K would double count the
    sqrt(B) normalisation.) Use :meth:`draw` to sample one.
    """

    U: torch.Tensor
    g: torch.Tensor
    l: int

    def __post_init__(self) -> None:
        self.U = torch.as_tensor(self.U, dtype=torch.float64).cpu()
        self.g = torch.as_tensor(self.g, dtype=torch.float64).cpu()
        if self.U.ndim != 2 or self.g.shape != (self.U.shape[0],) or self.U.shape[1] < 2:
            raise ValueError("U must be (M, d) with d >= 2 and g must be (M,)")
        self.U = self.U / self.U.norm(dim=1, keepdim=True)
        d = self.U.shape[1]
        K = gegenbauer_q(self.l, d, d * (self.U @ self.U.T))
        self.c = float(1.0 / torch.sqrt(self.g @ K @ self.g))

    @classmethod
    def draw(cls, d: int, l: int, *, generator: torch.Generator,
             n_dirs: int | None = None) -> DenseHarmonic:
        M = num_harmonics(d, l) if n_dirs is None else int(n_dirs)
        U = torch.randn(M, d, generator=generator, device=generator.device, dtype=torch.float64)
        g = torch.randn(M, generator=generator, device=generator.device, dtype=torch.float64)
        return cls(U.cpu(), g.cpu(), int(l))

    @property
    def name(self) -> str:
        return f"dense_harmonic(l={self.l})"

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        d = self.U.shape[1]
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(f"X must be (n, {d})")
        U = self.U.to(device=X.device, dtype=X.dtype)
        g = self.g.to(device=X.device, dtype=X.dtype)
        Q = gegenbauer_q(self.l, d, math.sqrt(d) * (X @ U.T))
        return self.c * math.sqrt(num_harmonics(d, self.l)) * (Q @ g)


def random_sparse(d: int, k: int, R: int, *, generator: torch.Generator,
                  kind: str = "monomial") -> Sum:
    """f_sp(x) = sum_{i=1}^R alpha_i t_i(beta_i . x), degree k + 1 (Nichani et al., Assumption 1).

    (alpha_1..alpha_R) is uniform on S^{R-1} and each beta_i uniform on S^{d-1}. The term t_i is
    ``"monomial"``: z^{k+1} as in the paper; ``"harmonic"``: sqrt(B(d,k+1)) Q_{k+1}(sqrt(d) z),
    purely degree k+1 with unit norm on S^{d-1}(sqrt d); ``"hermite"``: He_{k+1}(z)/sqrt((k+1)!),
    unit norm for Gaussian inputs.
    """
    if kind not in ("monomial", "harmonic", "hermite"):
        raise ValueError(f"kind must be 'monomial', 'harmonic' or 'hermite'; got {kind!r}")
    if int(R) != R or R < 1:
        raise ValueError(f"R must be a positive integer; got {R!r}")
    alphas = random_unit_vector(int(R), generator=generator)
    terms: list[Target] = []
    for a in alphas.tolist():
        beta = random_unit_vector(d, generator=generator)
        if kind == "monomial":
            terms.append(Polynomial(beta, p=k + 1, alpha=a))
        elif kind == "harmonic":
            terms.append(Gegenbauer(beta, k=k + 1, alpha=a))
        else:
            terms.append(Hermite(beta, k=k + 1, alpha=a, normalized=True))
    return Sum(terms)


def low_degree_plus_sparse(low: Target, sparse: Target) -> Sum:
    """f* = f_k + f_sp (Nichani et al. 2022, Assumption 1): a dense degree-<=k part with
    E[f_k^2] = 1 plus a sparse degree-(k+1) part that the NTK cannot learn with n << d^{k+1}."""
    return Sum([low, sparse])


def nichani_fig1_target(d: int, *, generator: torch.Generator, variant: str = "code") -> Target:
    """Nichani et al.'s Fig. 1 target (k = 1), beta uniform on the unit sphere:

    ``"code"`` (default): f*(x) = (beta.x + (beta.x)^2 - 1) / sqrt(3), unit variance for Gaussian
    inputs; ``"paper"``: f*(x) = x_1 - 1 + (beta.x)^2 (variance about 3). On the sphere the
    degree-2 part of the code variant has variance 2(d-1)/(3(d+2)): the NTK plateau.
    """
    beta = random_unit_vector(d, generator=generator)
    if variant == "code":
        body = Polynomial(beta, p=1) + Hermite(beta, k=2)
        return Scaled(body, 1 / math.sqrt(3))
    if variant == "paper":
        e1 = torch.zeros(d, dtype=torch.float64)
        e1[0] = 1.0
        return Polynomial(e1, p=1) + Hermite(beta, k=2)  # He_2(z) = z^2 - 1
    raise ValueError(f"variant must be 'code' or 'paper'; got {variant!r}")


def nichani_fig2_target(d: int, *, generator: torch.Generator, variant: str = "code") -> Target:
    """Nichani et al.'s Fig. 2 target (k = 2), A = diag(1[i > d/2]) (0-based i), z = beta.x:

    ``"code"``: f*(x) = x^T A x / sqrt(675) + He_3(z)/sqrt(6) (not centred, as in the authors'
    code); ``"clean"``: (x^T A x - tr A)/sqrt(4 ||A||_F^2) + He_3(z)/sqrt(12), each part with
    variance 1/2 for x ~ N(0, I_d).
    """
    beta = random_unit_vector(d, generator=generator)
    diag = (torch.arange(d, dtype=torch.float64) > d / 2).double()
    A = torch.diag(diag)
    if variant == "code":
        return Sum([QuadraticForm(A, alpha=1 / math.sqrt(675), label="x'Ax"),
                    Hermite(beta, k=3, normalized=True)])
    if variant == "clean":
        fro2 = float(diag.sum())
        if fro2 == 0:
            raise ValueError(f"d must be at least 2 for the clean Fig. 2 target; got {d}")
        return Sum([QuadraticForm(A, offset=-fro2, alpha=1 / math.sqrt(4 * fro2), label="x'Ax"),
                    Hermite(beta, k=3, alpha=1 / math.sqrt(2), normalized=True)])
    raise ValueError(f"variant must be 'code' or 'clean'; got {variant!r}")


# ----------------------------------------------------------------------------- Allen-Zhu & Li

@dataclass(eq=False)
class HierarchicalParity(Target):
    """Allen-Zhu & Li 2019, Sec. 8.1 (T1): H(x) = beta F(x) + alpha G(F(x)) in R^k, k = d/2,

        F_i(x) = x_{2i-1} x_{2i},   G_i(y) = (-1)^i y_1 y_2 y_3 y_4,   i = 1..k,

    for x uniform on {+-1}^d (not normalised). So H_i = beta x_{2i-1}x_{2i} + alpha (-1)^i x_1..x_8:
    a degree-2 base signal plus a degree-8 composite parity. The paper: d = 30, alpha = 0.3,
    beta in {1, 0.5, 0.3, 0.2, 0}; predicting beta F alone has error k alpha^2 = 1.35.
    """

    alpha: float = 0.3
    beta: float = 1.0
    d: int = 30

    def __post_init__(self) -> None:
        if int(self.d) != self.d or self.d < 8 or self.d % 2:
            raise ValueError(f"d must be an even integer >= 8; got {self.d!r}")

    @property
    def name(self) -> str:
        return f"hierarchical(beta={self.beta:g}, alpha={self.alpha:g})"

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must be (n, {self.d})")
        F = X[:, 0::2] * X[:, 1::2]
        g = F[:, :4].prod(dim=1, keepdim=True)
        signs = torch.tensor([(-1.0) ** i for i in range(1, self.d // 2 + 1)],
                             dtype=X.dtype, device=X.device)
        return self.beta * F + self.alpha * g * signs


@dataclass(eq=False)
class HardInstance(Target):
    """Allen-Zhu & Li 2019, Eq. (7.1) (T2): with x~ = sqrt(d) x and S = (i_1..i_k),

        H_r(x) = x~_{i_r} + alpha prod_{j in S} x~_j,   r = 1..k,

    on inputs from :func:`lazylab.data.samplers.hard_instance_inputs`. ``normalize=True`` divides
    by sqrt(k) (Concept-1 scaling, Sec. D.4); ``output=r`` returns the single output H_r.
    """

    indices: Sequence[int]
    alpha: float
    d: int
    normalize: bool = False
    output: int | None = None

    def __post_init__(self) -> None:
        idx = [int(i) for i in self.indices]
        if len(idx) < 2 or len(set(idx)) != len(idx) or min(idx) < 0 or max(idx) >= self.d:
            raise ValueError(f"indices must be >= 2 distinct integers in [0, d={self.d})")
        if self.output is not None and not 0 <= self.output < len(idx):
            raise ValueError(f"output must be None or in [0, {len(idx)}); got {self.output!r}")
        self.indices = tuple(idx)

    @property
    def name(self) -> str:
        return f"hard_instance(k={len(self.indices)}, alpha={self.alpha:g})"

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must be (n, {self.d})")
        F = math.sqrt(self.d) * X[:, list(self.indices)]
        H = F + self.alpha * F.prod(dim=1, keepdim=True)
        if self.normalize:
            H = H / math.sqrt(len(self.indices))
        return H if self.output is None else H[:, self.output]


def allenzhu_parity6(d: int, *, generator: torch.Generator) -> Parity:
    """Allen-Zhu & Li 2019, Fig. 4 (T3): y = d^3 x_{i1}...x_{i6} in {-1, +1} for x uniform on
    {+-1/sqrt(d)}^d (``hypercube(n, d, radius=1)``), with 6 distinct random indices."""
    if int(d) != d or d < 6:
        raise ValueError(f"d must be an integer >= 6; got {d!r}")
    return Parity.random(d, 6, generator=generator, scale=float(d) ** 3)

