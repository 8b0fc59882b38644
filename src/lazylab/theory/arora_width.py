"""Finite-width error model of Arora et al. (2019)'s predictions, by Monte Carlo over H(0).

At width m the network's tangent kernel at initialization is

    H(0)_ij = x_i.x_j (1/m') sum_{r <= m'} 1{w_r.x_i >= 0} 1{w_r.x_j >= 0},  w_r ~ N(0, I),

with m' = m independent neurons (Gaussian init) or m' = m/2 (the symmetric init pairs every
neuron with a copy of opposite a_r, so it has m/2 distinct w_r). E H(0) = H_inf (their Eq. (3));
each entry is a mean of m' bounded terms, so H(0) - H_inf = O(m'^-1/2) (Lemma C.3). A lazy net
(u(0) = 0, activation patterns nearly fixed) follows the linear dynamics of its own kernel H(0)
instead of H_inf, so Theorem 4.1's and Lemma 5.3's predictions carry a finite-width error whose
bias and spread over initializations we estimate here by drawing H(0) directly (no training):

* ``log_loss``: log(Phi_H0(k) / Phi_Hinf(k)), Phi_H(k) = (1/2)||(I - eta H)^k y||^2 (Eq. (8));
* ``dist_ratio``: D_H0(K) / D_Hinf(K), D_H(K)^2 = sum_i (1 - (1 - eta lambda_i)^K)^2 (v_i.y)^2
  / lambda_i (Lemma 5.3's main term, App. D.1).

What this model leaves out is the motion of the kernel during training, H(k) - H(0), which
Theorem 4.1 bounds only by O(n^3 / (sqrt(m) lambda_0 kappa)) (Lemma C.2): claims built on it
test whether the measured deviation is explained by the kernel at initialization alone.

Example
-------
>>> import torch
>>> from lazylab.solve.spectral import eigendecompose
>>> from lazylab.theory.arora import h_infinity
>>> g = torch.Generator().manual_seed(0)
>>> X = torch.nn.functional.normalize(torch.randn(30, 4, generator=g, dtype=torch.float64), 1)
>>> H0 = init_gram(X, 50_000, generator=g)
>>> bool((H0 - h_infinity(X)).abs().max() < 0.02)      # O(m^-1/2) entrywise
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch

from lazylab.solve.spectral import Spectrum, eigendecompose


def init_gram(X: torch.Tensor, independent: int, *, generator: torch.Generator,
              block: int = 4096) -> torch.Tensor:
    """H(0) of ``independent`` neurons w_r ~ N(0, I): x_i.x_j (1/m') sum_r 1_ri 1_rj (float64).

    Parameters
    ----------
    X : (n, d) inputs.
    independent : m', the number of distinct first-layer weights (m, or m/2 for the symmetric
        init, whose paired neurons share w_r and give the same kernel as m/2 neurons).
    generator : the random stream of the w_r (on X's device).
    block : neurons per block (memory n x block).
    """
    if int(independent) != independent or independent < 1:
        raise ValueError(f"independent must be a positive integer; got {independent!r}")
    X = X.to(torch.float64)
    n, d = X.shape
    acc = torch.zeros(n, n, dtype=torch.float64, device=X.device)
    for r0 in range(0, int(independent), block):
        r1 = min(int(independent), r0 + block)
        W = torch.randn(r1 - r0, d, generator=generator, dtype=torch.float64, device=X.device)
        A = (X @ W.T >= 0).to(torch.float64)
        acc += A @ A.T
    return (X @ X.T) * acc / int(independent)


class WidthSpread(NamedTuple):
    """Mean and standard deviation over H(0) draws, at each requested step."""

    steps: list[int]
    log_loss_mean: list[float]
    log_loss_sd: list[float]
    dist_ratio_mean: list[float]
    dist_ratio_sd: list[float]
    draws: int


def _loss_and_dist(spec: Spectrum, y: torch.Tensor, eta: float, ks: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    lam = spec.eigenvalues
    c2 = spec.project(y).square()
    base = (1 - eta * lam)[None, :]
    powk = base ** ks[:, None]
    loss = 0.5 * (powk.square() * c2[None, :]).sum(1)
    safe = torch.where(lam > 0, lam, torch.ones_like(lam))
    dist2 = ((1 - powk).square() * torch.where(lam > 0, c2 / safe, 0.0)[None, :]).sum(1)
    return loss, dist2.sqrt()


def width_spread(X: torch.Tensor, spectrum: Spectrum, labels: Mapping[str, torch.Tensor], *,
                 eta: float, steps: Sequence[int], independent: int, draws: int,
                 generator: torch.Generator) -> dict[str, WidthSpread]:
    """Monte Carlo of the finite-width error of Eq. (8) and of D(K), per label vector.

    For each of ``draws`` independent H(0) (:func:`init_gram`), the predictions of the linear
    dynamics with H(0) are compared with those of H_inf (``spectrum``) at every step k:
    log(Phi_H0(k) / Phi_Hinf(k)) and D_H0(k) / D_Hinf(k) (0/0 at k = 0 is reported as 1).
    The same H(0) draws serve every label vector (common random numbers).

    Returns
    -------
    dict label name -> :class:`WidthSpread` (sample standard deviations, ddof = 1).
    """
    if draws < 2:
        raise ValueError(f"draws must be at least 2 (a spread needs two draws); got {draws!r}")
    ks = torch.as_tensor(list(steps), dtype=torch.float64, device=spectrum.eigenvalues.device)
    ref = {name: _loss_and_dist(spectrum, y, eta, ks) for name, y in labels.items()}
    logs: dict[str, list[torch.Tensor]] = {name: [] for name in labels}
    ratios: dict[str, list[torch.Tensor]] = {name: [] for name in labels}
    for _ in range(draws):
        spec0 = eigendecompose(init_gram(X, independent, generator=generator))
        for name, y in labels.items():
            loss0, dist0 = _loss_and_dist(spec0, y, eta, ks)
            loss, dist = ref[name]
            logs[name].append((loss0 / loss).log())
            ratios[name].append(torch.where(dist > 0, dist0 / torch.where(dist > 0, dist, 1.0),
                                            1.0))
    out = {}
    for name in labels:
        L, R = torch.stack(logs[name]), torch.stack(ratios[name])
        out[name] = WidthSpread([int(k) for k in steps], L.mean(0).tolist(),
                                L.std(0).tolist(), R.mean(0).tolist(), R.std(0).tolist(),
                                draws)
    return out


def combined_se(sd: float, seeds: int, draws: int) -> float:
    """Standard error of (mean over ``seeds`` runs) - (Monte Carlo mean over ``draws``), each
    run a draw of spread ``sd``: sd sqrt(1/seeds + 1/draws)."""
    return sd * math.sqrt(1.0 / max(seeds, 1) + 1.0 / max(draws, 1))
