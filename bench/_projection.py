"""Projected paper-scale cost of one experiment, from capped runs of a sample of its groups.

Used by ``bench_paper_scale.py``. For an experiment at ``--scale paper`` parameters and its paper
seed count, the runner's groups are planned (:func:`lazylab.runner.spec.plan_groups`); ``prepare``
and ``theory`` run once, uncapped. The groups are split into strata of groups alike (a batched
group's label; for single units the method and other non-numeric keys), and in each a few seed-0
groups, evenly spaced in size (:func:`size_key`: the experiment's unit cost model, or the numeric
key of widest range, e.g. N), run with every training loop capped (:mod:`lazylab.train.meter`) at
``cap`` and ``2 cap`` steps under an operation and a flop counter, and timed at the same caps (or at
``tcap`` and ``2 tcap`` steps where the extra steps take under :data:`MIN_TIMED` seconds). Each
group's uncapped cost is extrapolated loop by loop (:func:`lazylab.train.meter.extrapolate`); every
group of a stratum then costs the log-log interpolation of the measured ones at its size, and the
experiment

    prepare + theory + sum over the groups.

Alongside the time on the device at hand, a one-H100 model: every piece (each training loop, and
the remainder of each group) costs

    max(operations x LAUNCH_SECONDS,
        max(flop / H100_FLOPS, bytes / H100_BYTES_PER_S) + decompositions,
        host / HOST_SPEEDUP),

a piece being bound by its kernel launches, its GPU arithmetic or its host work, whichever is
slowest (a GPU runs asynchronously beside the host). Beside it, ``h100_graph``: the same with
each training loop that replays from a CUDA graph where the device captures
(``loop_steps(replayed=True)``: the grid and packed trainers) launching only its kernels
(views launch nothing in a graph, and the host is out of the loop), each priced at
REPLAY_SECONDS (by default an eager launch's LAUNCH_SECONDS; an assumption until a device
measures replay, ``bench/bench_replay.py``).

``host`` is the CPU time here outside torch operations (Python, numpy, SciPy): the process's CPU
seconds minus those inside aten operations and their counting (:class:`Span`), minus the
dispatch into the counters (:func:`counter_overhead` a counted operation). With
``--keep-freed-memory`` the C allocator keeps freed memory
(:func:`lazylab.machine.keep_freed_memory`), so that a CPU's ``munmap`` of large tensors, which
a GPU's caching allocator never pays, is not host work. ``bytes`` are the bytes the operations
read and write (a view moves none; an input counts at most its storage, so a broadcast operand
counts once; an operator that returns nothing, such as ``lazylab::momentum_update_``, writes the
arguments its schema marks mutable): the arithmetic and the memory traffic form a roofline.
``decompositions`` prices the factorizations and solves of :data:`DECOMPOSITIONS` (eigh, SVD,
Cholesky, LU, least squares), which the flop counter does not count: each costs the smaller of
its time here at the host's assumed speed-up and its textbook flop (:func:`decomposition_flop`,
e.g. 9 n^3 for eigh with vectors) at :data:`DECOMP_FLOPS`, assumptions the measured rows check
(a small one is latency- and host-bound, a large one runs at a fraction of GEMM speed on the
device). Flop are counted by ``torch.utils.flop_counter`` with the in-place and vector products
it lacks added (:data:`EXTRA_FLOPS`: ``addmm_``, ``addbmm``, ``addmv``, ``mv``, ``dot``).
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from lazylab.experiments import get_experiment
from lazylab.runner.params import coerce
from lazylab.runner.spec import RunSpec, WorkGroup, plan_groups
from lazylab.train.meter import Segment, StepMeter, capped, extrapolate, per_evaluation, per_step

#: float32 GEMM throughput of an H100 80GB HBM3 (8192^3, TF32 off), flop/s, as measured there.
H100_FLOPS = 51.5e12
#: TF32 GEMM throughput assumed for the experiments whose paper scale declares TF32
#: (``Experiment.precision``): 4x the measured float32 rate, about 40% of the H100 SXM's
#: dense TF32 peak in NVIDIA's datasheet (494.7 TFLOP/s). Not measured: a lent device's
#: ``bench_paper_scale.py --device cuda`` prints the real rate (``gemm_flops_per_second``).
H100_TF32_FLOPS = 4 * H100_FLOPS
#: Memory bandwidth assumed for the H100 (HBM3: 3.35 TB/s in NVIDIA's datasheet, about 90%
#: of it reached by a streaming kernel). Not measured on the lent card.
H100_BYTES_PER_S = 3.0e12
#: Memory of the lent H100 (about 78 GiB usable of its 80 GiB), for sizing blocks as there.
H100_MEMORY_BYTES = 80 * 2**30
#: Seconds per launched operation of eager PyTorch on the H100: a 39-operation Ghorbani SGD
#: step took 100-300 us there, 2.5-7.7 us an operation; the middle of that range.
LAUNCH_SECONDS = 5e-6
#: Seconds per kernel of a training step replayed from a CUDA graph (``h100_graph``): not
#: measured on any device yet, so an eager launch's price, an upper bound (nothing is
#: dispatched from the host in a replay); ``bench_paper_scale.py --replay-us`` sets it.
REPLAY_SECONDS = LAUNCH_SECONDS
#: The GPU machine's host (16 cores) against one thread here, for numpy and LAPACK work: an
#: assumption, checked only through the measured rows (bench_paper_scale.py prints them).
#: A projection run on a CUDA device measures that machine's own host: 1 there
#: (:func:`price_host_for`).
HOST_SPEEDUP = 4.0


def price_host_for(device: torch.device) -> float:
    """Set and return the host speed-up for a projection on ``device``: host work measured on
    a CUDA machine is already the GPU host's, so it is priced as measured."""
    global HOST_SPEEDUP
    HOST_SPEEDUP = 1.0 if device.type == "cuda" else 4.0
    return HOST_SPEEDUP
#: flop/s assumed for a large dense decomposition on the H100 (cuSOLVER, float64): about 4%
#: of the float64 GEMM rate measured there (56 TFLOP/s), a tridiagonalisation being half
#: matrix-vector work. Not measured on the lent card; checked through arora-spectrum's row.
DECOMP_FLOPS = 2.0e12
#: Seconds a loop's extra steps must take for their timing to be trusted over timer jitter.
MIN_TIMED = 0.2
#: Counted runs of a group without a training loop whose host work bounds it on the model,
#: the least host work kept (:func:`_least_host`), where one run takes under
#: HOST_REPEAT_BELOW seconds here (three such runs stay well inside a piece's --limit).
HOST_REPEATS = 3
HOST_REPEAT_BELOW = 60.0


#: aten operations (overload packets) that factorize or solve: no flop formula, and far from
#: GEMM speed on any device; the model prices their time here like host work.
DECOMPOSITIONS = frozenset({
    "_linalg_eigh", "linalg_eigh", "linalg_eigvalsh", "_linalg_eigvals", "linalg_eig",
    "_linalg_svd", "linalg_svd", "linalg_svdvals", "linalg_cholesky_ex", "cholesky",
    "cholesky_solve", "_cholesky_solve_helper", "cholesky_inverse", "linalg_solve_ex",
    "_linalg_solve_ex", "linalg_lstsq", "linalg_lu_factor_ex", "linalg_lu", "linalg_lu_solve",
    "lu_unpack", "linalg_solve_triangular", "triangular_solve", "linalg_qr", "geqrf",
    "ormqr", "linalg_householder_product", "linalg_inv_ex", "_linalg_slogdet", "_linalg_det"})


def _n3(n: int) -> float:
    return float(n) ** 3


#: Textbook flop of the decompositions with a formula, from the shapes of their arguments
#: (A (..., m, n) first; B (..., n, k) the right-hand sides where there are some).
_DECOMP_FORMULAS = {
    "_linalg_eigh": lambda a: 9 * _n3(a[0][-1]), "linalg_eigh": lambda a: 9 * _n3(a[0][-1]),
    "linalg_eigvalsh": lambda a: 4 / 3 * _n3(a[0][-1]),
    "linalg_cholesky_ex": lambda a: _n3(a[0][-1]) / 3, "cholesky": lambda a: _n3(a[0][-1]) / 3,
    "cholesky_solve": lambda a: 2.0 * a[1][-1] ** 2 * a[0][-1],
    "_cholesky_solve_helper": lambda a: 2.0 * a[1][-1] ** 2 * a[0][-1],
    "linalg_solve_triangular": lambda a: float(a[0][-1]) ** 2 * a[1][-1],
    "triangular_solve": lambda a: float(a[1][-1]) ** 2 * a[0][-1],
    "linalg_lu_factor_ex": lambda a: 2 / 3 * _n3(a[0][-1]),
    "_linalg_solve_ex": lambda a: 2 / 3 * _n3(a[0][-1]) + 2.0 * a[0][-1] ** 2 * (
        a[1][-1] if len(a[1]) == len(a[0]) else 1),
    "linalg_inv_ex": lambda a: 2 * _n3(a[0][-1]),
    "linalg_qr": lambda a: 2.0 * a[0][-2] * a[0][-1] ** 2,
    "_linalg_svd": lambda a: 4.0 * a[0][-2] * a[0][-1] ** 2 + 22 * _n3(min(a[0][-2:])),
    "linalg_lstsq": lambda a: 2.0 * a[0][-2] * a[0][-1] ** 2,
}


def decomposition_flop(name: str, args) -> float:
    """Flop of one decomposition call (times its batch), inf where no formula is known."""
    shapes = [tuple(t.shape) for t in args if isinstance(t, torch.Tensor)]
    if name == "_linalg_eigh" and len(args) > 2 and args[2] is False:
        name = "linalg_eigvalsh"  # eigvalsh dispatches here without vectors
    f = _DECOMP_FORMULAS.get(name)
    if f is None or not shapes or len(shapes[0]) < 2:
        return math.inf
    try:
        return float(f(shapes)) * math.prod(shapes[0][:-2])
    except (IndexError, TypeError):
        return math.inf


def _addmm_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def _bmm_reduce_flop(self_shape, b1_shape, b2_shape, out_shape=None, **kwargs) -> int:
    b, m, k = b1_shape
    return 2 * b * m * k * b2_shape[-1]


def _mv_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1] if len(a_shape) == 2 else 2 * a_shape[0]


def _addmv_flop(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    return 2 * a_shape[0] * a_shape[1]


_aten = torch.ops.aten
#: Products ``torch.utils.flop_counter`` has no formula for (its registry covers ``addmm``
#: and ``baddbmm``, not the in-place ``addmm_`` and ``baddbmm_`` lazylab's trainers and normal
#: equations use).
EXTRA_FLOPS = {_aten.addmm_: _addmm_flop, _aten.addbmm: _bmm_reduce_flop,
               _aten.addbmm_: _bmm_reduce_flop, _aten.addmv: _addmv_flop,
               _aten.addmv_: _addmv_flop, _aten.mv: _mv_flop, _aten.dot: _mv_flop,
               _aten.baddbmm_: _bmm_reduce_flop}


def flop_counter() -> FlopCounterMode:
    """A silent flop counter with :data:`EXTRA_FLOPS`."""
    return FlopCounterMode(display=False, custom_mapping=EXTRA_FLOPS)


def _bytes(tree) -> int:
    """Bytes of the tensors in ``tree``, each at most its storage (a broadcast view of a
    small tensor reads the small tensor)."""
    total = 0
    for t in tree_leaves(tree):
        if isinstance(t, torch.Tensor):
            total += min(t.numel() * t.element_size(), t.untyped_storage().nbytes())
    return total


#: Operations that are views without saying so (``is_view`` false): they move no bytes.
METADATA_ONLY = frozenset({"_unsafe_view"})


def launches_kernel(func) -> bool:
    """Whether an aten operation launches a kernel on a GPU: every one but views (and
    :data:`METADATA_ONLY`). Eager PyTorch dispatches both from the host; a CUDA graph replays
    only the kernels."""
    return not func.is_view and func.overloadpacket.__name__ not in METADATA_ONLY


def written(func, args) -> list:
    """The arguments ``func``'s schema marks as written (``Tensor(a!)``)."""
    return [a for a, spec in zip(args, func._schema.arguments, strict=False)
            if spec.alias_info is not None and spec.alias_info.is_write]


class OpCounter(TorchDispatchMode):
    """Counts aten operations dispatched (views and metadata queries included), those that
    launch a kernel (``kernels``, :func:`launches_kernel`), the bytes those read and write
    (``bytes``: inputs, and outputs or the ``out=`` tensor), the wall
    and CPU seconds spent inside them (``seconds``, ``cpu``; synchronous on a CPU) and the H100
    model's seconds for those in :data:`DECOMPOSITIONS` (``decomp``, module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.seconds = 0.0
        self.cpu = 0.0
        self.decomp = 0.0
        self.bytes = 0.0
        self.kernels = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        c0, t0 = time.process_time(), time.perf_counter()
        out = func(*args, **(kwargs or {}))
        dt = time.perf_counter() - t0
        self.seconds += dt
        self.cpu += time.process_time() - c0
        name = func.overloadpacket.__name__
        if name in DECOMPOSITIONS:  # priced on the model here (module docstring)
            self.decomp += min(dt / HOST_SPEEDUP, decomposition_flop(name, args) / DECOMP_FLOPS)
        if launches_kernel(func):
            self.kernels += 1
            # an out= tensor is written once (not also read)
            kw = kwargs or {}
            self.bytes += _bytes((args, kw) if "out" in kw else (args, kw, out))
            if out is None:  # an operator that returns nothing writes its mutable arguments
                self.bytes += _bytes(written(func, args))
        return out


class Span(TorchDispatchMode):
    """CPU seconds of this process from the counters' first dispatch of an operation to its
    return: the operation and the counting together. Entered after :class:`OpCounter` and the
    flop counter, so it sees every operation first; the CPU time outside it is the host's own
    work (and the per-operation dispatch into Python before it, :func:`counter_overhead`).
    CPU time, not wall: other jobs on the machine do not lengthen it."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        t0 = time.process_time()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.seconds += time.process_time() - t0


@contextlib.contextmanager
def counters():
    """(operations, flop, span) counters of one measured run (:class:`OpCounter`,
    :func:`flop_counter`, :class:`Span`)."""
    with OpCounter() as oc, flop_counter() as fc, Span() as span:
        yield oc, fc, span


@contextlib.contextmanager
def gpu_paths():
    """Within: the code takes the paths it takes on a GPU where a CPU has its own, so that the
    counted operations are the GPU's (the packed trainers step their pack as one chunk,
    :data:`lazylab.train.packed._CPU_CHUNK_ELEMENTS`, with one reduction per run of
    equal-sized members, :data:`lazylab.train.packed._SEGMENT_SUMS`, and Nichani's Taylor-model
    GD its hidden units at once, :data:`lazylab.train.nichani.gd.CPU_COLUMNS`; on a CPU they
    step cache-sized blocks, a few times the launches)."""
    from lazylab.train import packed
    from lazylab.train.nichani import gd

    old = packed._CPU_CHUNK_ELEMENTS, gd.CPU_COLUMNS, packed._SEGMENT_SUMS
    packed._CPU_CHUNK_ELEMENTS = gd.CPU_COLUMNS = None
    packed._SEGMENT_SUMS = True
    try:
        yield
    finally:
        packed._CPU_CHUNK_ELEMENTS, gd.CPU_COLUMNS, packed._SEGMENT_SUMS = old


@contextlib.contextmanager
def eigvalsh_as_run():
    """Within: ``torch.linalg.eigvalsh`` computes no eigenvectors under the counters either.
    Under any dispatch mode torch cannot rule out a gradient and asks ``_linalg_eigh`` for the
    vectors as well (9 n^3 flop instead of 4/3 n^3, and that time here); a run without the
    counters does not. Inputs that require a gradient keep torch's own path."""
    real = torch.linalg.eigvalsh

    def eigvalsh(A: torch.Tensor, UPLO: str = "L", *, out=None) -> torch.Tensor:
        if A.requires_grad or out is not None:
            return real(A, UPLO, out=out)
        return torch.ops.aten._linalg_eigh(A, UPLO, False)[0]

    torch.linalg.eigvalsh = eigvalsh
    try:
        yield
    finally:
        torch.linalg.eigvalsh = real


_OVERHEAD: list[float] = []  # counter_overhead's measurement, once per process


def counter_overhead(n: int = 20_000) -> float:
    """CPU seconds the counters add outside :class:`Span` an operation (measured once per
    process): n one-element additions under :func:`counters`, CPU time outside the span,
    minus the same additions' CPU time outside operations without counters (a plain run's
    host work); subtracted per counted operation from the host term."""
    if not _OVERHEAD:
        a = torch.zeros(1)
        for _ in range(200):  # warm-up
            a = a + 1.0
        c0 = time.process_time()
        for _ in range(n):
            a = a + 1.0
        plain = time.process_time() - c0
        for _ in range(2):  # the first counted run is slower (a warm-up); the second counts
            with counters() as (oc, _, span):
                c0 = time.process_time()
                for _ in range(n):
                    a = a + 1.0
                outside = time.process_time() - c0 - span.seconds
                ops_cpu = oc.cpu
        # plain includes the additions themselves (their CPU time in the counted run)
        _OVERHEAD.append(max((outside - (plain - ops_cpu)) / n, 0.0))
    return _OVERHEAD[0]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Cost:
    """Wall and CPU seconds on the device at hand, aten operations, flop, CPU seconds inside
    aten operations and their counting here (:class:`Span`), the H100 model's seconds for the
    decompositions, bytes, and the H100 model of the whole: at the experiment's precision
    (``h100``) and in float32 throughout (``h100_fp32``, the same unless the paper scale
    declares TF32; what a float32 measurement checks); the operations that launch a kernel
    (``kernels``), and ``h100`` with the loops that replay from CUDA graphs priced as replayed
    (``h100_graph``, :func:`_h100`)."""

    wall: float = 0.0
    cpu: float = 0.0
    ops: float = 0.0
    flop: float = 0.0
    torch: float = 0.0
    decomp: float = 0.0
    bytes: float = 0.0
    h100: float = 0.0
    h100_fp32: float = 0.0
    kernels: float = 0.0
    h100_graph: float = 0.0

    def __add__(self, o: Cost) -> Cost:
        return Cost(*(a + b for a, b in zip(self.astuple(), o.astuple(), strict=True)))

    def scaled(self, f: float) -> Cost:
        return Cost(*(a * f for a in self.astuple()))

    def astuple(self) -> tuple[float, ...]:
        return (self.wall, self.cpu, self.ops, self.flop, self.torch, self.decomp, self.bytes,
                self.h100, self.h100_fp32, self.kernels, self.h100_graph)


def h100_seconds(ops: float, flop: float, host: float = 0.0, decomp: float = 0.0,
                 rate: float = H100_FLOPS, nbytes: float = 0.0, launch: float | None = None
                 ) -> float:
    """One piece on the H100 model (module docstring), its products at ``rate`` flop/s and
    its ``ops`` launched at ``launch`` seconds each (default LAUNCH_SECONDS)."""
    device = max(flop / rate, max(nbytes, 0.0) / H100_BYTES_PER_S)
    launch = LAUNCH_SECONDS if launch is None else launch
    return max(ops * launch, device + max(decomp, 0.0),
               max(host, 0.0) / HOST_SPEEDUP)


def h100_rate(exp) -> float:
    """The model's GEMM rate for an experiment: TF32 where its paper scale declares it."""
    return H100_TF32_FLOPS if exp.precision.get("paper") == "tf32" else H100_FLOPS


@dataclass
class Projection:
    experiment: str
    groups: int
    sampled: int
    seeds: int
    fixed: Cost
    per_group: Cost
    loops: int = 0
    exact: bool = True
    strata: int = 1

    @property
    def total(self) -> Cost:
        return self.fixed + self.per_group.scaled(self.groups)


class Timeout(BaseException):  # not swallowed by the code under measurement
    pass


def _alarm(seconds: float):
    def handler(signum, frame):
        raise Timeout(f"over {seconds:.0f} s")
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _once(fn, device: torch.device, rate: float = H100_FLOPS, fast: bool = False) -> Cost:
    """Cost of an uncapped call (timed, then counted; ``fast``: counted only, its own wall and
    CPU seconds standing for the time here, as in :func:`_measure_group`)."""
    wall = cpu = math.nan
    if not fast:
        sync(device)
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        sync(device)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    overhead = counter_overhead()  # measured before the counters start
    with counters() as (oc, fc, span):
        c1, w1 = time.process_time(), time.perf_counter()
        fn()
        host = time.process_time() - c1 - span.seconds - oc.n * overhead
        sync(device)
    if fast:
        wall, cpu = time.perf_counter() - w1, time.process_time() - c1
    flop = float(fc.get_total_flops())
    h100, h100_fp32 = (h100_seconds(oc.n, flop, host, oc.decomp, r, oc.bytes)
                       for r in (rate, H100_FLOPS))
    return Cost(wall, cpu, float(oc.n), flop, span.seconds, oc.decomp, oc.bytes, h100,
                h100_fp32, float(oc.kernels), h100)  # no loop: nothing replayed


def _timed_probe(device: torch.device):
    def probe() -> tuple[float, ...]:
        sync(device)
        return (time.perf_counter(), time.process_time())
    return probe


def _measure_group(call, cap: int, tcap: int, device: torch.device,
                   rate: float = H100_FLOPS, fast: bool = False, blocks: int | None = None
                   ) -> tuple[Cost, int, bool, str]:
    """Extrapolated uncapped cost of one group; (cost, loops seen, exact, the H100 model's
    pieces in words). Wall and CPU seconds are timed at caps ``cap`` and ``2 cap``, or where
    a loop's extra steps take less than :data:`MIN_TIMED` seconds at ``tcap`` and ``2 tcap``
    (enough steps that the timer's jitter is small against their difference); operations,
    flop, bytes and time inside operations are counted at the same caps (counts are exact).
    ``fast``: no timed runs; the counted runs' own wall and CPU seconds stand for the time
    here (a little high: the counters' overhead), half the measuring time. ``blocks``: every
    evaluation pass runs that many row blocks, the rest extrapolated
    (:func:`lazylab.train.meter.sampled_blocks`)."""
    timed, caps = [], (cap, 2 * cap)
    if not fast:
        timed, caps = _timed(call, cap, tcap, device, blocks)
    counted = []
    for k in caps[:len(timed) or 2]:  # counted where timed
        counted.append(_counted(call, k, blocks))
        if not counted[-1].loops:
            break
    if len(counted) == 1:
        counted = [_least_host(call, caps[0], blocks, counted[0])] * 2
    timed = (timed * 2 if len(timed) == 1 else timed) or [_subset(m, (5, 6)) for m in counted]
    exact = True
    totals = []
    for a, b in (timed, counted):
        tot = a.total()
        try:
            totals.append(extrapolate(a, b, tot))
        except ValueError:
            exact = False  # data-dependent loops: scale each loop of the short run linearly
            totals.append(_linear(a, tot))
    wall, cpu = totals[0]
    ops, flop, inside, decomp, nbytes, _, ccpu, kernels = totals[1]
    if exact:
        h100, detail = _h100(counted, rate)
        h100_fp32 = _h100(counted)[0] if rate != H100_FLOPS else h100
        h100_graph, replayed = _h100(counted, rate, graphs=True)
        if h100_graph != h100:  # the replayed loops' pieces too (their kernels a step)
            detail += "; " + "; ".join(w for w in replayed.split("; ") if "replayed" in w)
    else:  # replayed loops priced like the rest
        h100, h100_fp32 = (h100_seconds(ops, flop, ccpu - inside - ops * counter_overhead(),
                                        decomp, r, nbytes) for r in (rate, H100_FLOPS))
        h100_graph, detail = h100, "loops scaled linearly"
    return (Cost(wall, cpu, ops, flop, inside, decomp, nbytes, h100, h100_fp32, kernels,
                 h100_graph),
            len(counted[0].loops),
            exact, detail)


def _counted(call, cap: int, blocks: int | None) -> StepMeter:
    """One run of ``call`` under the counters, loops capped at ``cap``."""
    with counters() as (oc, fc, span):
        with capped(cap, lambda: (float(oc.n), float(fc.get_total_flops()), span.seconds,
                                  oc.decomp, oc.bytes, time.perf_counter(),
                                  time.process_time(), float(oc.kernels)),
                    blocks) as m:
            call()
    return m


def host_seconds(m: StepMeter) -> float:
    """A counted run's host work: its CPU seconds outside the operations and their counting."""
    ops, _, inside, _, _, _, cpu, _ = m.total()
    return cpu - inside - ops * counter_overhead()


def _least_host(call, cap: int, blocks: int | None, first: StepMeter) -> StepMeter:
    """Of ``first`` and up to :data:`HOST_REPEATS` - 1 more counted runs of a group without a
    training loop, the one with the least host work, while the kept run's host work bounds it
    on the model (:func:`host_bound`). A run's CPU time outside the operations only grows with
    what it does not own (first touches of fresh memory, caches shared with other jobs), so the
    least of a few runs is its own cost. Only runs under :data:`HOST_REPEAT_BELOW` seconds are
    repeated; the counts (operations, flop, bytes) are the same in every run."""
    best, runs, wall = first, 1, first.total()[5]
    while runs < HOST_REPEATS and wall < HOST_REPEAT_BELOW and host_bound(best):
        m = _counted(call, cap, blocks)
        best, runs = min((best, m), key=host_seconds), runs + 1
    return best


def host_bound(m: StepMeter) -> bool:
    """Whether a counted run without a loop costs more on the model with its host work than
    without it (in float32: the slowest arithmetic the model prices)."""
    ops, flop, _, decomp, nbytes, _, _, _ = m.total()
    return (h100_seconds(ops, flop, host_seconds(m), decomp, nbytes=nbytes)
            > h100_seconds(ops, flop, 0.0, decomp, nbytes=nbytes))


def _timed(call, cap: int, tcap: int, device: torch.device, blocks: int | None = None
           ) -> tuple[list[StepMeter], tuple[int, int]]:
    """The timed runs of :func:`_measure_group` and the caps they used."""
    timed, caps = [], (cap, 2 * cap)
    for k in caps:
        with capped(k, _timed_probe(device), blocks) as m:
            call()
        timed.append(m)
        if not m.loops:  # nothing to extrapolate: one run of each kind
            break
    if len(timed) == 2 and tcap > cap and any(
            per_step(timed[0], timed[1], i)[0] * cap < MIN_TIMED
            for i in range(len(timed[0].loops))):
        timed, caps = [], (tcap, 2 * tcap)  # steps too short to time at the small caps
        for k in caps:
            with capped(k, _timed_probe(device), blocks) as m:
                call()
            timed.append(m)
    return timed, caps


def _subset(m: StepMeter, idx: tuple[int, ...]) -> StepMeter:
    """A meter with only the probe components ``idx`` of ``m`` (its evaluations' too)."""
    def pick(r: tuple[float, ...]) -> tuple[float, ...]:
        return tuple(r[i] for i in idx)

    out = StepMeter(m.cap, m.probe, begin=pick(m.begin), finish=pick(m.finish))
    for seg in m.loops:
        out.loops.append(Segment(seg.requested, seg.run, pick(seg.start), pick(seg.end),
                                 seg.evaluations, seg.evaluated,
                                 list(pick(seg.evaluation_cost)) if seg.evaluation_cost
                                 else [],
                                 list(pick(seg.evaluation_extra)) if seg.evaluation_extra
                                 else []))
    return out


def _linear(m: StepMeter, tot: list[float]) -> list[float]:
    out = list(tot)
    for s in m.loops:
        out = [o + e for o, e in zip(out, s.evaluation_extra or [0.0] * len(out), strict=True)]
        if s.run and s.requested > s.run:
            for j in range(len(out)):
                out[j] += (s.end[j] - s.start[j]) * (s.requested / s.run - 1)
    return out


def _h100(counted: list[StepMeter], rate: float = H100_FLOPS, graphs: bool = False
          ) -> tuple[float, str]:
    """The H100 model of one group: each loop's steps (launches or arithmetic per step, times
    the steps requested), plus everything else of the short capped runs (its loop steps
    taken out), bound by launches, arithmetic or host work (module docstring); with the
    pieces in words (each loop's operations a step and steps, the rest's three bounds).
    Host work is the CPU time outside the counters' span (:class:`Span`) of the counted runs
    themselves (a time of other runs would carry their differences in load, and CPU time
    is not lengthened by other jobs). With ``graphs``, a loop whose steps replay from a CUDA
    graph (``Segment.replayed``) launches only its kernels (:func:`launches_kernel`):

        max(kernels x REPLAY_SECONDS, max(flop / rate, bytes / H100_BYTES_PER_S))

    a step; its evaluations and everything outside the loop stay eager."""
    ops, flop, inside, decomp, nbytes, _, tc, _ = counted[0].total()
    secs, words = 0.0, []
    for i, seg in enumerate(counted[0].loops):
        o, f, ins, dec, b, _, c, kern = per_step(counted[0], counted[1], i)
        replayed = graphs and seg.replayed
        loop = h100_seconds(kern if replayed else o, f, 0.0, dec, rate, b,
                            REPLAY_SECONDS if replayed else None) * seg.requested
        launched = f" ({kern:.0f} kernels replayed)" if replayed else ""
        words.append(f"loop {i}: {o:.0f} ops{launched}, {f / 1e9:.3g} GFLOP, "
                     f"{b / 1e9:.3g} GB a step x {seg.requested} = {loop:.2f} s")
        ops, flop, inside = ops - o * seg.run, flop - f * seg.run, inside - ins * seg.run
        decomp, nbytes = decomp - dec * seg.run, nbytes - b * seg.run
        tc -= c * seg.run
        if seg.evaluated:  # its evaluations, priced one by one (lazylab.train.meter)
            eo, ef, eins, edec, eb, ew, _, _ = per_evaluation(seg)
            ev = h100_seconds(eo, ef, 0.0, edec, rate, eb) * seg.evaluations
            loop += ev
            words.append(f"{seg.evaluations} evaluations of {eo:.0f} ops, {ef / 1e9:.3g} GFLOP "
                         f"= {ev:.2f} s")
            # the rest loses what these evaluations cost here, not the blocks they skipped
            mo, mf, mins, mdec, mb, _, mc, _ = seg.evaluation_cost
            ops, flop, inside = ops - mo, flop - mf, inside - mins
            decomp, nbytes, tc = decomp - mdec, nbytes - mb, tc - mc
        secs += loop
    host = tc - inside - max(ops, 0.0) * counter_overhead()
    rest = h100_seconds(max(ops, 0.0), max(flop, 0.0), host, decomp, rate, nbytes)
    words.append(f"rest: {max(ops, 0.0):.0f} ops, {max(flop, 0.0) / 1e9:.3g} GFLOP, "
                 f"{max(nbytes, 0.0) / 1e9:.3g} GB, "
                 f"decompositions {max(decomp, 0.0):.2f} s on the model, "
                 f"host {max(host, 0.0):.2f} s here = {rest:.2f} s")
    return secs + rest, "; ".join(words)


def sample_indices(n: int, k: int) -> list[int]:
    """k indices of range(n), evenly spaced, the first and the last included."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)}) if k > 1 else [n - 1]


def stratum(g: WorkGroup) -> tuple:
    """Groups alike in cost: a batched group's label, or for a single unit the names of its
    key and its non-numeric values (e.g. the method), numbers (sizes) varying within."""
    if g.label is not None:
        return ("group", g.label)
    key = g.units[0].key
    return ("unit",) + tuple(sorted((k, v if isinstance(v, (str, bool)) else "#")
                                    for k, v in key.items()))


def project(exp_id: str, *, cap: int, sample: int, device: torch.device,
            limit: float, tcap: int = 20, verbose: bool = False, fast: bool = False,
            overrides: dict[str, str] | None = None, blocks: int | None = None) -> Projection:
    """The projection of one experiment (module docstring): the groups are split into strata
    (:func:`stratum`); up to ``sample`` seed-0 groups of each, evenly spaced in size
    (:func:`size_key`, smallest first; one group per distinct size), are measured, and each group of
    the stratum costs the log-log interpolation of those at its size (:func:`interpolate`).
    ``limit`` seconds of wall time for each uncapped piece and each sampled group: a group over it
    ends the stratum's sampling (its larger groups follow the fit of the smaller ones), or, before
    two sizes are measured, the projection (Timeout). ``fast``: see :func:`_measure_group`;
    ``overrides``: paper parameters set otherwise (``--set``), e.g. one panel of a figure, so that
    disjoint parts of one experiment can be projected side by side and added; ``blocks``: row
    blocks an evaluation pass runs (:func:`_measure_group`)."""
    exp = get_experiment(exp_id)
    rate = h100_rate(exp)
    fields = exp.Params.model_fields
    p = exp.resolve("paper", {k: coerce(fields[k].annotation, v)
                              for k, v in (overrides or {}).items()})
    seeds = int(exp.default_seeds.get("paper", 1))
    groups = plan_groups(RunSpec(exp, p, "paper", seeds, device))
    kw: dict[str, Any] = {}
    fixed = Cost()
    counter_overhead()  # measured once, before any counter runs
    try:
        _alarm(limit)
        prep: list[Any] = []
        fixed = _once(lambda: prep.append(exp.prepare(p, device)), device, rate, fast)
        kw["prep"] = prep[-1]
        fixed = fixed + _once(lambda: exp.theory(p, **kw), device, rate, fast)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    strata: dict[tuple, list[WorkGroup]] = {}
    for g in groups:
        strata.setdefault(stratum(g), []).append(g)
    total, loops, exact, sampled = Cost(), 0, True, 0
    for members in strata.values():
        size = size_key(members, exp, p)
        first = _distinct(sorted([g for g in members if g.seed_index == 0] or members,
                                 key=size), size)
        points: list[tuple[float, Cost]] = []
        todo = sample_indices(len(first), sample)
        done_i: list[int] = []
        while todo:
            i = todo.pop(0)
            try:
                _alarm(limit)
                c, n_loops, ok, detail = _measure_group(_caller(exp, p, first[i], device, kw),
                                                        cap, tcap, device, rate, fast, blocks)
            except Timeout:
                exact = False  # the larger groups of this stratum: the fitted power law
                lo = max(done_i, default=-1)
                if verbose:
                    print(f"    {exp_id} {first[i].label or first[i].units[0].key_json}: over "
                          f"the {limit:.0f} s limit (--limit); its stratum's larger groups "
                          "follow the fit of the smaller ones", file=sys.stderr, flush=True)
                if len({x for x, _ in points}) >= 2 or i - lo <= 1:
                    break
                todo = [(lo + i) // 2 if lo >= 0 else i // 2]  # a smaller size between
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            points.append((size(first[i]), c))
            done_i.append(i)
            if verbose:
                print(f"    {exp_id} {first[i].label or first[i].units[0].key_json}: "
                      f"{c.wall:.1f} s here, H100 model {c.h100:.2f} s, replayed "
                      f"{c.h100_graph:.2f} s ({detail})",
                      file=sys.stderr, flush=True)
            loops, exact = loops + n_loops, exact and ok
        if not points or (len({x for x, _ in points}) < 2 and len(points) < len(first)
                          and not exact):
            raise Timeout(f"over {limit:.0f} s before two sizes of a stratum were measured")
        part = sum((interpolate(points, size(g)) for g in members), Cost())
        if verbose:
            st = stratum(members[0])
            words = " ".join(str(x) if not isinstance(x, tuple) else f"{x[0]}={x[1]}"
                             for x in st)
            print(f"    {exp_id} stratum {words}: "
                  f"{len(members)} groups from {len(points)} measured, H100 model "
                  f"{part.h100:.2f} s, replayed {part.h100_graph:.2f} s",
                  file=sys.stderr, flush=True)
        total = total + part
        sampled += len(points)
    return Projection(exp_id, len(groups), sampled, seeds, fixed, total.scaled(1 / len(groups)),
                      loops, exact, strata=len(strata))


def _distinct(groups: list[WorkGroup], size) -> list[WorkGroup]:
    """The first group of each size (``groups`` sorted by size): repetitions of one size
    (e.g. RF draws of W at one width) are measured once."""
    out: list[WorkGroup] = []
    for g in groups:
        if not out or size(g) != size(out[-1]):
            out.append(g)
    return out


def size_key(members: list[WorkGroup], exp=None, p=None):
    """A group's size within its stratum. For single units of an experiment with a unit cost
    model (``exp.unit_seconds(p, key)``, e.g. the Ghorbani width figures), that model: it knows
    where a cost stops growing (the NT fit's basis has d min(N, d) columns, so every N >= d
    costs the same), which a power law through smaller sizes does not. Otherwise the numeric
    key (positive values) spanning the widest log range (e.g. the width N, not the repetition
    index); 1 where none varies."""
    if exp is not None and hasattr(exp, "unit_seconds") and members[0].label is None:
        return lambda g: max(float(exp.unit_seconds(p, g.units[0].key)), 1e-12)
    best, span = None, 0.0
    for k in members[0].units[0].key:
        vals = [g.units[0].key.get(k) for g in members]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
               for v in vals):
            r = math.log(max(vals) / min(vals))
            if r > span:
                best, span = k, r
    return lambda g: float(g.units[0].key[best]) if best else 1.0


def interpolate(points: list[tuple[float, Cost]], x: float) -> Cost:
    """Each component's cost at size x, piecewise linear in log-log through the measured
    points (x ascending), the end segments extended; a constant from one point."""
    pts = sorted(points, key=lambda t: t[0])
    if len(pts) == 1 or pts[0][0] == pts[-1][0]:
        return pts[0][1] if len(pts) == 1 else pts[-1][1]
    k = 1
    while k < len(pts) - 1 and x > pts[k][0]:
        k += 1
    (x0, c0), (x1, c1) = pts[k - 1], pts[k]
    t = math.log(x / x0) / math.log(x1 / x0) if x1 != x0 else 0.0
    vals = []
    for a, b in zip(c0.astuple(), c1.astuple(), strict=True):
        la, lb = math.log(max(a, 1e-12)), math.log(max(b, 1e-12))
        vals.append(math.exp(la + t * (lb - la)))
    return Cost(*vals)


def _caller(exp, p, g: WorkGroup, device: torch.device, kw: dict[str, Any]):
    if g.label is None:
        (key, seed), = g.members
        return lambda: exp.run_unit(p, key, seed, device, **kw)
    return lambda: exp.run_group(p, g.members, g.seed, device, **kw)
