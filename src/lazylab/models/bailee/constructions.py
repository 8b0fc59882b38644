"""Explicit weights of Bai & Lee (2020): coherent directions and the representers W* of
Lemma 9 / Lemma 15 / Theorem 7, with their (2, p) norms.

Conventions follow :class:`TwoLayerNet` with ``init="symmetric"``: rows r and r + m/2 form a
pair with the same w0_r and opposite output weights a_r = -a_{r+m/2} = +-1, s_m = m^{-1/2},
and w0_r ~ N(0, B_x^{-2} I_d) (``weight_std = 1 / B_x``), so w0_r . x ~ N(0, 1) for inputs
on the sphere of radius B_x (Bai & Lee 2020, Eq. (3)).

* :func:`relu_hermite_coefficient`: mu_p = E[relu(G) He_p(G)] in closed form (the ReLU kernel
  of the proof of Lemma 9, App. A.2).
* :func:`relu_rf_coefficient`: the minimum-norm random-feature coefficient a(w0) of Lemma 9,

      a(w0) = alpha (B_x ||beta||)^q / mu_q * He_q(B_x beta_hat . w0),
      E_w0[relu(w0 . x) a(w0)] = alpha (beta . x)^q  for ||x|| = B_x,
      E[a^2] = alpha^2 (B_x ||beta||)^{2q} q! / mu_q^2.

* :func:`quadratic_representer`: W* of Theorem 7 (proof in App. C.4) for alpha (beta . x)^p,
  p in {2, 3, 4, 6, 8, ...}, sigma = relu^3/6 (sigma'' = relu): on pair r the member with
  a = +1 gets 2 m^{-1/4} sqrt(a_+(w0_r)) beta and the member with a = -1 gets
  2 m^{-1/4} sqrt(a_-(w0_r)) beta, with a(.) the Lemma 9 coefficient of exponent q = p - 2, so

      f^Q_{W*}(x) = [(2/m) sum_{pairs} relu(w0_r . x) a(w0_r)] (beta . x)^2 -> alpha (beta . x)^p,
      ||W*||_{2,4}^4 = 8 ||beta||^4 mean_r a(w0_r)^2.

* :func:`combine_representers`: footnote 5, W* = W_1 + W_2 Sigma (exact sum when the supports
  are disjoint rows, e.g. the 2-XOR representer).
* :func:`coherent_direction`: a "coherent" W (w_r = c v where a_r = +1, else 0), for which
  f^Q reaches the Theta(1) of Sec. 3.
* :func:`phase_sine`: sigma(u) = sin(u + phase), analytic with every derivative in closed form.

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet
>>> net = TwoLayerNet(4, 2000, activation="relu3_6", init="symmetric", a_init="ones",
...                   dtype=torch.float64, generator=torch.Generator().manual_seed(0))
>>> rep = quadratic_representer(net, alpha=1.0, beta=torch.ones(4, dtype=torch.float64), p=2)
>>> abs(rep.norm_2_4 ** 4 / (8 * 4**2 * 2 * 3.141592653589793) - 1) < 1e-12  # 8|b|^4 E a^2
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lazylab.activations import Activation, get_activation
from lazylab.data.harmonics import hermite_e
from lazylab.models.two_layer import TwoLayerNet


def norm_2p(W: torch.Tensor, p: float = 4.0) -> float:
    """||W||_{2,p} = (sum_r ||w_r||_2^p)^{1/p} over the rows w_r (Bai & Lee 2020, Sec. 2)."""
    if not p >= 1:
        raise ValueError(f"p must be >= 1; got {p!r}")
    norms = W.detach().double().norm(dim=-1)
    if math.isinf(p):
        return float(norms.max())
    return float(norms.pow(p).sum().pow(1.0 / p))


def relu_hermite_coefficient(p: int) -> float:
    """mu_p = E[relu(G) He_p(G)], G ~ N(0, 1) (the proof of Lemma 9, App. A.2, uses the kernel
    coefficients c_p; this closed form is ours, checked numerically).

    mu_0 = 1/sqrt(2 pi), mu_1 = 1/2, mu_{2l} = (-1)^{l+1} (2l - 3)!! / sqrt(2 pi) for l >= 1
    (with (-1)!! = 1), and mu_p = 0 for odd p >= 3. The ReLU kernel coefficients are
    c_p = mu_p^2 / p!.
    """
    if int(p) != p or p < 0:
        raise ValueError(f"p must be a non-negative integer; got {p!r}")
    p = int(p)
    if p == 1:
        return 0.5
    if p % 2:
        return 0.0
    if p == 0:
        return 1.0 / math.sqrt(2 * math.pi)
    ell = p // 2
    dfact = math.prod(range(2 * ell - 3, 0, -2)) if ell >= 2 else 1
    return (-1) ** (ell + 1) * dfact / math.sqrt(2 * math.pi)


def representable_exponent(q: int) -> bool:
    """Whether alpha (beta . x)^q is a ReLU random-feature function (Lemma 9): q in {0, 1, 2, 4,
    6, ...}, i.e. mu_q != 0."""
    return int(q) == q and q >= 0 and (q <= 1 or q % 2 == 0)


def _unit(beta: torch.Tensor) -> tuple[torch.Tensor, float]:
    if beta.dim() != 1:
        raise ValueError(f"beta must be a vector (d,); got shape {tuple(beta.shape)}")
    nb = float(beta.double().norm())
    if not nb > 0:
        raise ValueError("beta must be a nonzero vector")
    return beta / nb, nb


def relu_rf_coefficient(W0: torch.Tensor, alpha: float, beta: torch.Tensor, q: int,
                        B_x: float = 1.0) -> torch.Tensor:
    """Lemma 9's minimum-norm coefficient a(w0) for each row w0 of W0 (shape (m, d) -> (m,)).

    a(w0) = alpha (B_x ||beta||)^q / mu_q * He_q(B_x beta_hat . w0), so that
    E_{w0 ~ N(0, B_x^-2 I)}[relu(w0 . x) a(w0)] = alpha (beta . x)^q on ||x|| = B_x
    (Mehler: E[relu(G) He_q(G')] = mu_q rho^q for correlation rho).
    """
    if not representable_exponent(q):
        raise ValueError(f"q must be one of 0, 1, 2, 4, 6, ... (Lemma 9: mu_q != 0); got {q!r}")
    if not B_x > 0:
        raise ValueError(f"B_x must be > 0; got {B_x!r}")
    bhat, nb = _unit(beta.to(W0))
    coef = alpha * (B_x * nb) ** q / relu_hermite_coefficient(q)
    return coef * hermite_e(int(q), B_x * (W0 @ bhat))


@dataclass(frozen=True)
class QuadraticRepresenter:
    """W* (m, d) with f^Q_{W*} ~ alpha (beta . x)^p, and its norm ||W*||_{2,4}.

    ``coefficients`` are the Lemma 9 values a(w0_r) on the m/2 pairs (None for sums).
    """

    W: torch.Tensor
    norm_2_4: float
    coefficients: torch.Tensor | None = None


def _relu3_curvature(act: Activation) -> float:
    """c with sigma'' = c relu, for sigma = s relu^3 (c = 6 s; c = 1 for relu^3/6)."""
    if act.relu_power != 3:
        raise ValueError(f"the Theorem 7 construction needs sigma = s * relu^3 (sigma'' = 6 s "
                         f"relu); got activation {act.name!r}")
    return 6.0 * act.relu_scale


def _pair_rows(net: TwoLayerNet) -> tuple[torch.Tensor, torch.Tensor]:
    """For each pair r: the row index with a = +1 and the one with a = -1."""
    if not net.paired:
        raise ValueError("net must have init='symmetric' (paired neurons)")
    h = net.width // 2
    a = net.a[:h].detach()
    if not bool(((a.abs() - 1).abs() < 1e-12).all()):
        raise ValueError("net.a must be +-1 (a_init='ones' or 'sign')")
    idx = torch.arange(h, device=a.device)
    plus = torch.where(a > 0, idx, idx + h)
    return plus, torch.where(a > 0, idx + h, idx)


def quadratic_representer(net: TwoLayerNet, alpha: float, beta: torch.Tensor, p: int,
                          B_x: float = 1.0) -> QuadraticRepresenter:
    """W* of Theorem 7 (Bai & Lee 2020, App. C.4) for f*(x) = alpha (beta . x)^p.

    Needs p - 2 in {0, 1, 2, 4, ...} (p in {2, 3, 4, 6, 8, ...}), sigma = s relu^3 and a
    symmetric-init net with w0 ~ N(0, B_x^-2 I). Every row has norm Theta(m^{-1/4}): the
    randomization regime. With sigma'' = c relu, sqrt(a_+-) is divided by sqrt(c).
    """
    if int(p) != p or p < 2 or not representable_exponent(p - 2):
        raise ValueError(f"p must be one of 2, 3, 4, 6, 8, ... (Lemma 15); got {p!r}")
    curv = _relu3_curvature(net.act)
    plus, minus = _pair_rows(net)
    h = net.width // 2
    W0 = net.W.detach()[:h]
    beta = beta.to(W0)
    a = relu_rf_coefficient(W0, alpha, beta, int(p) - 2, B_x)
    c = 2.0 * net.width ** -0.25 / math.sqrt(curv)
    W = torch.zeros_like(net.W.detach())
    W[plus] = c * a.clamp_min(0).sqrt().unsqueeze(1) * beta
    W[minus] = c * (-a).clamp_min(0).sqrt().unsqueeze(1) * beta
    return QuadraticRepresenter(W, norm_2p(W, 4), a)


def combine_representers(*Ws: torch.Tensor,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """W* for f_1 + ... + f_k from representers W_j of each f_j (Bai & Lee 2020, footnote 5).

    When the W_j have pairwise disjoint nonzero rows, f^Q is additive over neurons and the sum
    is exact. Otherwise W* = W_1 + sum_{j>1} W_j Sigma_j with independent random signs Sigma_j
    (needs ``generator``): the cross terms have mean zero and are O_p(m^{-1/2}) when rows have
    norm m^{-1/4}, and ||W*||_{2,4} <= sum_j ||W_j||_{2,4}.
    """
    if not Ws:
        raise ValueError("combine_representers needs at least one weight matrix")
    shape = Ws[0].shape
    if any(W.shape != shape for W in Ws):
        raise ValueError("all representers must have the same shape (m, d)")
    support = torch.stack([W.detach().abs().sum(-1) > 0 for W in Ws]).sum(0)
    if int(support.max()) <= 1:
        return sum((W.detach() for W in Ws), torch.zeros_like(Ws[0]))
    if generator is None:
        raise ValueError("representers share rows: a generator is needed for the random signs "
                         "of footnote 5")
    out = Ws[0].detach().clone()
    for W in Ws[1:]:
        s = torch.randint(0, 2, (shape[0],), generator=generator, device=generator.device)
        out = out + (2 * s - 1).to(device=W.device, dtype=W.dtype).unsqueeze(1) * W.detach()
    return out


def xor_representer(net: TwoLayerNet, i: int = 0, j: int = 1) -> QuadraticRepresenter:
    """W* with f^Q_{W*}(x) -> x_i x_j (2-XOR, Bai & Lee 2020, Sec. 5.2).

    x_i x_j = ((e_i + e_j) . x)^2 / 4 - ((e_i - e_j) . x)^2 / 4: two p = 2 representers with
    constant a(w0) = +-sqrt(2 pi)/4 (independent of B_x), living on the a = +1 and a = -1
    members of each pair respectively, hence an exact sum.
    """
    d = net.d
    if not (0 <= i < d and 0 <= j < d and i != j):
        raise ValueError(f"i and j must be distinct indices in [0, {d}); got {i}, {j}")
    e = torch.eye(d, dtype=net.W.dtype, device=net.W.device)
    r1 = quadratic_representer(net, 0.25, e[i] + e[j], 2)
    r2 = quadratic_representer(net, -0.25, e[i] - e[j], 2)
    W = combine_representers(r1.W, r2.W)
    return QuadraticRepresenter(W, norm_2p(W, 4))


def coherent_direction(net: TwoLayerNet, v: torch.Tensor, scale: float) -> torch.Tensor:
    """(m, d) W with w_r = scale * v where a_r > 0 and 0 elsewhere (a "coherent" W).

    With scale = m^{-1/4}, f^Q_W = Theta(1) and f^L_W = Theta(m^{1/4}); an incoherent W (iid
    rows independent of a) would make f^Q cancel between the two halves.
    """
    if v.shape != (net.d,):
        raise ValueError(f"v must have shape ({net.d},); got {tuple(v.shape)}")
    mask = (net.a.detach() > 0).to(net.W.dtype).unsqueeze(1)
    return scale * mask * v.to(net.W).unsqueeze(0)


def phase_sine(phase: float = math.pi / 4) -> Activation:
    """sigma(u) = sin(u + phase), analytic, sigma^(j)(u) = sin(u + phase + j pi / 2).

    For G ~ N(0, 1), E[sigma^(j)(G)] = e^{-1/2} sin(phase + j pi / 2). With phase = pi/4 every
    derivative has a nonzero Gaussian mean of modulus e^{-1/2}/sqrt(2), so the order-k
    randomization of Bai & Lee 2020, Sec. 6, has a nonzero limit for every k (for plain sin,
    phase = 0, the even-order limits vanish).
    """
    if not math.isfinite(phase):
        raise ValueError(f"phase must be a finite number; got {phase!r}")
    if phase == 0.0:
        return get_activation("sin")

    def fn(u: torch.Tensor) -> torch.Tensor:
        return torch.sin(u + phase)

    def nth(u: torch.Tensor, j: int) -> torch.Tensor:
        return torch.sin(u + (phase + j * math.pi / 2))

    return Activation(f"sin(u+{phase:.4g})", fn, nth=nth)
