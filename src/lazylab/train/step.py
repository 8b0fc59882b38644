"""One optimizer update of :func:`lazylab.train.fit`: torch.optim.SGD plus gradient noise.

For each trained parameter theta in a group with learning-rate scale s and weight decay wd,
at step t with eta_t = lr * schedule(t):

    g_t = grad + wd * theta_t + noise_std * xi_t           (xi_t ~ N(0, I); "gradient" noise)
    torch.optim.SGD(lr = eta_t * s, momentum, nesterov, dampening = 0) on g_t
    theta_{t+1} += sqrt(2 eta_t s) * noise_std * xi'_t      ("langevin" noise, after the step)

The weight decay is folded into g_t here (not passed to torch's SGD) so that it enters before
the noise, as in the update rule of :mod:`lazylab.train.loop`; the noise draws come from the
run's generator in parameter order. ``foreach=False`` keeps torch on its per-tensor kernels,
which perform the same elementwise operations as the hand-written update of earlier versions
(results are bitwise identical to them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class ParamGroup:
    """Parameters sharing a learning-rate scale and a weight decay."""

    params: list[torch.Tensor]
    lr_scale: float
    weight_decay: float


class SGDStep:
    """Applies one update given the gradients (see the module docstring).

    Parameters
    ----------
    groups : the parameter groups.
    momentum, nesterov : heavy-ball momentum in [0, 1) and Nesterov's variant.
    noise_std, noise_mode : Gaussian noise level and where it enters ("gradient", "langevin").
    generator : the source of the noise (required when noise_std > 0).
    """

    def __init__(self, groups: list[ParamGroup], *, momentum: float = 0.0,
                 nesterov: bool = False, noise_std: float = 0.0,
                 noise_mode: str = "gradient", generator: torch.Generator | None = None):
        self.groups = groups
        self.noise_std, self.noise_mode, self.generator = noise_std, noise_mode, generator
        self.params = [p for grp in groups for p in grp.params]
        self.optimizer = torch.optim.SGD(
            [{"params": grp.params, "lr": 1.0} for grp in groups], lr=1.0,
            momentum=momentum, nesterov=nesterov, dampening=0.0, weight_decay=0.0,
            foreach=False)

    def _noise(self, p: torch.Tensor) -> torch.Tensor:
        return torch.randn(p.shape, generator=self.generator, device=p.device, dtype=p.dtype)

    @torch.no_grad()
    def __call__(self, grads: tuple[torch.Tensor | None, ...], eta: float) -> None:
        """Update the parameters in place with learning rate eta (before group scales)."""
        k = 0
        for grp, og in zip(self.groups, self.optimizer.param_groups, strict=True):
            og["lr"] = eta * grp.lr_scale
            for p in grp.params:
                g = grads[k]
                k += 1
                g = torch.zeros_like(p) if g is None else g
                if grp.weight_decay:
                    g = g.add(p, alpha=grp.weight_decay)
                if self.noise_std and self.noise_mode == "gradient":
                    g = g.add(self._noise(p), alpha=self.noise_std)
                p.grad = g
        self.optimizer.step()
        for grp, og in zip(self.groups, self.optimizer.param_groups, strict=True):
            for p in grp.params:
                p.grad = None
                if self.noise_std and self.noise_mode == "langevin":
                    p.add_(self._noise(p), alpha=math.sqrt(2 * og["lr"]) * self.noise_std)
