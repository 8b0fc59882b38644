"""Capped training loops (lazylab.train.meter): the cap, the records, the extrapolation."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lazylab.train import fit
from lazylab.train.meter import capped, extrapolate, loop_steps
from lazylab.train.packed import train_packed_quad


class Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _sampler(n: int, gen: torch.Generator):
    X = torch.randn(n, 4, generator=gen, dtype=torch.float64)
    return X, X[:, 0] ** 2 - 1


def _packed(steps: int) -> None:
    g = torch.Generator().manual_seed(0)
    W0 = [0.1 * torch.randn(k, 4, generator=g, dtype=torch.float64) for k in (2, 3)]
    train_packed_quad(W0, [0.01, 0.02], sampler=_sampler, steps=steps, batch_size=8,
                      generator=torch.Generator().manual_seed(1), check_every=0)


def _counted(run) -> tuple[int, float]:
    """(operations of ``run`` uncapped, their extrapolation from runs capped at 3 and 6)."""
    with Ops() as full:
        run()
    meters = []
    for cap in (3, 6):
        with Ops() as oc, capped(cap, lambda oc=oc: (float(oc.n),)) as m:
            run()
        meters.append(m)
    return full.n, extrapolate(meters[0], meters[1], meters[0].total())[0]


def test_outside_a_cap_loops_run_what_they_request():
    assert loop_steps(12345) == 12345


def test_cap_limits_fit_and_records_each_loop():
    net = torch.nn.Linear(3, 1).double()
    X = torch.randn(20, 3, dtype=torch.float64)
    with capped(4) as m:
        h1 = fit(net, data=(X, X[:, :1]), loss="mse", optimizer="gd", lr=0.1, steps=1000,
                 log_steps=[0, 2, 500, 1000])
        h2 = fit(net, data=(X, X[:, :1]), loss="mse", optimizer="gd", lr=0.1, steps=3)
    assert [(s.requested, s.run) for s in m.loops] == [(1000, 4), (3, 3)]
    # the last log moves to the last step run: a capped run still reports a final loss
    assert h1.steps == [0, 2, 4] and math.isfinite(h1.final_loss) and h2.steps[-1] == 3


def test_extrapolated_operations_equal_the_uncapped_count():
    """Per-step work is constant in the packed trainer (no periodic checks), so caps of 3 and
    6 steps predict the operation count of 40 steps exactly."""
    full, est = _counted(lambda: _packed(40))
    assert est == pytest.approx(full, abs=0.5)


def test_extrapolation_refuses_runs_that_saw_other_loops():
    with capped(2) as a:
        loop_steps(10)
    with capped(4) as b:
        loop_steps(10)
        loop_steps(10)
    with pytest.raises(ValueError, match="different loops"):
        extrapolate(a, b, [])


def test_cap_must_be_positive():
    with pytest.raises(ValueError, match="cap"):
        with capped(0):
            pass


def test_the_total_is_read_when_the_run_ends_not_when_asked():
    """A wall clock read after the block must not charge the run for what ran since: the
    projection measures four runs before it reads the first one's total."""
    clock = iter(range(100))
    with capped(2, lambda: (float(next(clock)),)) as m:
        loop_steps(10)
    later = [next(clock) for _ in range(5)]  # other runs, measured meanwhile
    assert later[0] == 3
    assert m.total() == [2.0] and m.close() == (2.0,) and m.loops[0].end == (2.0,)


def _logged_gd(steps: int) -> None:
    """Nichani's batched GD with a test evaluation at 12 log-spaced steps (dense early)."""
    from lazylab.models.nichani import TaylorFeatures, nichani_net
    from lazylab.train.history import log_spaced_steps
    from lazylab.train.nichani import train_taylor

    g = torch.Generator().manual_seed(0)
    X, Xt = torch.randn(30, 5, generator=g), torch.randn(400, 5, generator=g)
    net = nichani_net(5, 40, generator=g)
    tr, te = TaylorFeatures.of(net, X), TaylorFeatures.of(net, Xt)
    train_taylor(tr, X[:, 0], steps=steps, lr=0.1, log_steps=log_spaced_steps(steps, 12),
                 test=te, y_test=Xt[:, 0], W_init=0.01 * torch.randn(40, 5, generator=g))


@pytest.mark.parametrize("kept_apart", [True, False], ids=["evaluations", "charged-to-steps"])
def test_log_spaced_evaluations_extrapolate_exactly_when_kept_apart(monkeypatch, kept_apart):
    """Caps of 3 and 6 steps see the dense early evaluations (steps 1, 2, 3, ...): with the
    evaluations kept apart the extrapolated operation count of 300 steps is exact; charged to
    every step (the meter without evaluation()), it is 40% too high."""
    from contextlib import nullcontext

    import lazylab.train.nichani.gd as gd

    if not kept_apart:
        monkeypatch.setattr(gd, "evaluation", nullcontext)
    full, est = _counted(lambda: _logged_gd(300))
    if kept_apart:
        assert est == pytest.approx(full, abs=0.5)
    else:
        assert est > 1.3 * full
