"""Randomized two-layer networks of Bai & Lee (2020): sign randomization and its order-k analogue.

A base :class:`TwoLayerNet` with weights W0 is moved by a direction D (rows d_r) scaled per
neuron by independent random multipliers z_r (law P_r):

    f(x; W0 + diag(z) D) = s_m sum_r a_r sigma(w0_r.x + z_r d_r.x)  (+ c).

Because the law is a finite set of atoms, every moment over z is an exact finite sum:

    E_z f   = s_m sum_r a_r E_{z_r}[sigma(w0_r.x + z_r d_r.x)],
    Var_z f = s_m^2 sum_r a_r^2 Var_{z_r}[sigma(w0_r.x + z_r d_r.x)],
    E_z f^(j)(x; diag(z) D) = s_m sum_r a_r sigma^(j)(w0_r.x) E[z_r^j] (d_r.x)^j / j!.

- :class:`SignRandomizedNet` (Bai & Lee 2020, Sec. 3, Eq. (2)): z_r = Sigma_rr iid Unif{+-1}
  on every neuron, D = W (their notation) trainable. Odd Taylor terms have E[z^j] = 0 and
  vanish in expectation; even ones are unchanged (z^2 = 1), so
  E_Sigma f(W0 + W Sigma) = f^(0) + f^(2)(W) + f^(4)(W) + ... = s_m sum_r a_r [sigma(w0_r.x
  + w_r.x) + sigma(w0_r.x - w_r.x)] / 2 (exact: the signs are independent across neurons).
- :class:`HigherOrderRandomizedNet` (Bai & Lee 2020, Sec. 6.1): a symmetric-init net of m/2
  pairs (r, r + m/2); both members of pair r move along one trainable w*_r, scaled by
  z_{+,r} ~ P+ and z_{-,r} ~ P-, laws whose first k-1 moments agree and whose k-th moments
  differ by exactly 1 (:func:`moment_matched_pair`). Then E f^(j) = 0 for 1 <= j < k and
  E f^(k) = s_m sum_r a_r sigma^(k)(w0_r.x) (w*_r.x)^k / k!: the k-th order term is the one
  that survives. Note: the paper keeps 1/sqrt(#pairs) as prefactor; here s_m uses the full
  width m (a constant factor 1/sqrt 2 for ``scaling="ntk"``). The paper's a_r = +1 on the
  first half is ``a_init="ones"``; with random signs a_r, choose w*_r coherent with a_r.

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet, SignRandomizedNet
>>> g = torch.Generator().manual_seed(0)
>>> net = TwoLayerNet(3, 6, activation="tanh", init="symmetric", dtype=torch.float64,
...                   generator=g)
>>> rnet = SignRandomizedNet(net, init_std=0.3, generator=g)
>>> X = torch.randn(4, 3, dtype=torch.float64, generator=g)
>>> mean, se = rnet.monte_carlo(X, 2000, generator=g)
>>> bool(((mean - rnet.expectation(X)).abs() <= 5 * se).all())
True
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

from lazylab.models.two_layer import TwoLayerNet


@dataclass(frozen=True)
class MomentMatchedPair:
    """Two finite laws P+ and P- with E+ z^j = E- z^j (j < k) and E+ z^k - E- z^k = 1."""

    k: int
    plus_nodes: tuple[float, ...]
    plus_probs: tuple[float, ...]
    minus_nodes: tuple[float, ...]
    minus_probs: tuple[float, ...]

    def moment_gap(self, j: int) -> float:
        """E+ z^j - E- z^j."""
        return (sum(p * t**j for t, p in zip(self.plus_nodes, self.plus_probs, strict=True))
                - sum(p * t**j for t, p in zip(self.minus_nodes, self.minus_probs, strict=True)))


def moment_matched_pair(k: int) -> MomentMatchedPair:
    """The finite-difference construction of (z+, z-) for order k >= 1 (ours: Bai & Lee 2020,
    Sec. 6.1, state only the moment conditions).

    With h = (2^{k-1}/k!)^{1/k} and nodes t_i = (i - k/2) h, i = 0..k,
    P+ = sum_{k-i even} C(k,i)/2^{k-1} delta_{t_i} and
    P- = sum_{k-i odd} C(k,i)/2^{k-1} delta_{t_i}.
    Then E+ z^j - E- z^j = h^j Delta^k[t^j] / 2^{k-1}: 0 for j < k and k! h^k / 2^{k-1} = 1 for
    j = k. k = 2 gives P+ = Unif{+-1}, P- = delta_0: the sign randomization.
    """
    if int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    k = int(k)
    h = (2 ** (k - 1) / math.factorial(k)) ** (1 / k)
    nodes = [(i - k / 2) * h for i in range(k + 1)]
    w = [math.comb(k, i) / 2 ** (k - 1) for i in range(k + 1)]
    plus = [i for i in range(k + 1) if (k - i) % 2 == 0]
    minus = [i for i in range(k + 1) if (k - i) % 2 == 1]
    return MomentMatchedPair(k, tuple(nodes[i] for i in plus), tuple(w[i] for i in plus),
                             tuple(nodes[i] for i in minus), tuple(w[i] for i in minus))


class _RandomizedTwoLayer(nn.Module):
    """Shared machinery: neurons in groups, each group with one finite multiplier law.

    Subclasses set ``self.base`` (frozen TwoLayerNet), ``self._groups`` (list of (slice,
    nodes tuple, probs tuple) covering all m neurons) and implement ``direction()`` (m, d).
    """

    base: TwoLayerNet
    _groups: list[tuple[slice, tuple[float, ...], tuple[float, ...]]]

    def _setup(self, net: TwoLayerNet, generator: torch.Generator | None) -> None:
        if not isinstance(net, TwoLayerNet):
            raise ValueError(f"net must be a TwoLayerNet; got {type(net).__name__}")
        self.base = copy.deepcopy(net).requires_grad_(False)
        self.generator = generator

    def direction(self) -> torch.Tensor:
        raise NotImplementedError

    def _gen(self, generator: torch.Generator | None) -> torch.Generator:
        g = generator if generator is not None else self.generator
        if g is None:
            raise ValueError("generator must be given (here or at construction) to draw the "
                             "random multipliers; every draw uses an explicit generator")
        return g

    def sample_multipliers(self, n_draws: int | None = None,
                           generator: torch.Generator | None = None) -> torch.Tensor:
        """Per-neuron multipliers z: (m,), or (n_draws, m) for ``n_draws`` independent draws."""
        g = self._gen(generator)
        N = 1 if n_draws is None else int(n_draws)
        if N < 1:
            raise ValueError(f"n_draws must be a positive integer; got {n_draws!r}")
        W = self.base.W
        parts = []
        for sl, nodes, probs in self._groups:
            cnt = sl.stop - sl.start
            p = torch.tensor(probs, dtype=torch.float64, device=g.device)
            idx = torch.multinomial(p, N * cnt, replacement=True, generator=g)
            t = torch.tensor(nodes, dtype=W.dtype, device=g.device)
            parts.append(t[idx].reshape(N, cnt))
        z = torch.cat(parts, dim=1).to(W.device)
        return z[0] if n_draws is None else z

    def forward(self, X: torch.Tensor, multipliers: torch.Tensor | None = None, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """f(X; W0 + diag(z) D) for given multipliers z (m,) or a fresh draw from generator."""
        z = self.sample_multipliers(None, generator) if multipliers is None else multipliers
        return self.base.evaluate(X, self.base.W + z.unsqueeze(-1) * self.direction())

    def sample_outputs(self, X: torch.Tensor, n_draws: int,
                       generator: torch.Generator | None = None,
                       chunk: int = 256) -> torch.Tensor:
        """(n_draws, n) outputs for independent draws (vectorised over draws in chunks)."""
        Z = self.base.preactivation(X)
        V = X @ self.direction().T
        outs = []
        for start in range(0, int(n_draws), chunk):
            z = self.sample_multipliers(min(chunk, int(n_draws) - start), generator)
            A = self.base.act(Z.unsqueeze(0) + z.unsqueeze(1) * V.unsqueeze(0))
            outs.append(self.base.scale * (A @ self.base.a))
        out = torch.cat(outs)
        return out + self.base.c if self.base.c is not None else out

    def monte_carlo(self, X: torch.Tensor, n_draws: int,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, standard error) of f over ``n_draws`` independent draws."""
        if int(n_draws) < 2:
            raise ValueError(f"n_draws must be >= 2 for a standard error; got {n_draws!r}")
        outs = self.sample_outputs(X, n_draws, generator)
        return outs.mean(0), outs.std(0) / math.sqrt(outs.shape[0])

    def _atoms(self, X: torch.Tensor) -> list[tuple[torch.Tensor, float, slice]]:
        """sigma(w0_r.x + t d_r.x) for every atom t of every group: [(values, prob, group)]."""
        Z = self.base.preactivation(X)
        V = X @ self.direction().T
        return [(self.base.act(Z[:, sl] + t * V[:, sl]), p, sl)
                for sl, nodes, probs in self._groups for t, p in zip(nodes, probs, strict=True)]

    def expectation(self, X: torch.Tensor) -> torch.Tensor:
        """Exact E_z f(X; W0 + diag(z) D) (finite sum over each neuron's atoms)."""
        a = self.base.a
        out: torch.Tensor | float = 0.0
        for vals, p, sl in self._atoms(X):
            out = out + p * (vals @ a[sl])
        assert isinstance(out, torch.Tensor)  # every neuron group has atoms
        out = self.base.scale * out
        return out + self.base.c if self.base.c is not None else out

    def variance(self, X: torch.Tensor) -> torch.Tensor:
        """Exact Var_z f = s_m^2 sum_r a_r^2 Var_{z_r} sigma(w0_r.x + z_r d_r.x)."""
        atoms = self._atoms(X)
        mean = X.new_zeros(X.shape[0], self.base.width)
        for vals, p, sl in atoms:
            mean[:, sl] += p * vals
        var = torch.zeros_like(mean)
        for vals, p, sl in atoms:
            var[:, sl] += p * (vals - mean[:, sl]) ** 2
        return self.base.scale**2 * (var @ self.base.a**2)

    def expected_squared_error(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Exact E_z (y - f)^2 = (y - E f)^2 + Var f per sample."""
        return (y - self.expectation(X)) ** 2 + self.variance(X)

    def moments(self, j: int) -> torch.Tensor:
        """(m,) vector E[z_r^j]."""
        W = self.base.W
        out = torch.empty(W.shape[0], dtype=W.dtype, device=W.device)
        for sl, nodes, probs in self._groups:
            out[sl] = sum(p * t**j for t, p in zip(nodes, probs, strict=True))
        return out

    def terms(self, X: torch.Tensor, order: int,
              multipliers: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Taylor terms f^(j)(X; diag(z) D), j = 0..order, for multipliers z (default all 1)."""
        D = self.direction()
        U = D if multipliers is None else multipliers.unsqueeze(-1) * D
        return self.base.taylor_terms(X, U, order)

    def expected_terms(self, X: torch.Tensor, order: int) -> list[torch.Tensor]:
        """Exact E_z f^(j) = s_m sum_r a_r sigma^(j)(w0_r.x) E[z_r^j] (d_r.x)^j / j!."""
        if int(order) != order or order < 0:
            raise ValueError(f"order must be a non-negative integer; got {order!r}")
        Z = self.base.preactivation(X)
        V = X @ self.direction().T
        out = [self.base(X)]
        for j in range(1, int(order) + 1):
            coef = self.base.a * self.moments(j) / math.factorial(j)
            out.append(self.base.scale * ((self.base.act.deriv(Z, j) * V**j) @ coef))
        return out


class SignRandomizedNet(_RandomizedTwoLayer):
    """f(x; W0 + U Sigma), Sigma = diag(iid Unif{+-1}), one sign per neuron (Bai & Lee, Eq. (2)).

    U (Bai & Lee's W, rows u_r) is trainable; ``forward(X, generator=g)`` draws a fresh Sigma
    per call (SGD on the randomized risk), ``forward(X, signs)`` uses given signs,
    ``expectation`` / ``variance`` are the exact moments over Sigma.

    Parameters
    ----------
    net : the base TwoLayerNet (copied and frozen; symmetric init in the paper, not required).
    init : initial U (m, d); default zeros, or init_std * N(0, 1) entries.
    init_std : scale of a random initial U (W = 0 is a saddle of the randomized risk).
    generator : default generator for the initial U and for the sign draws.
    """

    def __init__(self, net: TwoLayerNet, *, init: torch.Tensor | None = None,
                 init_std: float = 0.0, generator: torch.Generator | None = None):
        super().__init__()
        self._setup(net, generator)
        self.U = nn.Parameter(_initial(self.base.W.shape, self.base.W, init, init_std, generator))
        self._groups = [(slice(0, net.width), (-1.0, 1.0), (0.5, 0.5))]

    def direction(self) -> torch.Tensor:
        return self.U

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by role (:mod:`lazylab.models.groups`): U moves the first layer."""
        return {"first": [self.U], "all": [self.U]}

    def sample_signs(self, n_draws: int | None = None,
                     generator: torch.Generator | None = None) -> torch.Tensor:
        """Sigma's diagonal: (m,) or (n_draws, m) iid +-1."""
        return self.sample_multipliers(n_draws, generator)

    def forward(self, X: torch.Tensor, signs: torch.Tensor | None = None, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
        return super().forward(X, signs, generator=generator)


class HigherOrderRandomizedNet(_RandomizedTwoLayer):
    """Order-k randomized net of Bai & Lee 2020, Sec. 6.1, on a symmetric-init TwoLayerNet.

    Pair r = (r, r + m/2) moves as (w0_r + z_{+,r} w*_r, w0_r + z_{-,r} w*_r), z_{+-} from
    :func:`moment_matched_pair(k)`; W* (m/2, d) is trainable. Use ||w*_r|| ~ m^{-1/(2k)} to make
    f^(k) = Theta(1) while f^(1..k-1) = O(m^{-j/(2k)}) (Sec. 6.1). ``forward(X, z)``
    takes z = (z_+, z_-) concatenated, shape (m,).

    Parameters
    ----------
    net : a TwoLayerNet with ``init="symmetric"``.
    k : the order to extract (k = 2 is the sign randomization of the "+" half).
    init, init_std, generator : initial W* and the default generator, as for
        :class:`SignRandomizedNet`.
    """

    def __init__(self, net: TwoLayerNet, k: int, *, init: torch.Tensor | None = None,
                 init_std: float = 0.0, generator: torch.Generator | None = None):
        super().__init__()
        self._setup(net, generator)
        if not net.paired:
            raise ValueError("net must have init='symmetric' (paired neurons)")
        self.pair = moment_matched_pair(k)
        self.k = self.pair.k
        h = net.width // 2
        self.W_star = nn.Parameter(_initial((h, net.d), self.base.W, init, init_std, generator))
        self._groups = [(slice(0, h), self.pair.plus_nodes, self.pair.plus_probs),
                        (slice(h, net.width), self.pair.minus_nodes, self.pair.minus_probs)]

    def direction(self) -> torch.Tensor:
        return torch.cat([self.W_star, self.W_star])

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by role (:mod:`lazylab.models.groups`): W* moves the first layer."""
        return {"first": [self.W_star], "all": [self.W_star]}


def _initial(shape: tuple[int, ...] | torch.Size, like: torch.Tensor, init: torch.Tensor | None,
             init_std: float, generator: torch.Generator | None) -> torch.Tensor:
    if init is not None:
        if tuple(init.shape) != tuple(shape):
            raise ValueError(f"init must have shape {tuple(shape)}; got {tuple(init.shape)}")
        return init.detach().clone().to(device=like.device, dtype=like.dtype)
    if init_std < 0 or (init_std > 0 and generator is None):
        raise ValueError(f"init_std must be >= 0 and needs a generator when > 0; got "
                         f"init_std={init_std!r}")
    if init_std == 0:
        return torch.zeros(shape, device=like.device, dtype=like.dtype)
    assert generator is not None  # init_std > 0 needs one, checked above
    noise = torch.randn(tuple(shape), generator=generator, device=generator.device,
                        dtype=like.dtype)
    return init_std * noise.to(like.device)
