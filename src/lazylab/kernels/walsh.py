"""Exact Walsh-Hadamard (Boolean Fourier) tools for the kernel lower bounds on {-1, 1}^d.

Allen-Zhu & Li (2019), Thms 2-3 and App. D. On the cube every function has the expansion
f(x) = sum_S f^(S) chi_S(x), chi_S(x) = prod_{j in S} x_j, f^(S) = E_x f(x) chi_S(x). A kernel
predictor K(x) = sum_n w_n K(x, x_n) has f^(S) = sum_n w_n M_{n,S} with

    M_{n,S} = E_x K(x, x_n) chi_S(x)                          (App. D, Eq. D.2),

and a linear model over features phi_l (Thm 3) has M_{l,S} = E_x phi_l(x) chi_S(x). For the
single-output hard target t(x) = x_i + alpha chi_S(x) (|S| = k, i in S), Parseval (Lemma D.1)
gives E (f - t)^2 = ||f^ - t^||^2, so the best risk of *any* weights is

    R*(S, i) = min_w ||M^T w - t^||^2 = ||t^||^2 - v^T (M M^T)^+ v,
    v = M t^ = M_{:,{i}} + alpha M_{:,S}.

Everything here is exact (no Monte Carlo): only the Gram G = M M^T (N x N) and the columns
M_{:,S} are needed. Points of the cube are indexed by integers b in [0, 2^d): x_j = 1 - 2 bit_j(b),
and a set S by its bit mask s, so chi_S(x_b) = (-1)^popcount(b & s) and the transform is the
natural-order Hadamard transform (:func:`fwht`).

Two representations (:class:`FourierSystem`):

* dot-product kernels K(x, y) = kappa(<x, y>): M_{n,S} = kappa^_{|S|} chi_S(x_n) (d + 1 numbers,
  :func:`dot_product_spectrum`) and G_{nm} = sum_j kappa^_j^2 Kraw_j(h_nm), with h_nm the Hamming
  distance and Kraw_j the Krawtchouk polynomial (:func:`krawtchouk_table`);
* any kernel given through a feature map phi (empirical NTK, random features): the coefficient
  matrix C = fwht(phi(all points)) (D x 2^d), M = Phi(X_N) C for the kernel, or M = C for the
  feature-map version of Thm 3.

Example
-------
>>> import torch
>>> f = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)  # values at x_b, d = 2
>>> fwht(f).tolist()   # E f, E f x_1, E f x_2, E f x_1 x_2
[2.5, -0.5, -1.0, 0.0]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

_MAX_D = 22


def _check_d(d: int) -> int:
    if int(d) != d or not 1 <= d <= _MAX_D:
        raise ValueError(f"d must be an integer in [1, {_MAX_D}] (2^d points); got {d!r}")
    return int(d)


def cube_points(d: int, *, dtype: torch.dtype = torch.float64,
                device: torch.device | str = "cpu") -> torch.Tensor:
    """All 2^d points of {-1, 1}^d; row b has x_j = 1 - 2 bit_j(b)."""
    d = _check_d(d)
    b = torch.arange(2 ** d, device=device).unsqueeze(1)
    bits = (b >> torch.arange(d, device=device)) & 1
    return (1 - 2 * bits).to(dtype)


def subset_mask(S: Sequence[int]) -> int:
    """Bit mask of a subset S of {0..d-1}."""
    return sum(1 << int(j) for j in S)


def subsets(d: int, k: int) -> list[tuple[int, ...]]:
    """All size-k subsets of {0..d-1}, in lexicographic order."""
    return list(itertools.combinations(range(d), k))


def fwht(values: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Normalized Walsh-Hadamard transform: out[s] = 2^-d sum_b values[b] (-1)^popcount(b & s).

    ``values`` holds f(x_b) along ``dim`` (length 2^d, points ordered as :func:`cube_points`);
    the result holds the Fourier coefficients f^(S) = E_x f(x) chi_S(x), S indexed by its mask.
    O(d 2^d) butterflies per column.
    """
    n = values.shape[dim]
    d = n.bit_length() - 1
    if n < 1 or 2 ** d != n:
        raise ValueError(f"length along dim must be a power of 2; got {n}")
    x = values.movedim(dim, 0).clone()
    rest = x.shape[1:]
    for j in range(d):
        h = 1 << j
        y = x.reshape(n // (2 * h), 2, h, *rest)
        a, b = y[:, 0].clone(), y[:, 1]
        y[:, 0] += b
        y[:, 1] = a - b
        x = y.reshape(n, *rest)
    return (x / n).movedim(0, dim)


def dot_product_spectrum(kappa: Callable[[torch.Tensor], torch.Tensor], d: int) -> torch.Tensor:
    """kappa^_j = E_z kappa(sum_i z_i) chi_[j](z), j = 0..d, for K(x, y) = kappa(<x, y>).

    Then E_x K(x, y) chi_S(x) = kappa^_|S| chi_S(y) (substitute z = x * y), so a dot-product
    kernel's whole Fourier structure is these d + 1 numbers. Computed exactly from the 2^d
    values kappa(<x, 1>).
    """
    X = cube_points(d)
    coef = fwht(kappa(X.sum(dim=1)).to(torch.float64))
    return coef[torch.tensor([(1 << j) - 1 for j in range(d + 1)])]


def krawtchouk_table(d: int) -> torch.Tensor:
    """Kraw[j, h] = sum_{|S| = j} chi_S(z) for z with h entries equal to -1:

        Kraw_j(h) = sum_s (-1)^s C(h, s) C(d - h, j - s),   j, h = 0..d.
    """
    d = _check_d(d)
    T = torch.zeros(d + 1, d + 1, dtype=torch.float64)
    for j in range(d + 1):
        for h in range(d + 1):
            T[j, h] = sum((-1) ** s * math.comb(h, s) * math.comb(d - h, j - s)
                          for s in range(0, min(h, j) + 1))
    return T


#: Sets of one size gathered at once by :func:`_chi`.
_CHI_SETS = 256


def _chi(X: torch.Tensor, S: Sequence[Sequence[int]]) -> torch.Tensor:
    """(N, len(S)) matrix chi_S(x_n) for +-1 inputs X.

    The sets of one size are gathered and multiplied together, up to ``_CHI_SETS`` at a time
    (the same products in the same order as set by set; the gathered (N, sets, |S|) block
    stays at most |S| times the output's columns for those sets)."""
    out = X.new_empty(X.shape[0], len(S))
    by_size: dict[int, list[int]] = {}
    for j, s in enumerate(S):
        by_size.setdefault(len(s), []).append(j)
    for k, cols in by_size.items():
        if k == 0:
            out[:, cols] = 1.0
            continue
        for lo in range(0, len(cols), _CHI_SETS):
            part = cols[lo:lo + _CHI_SETS]
            idx = torch.tensor([list(S[j]) for j in part], dtype=torch.long, device=X.device)
            out[:, part] = X[:, idx].prod(dim=2)
    return out



@dataclass
class FourierSystem:
    """The Gram G = M M^T (N x N) of a kernel or feature map and a way to get columns M_{:,S}.

    Build with :meth:`dot_product` (kernel kappa(<x, y>) at centres X) or :meth:`features`
    (coefficient matrix C of any features; the kernel <phi(x), phi(y)> at centres X is
    ``features(C, Phi_X)``, Thm 3's feature map is ``features(C)``).
    """

    gram: torch.Tensor
    column_fn: Callable[[Sequence[Sequence[int]]], torch.Tensor]

    @classmethod
    def dot_product(cls, spectrum: torch.Tensor, X: torch.Tensor) -> FourierSystem:
        """M_{n,S} = kappa^_|S| chi_S(x_n); X: (N, d) +-1 centres; spectrum from
        :func:`dot_product_spectrum`."""
        X = X.to(torch.float64)
        d = X.shape[1]
        H = ((d - X @ X.T) / 2).round().long()          # Hamming distances
        K = krawtchouk_table(d)
        G = (spectrum.square().unsqueeze(1) * K).sum(dim=0)[H]

        def cols(S: Sequence[Sequence[int]]) -> torch.Tensor:
            sizes = torch.tensor([len(s) for s in S])
            return _chi(X, S) * spectrum[sizes]
        return cls(G, cols)

    @classmethod
    def features(cls, C: torch.Tensor, Phi: torch.Tensor | None = None) -> FourierSystem:
        """C: (D, 2^d) Fourier coefficients of D features (``fwht(phi(cube_points), dim=0).T``).

        With ``Phi`` (N, D) = phi(x_n) the system is the kernel <phi(x), phi(x_n)>'s
        (M = Phi C); without it, the feature map's own (M = C, Thm 3).
        """
        C = C.to(torch.float64)
        if Phi is None:
            G = C @ C.T

            def cols(S: Sequence[Sequence[int]]) -> torch.Tensor:
                return C[:, [subset_mask(s) for s in S]]
        else:
            Phi = Phi.to(torch.float64)
            G = Phi @ (C @ C.T) @ Phi.T

            def cols(S: Sequence[Sequence[int]]) -> torch.Tensor:
                return Phi @ C[:, [subset_mask(s) for s in S]]
        return cls(G, cols)

    def pinv_factor(self, rtol: float = 1e-10) -> torch.Tensor:
        """B with G^+ = B B^T (eigenvalues below rtol * max are treated as 0)."""
        lam, U = torch.linalg.eigh((self.gram + self.gram.T) / 2)
        keep = lam > rtol * max(float(lam.max()), 0.0)
        return U[:, keep] / lam[keep].sqrt()


def best_risk(system: FourierSystem, sets: Sequence[Sequence[int]], i_of: Sequence[int],
              alpha: float, *, factor: torch.Tensor | None = None,
              chunk: int = 2048) -> torch.Tensor:
    """R*(S, i) = 1 + alpha^2 - v^T G^+ v, v = M_{:,{i}} + alpha M_{:,S}, for each S in ``sets``.

    The smallest risk E_x (f(x) - x_i - alpha chi_S(x))^2 of any f in the span (Lemma D.1 with
    the best weights); ``i_of[r]`` is the singleton of set r (|S| >= 2 so {i} != S).
    """
    B = system.pinv_factor() if factor is None else factor
    out = []
    for lo in range(0, len(sets), chunk):
        S = sets[lo:lo + chunk]
        V = system.column_fn([(i,) for i in i_of[lo:lo + chunk]]) + alpha * system.column_fn(S)
        out.append((1 + alpha ** 2) - (B.T @ V).square().sum(dim=0))
    return torch.cat(out).clamp_min(0.0)


def leverage_scores(system: FourierSystem, sets: Sequence[Sequence[int]], *,
                    rtol: float = 1e-10) -> torch.Tensor:
    """Leverage l_S = M_S^T (M_k M_k^T)^+ M_S of the columns of one degree (Lemma D.2, sharp form).

    Here M_k (N x R) holds the columns of every set in ``sets`` (all size-k sets): l is the
    diagonal of the projection onto the row space of M_k, i.e. the squared row norms of the
    right singular vectors with nonzero singular values (cost min(N, R)^2 max(N, R)). A set S
    whose risk is <= alpha^2/16 needs <M_S, a> = 1 with sum_{S' != S} <M_S', a>^2 <= 1/9, i.e.
    q_S >= 9, i.e. l_S = q_S / (1 + q_S) >= 0.9; since sum_S l_S = rank <= N, at most N / 0.9
    sets are good.
    """
    Mk = system.column_fn(sets)
    if Mk.shape[0] > Mk.shape[1]:
        lam, V = torch.linalg.eigh(Mk.T @ Mk)                 # right singular vectors
        keep = lam > rtol * max(float(lam.max()), 0.0)
        return V[:, keep].square().sum(dim=1)
    lam, U = torch.linalg.eigh(Mk @ Mk.T)
    keep = lam > rtol * max(float(lam.max()), 0.0)
    B = U[:, keep] / lam[keep].sqrt()
    return (B.T @ Mk).square().sum(dim=0)


def fraction_good(risks: torch.Tensor, alpha: float) -> float:
    """Fraction of sets whose best risk is <= alpha^2 / 16 (Thm 2's threshold)."""
    return float((risks <= alpha ** 2 / 16).double().mean())


def parseval_risk(coeffs: torch.Tensor, i: int, S: Sequence[int], alpha: float) -> float:
    """E (f - x_i - alpha chi_S)^2 from f's Fourier coefficients (Lemma D.1):
    (f^({i}) - 1)^2 + (f^(S) - alpha)^2 + sum of the other f^(S')^2."""
    t = torch.zeros_like(coeffs)
    t[subset_mask([i])] += 1.0
    t[subset_mask(S)] += alpha
    return float((coeffs - t).square().sum())
