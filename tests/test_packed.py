"""The block-diagonal packed trainer (lazylab.train.packed) against one-by-one training with
lazylab.train.fit: same initialization, same sample stream, float64."""

from __future__ import annotations

import math

import pytest
import torch

from lazylab.models import TwoLayerNet
from lazylab.train import TrainingDiverged, fit, ghorbani_paper, packed
from lazylab.train.packed import chunk_bounds, train_packed_quad

D, B, STEPS = 6, 16, 300


def sampler(n: int, gen: torch.Generator):
    X = torch.randn(n, D, generator=gen, dtype=torch.float64)
    return X, X[:, 0] ** 2 - 0.5 * X[:, 1] ** 2 + 0.5 + 0.1 * X[:, 2]


def one_by_one(W0, lr, *, train_second: bool, stream_seed: int):
    net = TwoLayerNet(D, len(W0), activation="quad", scaling="none", a_init="ones",
                      train_second=train_second, bias=True, dtype=torch.float64)
    with torch.no_grad():
        net.W.copy_(W0)
        if train_second:
            net.a.zero_()
    try:
        hist = fit(net, sampler=sampler, loss="mse", optimizer="one_pass", lr=lr, steps=STEPS,
                   batch_size=B, schedule=ghorbani_paper(STEPS, 40, 40), log_steps=[STEPS],
                   generator=torch.Generator().manual_seed(stream_seed))
    except TrainingDiverged:
        return None
    return net.W.detach(), (net.scale * net.a.detach()), float(net.c.detach()), hist.final_loss


@pytest.fixture(params=[None, 9, "sums"], ids=["one-chunk", "chunks-of-9-units", "segment-sums"])
def chunked(request, monkeypatch):
    """The pack stepped whole, or in chunks of at most 9 hidden units (widths 2, 5, 9, 5,
    the 9 trained as D = 6 units (lazylab.train.rowspace) where the second layer is fixed:
    chunks [2, 5], [6 or 9], [5], after the divergence [2, 5], [6 or 9]; NT's 3, 6, 4:
    [3, 6], [4]), or whole with the per-member sums a GPU takes (packed._SEGMENT_SUMS: one
    reduction per run of equal sizes, here runs of one member, and of three in the NaN test)."""
    if request.param == "sums":
        monkeypatch.setattr(packed, "_SEGMENT_SUMS", True)
    elif request.param is not None:
        monkeypatch.setattr(packed, "_CPU_CHUNK_ELEMENTS", request.param * B)
    return request.param


def test_chunk_bounds_keep_members_whole():
    assert chunk_bounds([2, 5, 9, 5], 8) == [(0, 2), (2, 3), (3, 4)]
    assert chunk_bounds([2, 5, 9, 5], None) == [(0, 4)]
    assert chunk_bounds([4, 4, 4], 8) == [(0, 2), (2, 3)]


@pytest.mark.parametrize("train_second", [False, True])
def test_packed_equals_one_by_one(train_second, chunked):
    g = torch.Generator().manual_seed(3)
    widths = [2, 5, 9, 5]
    lrs = [0.01, 0.02, 0.01, 50.0]  # the last one diverges
    W0 = [0.3 * torch.randn(n, D, generator=g, dtype=torch.float64) / math.sqrt(D)
          for n in widths]
    a0 = [torch.zeros(n, dtype=torch.float64) for n in widths] if train_second else None
    res = train_packed_quad(W0, lrs, sampler=sampler, steps=STEPS, batch_size=B,
                            generator=torch.Generator().manual_seed(7),
                            schedule=ghorbani_paper(STEPS, 40, 40), a0=a0,
                            train_second=train_second)
    for j, (w, lr) in enumerate(zip(W0, lrs, strict=True)):
        ref = one_by_one(w, lr, train_second=train_second, stream_seed=7)
        if ref is None:
            assert bool(res.diverged[j]) and math.isnan(float(res.final_loss[j]))
            continue
        assert not bool(res.diverged[j])
        Wr, ar, cr, lossr = ref
        torch.testing.assert_close(res.W[j], Wr, rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(res.a[j], ar, rtol=1e-9, atol=1e-12)
        assert float(res.c[j]) == pytest.approx(cr, rel=1e-9, abs=1e-12)
        assert float(res.final_loss[j]) == pytest.approx(lossr, rel=1e-9)
    assert bool(res.diverged[3])  # the test would be vacuous without a diverged member


def test_a_nan_stays_in_its_block(chunked):
    g = torch.Generator().manual_seed(0)
    W0 = [0.1 * torch.randn(3, D, generator=g, dtype=torch.float64) for _ in range(3)]
    W0[1][0, 0] = float("nan")
    alone = train_packed_quad([W0[0], W0[2]], [0.01, 0.01], sampler=sampler, steps=50,
                              batch_size=B, generator=torch.Generator().manual_seed(1))
    res = train_packed_quad(W0, [0.01] * 3, sampler=sampler, steps=50, batch_size=B,
                            generator=torch.Generator().manual_seed(1))
    assert res.diverged.tolist() == [False, True, False]
    torch.testing.assert_close(res.W[0], alone.W[0], rtol=1e-12, atol=0)
    torch.testing.assert_close(res.W[2], alone.W[1], rtol=1e-12, atol=0)


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-width", "ghorbani-mg-width"])
def test_ghorbani_nn_group_matches_its_members_alone(exp_id):
    """A width trained in the packed grid and alone (same init, same stream): float32 SGD
    rounding over 400 steps moves the risk by far less than 1e-4 of it."""
    from lazylab.experiments import get_experiment

    exp = get_experiment(exp_id)
    p = exp.resolve("quick", {"d": 8, "sgd_steps": 400, "n_widths": 3, "test_samples": 200,
                              "lr_factors": [0.5, 1.0, 2.0]})
    members = [({"method": "NN", "N": N}, 1000 + N) for N in exp.widths(p)]
    together = exp.run_group(p, members, 77, torch.device("cpu"))
    assert len(together) == len(members) >= 3
    for m, rows in zip(members, together, strict=True):
        alone = exp.run_group(p, [m], 77, torch.device("cpu"))[0]
        got = {r["metric"]: r["value"] for r in rows}
        ref = {r["metric"]: r["value"] for r in alone}
        assert got.keys() == ref.keys() and {"risk", "test_risk", "train_loss", "lr"} <= set(got)
        assert got["lr"] == ref["lr"]
        for k in ("risk", "test_risk", "train_loss"):
            assert got[k] == pytest.approx(ref[k], rel=1e-4), (m, k)


def _nt_one_by_one(W0, lr, log, stream_seed: int):
    """The NT model trained by fit: a LinearizedModel of the quadratic net at W0."""
    from lazylab.models import LinearizedModel

    net = TwoLayerNet(D, len(W0), activation="quad", scaling="none", a_init="ones", bias=True,
                      dtype=torch.float64)
    with torch.no_grad():
        net.W.copy_(W0)
    lin = LinearizedModel(net, include_f0=False, wrt=("W", "c"))
    try:
        hist = fit(lin, sampler=sampler, loss="mse", optimizer="one_pass", lr=lr, steps=STEPS,
                   batch_size=B, schedule=ghorbani_paper(STEPS, 40, 40), log_steps=log,
                   eval_fn=lambda _m: {"norm": float(lin.direction["W"].norm())},
                   generator=torch.Generator().manual_seed(stream_seed))
    except TrainingDiverged:
        return None
    return lin.direction["W"].detach(), float(lin.direction["c"].detach()), hist


def test_packed_nt_equals_linearized_fit_with_its_log(chunked):
    """The NT pack equals fit on LinearizedModel(wrt W, c), member by member, float64: final
    parameters, and at every logged step the batch loss and an evaluation of the parameters
    (before that step's update, as fit logs them)."""
    from lazylab.train.packed import train_packed_nt

    g = torch.Generator().manual_seed(5)
    widths, lrs = [3, 6, 4], [0.002, 0.004, 80.0]  # the last one diverges
    W0 = [torch.randn(n, D, generator=g, dtype=torch.float64) / math.sqrt(D) for n in widths]
    log = [0, 1, 7, 60, 200, STEPS]
    res = train_packed_nt(W0, lrs, sampler=sampler, steps=STEPS, batch_size=B,
                          generator=torch.Generator().manual_seed(9),
                          schedule=ghorbani_paper(STEPS, 40, 40), log_steps=log,
                          eval_fn=lambda j, prm: float(prm[1].norm()))
    assert res.log_steps == log and res.log_loss is not None and res.log_eval is not None
    for j, (w, lr) in enumerate(zip(W0, lrs, strict=True)):
        ref = _nt_one_by_one(w, lr, log, stream_seed=9)
        if ref is None:
            assert bool(res.diverged[j])
            continue
        U, c, hist = ref
        assert not bool(res.diverged[j])
        torch.testing.assert_close(res.U[j], U, rtol=1e-9, atol=1e-12)
        assert float(res.c[j]) == pytest.approx(c, rel=1e-9, abs=1e-12)
        assert hist.steps == log
        torch.testing.assert_close(res.log_loss[j], torch.tensor(hist.train_loss,
                                   dtype=torch.float64), rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(res.log_eval[j], torch.tensor(
            [e["norm"] for e in hist.evals], dtype=torch.float64), rtol=1e-9, atol=1e-12)
    assert bool(res.diverged[2])


def test_packed_quad_log_equals_fit_log(chunked):
    """The NN pack's logged batch losses and evaluations equal fit's History, float64."""
    g = torch.Generator().manual_seed(4)
    W0 = [0.3 * torch.randn(n, D, generator=g, dtype=torch.float64) / math.sqrt(D)
          for n in (4, 7)]
    log = [0, 3, 50, 151, STEPS]
    res = train_packed_quad(W0, [0.01, 0.02], sampler=sampler, steps=STEPS, batch_size=B,
                            generator=torch.Generator().manual_seed(2),
                            schedule=ghorbani_paper(STEPS, 40, 40), log_steps=log,
                            eval_fn=lambda j, prm: float((prm[0] * prm[1][:, None]).sum()))
    for j, w in enumerate(W0):
        net = TwoLayerNet(D, len(w), activation="quad", scaling="none", a_init="ones",
                          bias=True, dtype=torch.float64)
        with torch.no_grad():
            net.W.copy_(w)
        hist = fit(net, sampler=sampler, loss="mse", optimizer="one_pass", lr=[0.01, 0.02][j],
                   steps=STEPS, batch_size=B, schedule=ghorbani_paper(STEPS, 40, 40),
                   log_steps=log, generator=torch.Generator().manual_seed(2),
                   eval_fn=lambda m: {"s": float((m.W * m.a[:, None]).sum())})
        torch.testing.assert_close(res.log_loss[j], torch.tensor(hist.train_loss,
                                   dtype=torch.float64), rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(res.log_eval[j], torch.tensor(
            [e["s"] for e in hist.evals], dtype=torch.float64), rtol=1e-9, atol=1e-12)


def _second_step_ops(kind: str, widths: list[int]) -> list[str]:
    """The aten operations a pack of members of these widths dispatches in its second step
    (the first makes the per-batch constants), one chunk."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    cls = {"NN": packed._QuadPack, "NN-both": packed._QuadPackBoth, "NT": packed._NTPack}[kind]
    G = len(widths)
    g = torch.Generator().manual_seed(G)
    first = [torch.randn(n, D, generator=g, dtype=torch.float64) for n in widths]
    second = ([torch.ones(n, dtype=torch.float64) for n in widths] if kind != "NT"
              else [torch.zeros_like(w) for w in first])
    pack = cls(first, second, torch.zeros(G, dtype=torch.float64),
               torch.full((G,), 0.01, dtype=torch.float64), list(range(G)), None)
    X, y = sampler(B, g)
    mult = torch.ones((), dtype=torch.float64)
    pack.step(X, y, mult)
    with Ops() as ops:
        pack.step(X, y, mult)
    return ops.names


@pytest.mark.parametrize("kind", ["NN", "NN-both", "NT"])
def test_a_packed_step_dispatches_the_same_few_operations_for_any_number_of_members(kind):
    """One chunk: a step's operations do not grow with the members (2 or 7), and after the
    first step (which makes the per-batch constants) an NN step is 14 operations: two GEMMs,
    the per-member sums and the elementwise work, no view of the parameters (a GPU pays each
    operation eagerly)."""
    counts = [len(_second_step_ops(kind, [3 + j for j in range(G)])) for G in (2, 7)]
    assert counts[0] == counts[1]
    assert counts[0] <= {"NN": 14, "NN-both": 18, "NT": 15}[kind], counts


@pytest.mark.parametrize("kind", ["NN", "NN-both", "NT"])
def test_segment_sums_dispatch_no_index_add_and_one_reduction_per_run(kind, monkeypatch):
    """The GPU's per-member sums (packed._SEGMENT_SUMS): no index_add (CUDA's deterministic one
    sorts and adds each member's rows serially) and one sum per run of equal sizes, whatever
    the members: widths 3, 3, 3, 5, 5 make two runs, as do 3, 5."""
    monkeypatch.setattr(packed, "_SEGMENT_SUMS", True)
    for widths in ([3, 3, 3, 5, 5], [3, 5]):
        names = _second_step_ops(kind, widths)
        assert not [n for n in names if "index_add" in n or "index_put" in n], names
        assert sum(n.startswith("sum.") for n in names) == 2 + (kind == "NN-both"), names


@pytest.mark.parametrize("kind", ["nn", "nt"])
def test_packed_rows_are_aligned_and_train_as_contiguous_rows(kind, monkeypatch):
    """The pack's (P, d) matrices start every row on a 64-byte line (packed._ROW_ALIGN: d = 6
    is stored 16 apart), and train as contiguous rows do, to rounding."""
    g = torch.Generator().manual_seed(5)
    W0 = [0.3 * torch.randn(n, D, generator=g, dtype=torch.float64) / math.sqrt(D)
          for n in (2, 5, 9)]
    kinds = {"nn": packed._QuadPackBoth, "nt": packed._NTPack}
    pack = kinds[kind](W0, [w.clone() if kind == "nt" else w[:, 0].clone() for w in W0],
                       torch.zeros(3, dtype=torch.float64), torch.ones(3), [0, 1, 2])
    assert pack.first.stride() == (16, 1) and torch.equal(pack.first, torch.cat(W0))
    assert pack.second.stride() == ((16, 1) if kind == "nt" else (1,))

    def run():
        if kind == "nt":
            return packed.train_packed_nt(W0, [0.01] * 3, sampler=sampler, steps=100,
                                          batch_size=B, generator=torch.Generator().manual_seed(2))
        return train_packed_quad(W0, [0.01] * 3, sampler=sampler, steps=100, batch_size=B,
                                 train_second=True, generator=torch.Generator().manual_seed(2),
                                 a0=[torch.zeros(len(w), dtype=torch.float64) for w in W0])
    aligned = run()
    monkeypatch.setattr(packed, "_ROW_ALIGN", None)
    plain = run()
    for a, b in zip(aligned.W + aligned.a, plain.W + plain.a, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
