"""bench/_projection.py hands its options down to every measured group: ``--fast`` (no timed
runs), the H100 model's GEMM rate of an experiment that declares TF32 at paper scale and the
evaluation blocks of ``--eval-blocks``. The first two were once dropped on the way (every
group timed, every group priced at float32)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _projection as P  # noqa: E402


@pytest.fixture
def spy(monkeypatch):
    """Every ``_measure_group`` call's rate, fast flag and blocks; timed runs refused."""
    seen: list[tuple[float, bool, int | None]] = []
    real = P._measure_group

    def measure(call, cap, tcap, device, rate=P.H100_FLOPS, fast=False, blocks=None):
        seen.append((rate, fast, blocks))
        return real(call, cap, tcap, device, rate, fast, blocks)

    def no_timing(*a, **k):
        raise AssertionError("a timed run in a --fast projection")

    monkeypatch.setattr(P, "_measure_group", measure)
    monkeypatch.setattr(P, "_timed", no_timing)
    return seen


@pytest.mark.parametrize("declared, rate", [({}, P.H100_FLOPS),
                                            ({"paper": "tf32"}, P.H100_TF32_FLOPS)])
def test_fast_and_the_tf32_rate_reach_every_group(toy, spy, monkeypatch, declared, rate):
    monkeypatch.setattr(type(toy), "precision", declared)
    pr = P.project(toy.id, cap=2, sample=3, device=torch.device("cpu"), limit=60, fast=True,
                   blocks=3)
    assert pr.sampled == len(spy) >= 2
    assert spy == [(rate, True, 3)] * len(spy)
    # the float32 model beside it: the same where nothing is declared, never faster
    if declared:
        assert pr.total.h100_fp32 >= pr.total.h100 > 0
    else:
        assert pr.total.h100_fp32 == pr.total.h100 > 0


def test_sampled_evaluations_price_like_full_ones():
    """A group whose logged full-data loss runs in 8 row blocks, measured with 2 blocks an
    evaluation: the same extrapolated flop and operations as measured with all 8, and the same
    pieces of the H100 model, its evaluations priced in full and its remainder not charged
    twice."""
    from lazylab.train import fit

    def call() -> None:
        g = torch.Generator().manual_seed(0)
        X = torch.randn(4096, 64, generator=g)
        net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                  torch.nn.Linear(256, 1))
        fit(net, data=(X, X[:, :1]), optimizer="sgd", batch_size=4096, lr=0.01, steps=50,
            log_steps=[0, 50], eval_rows=512, generator=torch.Generator().manual_seed(1))

    cpu = torch.device("cpu")
    full, _, _, words = P._measure_group(call, 2, 20, cpu, fast=True)
    part, _, _, part_words = P._measure_group(call, 2, 20, cpu, fast=True, blocks=2)
    assert part.flop == pytest.approx(full.flop, rel=1e-9)
    assert part.ops == pytest.approx(full.ops, rel=1e-9)
    # the model's pieces from counts (each loop, the evaluations, the remainder's operations,
    # flop and bytes) agree; only the remainder's host seconds are timed, hence not compared
    assert part_words.split("host")[0] == words.split("host")[0]
    assert "2 evaluations of " in words


@pytest.mark.parametrize("fast, calls", [(True, 1), (False, 2)])
def test_fast_runs_prepare_once(toy, monkeypatch, fast, calls):
    """``prepare`` (an Arora experiment's float64 eigendecompositions at n = 10^4: most of its
    measuring time) runs once under ``--fast``, counted; twice otherwise, timed and counted."""
    seen = []
    real = type(toy).prepare

    def prepare(self, p, device):
        seen.append(1)
        return real(self, p, device)

    monkeypatch.setattr(type(toy), "prepare", prepare)
    monkeypatch.setattr(P, "_timed", lambda call, cap, tcap, device, blocks=None: ([], (cap,)))
    pr = P.project(toy.id, cap=2, sample=1, device=torch.device("cpu"), limit=60, fast=fast)
    assert len(seen) == calls
    assert pr.fixed.wall >= 0 and pr.fixed.cpu >= 0


@pytest.mark.parametrize("overhead", [0.0, 1e-4])
def test_host_work_excludes_the_counters_own(monkeypatch, overhead):
    """A group with no training loop: 1000 counted operations, 1 ms inside them, 1 s of wall.
    Its host work is the wall outside operations less the counters' overhead for each counted
    operation (:func:`counter_overhead`), priced at the host speed-up."""
    monkeypatch.setattr(P, "_OVERHEAD", [overhead])
    # ops, flop, inside, decomp, bytes, wall, cpu, kernels
    reading = (1000.0, 0.0, 1e-3, 0.0, 0.0, 1.0, 1.0, 900.0)
    m = P.StepMeter(2, lambda: reading, begin=(0.0,) * 8, finish=reading)
    h100, words = P._h100([m, m])
    host = 1.0 - 1e-3 - 1000 * overhead
    assert h100 == pytest.approx(host / P.HOST_SPEEDUP, rel=1e-12)
    assert f"host {host:.2f} s here" in words


def test_a_group_without_a_loop_keeps_its_least_host_work(monkeypatch):
    """A group without a training loop whose host work bounds it on the model is counted up
    to HOST_REPEATS times when a run is short, and the run with the least host work is kept:
    the first run here burns 0.3 s of CPU outside any operation (as a first touch of fresh
    memory does), the later ones do not. Counting stops once the kept run is not host-bound,
    and a long run is counted once."""
    monkeypatch.setattr(P, "_OVERHEAD", [0.0])
    runs: list[int] = []

    def call() -> None:
        runs.append(1)
        torch.ones(64).sum()
        if len(runs) == 1:
            t = time.process_time()
            while time.process_time() - t < 0.3:
                pass

    def measure() -> P.Cost:
        runs.clear()
        c, loops, exact, _ = P._measure_group(call, 2, 2, torch.device("cpu"), fast=True)
        assert loops == 0 and exact
        return c

    monkeypatch.setattr(P, "host_bound", lambda m: True)
    c = measure()
    assert len(runs) == P.HOST_REPEATS and c.h100 < 0.1 / P.HOST_SPEEDUP  # not the 0.3 s run
    monkeypatch.setattr(P, "host_bound", lambda m: P.host_seconds(m) > 0.2)
    c = measure()
    assert len(runs) == 2 and c.h100 < 0.1 / P.HOST_SPEEDUP
    monkeypatch.setattr(P, "HOST_REPEAT_BELOW", 0.0)
    c = measure()
    assert len(runs) == 1 and c.h100 >= 0.3 / P.HOST_SPEEDUP


@pytest.mark.parametrize("ops, host, bound", [(1000, 0.1, True), (1000, 0.01, False),
                                              (10, 1e-3, True), (10, 1e-4, False)])
def test_host_bound_compares_host_work_with_the_launches(monkeypatch, ops, host, bound):
    """Host-bound on the model: host / HOST_SPEEDUP above ops x LAUNCH_SECONDS (no flop)."""
    monkeypatch.setattr(P, "_OVERHEAD", [0.0])
    reading = (float(ops), 0.0, 0.0, 0.0, 0.0, 1.0, host, float(ops))
    m = P.StepMeter(2, lambda: reading, begin=(0.0,) * 8, finish=reading)
    assert (host / P.HOST_SPEEDUP > ops * P.LAUNCH_SECONDS) == bound
    assert P.host_bound(m) == bound


def test_gpu_paths_count_the_one_chunk_pack(monkeypatch):
    """Under :func:`gpu_paths` a packed trainer steps its pack as one chunk on a CPU too (as on
    a GPU), its per-member sums one reduction per run of equal sizes (packed._SEGMENT_SUMS, as
    on a GPU): the operations counted are those of that step, fewer than the CPU's chunked
    step launches; the CPU's settings come back afterwards."""
    from lazylab.train import packed

    def ops() -> int:
        g = torch.Generator().manual_seed(0)
        W0 = [torch.randn(n, 4, generator=g) for n in (3, 5, 7)]

        def sampler(n, gen):
            X = torch.randn(n, 4, generator=gen)
            return X, X[:, 0] ** 2

        with P.OpCounter() as oc:
            packed.train_packed_quad(W0, [0.01] * 3, sampler=sampler, steps=5, batch_size=8,
                                     generator=torch.Generator().manual_seed(1))
        return oc.n

    from lazylab.train.nichani import gd

    monkeypatch.setattr(packed, "_CPU_CHUNK_ELEMENTS", 5 * 8)  # chunks [3], [5], [7]
    chunked = ops()
    cols = gd.CPU_COLUMNS
    with P.gpu_paths():
        one = ops()
        assert gd.CPU_COLUMNS is None  # Nichani's GD: every hidden unit at once
    assert packed._CPU_CHUNK_ELEMENTS == 5 * 8 and gd.CPU_COLUMNS == cols is not None
    assert packed._SEGMENT_SUMS is None
    monkeypatch.setattr(packed, "_CPU_CHUNK_ELEMENTS", 10**9)  # one chunk by size
    monkeypatch.setattr(packed, "_SEGMENT_SUMS", True)  # the GPU's per-member sums
    assert one == ops() < chunked


def test_span_holds_every_operation_and_its_counting():
    """The host term is the CPU time outside :class:`Span`, the first mode an operation meets:
    its time holds each operation's own (timed inside by :class:`OpCounter`) and the counting
    (nested intervals of one clock, so never less), and every operation is counted once."""
    a = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    with P.counters() as (oc, fc, span):
        for _ in range(50):
            a = torch.tanh(a @ a)
    assert oc.n == 100
    assert fc.get_total_flops() == 50 * 2 * 64**3
    assert span.seconds >= oc.cpu > 0


def test_eigvalsh_is_counted_without_vectors_as_it_runs():
    """Under the counters torch's eigvalsh asks for eigenvectors too (a dispatch mode hides
    whether a gradient is wanted); ``eigvalsh_as_run`` prices it as the uncounted run computes
    it, 4/3 n^3 flop, with the same eigenvalues, while eigh keeps its 9 n^3."""
    n = 60
    g = torch.Generator().manual_seed(0)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    A = A + A.T
    with P.eigvalsh_as_run():
        with P.OpCounter() as oc:
            ev = torch.linalg.eigvalsh(A)
        with P.OpCounter() as oc_v:
            torch.linalg.eigh(A)
    assert torch.allclose(ev, torch.linalg.eigvalsh(A), rtol=0, atol=1e-12)
    assert oc.decomp * P.DECOMP_FLOPS == pytest.approx(4 / 3 * n**3)
    assert oc_v.decomp * P.DECOMP_FLOPS == pytest.approx(9 * n**3)
    assert torch.linalg.eigvalsh.__module__ != P.__name__  # restored on leaving


def _meter(cap: int, replayed: bool, per_step: tuple[float, ...]) -> P.StepMeter:
    """A run of one loop of 1000 steps capped at ``cap``: readings ``per_step`` a step."""
    end = tuple(cap * x for x in per_step)
    m = P.StepMeter(cap, lambda: end, begin=(0.0,) * 8, finish=end)
    m.loops.append(P.Segment(1000, cap, (0.0,) * 8, end, replayed=replayed))
    return m


@pytest.mark.parametrize("replayed", [True, False])
@pytest.mark.parametrize("replay_seconds", [None, 2e-6])
def test_replayed_loops_launch_only_their_kernels(monkeypatch, replayed, replay_seconds):
    """A launch-bound loop of 50 operations a step, 30 of them kernels: eager it costs 50
    launches a step; replayed from a CUDA graph, 30 at REPLAY_SECONDS (``graphs``; by default
    an eager launch's price, or what ``--replay-us`` sets); a loop that does not replay is
    priced eagerly either way. Nothing outside the loop: no other term."""
    if replay_seconds is not None:
        monkeypatch.setattr(P, "REPLAY_SECONDS", replay_seconds)
    step = (50.0, 1e3, 0.0, 0.0, 1e3, 1e-4, 1e-4, 30.0)
    runs = [_meter(2, replayed, step), _meter(4, replayed, step)]
    eager = P._h100(runs)[0]
    graph, words = P._h100(runs, graphs=True)
    replay = replay_seconds or P.LAUNCH_SECONDS
    assert eager == pytest.approx(50 * P.LAUNCH_SECONDS * 1000, rel=1e-12)
    expect = 30 * replay if replayed else 50 * P.LAUNCH_SECONDS
    assert graph == pytest.approx(expect * 1000, rel=1e-12)
    assert ("30 kernels replayed" in words) == replayed


def test_a_memory_bound_loop_costs_its_bytes_replayed_or_not():
    """Replay removes launches, not memory traffic: a loop moving 1 GB a step costs
    1 GB / H100_BYTES_PER_S a step both ways."""
    step = (50.0, 1e3, 0.0, 0.0, 1e9, 1e-4, 1e-4, 30.0)
    runs = [_meter(2, True, step), _meter(4, True, step)]
    expect = 1e9 / P.H100_BYTES_PER_S * 1000
    assert P._h100(runs)[0] == pytest.approx(expect, rel=1e-12)
    assert P._h100(runs, graphs=True)[0] == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize("capture", [None, False])
def test_the_grid_and_packed_trainers_declare_their_replayed_loops(capture):
    """``train_grid`` and the packed trainers replay their steps from a CUDA graph where the
    device captures, unless told not to (``capture=False``); their loops say so to the meter
    (``Segment.replayed``), and the projection's graph model follows (its eager model not)."""
    from lazylab.models.mlp import MLP3
    from lazylab.train import packed
    from lazylab.train.ensemble import train_grid

    g = torch.Generator().manual_seed(0)
    X, Y = torch.randn(100, 6, generator=g), torch.randn(100, 2, generator=g)

    def grid() -> None:
        net = MLP3(6, 2, 8, generator=torch.Generator().manual_seed(1))
        train_grid(net, X, Y, lrs=[1e-3, 1e-2], wds=[0.0], epochs=800, capture=capture,
                   generator=torch.Generator().manual_seed(2))

    def pack() -> None:
        W0 = [torch.randn(n, 4, generator=torch.Generator().manual_seed(n)) for n in (3, 5)]

        def sampler(n, gen):
            x = torch.randn(n, 4, generator=gen)
            return x, x[:, 0] ** 2

        packed.train_packed_quad(W0, [0.01] * 2, sampler=sampler, steps=1000, batch_size=8,
                                 generator=torch.Generator().manual_seed(1), capture=capture)

    for call in (grid, pack):
        with P.capped(2) as m:
            call()
        assert [s.replayed for s in m.loops] == [capture is None]
        cost = P._measure_group(call, 2, 20, torch.device("cpu"), fast=True)[0]
        assert 0 < cost.kernels < cost.ops
        if capture is None:
            assert cost.h100_graph < cost.h100
        else:
            assert cost.h100_graph == cost.h100


def test_the_ratio_table_counts_a_gpus_operations(monkeypatch):
    """bench_paper_scale.measure counts a packed step's operations as a GPU launches them (one
    chunk), however a CPU chunks it; the ratio table's operations column is the GPU's."""
    import bench_paper_scale as bps
    from lazylab.train import packed

    g = torch.Generator().manual_seed(0)
    W0 = [torch.randn(n, 4, generator=g) for n in (3, 5, 7)]

    def sampler(n, gen):
        X = torch.randn(n, 4, generator=gen)
        return X, X[:, 0] ** 2

    def run(k: int) -> None:
        packed.train_packed_quad(W0, [0.01] * 3, sampler=sampler, steps=k, batch_size=8,
                                 generator=torch.Generator().manual_seed(1), check_every=0)

    dev = torch.device("cpu")
    monkeypatch.setattr(packed, "_CPU_CHUNK_ELEMENTS", 10**9)  # one chunk by size
    one = bps.measure(run, 3, dev, repeats=1)[0]
    monkeypatch.setattr(packed, "_CPU_CHUNK_ELEMENTS", 5 * 8)  # chunks [3], [5], [7]
    assert bps.measure(run, 3, dev, repeats=1)[0] == one
    with P.OpCounter() as oc:
        run(3)
    with P.OpCounter() as oc2:
        run(6)
    assert (oc2.n - oc.n) / 3 > one  # what the CPU itself dispatches
