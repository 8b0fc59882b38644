"""A hyper-parameter grid trained as ONE batched ensemble (Allen-Zhu & Li 2019, Sec. 8).

The paper trains each (learning rate, weight decay) pair on the {1, 2, 5} x 10^k grid for 800
epochs of SGD (momentum 0.9, batch 50, lr / 10 at half the epochs) and reports the best. Here the
G = |lrs| x |wds| configurations share the model's initialization and the mini-batch order, so
their trainable parameters are stacked along a leading axis and one step of all of them is one
call of ``torch.func.vmap(torch.func.grad(loss))``: batched GEMMs instead of a Python loop over
configurations (``bench/bench_ensemble_grid.py`` measures the ratio to one configuration).

Each configuration follows ``torch.optim.SGD`` exactly (PyTorch semantics, dampening 0):

    g <- grad L(theta) + wd theta,  b <- mu b + g  (b = g at step 1),  theta <- theta - lr b,

with lr divided by ``decay_factor`` from epoch ``floor(decay_at * epochs)`` on. The loss is the
batch mean of ||f(x) - y||^2 (summed over outputs, no 1/2; the paper's test error). With
``linearize=True`` the model is replaced by its first-order Taylor expansion at the init,
f(theta0; x) + J(theta0) (theta - theta0) (computed with ``torch.func.jvp``): the paper's "(NTK)"
mode, all layers trained in the tangent kernel regime.

Example
-------
>>> import torch
>>> from lazylab.models.mlp import MLP2
>>> g = torch.Generator().manual_seed(0)
>>> net = MLP2(4, 1, 8, generator=g, dtype=torch.float64)
>>> X = torch.randn(20, 4, generator=g, dtype=torch.float64); Y = X[:, :1] ** 2
>>> res = train_grid(net, X, Y, lrs=[0.01, 0.1], wds=[0.0], trainable="all", epochs=3,
...                  batch_size=5, generator=torch.Generator().manual_seed(1))
>>> res.errors(X, Y).shape
torch.Size([2])
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, jvp, vmap

__all__ = ["GridRun", "decade_grid", "train_grid", "best_index"]


def decade_grid(k_min: int, k_max: int, mantissas: Sequence[float] = (1, 2, 5)) -> list[float]:
    """Sorted {1, 2, 5} x 10^k for k in [k_min, k_max] (the paper's lr and wd grid).

    >>> decade_grid(-2, -1)
    [0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    """
    if k_min > k_max:
        raise ValueError(f"k_min must be <= k_max; got {k_min} > {k_max}")
    return sorted(float(f"{mu}e{k}") for k in range(k_min, k_max + 1) for mu in mantissas)


def best_index(values: torch.Tensor) -> int:
    """Index of the smallest finite value (diverged configurations are skipped); -1 if none."""
    v = torch.as_tensor(values, dtype=torch.float64)
    ok = torch.isfinite(v)
    if not bool(ok.any()):
        return -1
    return int(torch.where(ok, v, torch.inf).argmin())


def _names(model: nn.Module, trainable: str | Sequence[str]) -> list[str]:
    """Parameter names of a group of ``model.param_groups()`` or an explicit name list."""
    by_id = {id(p): n for n, p in model.named_parameters()}
    if isinstance(trainable, str):
        groups = model.param_groups() if hasattr(model, "param_groups") else {
            "all": list(model.parameters())}
        if trainable not in groups:
            raise ValueError(f"trainable must be one of {', '.join(groups)}; got {trainable!r}")
        return [by_id[id(p)] for p in groups[trainable]]
    names = list(trainable)
    unknown = sorted(set(names) - set(by_id.values()))
    if unknown:
        raise ValueError(f"unknown parameter names {unknown}")
    return names


@dataclass
class GridRun:
    """The trained ensemble: ``params[name]`` has shape (G, *shape) for trainable names.

    ``configs[g] = (lr, wd)``; ``train_loss[g, e]`` is the mean mini-batch loss during epoch
    e, before each step (NaN/inf once a configuration diverged).
    """

    model: nn.Module
    configs: list[tuple[float, float]]
    params: dict[str, torch.Tensor]
    fixed: dict[str, torch.Tensor]
    theta0: dict[str, torch.Tensor]
    linearize: bool
    train_loss: torch.Tensor

    def _fn(self):
        return _forward_fn(self.model, self.fixed, self.theta0, self.linearize)

    @torch.no_grad()
    def predict(self, X: torch.Tensor, *, chunk: int = 8192) -> torch.Tensor:
        """Outputs of every configuration, (G, n, ...)."""
        fn = vmap(self._fn(), in_dims=(0, None))
        return torch.cat([fn(self.params, X[i:i + chunk]) for i in range(0, len(X), chunk)],
                         dim=1)

    @torch.no_grad()
    def errors(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        """Mean over x of ||f(x) - y||^2 per configuration (G,); non-finite -> inf."""
        out = self.predict(X)
        diff = (out - Y.to(out.dtype)).reshape(out.shape[0], out.shape[1], -1)
        err = diff.square().sum(dim=2).mean(dim=1)
        return torch.where(torch.isfinite(err), err, torch.full_like(err, math.inf))

    def norms(self, names: Sequence[str]) -> torch.Tensor:
        """Frobenius norm of the trained tensors ``names`` together, per configuration (G,)."""
        tot = sum(self.params[n].reshape(len(self.configs), -1).square().sum(dim=1)
                  for n in names)
        return tot.sqrt()


def _forward_fn(model: nn.Module, fixed: dict[str, torch.Tensor],
                theta0: dict[str, torch.Tensor], linearize: bool):
    def f(params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        return functional_call(model, {**fixed, **params}, (X,))

    if not linearize:
        return f

    def f_lin(params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        delta = {n: params[n] - theta0[n] for n in params}
        out0, tangent = jvp(lambda p: f(p, X), (theta0,), (delta,))
        return out0 + tangent
    return f_lin


def train_grid(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, *, lrs: Sequence[float],
               wds: Sequence[float], trainable: str | Sequence[str] = "all", epochs: int,
               batch_size: int = 50, momentum: float = 0.9, decay_at: float = 0.5,
               decay_factor: float = 10.0, linearize: bool = False,
               generator: torch.Generator, max_group: int | None = None) -> GridRun:
    """Train every (lr, wd) in ``lrs x wds`` from the same init and batch order, batched.

    Parameters
    ----------
    model : an ``nn.Module`` (its current parameters are the shared init; it is not modified).
    X, Y : training inputs (n, d) and targets (n, k) or (n,).
    lrs, wds : learning rates (> 0) and weight decays (>= 0); G = len(lrs) * len(wds).
    trainable : a key of ``model.param_groups()`` ("all", "first", "last", ...) or names.
    epochs, batch_size, momentum : SGD protocol (paper: 800, 50, 0.9).
    decay_at, decay_factor : lr / decay_factor from epoch floor(decay_at * epochs).
    linearize : train the first-order Taylor model at the init instead ("NTK" mode).
    generator : the mini-batch order (one permutation per epoch, shared by all configurations).
    max_group : train at most this many configurations at once (memory); None = all.

    Returns
    -------
    :class:`GridRun` with the stacked trained parameters.
    """
    if int(epochs) != epochs or epochs < 1:
        raise ValueError(f"epochs must be a positive integer; got {epochs!r}")
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}")
    if not lrs or any(lr <= 0 for lr in lrs) or not wds or any(w < 0 for w in wds):
        raise ValueError("lrs must be non-empty and > 0, wds non-empty and >= 0")
    names = _names(model, trainable)
    all_tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    theta0 = {n: all_tensors[n].detach() for n in names}
    fixed = {n: t.detach() for n, t in all_tensors.items() if n not in theta0}
    configs = list(itertools.product([float(v) for v in lrs], [float(v) for v in wds]))
    n = X.shape[0]
    Y = Y.to(X.dtype)
    fwd = _forward_fn(model, fixed, theta0, linearize)

    def loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor
             ) -> torch.Tensor:
        diff = (fwd(params, xb) - yb).reshape(xb.shape[0], -1)
        return diff.square().sum(dim=1).mean()

    step_grad = vmap(grad_and_value(loss), in_dims=(0, None, None))
    # The batch order: one permutation per epoch, drawn up front (shared by all groups).
    perms = [torch.randperm(n, generator=generator, device=generator.device).to(X.device)
             for _ in range(int(epochs))]
    decay_epoch = math.floor(decay_at * epochs)
    size = len(configs) if max_group is None else max(1, int(max_group))
    out_params: dict[str, list[torch.Tensor]] = {nm: [] for nm in names}
    losses = []
    for lo in range(0, len(configs), size):
        cfg = configs[lo:lo + size]
        G = len(cfg)
        P = {nm: theta0[nm].unsqueeze(0).repeat(G, *[1] * theta0[nm].ndim).clone()
             for nm in names}
        buf: dict[str, torch.Tensor] | None = None
        lr0 = torch.tensor([c[0] for c in cfg], dtype=X.dtype, device=X.device)
        wd = torch.tensor([c[1] for c in cfg], dtype=X.dtype, device=X.device)
        ep_loss = torch.zeros(G, int(epochs), dtype=torch.float64)
        for e in range(int(epochs)):
            lr = lr0 / decay_factor if e >= decay_epoch else lr0
            perm = perms[e]
            tot = torch.zeros(G, dtype=torch.float64, device=X.device)
            for s in range(0, n, batch_size):
                idx = perm[s:s + batch_size]
                xb, yb = X[idx], Y[idx]
                g, val = step_grad(P, xb, yb)
                with torch.no_grad():
                    for nm in names:
                        shape = (G,) + (1,) * theta0[nm].ndim
                        g[nm].add_(wd.view(shape) * P[nm])
                    if buf is None:
                        buf = {nm: g[nm].clone() for nm in names}
                    else:
                        for nm in names:
                            buf[nm].mul_(momentum).add_(g[nm])
                    for nm in names:
                        P[nm].sub_(lr.view((G,) + (1,) * theta0[nm].ndim) * buf[nm])
                    tot += val.double() * len(idx)
            ep_loss[:, e] = (tot / n).cpu()
        for nm in names:
            out_params[nm].append(P[nm])
        losses.append(ep_loss)
    params = {nm: torch.cat(v) for nm, v in out_params.items()}
    return GridRun(model, configs, params, fixed, theta0, linearize, torch.cat(losses))
