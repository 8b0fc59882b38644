"""The two-layer network every paper starts from.

    f(x; W, a) = s_m * sum_{r=1}^m a_r sigma(w_r . x)  (+ c when ``bias=True``)

with s_m = m^{-1/2} (NTK scaling, Arora et al. 2019 Eq. (1); Bai & Lee 2020 Eq. (1)),
s_m = 1/m (mean-field scaling, Mei et al. 2018; the ``ghorbani`` NN scripts) or s_m = 1
(``"none"``, Ghorbani et al. 2019 Eq. (1)).
Initialization: w_r ~ N(0, sigma_w^2 I) and a_r = +-1 (``a_init="sign"``), a_r ~ N(0, 1)
(``"gaussian"``) or a_r = 1 (``"ones"``). ``init="symmetric"`` draws m/2 neurons and repeats
them with a_r negated (rows r and r + m/2 are a pair), so f(x; W0) = 0 exactly (Bai & Lee
2020, Eq. (3); Nichani et al. 2022, Eqs. (8)-(9)). With ``a_init="ones"`` this is exactly Bai &
Lee's a = (+1, ..., +1, -1, ..., -1).

Conventions: rows of ``W`` are neurons (the papers write W in R^{d x m} with columns w_r).

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet
>>> net = TwoLayerNet(5, 8, init="symmetric", generator=torch.Generator().manual_seed(0))
>>> float(net(torch.randn(3, 5)).detach().abs().max())
0.0
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from lazylab.activations import Activation, get_activation

Scaling = Literal["ntk", "mf", "none"]

_SCALES = {"ntk": lambda m: 1 / math.sqrt(m), "mf": lambda m: 1 / m, "none": lambda m: 1.0}


def scale_factor(scaling: str, width: int) -> float:
    """s_m for a width-m layer: ``"ntk"`` m^{-1/2}, ``"mf"`` (mean field) 1/m, ``"none"`` 1."""
    if scaling not in _SCALES:
        raise ValueError(f"scaling must be one of ntk, mf, none; got {scaling!r}")
    return _SCALES[scaling](width)


class TwoLayerNet(nn.Module):
    """f(x) = s_m sum_r a_r sigma(w_r . x) (+ c).

    Parameters
    ----------
    d : input dimension (> 0).
    width : number of hidden units m (> 0; even for ``init="symmetric"``).
    activation : an activation name of :mod:`lazylab.activations` or an ``Activation``.
    init : ``"gaussian"`` (i.i.d. neurons) or ``"symmetric"`` (paired neurons, f(W0) = 0).
    scaling : ``"ntk"`` (1/sqrt(m)), ``"mf"`` (1/m) or ``"none"`` (1).
    a_init : ``"sign"`` (+-1), ``"gaussian"`` (N(0,1)) or ``"ones"``.
    weight_std : standard deviation of the entries of w_r (default 1, so w_r ~ N(0, I)).
    train_second : whether ``a`` is a trainable parameter (otherwise a fixed buffer).
    bias : add a trainable scalar output offset c (initialised at 0).
    generator, device, dtype : where and how the initial weights are drawn.

    Attributes
    ----------
    W : (m, d) first-layer weights, rows w_r (always a parameter).
    a : (m,) second-layer weights (parameter or buffer).
    c : scalar output offset (parameter) or None.
    act : the :class:`Activation`.
    scale : the float s_m.
    paired : True for the symmetric init: the forward sums each pair (r, r + m/2) first, so
        identical pair preactivations cancel exactly and f(x; W0) is exactly 0.
    """

    def __init__(self, d: int, width: int, *, activation: str | Activation = "relu",
                 init: Literal["gaussian", "symmetric"] = "gaussian",
                 scaling: Scaling = "ntk",
                 a_init: Literal["sign", "gaussian", "ones"] = "sign",
                 weight_std: float = 1.0, train_second: bool = False, bias: bool = False,
                 generator: torch.Generator | None = None,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        if int(d) != d or d < 1:
            raise ValueError(f"d must be a positive integer; got {d!r}")
        if int(width) != width or width < 1:
            raise ValueError(f"width must be a positive integer; got {width!r}")
        if init not in ("gaussian", "symmetric"):
            raise ValueError(f"init must be 'gaussian' or 'symmetric'; got {init!r}")
        if init == "symmetric" and width % 2:
            raise ValueError(f"width must be even for init='symmetric'; got {width}")
        if a_init not in ("sign", "gaussian", "ones"):
            raise ValueError(f"a_init must be one of sign, gaussian, ones; got {a_init!r}")
        if not weight_std > 0:
            raise ValueError(f"weight_std must be > 0; got {weight_std!r}")
        self.d, self.width = int(d), int(width)
        self.act = get_activation(activation)
        self.init, self.scaling, self.a_init = init, scaling, a_init
        self.scale = scale_factor(scaling, width)

        dev = torch.device(device) if device is not None else (
            generator.device if generator is not None else torch.device("cpu"))
        m0 = width // 2 if init == "symmetric" else width
        W = weight_std * torch.randn(m0, d, generator=generator, device=dev, dtype=dtype)
        if a_init == "sign":
            a = torch.randint(0, 2, (m0,), generator=generator, device=dev).to(dtype) * 2 - 1
        elif a_init == "gaussian":
            a = torch.randn(m0, generator=generator, device=dev, dtype=dtype)
        else:
            a = torch.ones(m0, device=dev, dtype=dtype)
        if init == "symmetric":
            W = torch.cat([W, W])
            a = torch.cat([a, -a])
        self.W = nn.Parameter(W)
        if train_second:
            self.a = nn.Parameter(a)
        else:
            self.register_buffer("a", a)
        self.c = nn.Parameter(torch.zeros((), device=dev, dtype=dtype)) if bias else None

    @classmethod
    def from_weights(cls, W: torch.Tensor, a: torch.Tensor, *,
                     activation: str | Activation = "relu", scaling: Scaling = "ntk",
                     paired: bool = False, train_second: bool = False,
                     c: float | torch.Tensor | None = None) -> TwoLayerNet:
        """A net with given weights W (m, d) and a (m,) (copied), e.g. a teacher network.

        ``paired=True`` marks rows (r, r + m/2) as symmetric pairs (``init="symmetric"``);
        ``c`` adds a trainable offset with that initial value.
        """
        if W.dim() != 2 or a.shape != (W.shape[0],):
            raise ValueError(f"W must be (m, d) and a must be (m,); got {tuple(W.shape)} and "
                             f"{tuple(a.shape)}")
        net = cls(W.shape[1], W.shape[0], activation=activation,
                  init="symmetric" if paired else "gaussian", scaling=scaling,
                  train_second=train_second, bias=c is not None, device=W.device,
                  dtype=W.dtype, generator=torch.Generator(device=W.device).manual_seed(0))
        with torch.no_grad():
            net.W.copy_(W)
            net.a.copy_(a.to(W.dtype))
            if c is not None:
                assert net.c is not None  # bias=c is not None above
                net.c.fill_(float(c))
        return net

    def preactivation(self, X: torch.Tensor, W: torch.Tensor | None = None) -> torch.Tensor:
        """(n, m) matrix of w_r . x_i (with the net's W, or the given (m, d) W)."""
        W = self.W if W is None else W
        if self.paired and W.shape[0] == self.width:
            # One batched product over the two halves computes a pair's two columns with the
            # same kernel on the same shapes, so identical rows give bitwise-identical columns.
            h = self.width // 2
            Z = X @ W.reshape(2, h, -1).mT
            return torch.cat([Z[0], Z[1]], dim=-1)
        return X @ W.T

    @property
    def paired(self) -> bool:
        return self.init == "symmetric"

    def evaluate(self, X: torch.Tensor, W: torch.Tensor | None = None,
                 a: torch.Tensor | None = None) -> torch.Tensor:
        """f(X) with the first layer replaced by W and/or the second by a (pure function).

        ``net.evaluate(X, net.W + U)`` is f(x; W0 + U) without touching the parameters.
        """
        W = self.W if W is None else W
        return self._readout(self.act(self.preactivation(X, W)), self.a if a is None else a)

    def _readout(self, S: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """s_m sum_r a_r S[..., r] (+ c), summing each symmetric pair first (exact zeros)."""
        A = S * a
        if self.paired and A.shape[-1] == self.width:
            h = self.width // 2
            out = self.scale * (A[..., :h] + A[..., h:]).sum(-1)
        else:
            out = self.scale * A.sum(-1)
        return out + self.c if self.c is not None else out

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.evaluate(X)

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by role (:mod:`lazylab.models.groups`): ``"first"`` [W], ``"last"`` [a]
        (when trainable) and [c] (when ``bias``), ``"all"`` every parameter.

        ``trained="first"`` of the kernels is the group ``"first"``; ``trained="both"`` is
        W, a and c whether or not a is trainable (the NTK of both layers).
        """
        last = [p for p in (self.a, self.c) if isinstance(p, nn.Parameter)]
        groups = {"first": [self.W], "all": list(self.parameters())}
        if last:
            groups["last"] = last
        return groups

    def taylor_terms(self, X: torch.Tensor, U: torch.Tensor | None, order: int, *,
                     delta_a: torch.Tensor | None = None,
                     delta_c: torch.Tensor | float | None = None) -> list[torch.Tensor]:
        """Closed-form Taylor terms of t -> f(x; W + tU, a + t delta_a, c + t delta_c) at t = 0.

        f^(j)(x) = s_m sum_r [ a_r sigma^(j)(w_r.x) (u_r.x)^j / j!
                               + delta_a_r sigma^(j-1)(w_r.x) (u_r.x)^(j-1) / (j-1)! ]
                   + delta_c 1{j = 1},

        so f(W + tU, ...) = sum_j t^j f^(j) for analytic sigma. f^(0) = f, f^(1) = f_L (the
        NTK / linearized model), f^(2) = f_Q (QuadNTK): Bai & Lee 2020, Sec. 2.4 and the k-th
        order term of Sec. 6; Nichani et al. 2022, Eqs. (11)-(12).

        Parameters
        ----------
        X : (n, d) inputs.
        U : (m, d) first-layer direction (None: zero).
        order : highest order k >= 0.
        delta_a : (m,) second-layer direction (optional).
        delta_c : offset direction (optional).

        Returns
        -------
        [f^(0), ..., f^(k)], each of shape (n,).
        """
        if int(order) != order or order < 0:
            raise ValueError(f"order must be a non-negative integer; got {order!r}")
        if U is not None and U.shape != self.W.shape:
            raise ValueError(f"U must have the shape of W {tuple(self.W.shape)}; "
                             f"got {tuple(U.shape)}")
        Z0 = self.preactivation(X)
        V = X @ U.T if U is not None else None
        prev = self.act(Z0)  # sigma^(j-1)(Z0) at step j
        out = [self._readout(prev, self.a)]
        pow_prev = torch.ones_like(Z0)  # (u.x)^(j-1) / (j-1)!
        for j in range(1, order + 1):
            dj = self.act.deriv(Z0, j)
            pow_j = pow_prev * V / j if V is not None else torch.zeros_like(Z0)
            term = self.scale * ((dj * pow_j) @ self.a)
            if delta_a is not None:
                term = term + self.scale * ((prev * pow_prev) @ delta_a)
            if j == 1 and delta_c is not None:
                term = term + delta_c
            out.append(term)
            prev, pow_prev = dj, pow_j
        return out

    def tangent_features(self, X: torch.Tensor) -> torch.Tensor:
        """(n, m, d) gradients of f(x_i) in w_r: s_m a_r sigma'(w_r.x_i) x_i.

        The first-layer NTK feature map phi(x) (Nichani et al. 2022, Eq. (13); Ghorbani et al.
        2019, Eq. (3) with a_r absorbed), so f_L(x; U) = <phi(x), U>. Memory n m d: for small
        problems; kernels use the factorised form (D1 D1^T) * (X X^T) instead.
        """
        D1 = self.act.deriv(self.preactivation(X), 1) * (self.scale * self.a)
        return D1.unsqueeze(-1) * X.unsqueeze(1)

    def extra_repr(self) -> str:
        return (f"d={self.d}, width={self.width}, activation={self.act.name}, init={self.init}, "
                f"scaling={self.scaling}, a_init={self.a_init}")
