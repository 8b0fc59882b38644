"""The momentum update operator (:mod:`lazylab.train.fused_update`): the formula, its two
implementations (two in-place operations; the Triton kernel, run here in Triton's CPU
interpreter), its validation, and what the projection's operation counter sees."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lazylab.train import fused_update as fu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _projection as P  # noqa: E402


def _inputs(G: int, T: int, dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    theta, buf = (torch.randn(G, T, generator=g, dtype=dtype) for _ in range(2))
    return [theta, buf, torch.rand(G, 1, generator=g, dtype=dtype) * 0.1,
            torch.rand(G, 1, generator=g, dtype=dtype)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_operator_is_the_two_operations_bit_for_bit(dtype):
    theta, buf, wd, lr = _inputs(4, 333, dtype)
    t2, b2 = theta.clone(), buf.clone()
    b2.addcmul_(t2, wd)
    t2.addcmul_(b2, lr, value=-1.0)
    fu.momentum_update_(theta, buf, wd, lr)
    assert torch.equal(theta, t2) and torch.equal(buf, b2)


def test_operator_is_torch_sgd_after_the_deposit():
    """b = mu b + g deposited first, then the operator: torch.optim.SGD's step, per row."""
    theta, buf, wd, lr = _inputs(3, 50, torch.float64, seed=1)
    grad, mu = torch.randn(3, 50, dtype=torch.float64), 0.9
    ref = []
    for r in range(3):
        p = torch.nn.Parameter(theta[r].clone())
        opt = torch.optim.SGD([p], lr=float(lr[r]), momentum=mu, weight_decay=float(wd[r]))
        opt.state[p]["momentum_buffer"] = buf[r].clone()
        p.grad = grad[r].clone()
        opt.step()
        ref.append(p.detach())
    buf.mul_(mu).add_(grad)
    fu.momentum_update_(theta, buf, wd, lr)
    assert (theta - torch.stack(ref)).abs().max().item() < 1e-12


@pytest.mark.parametrize("shapes, word", [
    (((3, 4), (3, 5), (3, 1), (3, 1)), "theta and buf"),
    (((3, 4), (3, 4), (3,), (3, 1)), "wd and lr"),
    (((3, 4), (3, 4), (3, 1), (2, 1)), "wd and lr"),
    (((3, 4), (3, 4), (3, 1), (3, 1), "meta"), "one device"),
    (((4,), (4,), (1,), (1,)), "theta and buf"),
])
def test_bad_shapes_name_the_argument(shapes, word):
    args = [torch.zeros(s) for s in shapes[:4]]
    if len(shapes) > 4:  # the last column on another device
        args[3] = torch.zeros(shapes[3], device=shapes[4])
    with pytest.raises(ValueError, match=word):
        fu.momentum_update_(*args)


def test_no_fused_kernel_on_a_cpu_or_when_switched_off(monkeypatch):
    assert fu.fused_works("cpu") is False
    monkeypatch.setenv(fu.ENV, "0")
    fu.fused_works.cache_clear()
    try:
        assert fu.fused_works("cuda:0") is False
    finally:
        fu.fused_works.cache_clear()


def test_counter_sees_one_kernel_reading_and_writing_theta_and_buf():
    """What the H100 model prices: one kernel, four passes over (G, T) floats (plus the two
    columns), against two kernels and six passes for the two operations."""
    G, T = 6, 1000
    theta, buf, wd, lr = _inputs(G, T, torch.float32)
    big, cols = G * T * 4, 2 * G * 4
    with P.OpCounter() as oc:
        fu.momentum_update_(theta, buf, wd, lr)
    assert (oc.kernels, oc.bytes) == (1, 4 * big + cols)
    with P.OpCounter() as two:
        buf.addcmul_(theta, wd)
        theta.addcmul_(buf, lr, value=-1.0)
    assert (two.kernels, two.bytes) == (2, 6 * big + cols)


_INTERPRETED = """
import json, torch
from lazylab.train import fused_update as fu
out = {}
for G, T in ((3, 2500), (1, 7), (2, 1024)):
    g = torch.Generator().manual_seed(G * T)
    flat = torch.randn(2, G * T + 16, generator=g)  # a tail after each tensor: never written
    theta, buf = flat[0, :G * T].view(G, T), flat[1, :G * T].view(G, T)
    wd, lr = torch.rand(G, 1, generator=g) * 0.1, torch.rand(G, 1, generator=g)
    ref_t, ref_b, tail = theta.clone(), buf.clone(), flat[:, G * T:].clone()
    fu._two_ops(ref_t, ref_b, wd, lr)
    fu.triton_launcher()(theta, buf, wd, lr)
    ulp = torch.finfo(torch.float32).eps
    out[f"{G}x{T}"] = [((theta - ref_t).abs() / (1 + ref_t.abs())).max().item() / ulp,
                       ((buf - ref_b).abs() / (1 + ref_b.abs())).max().item() / ulp,
                       torch.equal(flat[:, G * T:], tail)]
print(json.dumps(out))
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_triton_kernel_in_the_interpreter_matches_the_two_operations():
    """Every row with its own lr and wd, a last block cut short by the mask, nothing written
    past the tensors; within 4 units in the last place (the probe's tolerance: a GPU may fuse
    a multiply-add where the CPU rounds twice)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    res = subprocess.run([sys.executable, "-c", _INTERPRETED], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(out) == {"3x2500", "1x7", "2x1024"}
    for ulps_theta, ulps_buf, tail_kept in out.values():
        assert ulps_theta <= 4 and ulps_buf <= 4 and tail_kept


def test_bench_refuses_bad_sizes_with_one_line():
    bench = Path(__file__).resolve().parents[1] / "bench" / "bench_fused_update.py"
    res = subprocess.run([sys.executable, str(bench), "--G", "0"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2
    assert "--G, --T and --reps must be at least 1" in res.stderr
    assert "Traceback" not in res.stderr


def test_cuda_kernel_takes_the_fused_path_only_where_it_can(monkeypatch):
    """The CUDA implementation's conditions, checked with CPU tensors: the probe passed, both
    tensors contiguous and of one dtype, at most MAX_ROWS rows; otherwise the two operations
    (and the same numbers)."""
    calls: list[str] = []
    monkeypatch.setattr(fu, "fused_works", lambda device, dtype=torch.float32: True)
    monkeypatch.setattr(fu, "triton_launcher",
                        lambda: lambda *a: (calls.append("fused"), fu._two_ops(*a)))
    theta, buf, wd, lr = _inputs(4, 64, torch.float32)
    fu._cuda(theta, buf, wd, lr)
    fu._cuda(theta.t().contiguous().t(), buf, wd, lr)  # a transposed layout: not contiguous
    fu._cuda(theta, buf.double(), wd, lr)
    assert calls == ["fused"]
    monkeypatch.setattr(fu, "MAX_ROWS", 3)
    fu._cuda(theta, buf, wd, lr)
    monkeypatch.setattr(fu, "fused_works", lambda device, dtype=torch.float32: False)
    monkeypatch.setattr(fu, "MAX_ROWS", 65_535)
    fu._cuda(theta, buf, wd, lr)
    assert calls == ["fused"]


def test_other_backends_run_the_two_operations():
    """Meta tensors (shapes only) go through the same default as the CPU: no backend is left
    without an implementation."""
    theta, buf = torch.empty(3, 5, device="meta"), torch.empty(3, 5, device="meta")
    fu.momentum_update_(theta, buf, torch.empty(3, 1, device="meta"),
                        torch.empty(3, 1, device="meta"))
    assert theta.shape == (3, 5) and buf.device.type == "meta"
