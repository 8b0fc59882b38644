"""Full-batch gradient descent of a one-hidden-layer ReLU network, gradients written out.

For f(x) = a^T relu(W x + b) + c (an ``nn.Sequential(Linear(d, m), ReLU(), Linear(m, 1))``)
and the mean square loss L = (1/n) sum_i (f(x_i) - y_i)^2, with r = (2/n)(f - y) and
Z = X W^T + b:

    grad_a = relu(Z)^T r,  grad_c = sum_i r_i,  G = (r a^T) * 1[Z > 0],
    grad_W = G^T X,  grad_b = sum_i G_i,

and every parameter takes torch.optim.SGD's heavy-ball step (dampening 0): B <- mu B + grad
(B = grad at the first step), theta <- theta - lr B. That is :func:`lazylab.train.fit` with
``optimizer="gd"``, ``loss="mse"`` and a constant step, in about 20 tensor operations a step
instead of autograd's and the optimizer's (Nichani et al. 2022, Fig. 2 trains thousands of
such networks for 3000 steps each, where the per-step overhead is most of the time).

:func:`gd_relu_mlps` trains K such networks, each on its own data set, as one stacked
computation: the same step with batched products over (K, n_max) rows, the data sets
zero-padded to the largest n and each row weighted by 2/n_k (0 on a padded row, whose residual,
and so whose every gradient term, is then exactly 0). A step is as many operations for K
networks as for one.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["gd_relu_mlp", "gd_relu_mlps"]


def _layers(net: nn.Module) -> tuple[nn.Linear, nn.Linear]:
    ok = (isinstance(net, nn.Sequential) and len(net) == 3 and isinstance(net[0], nn.Linear)
          and isinstance(net[1], nn.ReLU) and isinstance(net[2], nn.Linear)
          and net[2].out_features == 1)
    if not ok:
        raise ValueError("net must be nn.Sequential(Linear(d, m), ReLU(), Linear(m, 1))")
    return net[0], net[2]


@torch.no_grad()
def gd_relu_mlp(net: nn.Module, X: torch.Tensor, y: torch.Tensor, *, lr: float, steps: int,
                momentum: float = 0.0) -> float:
    """Train ``net`` in place by ``steps`` full-batch GD steps; returns the final training
    loss (1/n) sum_i (f(x_i) - y_i)^2 (NaN or inf if the run diverged).

    ``y`` is (n,) or (n, 1).

    Example
    -------
    >>> g = torch.Generator().manual_seed(0)
    >>> net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)).double()
    >>> X = torch.randn(20, 3, generator=g, dtype=torch.float64); y = X[:, 0] ** 2
    >>> before = float(((net(X).squeeze(1) - y) ** 2).mean().detach())
    >>> gd_relu_mlp(net, X, y, lr=0.05, steps=200, momentum=0.9) < before
    True
    """
    first, last = _layers(net)
    W, b, a, c = first.weight, first.bias, last.weight, last.bias  # (m, d) (m) (1, m) (1)
    params = (W, b, a, c)
    y = y.reshape(-1, 1).to(W.dtype)
    n = X.shape[0]
    bufs: list[torch.Tensor] | None = None
    for _ in range(int(steps)):
        Z = torch.addmm(b, X, W.T)
        H = Z.clamp_min(0)
        r = torch.addmm(c, H, a.T).sub_(y).mul_(2.0 / n)          # dL/df (n, 1)
        G = torch.mm(r, a).mul_(Z > 0)                               # dL/dZ (n, m)
        grads = (torch.mm(G.T, X), G.sum(0), torch.mm(r.T, H), r.sum(0))
        bufs = _heavy_ball(params, grads, bufs, lr, momentum)
    f = torch.addmm(c, torch.addmm(b, X, W.T).clamp_min_(0), a.T)
    return float(((f - y) ** 2).mean())


def _heavy_ball(params: tuple[torch.Tensor, ...], grads: tuple[torch.Tensor, ...],
                bufs: list[torch.Tensor] | None, lr: float, momentum: float
                ) -> list[torch.Tensor]:
    """torch.optim.SGD's step (dampening 0): B <- mu B + grad (B = grad at the first step),
    theta <- theta - lr B, in place; returns the buffers."""
    if bufs is None:
        bufs = [g.clone() for g in grads]
    else:
        for buf, g in zip(bufs, grads, strict=True):
            buf.mul_(momentum).add_(g)
    for p, buf in zip(params, bufs, strict=True):
        p.sub_(buf, alpha=lr)
    return bufs


def _stack(nets: list[nn.Module]) -> tuple[torch.Tensor, ...]:
    layers = [_layers(net) for net in nets]
    dims = {(f.in_features, f.out_features, f.weight.dtype, f.weight.device) for f, _ in layers}
    if len(dims) != 1:
        raise ValueError("nets must share input dimension, width, dtype and device")
    return (torch.stack([f.weight.detach() for f, _ in layers]),            # (K, m, d)
            torch.stack([f.bias.detach() for f, _ in layers]).unsqueeze(1),  # (K, 1, m)
            torch.stack([g.weight.detach() for _, g in layers]),             # (K, 1, m)
            torch.stack([g.bias.detach() for _, g in layers]).unsqueeze(1))  # (K, 1, 1)


def _padded(Xs: list[torch.Tensor], ys: list[torch.Tensor], dtype: torch.dtype
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X (K, n_max, d) and y (K, n_max, 1) zero-padded; row weights 2/n_k, 0 on padding."""
    K, n_max, d = len(Xs), max(int(X.shape[0]) for X in Xs), int(Xs[0].shape[1])
    dev = Xs[0].device
    Xp = torch.zeros(K, n_max, d, dtype=dtype, device=dev)
    yp = torch.zeros(K, n_max, 1, dtype=dtype, device=dev)
    w = torch.zeros(K, n_max, 1, dtype=dtype, device=dev)
    for k, (X, y) in enumerate(zip(Xs, ys, strict=True)):
        n = int(X.shape[0])
        if y.numel() != n:
            raise ValueError(f"ys[{k}] must have {n} entries (one per row of Xs[{k}])")
        Xp[k, :n] = X
        yp[k, :n] = y.reshape(-1, 1)
        w[k, :n] = 2.0 / n
    return Xp, yp, w


@torch.no_grad()
def gd_relu_mlps(nets: list[nn.Module], Xs: list[torch.Tensor], ys: list[torch.Tensor], *,
                 lr: float, steps: int, momentum: float = 0.0) -> list[float]:
    """Train every ``nets[k]`` in place on (``Xs[k]``, ``ys[k]``) by ``steps`` full-batch GD
    steps, all K as one stacked computation (module docstring); returns each final training
    loss (NaN or inf for a run that diverged; the others are unaffected).

    The same update as :func:`gd_relu_mlp` network by network; the sums over a network's rows
    run in other blocks, so the results agree with it to rounding (float64: ~1e-12 after a
    few hundred steps), not bit for bit.

    Example
    -------
    >>> g = torch.Generator().manual_seed(0)
    >>> nets = [nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)).double()
    ...         for _ in range(2)]
    >>> Xs = [torch.randn(n, 3, generator=g, dtype=torch.float64) for n in (20, 35)]
    >>> losses = gd_relu_mlps(nets, Xs, [X[:, 0] ** 2 for X in Xs], lr=0.05, steps=100)
    >>> len(losses), all(v < 1.0 for v in losses)
    (2, True)
    """
    if not nets or len(nets) != len(Xs) or len(Xs) != len(ys):
        raise ValueError("nets, Xs and ys must be non-empty lists of one length")
    W, b, a, c = _stack(nets)
    X, y, w = _padded(Xs, ys, W.dtype)
    params = (W, b, a, c)
    bufs: list[torch.Tensor] | None = None
    for _ in range(int(steps)):
        Z = torch.baddbmm(b, X, W.transpose(1, 2))                    # (K, n, m)
        H = Z.clamp_min(0)
        r = torch.baddbmm(c, H, a.transpose(1, 2)).sub_(y).mul_(w)  # dL/df (K, n, 1)
        G = torch.bmm(r, a).mul_(Z > 0)                               # dL/dZ (K, n, m)
        grads = (torch.bmm(G.transpose(1, 2), X), G.sum(1, keepdim=True),
                 torch.bmm(r.transpose(1, 2), H), r.sum(1, keepdim=True))
        bufs = _heavy_ball(params, grads, bufs, lr, momentum)
    f = torch.baddbmm(c, torch.baddbmm(b, X, W.transpose(1, 2)).clamp_min_(0),
                      a.transpose(1, 2))
    sq = ((f - y) ** 2).mul_(w).sum(1).squeeze(1) / 2.0                 # w = 2/n on real rows
    for k, net in enumerate(nets):
        first, last = _layers(net)
        first.weight.copy_(W[k])
        first.bias.copy_(b[k, 0])
        last.weight.copy_(a[k])
        last.bias.copy_(c[k, 0])
    return [float(v) for v in sq]
