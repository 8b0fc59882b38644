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
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["gd_relu_mlp"]


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
    >>> before = float(((net(X).squeeze(1) - y) ** 2).mean())
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
        if bufs is None:
            bufs = [g.clone() for g in grads]
        else:
            for buf, g in zip(bufs, grads, strict=True):
                buf.mul_(momentum).add_(g)
        for p, buf in zip(params, bufs, strict=True):
            p.sub_(buf, alpha=lr)
    f = torch.addmm(c, torch.addmm(b, X, W.T).clamp_min_(0), a.T)
    return float(((f - y) ** 2).mean())
