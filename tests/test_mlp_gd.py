"""The hand-written full-batch GD of a one-hidden-layer ReLU network against ``fit``."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lazylab.train import fit
from lazylab.train.mlp_gd import gd_relu_mlp, gd_relu_mlps

F64 = torch.float64


def _net(d: int, m: int, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)  # nn.Linear's default init; both runs start from one copy
    return nn.Sequential(nn.Linear(d, m), nn.ReLU(), nn.Linear(m, 1)).to(dtype)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_gd_relu_mlp_equals_fit_full_batch(momentum):
    """Same parameters and final training loss as fit(optimizer="gd", loss="mse") after 150
    steps, float64, to 1e-10; y given as (n,) or (n, 1)."""
    g = torch.Generator().manual_seed(1)
    X = torch.randn(60, 5, generator=g, dtype=F64)
    y = (X[:, :1] * X[:, 1:2]).tanh()
    ref = _net(5, 16, F64)
    ours = _net(5, 16, F64)
    h = fit(ref, data=(X, y), lr=0.05, steps=150, momentum=momentum, log_points=1)
    loss = gd_relu_mlp(ours, X, y.squeeze(1), lr=0.05, steps=150, momentum=momentum)
    for p, q in zip(ref.parameters(), ours.parameters(), strict=True):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-10)
    assert abs(loss - float(h.train_loss[-1])) < 1e-10
    with torch.no_grad():
        assert loss < float(((_net(5, 16, F64)(X) - y) ** 2).mean())


def test_gd_relu_mlp_reports_divergence_and_refuses_other_nets():
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(2), dtype=F64)
    net = _net(3, 8, F64)
    assert not math.isfinite(gd_relu_mlp(net, X, X[:, 0] * 50, lr=40.0, steps=200))
    with pytest.raises(ValueError, match="nn.Sequential"):
        gd_relu_mlp(nn.Linear(3, 1), X, X[:, 0], lr=0.1, steps=1)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_stacked_networks_equal_one_by_one(momentum):
    """Three networks on data sets of 17, 40 and 29 rows trained as one stacked computation:
    the parameters and final losses of :func:`gd_relu_mlp` run network by network, float64,
    to 1e-10 after 150 steps (the padded rows contribute exact zeros); a diverging member
    leaves the others unchanged."""
    g = torch.Generator().manual_seed(3)
    Xs = [torch.randn(n, 5, generator=g, dtype=F64) for n in (17, 40, 29)]
    ys = [(X[:, 0] * X[:, 1]).tanh() for X in Xs]
    ys[2] = ys[2] * 1e3  # diverges at this step size
    ref = [_net(5, 16, F64) for _ in Xs]
    ours = [_net(5, 16, F64) for _ in Xs]
    with torch.no_grad():  # distinct initial networks
        for k in range(3):
            for p, q in zip(ref[k].parameters(), ours[k].parameters(), strict=True):
                p.add_(0.1 * k)
                q.add_(0.1 * k)
    losses_ref = [gd_relu_mlp(n, X, y, lr=0.05, steps=150, momentum=momentum)
                  for n, X, y in zip(ref, Xs, ys, strict=True)]
    losses = gd_relu_mlps(ours, Xs, ys, lr=0.05, steps=150, momentum=momentum)
    assert not math.isfinite(losses_ref[2]) and not math.isfinite(losses[2])
    for k in range(2):
        assert abs(losses[k] - losses_ref[k]) < 1e-10
        for p, q in zip(ref[k].parameters(), ours[k].parameters(), strict=True):
            torch.testing.assert_close(q, p, rtol=0, atol=1e-10)


def test_stacked_networks_refuse_mismatched_inputs():
    X = torch.randn(10, 3, dtype=F64)
    with pytest.raises(ValueError, match="one length"):
        gd_relu_mlps([_net(3, 8, F64)], [X, X], [X[:, 0]], lr=0.1, steps=1)
    with pytest.raises(ValueError, match="share input dimension"):
        gd_relu_mlps([_net(3, 8, F64), _net(3, 9, F64)], [X, X], [X[:, 0]] * 2, lr=0.1,
                     steps=1)
    with pytest.raises(ValueError, match="ys\\[0\\] must have 10"):
        gd_relu_mlps([_net(3, 8, F64)], [X], [X[:5, 0]], lr=0.1, steps=1)


def test_a_gd_step_dispatches_a_few_operations_one_or_stacked():
    """Steps 2 on of one network and of three stacked cost the same 13 operations
    (four products, the ReLU, the outer product r a^T and its mask, the residual scaling,
    three ``_foreach`` updates and two views of transposed operands), where autograd and
    ``torch.optim.SGD`` dispatch several times more; counted at the dispatcher, the
    difference of 20 and 10 steps."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    X = torch.randn(30, 4, generator=torch.Generator().manual_seed(4), dtype=F64)

    def per_step(stacked: bool) -> float:
        counts = []
        for steps in (10, 20):
            with Ops() as ops:
                if stacked:
                    gd_relu_mlps([_net(4, 8, F64) for _ in range(3)], [X, X[:20], X[:25]],
                                 [X[:, 0], X[:20, 1], X[:25, 2]], lr=0.01, steps=steps,
                                 momentum=0.9)
                else:
                    gd_relu_mlp(_net(4, 8, F64), X, X[:, 0], lr=0.01, steps=steps, momentum=0.9)
            counts.append(ops.n)
        return (counts[1] - counts[0]) / 10
    one, three = per_step(False), per_step(True)
    assert one == three and one <= 13, (one, three)
