"""The explicit solutions of Nichani, Bai & Lee (2022): W_Q (Lemma 1), W_L (Lemma 2) and
W* = W_L + W_Q S (Theorem 2), for the network of :func:`~lazylab.models.nichani.nichani_net`.

Rows are neurons (W is (m, d)); a_r = +1 on the first half and -1 on the second.

* :func:`construct_wq`: moves one copy of each pair along beta, w_r = c_r beta, so that

      f_Q(x; W_Q) = (beta.x)^2 (1/(2 sqrt m)) sum_r a_r c_r^2 sigma''(w0_r.x).

  k = 1 (target (beta.x)^2): c_r^2 = 4 / (sqrt(m) E[sigma''(z)]) on the copies with
  a_r = sign(E sigma''), giving ||W_Q||_{2,4}^4 = 8 / E[sigma'']^2 (constant in m) and
  ||W_Q||_F^2 = 2 sqrt(m) / |E sigma''| (each neuron moves m^{-1/4}).
  k = 2 (target (beta.x)^3): c_r^2 = 4 d |beta.w0_r| / (sqrt(m) |E[z sigma''(z)]|) on the copy
  with a_r = sign((beta.w0_r) E[z sigma'']), by Funk-Hecke E_w[(beta.w) sigma''(w.x)] =
  E[z sigma''(z)] (beta.x)/d; ||W_Q||_{2,4}^4 ~ 8 d / E[z sigma'']^2 = O(d^{k-1}).
  E is over z ~ tau_d, the law of w0_r.x on the sphere (the Gaussian constant E over
  N(0, 1) would leave an error floor that does not shrink with m).
* :func:`construct_wl`: for f_1(x) = b0 + u.x,
  w_r = a_r (u / (sqrt(m) E[sigma']) + b0 w0_r / (sqrt(m) E[z sigma'])), so f_L -> b0 + u.x and
  ||W_L||_F^2 = O(1).
* :func:`random_signs`: signs s_r per neuron (balanced on the moved half: sum s_r = 0), and
  W* = W_L + S W_Q with S = diag(s) acting on rows. f_Q(S W) = f_Q(W) exactly, while f_L(S W_Q)
  loses coherence: E_S f_L(x; S W)^2 = (1/m) sum_r sigma'(w0_r.x)^2 (x.w_r)^2 (Sec. 4.1).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lazylab.data.spherical import tau_expect
from lazylab.models.two_layer import TwoLayerNet


def tau_moment(net: TwoLayerNet, order: int, power: int) -> float:
    """E_{z ~ tau_d}[z^power sigma^(order)(z)] for the net's activation."""
    act = net.act

    def g(z: np.ndarray) -> np.ndarray:
        return (z**power) * act.deriv(torch.tensor(z), order).numpy()

    return tau_expect(g, net.d)


def _base(net: TwoLayerNet) -> tuple[torch.Tensor, torch.Tensor, int]:
    if not net.paired:
        raise ValueError("the constructions need the symmetric (paired) initialization")
    return net.W.detach(), net.a.detach(), net.width


def construct_wq(net: TwoLayerNet, beta: torch.Tensor, k: int = 1) -> torch.Tensor:
    """W_Q (m, d) with f_Q(x; W_Q) ~ (beta.x)^{k+1} for k in {1, 2} (Lemma 1; see module doc).

    The error decays like m^{-1/2}; ``beta`` is normalised to a unit vector.
    """
    W0, a, m = _base(net)
    beta = torch.as_tensor(beta, dtype=W0.dtype, device=W0.device)
    beta = beta / beta.norm()
    if k == 1:
        e2 = tau_moment(net, 2, 0)
        c2 = torch.full((m,), 4.0 / (math.sqrt(m) * abs(e2)), dtype=W0.dtype, device=W0.device)
        move = a == math.copysign(1.0, e2)
    elif k == 2:
        e2 = tau_moment(net, 2, 1)
        proj = W0 @ beta
        c2 = 4.0 * net.d * proj.abs() / (math.sqrt(m) * abs(e2))
        move = a == torch.sign(proj) * math.copysign(1.0, e2)
    else:
        raise ValueError(f"k must be 1 or 2; got {k!r}")
    c = torch.where(move, c2.sqrt(), torch.zeros_like(c2))
    return c.unsqueeze(1) * beta.unsqueeze(0)


def construct_wl(net: TwoLayerNet, u: torch.Tensor, b0: float = 0.0) -> torch.Tensor:
    """W_L (m, d) with f_L(x; W_L) ~ b0 + u.x (Lemma 2, k = 1; see module doc)."""
    W0, a, m = _base(net)
    u = torch.as_tensor(u, dtype=W0.dtype, device=W0.device)
    e1, ez1 = tau_moment(net, 1, 0), tau_moment(net, 1, 1)
    W = u.unsqueeze(0) / (math.sqrt(m) * e1) + b0 * W0 / (math.sqrt(m) * ez1)
    return a.unsqueeze(1) * W


def random_signs(m: int, *, generator: torch.Generator, balanced: bool = True,
                 dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(m,) signs s_r = +-1 for S = diag(s) acting on neurons (rows).

    ``balanced=True``: within each half (r < m/2 and r >= m/2) exactly half the signs are +1,
    so for a W moving one half sum_r s_r over the moved neurons is 0, which removes the shared
    Gaussian factor that the constant Hermite part of sigma' gives E_n f_L(S W_Q)^2 (the
    paper's S of Sec. 4.1 is i.i.d.). Otherwise i.i.d. Rademacher.
    """
    if int(m) != m or m < 2 or m % 2:
        raise ValueError(f"m must be an even integer >= 2; got {m!r}")
    dev = generator.device
    if not balanced:
        return (torch.randint(0, 2, (m,), generator=generator, device=dev) * 2 - 1).to(dtype)
    h = m // 2
    out = []
    for _ in range(2):
        base = torch.ones(h, dtype=dtype, device=dev)
        base[h // 2:] = -1
        out.append(base[torch.randperm(h, generator=generator, device=dev)])
    return torch.cat(out)


def norm_2_4(W: torch.Tensor) -> torch.Tensor:
    """||W||_{2,4} = (sum_r ||w_r||_2^4)^{1/4} over the neurons (rows) of W (…, m, d)."""
    return (W.pow(2).sum(-1).pow(2).sum(-1)).pow(0.25)
