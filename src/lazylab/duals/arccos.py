"""Arc-cosine kernels: exact NNGP and NTK of two-layer nets with sigma(u) = s * max(u, 0)^k.

For w ~ N(0, I_d) and theta the angle between x and z (cos theta = rho = x.z / (|x| |z|)),
Cho & Saul (2009, Eq. (1)-(4)) give

    E_w[ relu(w.x)^k relu(w.z)^k ] = |x|^k |z|^k J_k(theta) / (2 pi),

    J_0 = pi - theta,
    J_1 = sin theta + (pi - theta) cos theta,
    J_k = (2k - 1) cos theta J_{k-1} + (k - 1)^2 sin^2 theta J_{k-2}     (k >= 2),

(the recursion reproduces Cho & Saul's J_2 and J_3 and follows from their derivative formula
J_k = (-1)^k sin^(2k+1) theta (sin^-1 theta d/dtheta)^k ((pi - theta)/sin theta)).
With sigma = s relu^k, sigma' = s k relu^(k-1), hence

    NNGP(x, z)        = s^2 |x|^k |z|^k J_k / (2 pi),
    NTK_first(x, z)   = (x.z) s^2 k^2 |x|^(k-1) |z|^(k-1) J_(k-1) / (2 pi),

and for k = s = 1 the latter is Arora et al. (2019)'s Gram matrix (their Eq. (3))

    H_inf(x, z) = x.z (pi - arccos rho) / (2 pi) = x.z (1/4 + arcsin(rho) / (2 pi)).

The dense (n, n') part is done in place on the Gram matrix, a few row blocks at a time, so the
cosines of a block live in a reusable scratch buffer instead of a second n x n' array, and the
relu NTK takes two passes per block: for n = 5000 it costs little more than X Z^T itself
(bench/bench_ntk.py).

Example
-------
>>> import torch
>>> x = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
>>> relu_power_ntk(x, power=1).diagonal().tolist()   # H(x, x) = |x|^2 / 2
[0.5, 2.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lazylab.duals._inputs import GramStats, check_pair, gram_stats, safe_reciprocal

# Row blocks of the cosines: at most _MAX_BLOCKS blocks, each of at least _MIN_BLOCK elements.
# Blocking keeps the scratch buffer small (a full-size second n x n' array costs more in page
# faults than the elementwise passes themselves) and a block's five passes closer to the
# cache: at n = 5000 with two threads, 16 blocks (6 MB each) gave 1.12-1.14x X @ X.T against
# 1.19-1.20x for 4 blocks (25 MB). The floor keeps the number of multi-threaded torch calls
# small: on a busy machine each parallel region can stall for a scheduler time slice, and
# 2^16-element blocks were measured 10x slower there.
_MAX_BLOCKS = 16
_MIN_BLOCK = 1 << 18

BlockFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], None]


def arccos_j(k: int, rho: torch.Tensor) -> torch.Tensor:
    """Cho & Saul's angular factor J_k(theta) as a function of rho = cos theta in [-1, 1]."""
    if k < 0:
        raise ValueError(f"k must be a non-negative integer; got {k}")
    theta_c = math.pi - torch.arccos(rho)  # pi - theta
    if k == 0:
        return theta_c
    sin2 = (1 - rho * rho).clamp_min(0)
    j_prev, j = theta_c, sin2.sqrt() + theta_c * rho
    for i in range(2, k + 1):
        j_prev, j = j, (2 * i - 1) * rho * j + (i - 1) ** 2 * sin2 * j_prev
    return j


def _map_cosines(st: GramStats, fn: BlockFn) -> torch.Tensor:
    """Overwrite st.G block by block with fn(g, rho, nx, nz), rho the clamped cosines.

    ``fn`` receives a row block g of G (to be overwritten with the kernel), the matching
    cosines rho (a scratch buffer it may destroy), the block's norms nx (b,) and all nz (n',).
    """
    G, nx, nz = st.G, st.nx, st.nz
    n, n2 = G.shape
    rx, rz = safe_reciprocal(nx), safe_reciprocal(nz)
    block = max(_MIN_BLOCK, -(-n * n2 // _MAX_BLOCKS))
    rows = max(1, min(n, block // max(n2, 1)))
    buf = G.new_empty(rows, n2)
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        g, rho = G[i0:i1], buf[: i1 - i0]
        torch.mul(g, rx[i0:i1, None], out=rho)
        rho.mul_(rz).clamp_(-1.0, 1.0)
        if st.symmetric:
            # angle 0 on the diagonal exactly, whatever the rounding of G_ii / |x_i|^2
            rho[:, i0:i1].diagonal().fill_(1.0)
        fn(g, rho, nx[i0:i1], nz)
    return G


def _relu_first_quarter(g: torch.Tensor, rho: torch.Tensor, nx: torch.Tensor,
                        nz: torch.Tensor) -> None:
    # Called on g = G/4 (the Gram matrix of X/2 and Z/2): H = G (1/4 + arcsin(rho) / (2 pi))
    # = g + (2/pi) g arcsin(rho), two passes (arcsin avoids the "pi -" pass of arccos).
    g.addcmul_(g, rho.asin_(), value=2 / math.pi)


def _relu_both(g: torch.Tensor, rho: torch.Tensor, nx: torch.Tensor, nz: torch.Tensor) -> None:
    # H + NNGP = g (pi - theta) / pi + |x||z| sin(theta) / (2 pi)
    sin = (1 - rho * rho).clamp_min_(0).sqrt_().mul_(nz).mul_(nx[:, None] / (2 * math.pi))
    rho.asin_().mul_(1 / math.pi).add_(0.5)
    g.mul_(rho).add_(sin)


def _outer_pow(nx: torch.Tensor, nz: torch.Tensor, p: int) -> torch.Tensor:
    return (nx[:, None] ** p) * (nz ** p)


def relu_power_nngp(X: torch.Tensor, Z: torch.Tensor | None = None, *, power: int = 1,
                    scale: float = 1.0) -> torch.Tensor:
    """E_w[sigma(w.x) sigma(w.z)] for sigma = scale * relu^power, w ~ N(0, I) (Cho & Saul 2009).

    Parameters
    ----------
    X : (n, d) tensor; Z : (n', d) tensor or None (then Z = X).
    power : k >= 0 (k = 0 is the step function 1{u > 0}).
    scale : the factor s in front of relu^k.

    Returns
    -------
    (n, n') tensor s^2 |x|^k |z|^k J_k(theta) / (2 pi) on X's device and dtype.
    """
    if int(power) != power or power < 0:
        raise ValueError(f"power must be a non-negative integer; got {power!r}")
    X, Z = check_pair(X, Z)
    c = scale * scale / (2 * math.pi)

    def fn(g: torch.Tensor, rho: torch.Tensor, nx: torch.Tensor, nz: torch.Tensor) -> None:
        g.copy_(arccos_j(power, rho)).mul_(c)
        if power:
            g.mul_(_outer_pow(nx, nz, power))

    return _map_cosines(gram_stats(X, Z), fn)


def relu_power_ntk(X: torch.Tensor, Z: torch.Tensor | None = None, *, power: int = 1,
                   scale: float = 1.0, trained: str = "first") -> torch.Tensor:
    """Infinite-width NTK for sigma = scale * relu^power (power >= 1).

    trained="first": (x.z) s^2 k^2 |x|^(k-1) |z|^(k-1) J_(k-1)(theta) / (2 pi)  (Arora et al.
    2019, Eq. (3), for k = s = 1); trained="both" adds :func:`relu_power_nngp`.
    """
    if int(power) != power or power < 1:
        raise ValueError(f"power must be a positive integer for the NTK; got {power!r}")
    if trained not in ("first", "both"):
        raise ValueError(f"trained must be one of first, both; got {trained!r}")
    X, Z = check_pair(X, Z)
    if power == 1 and scale == 1.0:
        if trained == "first":
            # halving is exact in floating point and folds the 1/4 into the matrix product
            return _map_cosines(gram_stats(X / 2, None if Z is None else Z / 2),
                                _relu_first_quarter)
        return _map_cosines(gram_stats(X, Z), _relu_both)
    st = gram_stats(X, Z)
    c = scale * scale / (2 * math.pi)
    k = int(power)

    def fn(g: torch.Tensor, rho: torch.Tensor, nx: torch.Tensor, nz: torch.Tensor) -> None:
        first = arccos_j(k - 1, rho).mul_(g).mul_(c * k * k)
        if k > 1:
            first.mul_(_outer_pow(nx, nz, k - 1))
        if trained == "both":
            first.add_(arccos_j(k, rho).mul_(_outer_pow(nx, nz, k)).mul_(c))
        g.copy_(first)

    return _map_cosines(st, fn)
