"""The hand-written full-batch GD of a one-hidden-layer ReLU network against ``fit``."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lazylab.train import fit
from lazylab.train.mlp_gd import gd_relu_mlp

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
