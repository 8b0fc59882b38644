"""Full-batch gradient descent of a one-hidden-layer ReLU network, gradients written out.

For f(x) = a^T relu(W x + b) + c (an ``nn.Sequential(Linear(d, m), ReLU(), Linear(m, 1))``)
and the mean square loss L = (1/n) sum_i (f(x_i) - y_i)^2, with r = (2/n)(f - y) and
Z = X W^T + b:

    grad_a = relu(Z)^T r,  grad_c = sum_i r_i,  G = (r a^T) * 1[Z > 0],
    grad_W = G^T X,  grad_b = sum_i G_i,

and every parameter takes torch.optim.SGD's heavy-ball step (dampening 0): B <- mu B + grad
(B = grad at the first step), theta <- theta - lr B. That is :func:`lazylab.train.fit` with
``optimizer="gd"``, ``loss="mse"`` and a constant step. Each bias rides as one more weight on
a column of ones, W1 = [W, b] on X1 = [X, 1] and a1 = [a, c] on H1 = [relu(Z), 1] (W1 stored
as (d + 1, m), so that no product takes a transposed operand), and a step is four matrix
products, the ReLU, its backward (r a^T masked in one ``threshold_backward`` pass) and the
heavy-ball update of one flat buffer that holds every parameter (three in-place operations,
one without momentum): 13 dispatched operations (two of them views) instead of autograd's and
the optimizer's (Nichani et al. 2022, Fig. 2 trains thousands of such networks for 3000 steps
each, where the per-step overhead is most of the time).

:func:`gd_relu_mlps` trains K such networks, each on its own data set, as one stacked
computation: the same step with batched products over (K, n_max) rows, the data sets
zero-padded to the largest n and each row weighted by 2/n_k (0 on a padded row, whose residual,
and so whose every gradient term, is then exactly 0). A step is as many operations for K
networks as for one.
"""

from __future__ import annotations

import torch
from torch import nn

_RELU_BACKWARD = torch.ops.aten.threshold_backward.default


def _layers(net: nn.Module) -> tuple[nn.Linear, nn.Linear]:
    ok = (isinstance(net, nn.Sequential) and len(net) == 3 and isinstance(net[0], nn.Linear)
          and isinstance(net[1], nn.ReLU) and isinstance(net[2], nn.Linear)
          and net[2].out_features == 1)
    if not ok:
        raise ValueError("net must be nn.Sequential(Linear(d, m), ReLU(), Linear(m, 1))")
    return net[0], net[2]


def _ones_column(A: torch.Tensor) -> torch.Tensor:
    """[A, 1]: A with a column of ones appended (last dimension)."""
    return torch.cat([A, A.new_ones(*A.shape[:-1], 1)], -1)


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
    m, n = first.out_features, X.shape[0]
    d = first.in_features
    # [W, b] stored transposed, (d + 1, m): both of its products then take plain operands
    flat, (W1, a1) = _flat((d + 1, m), (1, m + 1), like=first.weight)
    grads, (gW, ga) = _flat((d + 1, m), (1, m + 1), like=first.weight)
    W1.copy_(torch.cat([first.weight, first.bias.unsqueeze(1)], 1).T)
    a1.copy_(torch.cat([last.weight, last.bias.unsqueeze(1)], 1))
    X1 = _ones_column(X.to(W1.dtype))
    H1 = X1.new_ones(n, m + 1)                                      # [relu(Z), 1]
    H, a, a1T = H1[:, :m], a1[:, :m], a1.T
    y = y.reshape(-1, 1).to(W1.dtype)
    buf: torch.Tensor | None = None
    for _ in range(int(steps)):
        Z = torch.mm(X1, W1)
        torch.clamp_min(Z, 0, out=H)
        r = torch.addmm(y, H1, a1T, beta=-1.0).mul_(2.0 / n)       # dL/df (n, 1)
        G = _RELU_BACKWARD(r * a, Z, 0.0)                           # dL/dZ (n, m)
        torch.mm(X1.T, G, out=gW)
        torch.mm(r.T, H1, out=ga)
        buf = _heavy_ball(flat, grads, buf, lr, momentum)
    first.weight.copy_(W1[:-1].T)
    first.bias.copy_(W1[-1])
    last.weight.copy_(a)
    last.bias.copy_(a1[:, -1])
    torch.clamp_min(torch.mm(X1, W1), 0, out=H)
    return float(((H1 @ a1T - y) ** 2).mean())


def _flat(*shapes: tuple[int, ...], like: torch.Tensor
          ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One uninitialized flat buffer (``like``'s dtype and device) and views of it of the
    given shapes, in order: all parameters (or gradients) then take one update."""
    sizes = [int(torch.Size(sh).numel()) for sh in shapes]
    flat = like.new_empty(sum(sizes))
    return flat, [v.view(sh) for v, sh in zip(flat.split(sizes), shapes, strict=True)]


def _heavy_ball(params: torch.Tensor, grads: torch.Tensor, buf: torch.Tensor | None,
                lr: float, momentum: float) -> torch.Tensor | None:
    """torch.optim.SGD's step (dampening 0) on flat buffers: B <- mu B + grad (B = grad at
    the first step), theta <- theta - lr B (theta <- theta - lr grad without momentum), in
    place; returns the buffer. The same arithmetic, in the same order, as SGD's per-tensor
    update, as one to three operations on one tensor."""
    if momentum == 0:
        params.add_(grads, alpha=-lr)
        return None
    if buf is None:
        buf = grads.clone()
    else:
        buf.mul_(momentum).add_(grads)
    params.add_(buf, alpha=-lr)
    return buf


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
    K, n, m, d = X.shape[0], X.shape[1], W.shape[1], X.shape[2]
    flat, (W1, a1) = _flat((K, d + 1, m), (K, 1, m + 1), like=W)
    grads, (gW, ga) = _flat((K, d + 1, m), (K, 1, m + 1), like=W)
    W1.copy_(torch.cat([W, b.transpose(1, 2)], 2).transpose(1, 2))  # (K, d + 1, m)
    a1.copy_(torch.cat([a, c], 2))                                   # (K, 1, m + 1)
    X1 = _ones_column(X)
    H1 = X1.new_ones(K, n, m + 1)                                    # [relu(Z), 1]
    H, a_, a1T = H1[..., :m], a1[..., :m], a1.transpose(1, 2)
    buf: torch.Tensor | None = None
    for _ in range(int(steps)):
        Z = torch.bmm(X1, W1)                                         # (K, n, m)
        torch.clamp_min(Z, 0, out=H)
        r = torch.baddbmm(y, H1, a1T, beta=-1.0).mul_(w)             # dL/df (K, n, 1)
        G = _RELU_BACKWARD(r * a_, Z, 0.0)                            # dL/dZ (K, n, m)
        torch.bmm(X1.transpose(1, 2), G, out=gW)
        torch.bmm(r.transpose(1, 2), H1, out=ga)
        buf = _heavy_ball(flat, grads, buf, lr, momentum)
    torch.clamp_min(torch.bmm(X1, W1), 0, out=H)
    sq = ((H1 @ a1T - y) ** 2).mul_(w).sum(1).squeeze(1) / 2.0       # w = 2/n on real rows
    for k, net in enumerate(nets):
        first, last = _layers(net)
        first.weight.copy_(W1[k, :-1].T)
        first.bias.copy_(W1[k, -1])
        last.weight.copy_(a_[k])
        last.bias.copy_(a1[k, :, -1])
    return [float(v) for v in sq]
