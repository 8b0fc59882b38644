"""Allen-Zhu & Li (2019)'s three-layer ResNet learner (Eq. 2.1 and the Sec. 6 bottleneck form).

Original form (Eq. 2.1), W in R^{m x d}, U in R^{m x m}, A in R^{k x m}:

    out(x) = A ( sigma(W x + b1) + sigma(U sigma(W x + b1) + b2) ).

Bottleneck form (Sec. 6, U = V A, "works well empirically"), V in R^{m x k}:

    h1 = sigma(W x + b1),  out1 = A_in h1,  h2 = sigma(V out1 + b2),  out = A (h1 + h2),

so out = out1 + A sigma(V (out1, 1)) with the *same* A inside and outside when ``tied=True``
(A_in = A). With ``tied=False`` the inner A_in is a frozen buffer (a copy of A at init): only
then is training A alone ("last", the conjugate kernel of Sec. 8.1) a linear model: with the
A of Sec. 6 tied inside and outside, the paper's "(last)" learner would be nonlinear in A.

Initialization (Sec. 8.1): every entry of A, V (or U), W and the biases i.i.d. N(0, 1/m)
(``init="normal"``), or std 1/(sqrt(fan_in) + sqrt(fan_out)) (footnote 15, ``init="fan"``).
sigma = ReLU with derivative 1[z >= 0] in :meth:`ResNet3.manual_grads`.

:meth:`ResNet3.param_groups` maps the training modes onto parameters: "first" = (W, b1), "hidden"
= (V or U, b2), "last" = (A,), "all".
"""

from __future__ import annotations

import math
from functools import partial

import torch
from torch import nn

from lazylab.models.stacked import RESNET3_PASSES, StackedGrads

_INITS = ("normal", "fan")


def init_std(init: str, m: int, fan_in: int, fan_out: int) -> float:
    """Entry std: 1/sqrt(m) for ``"normal"`` (N(0, 1/m)), 1/(sqrt(fan_in) + sqrt(fan_out)) for
    ``"fan"``."""
    if init == "normal":
        return 1.0 / math.sqrt(m)
    if init == "fan":
        return 1.0 / (math.sqrt(fan_in) + math.sqrt(fan_out))
    raise ValueError(f"init must be one of {', '.join(_INITS)}; got {init!r}")


def _param(shape: tuple[int, ...], std: float, g: torch.Generator | None, dtype: torch.dtype,
           device: torch.device | str | None) -> nn.Parameter:
    return nn.Parameter(std * torch.randn(shape, generator=g, dtype=dtype, device=device))


class ResNet3(StackedGrads, nn.Module):
    """Three-layer ResNet out(x) = A(sigma(W x + b1) + sigma(U sigma(W x + b1) + b2)).

    Parameters
    ----------
    d, k, m : input dimension, outputs, width.
    form : ``"bottleneck"`` (U = V A_in, V in R^{m x k}; Sec. 6) or ``"full"`` (U in R^{m x m}).
    tied : bottleneck only; False makes A_in a frozen copy of A (for "last" training).
    init : ``"normal"`` (N(0, 1/m) entries, biases included) or ``"fan"`` (footnote 15).
    generator, dtype, device : where the random init comes from and lives.
    """

    stacked_passes = RESNET3_PASSES

    A_in: torch.Tensor  # the frozen inner copy of A (a buffer; bottleneck with tied=False)

    def __init__(self, d: int, k: int, m: int, *, form: str = "bottleneck", tied: bool = True,
                 init: str = "normal", generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None):
        super().__init__()
        for name, v in (("d", d), ("k", k), ("m", m)):
            if int(v) != v or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}")
        if form not in ("bottleneck", "full"):
            raise ValueError(f"form must be 'bottleneck' or 'full'; got {form!r}")
        self.d, self.k, self.m, self.form, self.tied = int(d), int(k), int(m), form, bool(tied)
        param = partial(_param, g=generator, dtype=dtype, device=device)
        sw = init_std(init, m, d, m)
        self.W = param((m, d), sw)
        self.b1 = param((m,), sw)
        if form == "bottleneck":
            sv = init_std(init, m, k, m)
            self.V = param((m, k), sv)
        else:
            sv = init_std(init, m, m, m)
            self.U = param((m, m), sv)
        self.b2 = param((m,), sv)
        self.A = param((k, m), init_std(init, m, m, k))
        if form == "bottleneck" and not tied:
            self.register_buffer("A_in", self.A.detach().clone())

    def _inner_A(self) -> torch.Tensor:
        return self.A if self.tied else self.A_in

    def features(self, X: torch.Tensor) -> torch.Tensor:
        """h1 + h2 (n, m): the last hidden layer, so that out = features @ A^T."""
        h1 = torch.relu(X @ self.W.T + self.b1)
        if self.form == "bottleneck":
            z2 = (h1 @ self._inner_A().T) @ self.V.T + self.b2
        else:
            z2 = h1 @ self.U.T + self.b2
        return h1 + torch.relu(z2)

    def out1(self, X: torch.Tensor) -> torch.Tensor:
        """out1(x) = A sigma(W x + b1): the first block's output (the learned F, Claim C.7)."""
        return torch.relu(X @ self.W.T + self.b1) @ self._inner_A().T

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self.features(X) @ self.A.T

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """"first" = (W, b1), "hidden" = (V or U, b2), "last" = (A,), "all"."""
        hidden = self.V if self.form == "bottleneck" else self.U
        return {"first": [self.W, self.b1], "hidden": [hidden, self.b2], "last": [self.A],
                "all": list(self.parameters())}

    @torch.no_grad()
    def manual_grads(self, X: torch.Tensor, Y: torch.Tensor) -> dict[str, torch.Tensor]:
        """Hand-derived gradients of Obj = 1/2 sum_n ||y_n - out(x_n)||^2 (Eq. 6.1).

        With z1 = W x + b1, h1 = sigma(z1), o1 = A_in h1, z2 = V o1 + b2, h2 = sigma(z2),
        e = out - y:  dV = (1[z2>=0] * A^T e) o1^T;  g_o1 = e [tied] + V^T (1[z2>=0] * A^T e);
        dW = (1[z1>=0] * A_in^T g_o1) x^T;  dA = e (h1 + h2)^T + g_inner h1^T [tied], where
        g_inner = V^T (1[z2>=0] * A^T e). The skip makes g_o1 start with e only when A is tied
        (out = out1 + A h2 with out1 = A h1); biases take the same sums without the input.
        Bottleneck form only.
        """
        if self.form != "bottleneck":
            raise ValueError("manual_grads implements the bottleneck form")
        Ain = self._inner_A()
        z1 = X @ self.W.T + self.b1
        h1 = torch.relu(z1)
        o1 = h1 @ Ain.T
        z2 = o1 @ self.V.T + self.b2
        h2 = torch.relu(z2)
        e = (h1 + h2) @ self.A.T - Y
        d2 = (z2 >= 0).to(X.dtype) * (e @ self.A)            # 1[z2>=0] * A^T e  (n, m)
        g_inner = d2 @ self.V                                 # V^T(...)  (n, k)
        # d out / d h1 through the skip is A^T e; through out1 -> z2 it is A_in^T g_inner.
        d1 = (z1 >= 0).to(X.dtype) * (e @ self.A + g_inner @ Ain)
        grads = {"W": d1.T @ X, "b1": d1.sum(0), "V": d2.T @ o1, "b2": d2.sum(0),
                 "A": e.T @ (h1 + h2)}
        if self.tied:
            grads["A"] = grads["A"] + g_inner.T @ h1
        return grads



    def extra_repr(self) -> str:
        return f"d={self.d}, k={self.k}, m={self.m}, form={self.form}, tied={self.tied}"
