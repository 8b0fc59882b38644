"""Fully connected learners of Allen-Zhu & Li (2019), Sec. 8: two- and three-layer ReLU MLPs
and the Fig. 4 two-layer net with a fixed +-1/sqrt(m) output layer.

* :class:`MLP2`: out(x) = A sigma(W x + b) (2layer).
* :class:`MLP3`: out(x) = A sigma(U sigma(W x + b1) + b2) (3layer; the paper does not specify
  the architecture, and this is its natural reading: the ResNet of Eq. 2.1 without the skip).
* :class:`SignOutputNet`: F(W; x) = a^T sigma(W x), a in {+-1/sqrt(m)}^m with exactly m/2 of each
  sign, no bias, only W trained (Sec. 8.2).

Init as :class:`lazylab.models.resnet.ResNet3`: N(0, 1/m) entries with biases, or footnote 15's
std 1/(sqrt(fan_in) + sqrt(fan_out)). ``param_groups()``: "first" = (W, b1), "hidden" = (U, b2)
(MLP3 only), "last" = (A,), "all".
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from lazylab.models.resnet import _param, init_std
from lazylab.models.stacked import MLP2_PASSES, MLP3_PASSES, StackedGrads


def _check(**sizes: int) -> None:
    for name, v in sizes.items():
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer; got {v!r}")


class MLP2(StackedGrads, nn.Module):
    """out(x) = A sigma(W x + b); W in R^{m x d}, A in R^{k x m}."""

    stacked_passes = MLP2_PASSES

    def __init__(self, d: int, k: int, m: int, *, init: str = "normal",
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None):
        super().__init__()
        _check(d=d, k=k, m=m)
        param = partial(_param, g=generator, dtype=dtype, device=device)
        sw = init_std(init, m, d, m)
        self.W = param((m, d), sw)
        self.b1 = param((m,), sw)
        self.A = param((k, m), init_std(init, m, m, k))

    def features(self, X: torch.Tensor) -> torch.Tensor:
        """sigma(W x + b) (n, m)."""
        return torch.relu(X @ self.W.T + self.b1)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.features(X) @ self.A.T

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """"first" = (W, b1), "last" = (A,), "all"."""
        return {"first": [self.W, self.b1], "last": [self.A], "all": list(self.parameters())}




class MLP3(StackedGrads, nn.Module):
    """out(x) = A sigma(U sigma(W x + b1) + b2); U in R^{m x m}."""

    stacked_passes = MLP3_PASSES

    def __init__(self, d: int, k: int, m: int, *, init: str = "normal",
                 generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None):
        super().__init__()
        _check(d=d, k=k, m=m)
        param = partial(_param, g=generator, dtype=dtype, device=device)
        sw, su = init_std(init, m, d, m), init_std(init, m, m, m)
        self.W = param((m, d), sw)
        self.b1 = param((m,), sw)
        self.U = param((m, m), su)
        self.b2 = param((m,), su)
        self.A = param((k, m), init_std(init, m, m, k))

    def features(self, X: torch.Tensor) -> torch.Tensor:
        """sigma(U sigma(W x + b1) + b2) (n, m)."""
        return torch.relu(torch.relu(X @ self.W.T + self.b1) @ self.U.T + self.b2)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.features(X) @ self.A.T

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """"first" = (W, b1), "hidden" = (U, b2), "last" = (A,), "all"."""
        return {"first": [self.W, self.b1], "hidden": [self.U, self.b2], "last": [self.A],
                "all": list(self.parameters())}




class SignOutputNet(nn.Module):
    """F(W; x) = a^T sigma(W x), a_r = +-1/sqrt(m) (first m/2 positive), W ~ N(0, 1/m) entries.

    Only W is a parameter (Sec. 8.2); ``m`` must be even.
    """

    a: torch.Tensor  # the fixed output signs (a buffer)

    def __init__(self, d: int, m: int, *, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None):
        super().__init__()
        _check(d=d, m=m)
        if m % 2:
            raise ValueError(f"m must be even (half the output signs are +); got {m}")
        self.W = _param((m, d), 1.0 / math.sqrt(m), generator, dtype, device)
        a = torch.cat([torch.ones(m // 2, dtype=dtype), -torch.ones(m // 2, dtype=dtype)])
        self.register_buffer("a", (a / math.sqrt(m)).to(device=device))

    @classmethod
    def from_weights(cls, W: torch.Tensor) -> SignOutputNet:
        """A net with the given first layer (m even)."""
        net = cls(W.shape[1], W.shape[0], dtype=W.dtype, device=W.device)
        with torch.no_grad():
            net.W.copy_(W)
        return net

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return torch.relu(X @ self.W.T) @ self.a

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """"first" = "all" = (W,)."""
        return {"first": [self.W], "all": [self.W]}
