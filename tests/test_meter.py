"""Capped training loops (lazylab.train.meter): the cap, the records, the extrapolation."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lazylab.train import fit
from lazylab.train.meter import capped, evaluation, extrapolate, loop_steps, sampled_blocks
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


def test_logged_steps_are_priced_as_evaluations_not_as_steps():
    """Logs dense early (0-7, then 10, 20, 40) with an evaluation of the parameters: a logged
    step's bookkeeping (its batch losses, the divergence check) goes to the evaluations, so
    caps of 3 and 6 predict the operations of 40 steps within 5% (charged to every step, as
    before, they over-predicted by 23%)."""

    def logged() -> None:
        g = torch.Generator().manual_seed(0)
        W0 = [0.1 * torch.randn(k, 4, generator=g, dtype=torch.float64) for k in (2, 3)]
        train_packed_quad(W0, [0.01, 0.02], sampler=_sampler, steps=40, batch_size=8,
                          generator=torch.Generator().manual_seed(1), check_every=0,
                          log_steps=[0, 1, 2, 3, 4, 5, 6, 7, 10, 20, 40],
                          eval_fn=lambda j, prm: float(prm[0].sum()))

    full, est = _counted(logged)
    assert est == pytest.approx(full, rel=0.05)


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


def _sgd_in_blocks(steps: int, n: int = 40, rows: int = 5) -> None:
    """SGD whose logged full-data loss runs in row blocks of ``rows`` (n / rows of them);
    one batch an epoch, so that every step costs the same (a new epoch draws a permutation)."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 3, generator=g, dtype=torch.float64)
    net = torch.nn.Linear(3, 1).double()
    fit(net, data=(X, X[:, :1]), optimizer="sgd", batch_size=n, lr=0.05, steps=steps,
        log_steps=[0, steps // 2, steps], eval_rows=rows,
        generator=torch.Generator().manual_seed(1))


def _blocked_counts(run, blocks: int | None) -> tuple[int, int, float]:
    """(operations uncapped, of the run capped at 3, extrapolated from caps 3 and 6)."""
    with Ops() as full:
        run()
    meters, ran = [], []
    for cap in (3, 6):
        with Ops() as oc, capped(cap, lambda oc=oc: (float(oc.n),), blocks) as m:
            run()
        meters.append(m)
        ran.append(oc.n)
    return full.n, ran[0], extrapolate(meters[0], meters[1], meters[0].total())[0]


@pytest.mark.parametrize("blocks", [1, 2, 7, 8])
def test_sampled_evaluation_blocks_extrapolate_exactly(blocks):
    """Full-data losses over 8 equal row blocks, 3 logged of 100 steps: measured with 1, 2 or 7
    blocks an evaluation, the extrapolated operation count is the one measured with all 8
    blocks (blocks are alike), which is the uncapped count but for the few operations a
    logged step makes outside its evaluation (the middle log, which no capped run makes); and
    the capped run ran fewer operations than with all 8."""
    full, ran, est = _blocked_counts(lambda: _sgd_in_blocks(100), blocks)
    _, ran_all, est_all = _blocked_counts(lambda: _sgd_in_blocks(100), None)
    assert est == pytest.approx(est_all, abs=1e-6)
    assert abs(est_all - full) <= 3
    assert (ran < ran_all) == (blocks < 8)


def test_skipped_blocks_are_charged(monkeypatch):
    """Without charging the skipped blocks the same measurement falls short by (at least one
    operation of) the 6 of 8 blocks of each of the 3 evaluations: the charge is what makes it
    exact."""
    import lazylab.train.meter as meter

    real = meter.sampled_blocks

    def uncharged(items):
        m = meter._METER.get()
        b = None if m is None or not m.evaluating else m.blocks
        yield from (items if b is None else items[:b])

    _, _, est_all = _blocked_counts(lambda: _sgd_in_blocks(100), None)
    _, _, est = _blocked_counts(lambda: _sgd_in_blocks(100), 2)
    monkeypatch.setattr("lazylab.train.loop.sampled_blocks", uncharged)
    _, _, low = _blocked_counts(lambda: _sgd_in_blocks(100), 2)
    assert est == pytest.approx(est_all, abs=1e-6) and low < est_all - 3 * 6
    assert real is meter.sampled_blocks


def test_sampled_blocks_only_inside_an_evaluation():
    """A training loop's own blocks (outside evaluation()) are never cut, and the capped
    helper refuses a block count below 1."""
    with capped(2, lambda: (0.0,), blocks=1):
        loop_steps(10)
        assert list(sampled_blocks(range(5))) == [0, 1, 2, 3, 4]
        with evaluation():
            assert list(sampled_blocks(range(5))) == [0]
    with pytest.raises(ValueError, match="blocks must be"):
        with capped(2, blocks=0):
            pass
