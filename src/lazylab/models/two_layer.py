"""The two-layer network every paper starts from.

    f(x; W, a) = s_m * sum_{r=1}^m a_r sigma(w_r . x)  (+ c when ``bias=True``)

with s_m = m^{-1/2} (NTK scaling, Arora et al. 2019 Eq. (1); Bai & Lee 2020), s_m = 1/m
(mean-field scaling) or s_m = 1 (``"none"``, Ghorbani et al. 2019 Eq. (1)).
Initialization: w_r ~ N(0, sigma_w^2 I) and a_r = +-1 (``a_init="sign"``), a_r ~ N(0, 1)
(``"gaussian"``) or a_r = 1 (``"ones"``). ``init="symmetric"`` draws m/2 neurons and repeats
them with a_r negated, so f(x; W0) = 0 exactly (Bai & Lee 2020, Sec. 3; Chizat et al. 2019).

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet
>>> net = TwoLayerNet(5, 8, init="symmetric", generator=torch.Generator().manual_seed(0))
>>> float(net(torch.randn(3, 5)).abs().max())
0.0
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from lazylab.activations import Activation, get_activation

__all__ = ["TwoLayerNet"]

Scaling = Literal["ntk", "mf", "none"]


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
    act : the :class:`Activation`.
    scale : the float s_m.
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
        if scaling not in ("ntk", "mf", "none"):
            raise ValueError(f"scaling must be one of ntk, mf, none; got {scaling!r}")
        if a_init not in ("sign", "gaussian", "ones"):
            raise ValueError(f"a_init must be one of sign, gaussian, ones; got {a_init!r}")
        self.d, self.width = int(d), int(width)
        self.act = get_activation(activation)
        self.init, self.scaling, self.a_init = init, scaling, a_init
        self.scale = {"ntk": 1 / math.sqrt(width), "mf": 1 / width, "none": 1.0}[scaling]

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

    def preactivation(self, X: torch.Tensor) -> torch.Tensor:
        """(n, m) matrix of w_r . x_i."""
        return X @ self.W.T

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        out = self.scale * (self.act(self.preactivation(X)) @ self.a)
        return out + self.c if self.c is not None else out

    def extra_repr(self) -> str:
        return (f"d={self.d}, width={self.width}, activation={self.act.name}, init={self.init}, "
                f"scaling={self.scaling}, a_init={self.a_init}")
