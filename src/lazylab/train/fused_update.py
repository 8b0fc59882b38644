"""The rest of a momentum-SGD step over stacked parameters, as one operator.

For G configurations stacked as (G, T) parameters ``theta`` and momentum buffer ``b`` (the
step's gradient already in the buffer, ``b = mu b + g``), what remains of one step of
``torch.optim.SGD`` with weight decay ``wd`` and learning rate ``lr`` (one per configuration,
(G, 1) columns) is

.. math::

    b \\leftarrow b + \\mathrm{wd}\\,\\theta, \\qquad
    \\theta \\leftarrow \\theta - \\mathrm{lr}\\, b .

As two in-place operations that is six passes over (G, T) floats: each reads two tensors and
writes one. A kernel that reads ``theta`` and ``b`` once and writes both makes four. On a CUDA
device with Triton that kernel runs; on a CPU, without Triton, with ``LAZYLAB_FUSED_UPDATE=0``,
or where the device's probe failed (:func:`fused_works`: it must agree with the two operations
and not be slower), the two operations run. Either way the call is one operator,
``torch.ops.lazylab.momentum_update_``, so an operation counter sees what a GPU launches: one
kernel that reads and writes ``theta`` and ``b``.

>>> import torch
>>> theta, b = torch.ones(2, 3), torch.full((2, 3), 0.5)
>>> momentum_update_(theta, b, torch.tensor([[0.0], [1.0]]), torch.tensor([[0.1], [0.1]]))
>>> b[:, 0].tolist(), theta[:, 0].tolist()
([0.5, 1.5], [0.949999988079071, 0.8500000238418579])
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import cache

import torch

#: Environment switch: "0" keeps the two operations on every device.
ENV = "LAZYLAB_FUSED_UPDATE"
#: Elements per Triton program.
BLOCK = 1024
#: Rows (configurations) the kernel takes: a CUDA grid's second dimension.
MAX_ROWS = 65_535

_LIB = torch.library.Library("lazylab", "DEF")
_LIB.define("momentum_update_(Tensor(a!) theta, Tensor(b!) buf, Tensor wd, Tensor lr) -> ()")


def _two_ops(theta: torch.Tensor, buf: torch.Tensor, wd: torch.Tensor,
             lr: torch.Tensor) -> None:
    buf.addcmul_(theta, wd)
    theta.addcmul_(buf, lr, value=-1.0)


def _check(theta: torch.Tensor, buf: torch.Tensor, wd: torch.Tensor, lr: torch.Tensor) -> None:
    if theta.dim() != 2 or buf.shape != theta.shape:
        raise ValueError(f"theta and buf must be (G, T) of one shape; got {tuple(theta.shape)} "
                         f"and {tuple(buf.shape)}")
    G = theta.shape[0]
    if wd.shape != (G, 1) or lr.shape != (G, 1):
        raise ValueError(f"wd and lr must be ({G}, 1) columns; got {tuple(wd.shape)} and "
                         f"{tuple(lr.shape)}")
    devices = {t.device for t in (theta, buf, wd, lr)}
    if len(devices) > 1:
        raise ValueError("theta, buf, wd and lr must be on one device; got "
                         f"{sorted(map(str, devices))}")


def momentum_update_(theta: torch.Tensor, buf: torch.Tensor, wd: torch.Tensor,
                     lr: torch.Tensor) -> None:
    """In place: ``buf += wd * theta``, then ``theta -= lr * buf`` (module docstring).

    ``theta`` and ``buf`` are (G, T) tensors of one dtype and device, ``wd`` and ``lr`` (G, 1)
    columns: configuration g's weight decay and learning rate."""
    _check(theta, buf, wd, lr)
    torch.ops.lazylab.momentum_update_(theta, buf, wd, lr)


def _cuda(theta: torch.Tensor, buf: torch.Tensor, wd: torch.Tensor, lr: torch.Tensor) -> None:
    if (theta.is_contiguous() and buf.is_contiguous() and theta.dtype == buf.dtype
            and theta.shape[0] <= MAX_ROWS and fused_works(str(theta.device), theta.dtype)):
        triton_launcher()(theta, buf, wd, lr)
    else:
        _two_ops(theta, buf, wd, lr)


# the two operations on every backend (CPU, Meta, ...) but CUDA's own; registered below the
# Python dispatch key, so that a dispatch mode sees one operator
_LIB.impl("momentum_update_", _two_ops, "CompositeExplicitAutograd")
_LIB.impl("momentum_update_", _cuda, "CUDA")


@cache
def triton_launcher() -> Callable[..., None]:
    """``launch(theta, buf, wd, lr)``: the fused kernel over contiguous (G, T) ``theta`` and
    ``buf``, one program per block of ``BLOCK`` columns and row (a CUDA grid's second axis
    holds at most :data:`MAX_ROWS` rows). Raises ImportError without Triton. Under
    ``TRITON_INTERPRET=1`` it runs on CPU tensors (how the tests check it)."""
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[untyped-decorator]
    def kernel(theta, buf, wd, lr, T, BLOCK: tl.constexpr):
        row = tl.program_id(1)
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < T
        at = row.to(tl.int64) * T + cols  # int64: G x T may pass 2^31
        w = tl.load(wd + row)
        a = tl.load(lr + row)
        th = tl.load(theta + at, mask=mask)
        b = tl.load(buf + at, mask=mask) + th * w
        tl.store(buf + at, b, mask=mask)
        tl.store(theta + at, th - b * a, mask=mask)

    def launch(theta: torch.Tensor, buf: torch.Tensor, wd: torch.Tensor,
               lr: torch.Tensor) -> None:
        G, T = theta.shape
        kernel[(triton.cdiv(T, BLOCK), G)](theta, buf, wd.to(theta.dtype).contiguous(),
                                           lr.to(theta.dtype).contiguous(), T, BLOCK=BLOCK)

    return launch


def _probe_inputs(G: int, T: int, device: torch.device, dtype: torch.dtype
                  ) -> list[torch.Tensor]:
    g = torch.Generator(device=device).manual_seed(0)
    theta, buf = (torch.randn(G, T, generator=g, device=device, dtype=dtype) for _ in range(2))
    wd = torch.rand(G, 1, generator=g, device=device, dtype=dtype) * 1e-2
    lr = torch.rand(G, 1, generator=g, device=device, dtype=dtype)
    return [theta, buf, wd, lr]


def _seconds(fn: Callable[..., None], args: list[torch.Tensor], reps: int = 5) -> float:
    best = float("inf")
    for _ in range(reps):
        torch.cuda.synchronize(args[0].device)
        t0 = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize(args[0].device)
        best = min(best, time.perf_counter() - t0)
    return best


@cache
def fused_works(device: str, dtype: torch.dtype = torch.float32) -> bool:
    """The once-per-device probe: on (5, 3001) random inputs the fused kernel matches the two
    operations to 4 units in the last place of the result's scale, and on (16, 2^19) it is not
    slower than them. False on a CPU, without Triton, with ``LAZYLAB_FUSED_UPDATE=0``, or on
    any failure."""
    dev = torch.device(device)
    if os.environ.get(ENV, "1").strip() == "0" or dev.type != "cuda":
        return False
    try:
        launch = triton_launcher()
        ref, got = _probe_inputs(5, 3001, dev, dtype), _probe_inputs(5, 3001, dev, dtype)
        _two_ops(*ref)
        launch(*got)
        eps = torch.finfo(dtype).eps
        ok = all(bool(((a - b).abs() <= 4 * eps * (1 + a.abs())).all())
                 for a, b in zip(ref[:2], got[:2], strict=True))
        big = _probe_inputs(16, 1 << 19, dev, dtype)
        launch(*big)  # compiled and warm
        _two_ops(*big)
        return ok and _seconds(launch, big) <= _seconds(_two_ops, big)
    except Exception:  # noqa: BLE001 - any failure means: the two operations
        return False
