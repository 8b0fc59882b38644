"""Put a standard ``torch.nn`` network into the NTK parametrization.

In the NTK parametrization (Jacot et al. 2018; the m^-1/2 of Arora et al. 2019, Eq. (1)) every
trained weight is a standard normal variable and the layer scales its product by
weight_std / sqrt(fan_in):

    h_{l+1} = (weight_std / sqrt(n_l)) W_l h_l + bias_std b_l,   W_l, b_l ~ N(0, 1) entries,

so the gradient with respect to the trained W_l carries the factor too, and the empirical NTK
of a wide network tends to the closed form with no hand scaling. A ``torch.nn.Linear`` layer
in the standard parametrization instead trains W_l directly at variance ~1/n_l: its empirical
NTK is off by a factor of order the width (about 1660 at the widths of a typical check).

:func:`ntk_parametrize` re-initializes every ``nn.Linear`` of a module (seeded) and registers
``torch.nn.utils.parametrize`` scalings, so ``module.weight`` is the scaled weight used in the
forward pass and ``parametrizations.weight.original`` the trained N(0, 1) variable. By
default the first layer acts on x unscaled (w_r ~ N(0, I) on raw inputs), the convention of
:func:`lazylab.kernels.ntk` and of Arora et al. (2019), Eq. (1): for
``nn.Sequential(nn.Linear(d, m), nn.ReLU(), nn.Linear(m, 1))`` the empirical NTK of all
parameters tends to ``ntk(X, trained="both")`` at rate m^-1/2. ``scale_input_layer=True``
divides the first layer by sqrt(d) too (Jacot et al.'s convention for every layer); the limit
is then the kernel of x / sqrt(d), ``ntk(X / sqrt(d), trained="both")``.

Example
-------
>>> import torch
>>> from lazylab.kernels import empirical_ntk, ntk
>>> g = torch.Generator().manual_seed(0)
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 20000), torch.nn.ReLU(),
...                           torch.nn.Linear(20000, 1)).double()
>>> net = ntk_parametrize(net, generator=g)
>>> X = torch.nn.functional.normalize(torch.randn(4, 3, generator=g, dtype=torch.float64), dim=1)
>>> K, H = empirical_ntk(net, X, trained="all"), ntk(X, trained="both")
>>> bool(((K - H).abs().max() / H.abs().max()) < 0.05)  # O(m^-1/2)
True
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize


class _Scale(nn.Module):
    """The parametrization w -> c w."""

    def __init__(self, c: float):
        super().__init__()
        self.c = float(c)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return self.c * w

    def extra_repr(self) -> str:
        return f"c={self.c:g}"


def ntk_parametrize(module: nn.Module, *, weight_std: float = 1.0, bias_std: float = 0.0,
                    scale_input_layer: bool = False,
                    generator: torch.Generator | None = None) -> nn.Module:
    """Re-initialize every ``nn.Linear`` of ``module`` in the NTK parametrization (module
    docstring), in place; returns ``module``.

    Parameters
    ----------
    weight_std : sigma_w; the weight of a layer with fan-in n is (sigma_w / sqrt(n)) W.
    bias_std : sigma_b; the bias is sigma_b b (0: biases contribute nothing and receive no
        gradient, as in the closed forms of :mod:`lazylab.kernels`).
    scale_input_layer : divide the first layer by sqrt(d) too. False (the default): the
        first layer's weights are w ~ N(0, sigma_w^2 I) on raw inputs, the convention of the
        closed forms in :mod:`lazylab.kernels`, so ``ntk(X, trained="both")`` is the limit.
    generator : draws the N(0, 1) weights and biases.
    """
    if not weight_std > 0 or bias_std < 0:
        raise ValueError(f"weight_std must be > 0 and bias_std >= 0; got {weight_std!r}, "
                         f"{bias_std!r}")
    layers = [m for m in module.modules() if isinstance(m, nn.Linear)]
    if not layers:
        raise ValueError("ntk_parametrize found no torch.nn.Linear layer in the module")
    for i, layer in enumerate(layers):
        if parametrize.is_parametrized(layer):
            raise ValueError(f"layer {i} ({layer}) is parametrized already")
        with torch.no_grad():
            w = torch.randn(layer.weight.shape, generator=generator, dtype=layer.weight.dtype)
            layer.weight.copy_(w.to(layer.weight.device))
            if layer.bias is not None:
                b = torch.randn(layer.bias.shape, generator=generator, dtype=layer.bias.dtype)
                layer.bias.copy_(b.to(layer.bias.device))
        c = weight_std / math.sqrt(layer.in_features) if (i or scale_input_layer) else weight_std
        parametrize.register_parametrization(layer, "weight", _Scale(c))
        if layer.bias is not None:
            parametrize.register_parametrization(layer, "bias", _Scale(bias_std))
    return module
