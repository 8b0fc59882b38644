"""Many two-layer quadratic networks trained as ONE block-diagonal network by one-pass SGD.

Ghorbani et al. (2019, Sec. 2.3 and the companion code) train, for every width N of a grid
and every step size of a search, the network (NN)

    f_j(x) = sum_{i <= N_j} a_{j,i} (w_{j,i} . x)^2 + c_j

or its linearization at w (NT, Sec. 2.2: the neural tangent model with U = 0 at the start)

    f_j(x) = sum_{i <= N_j} 2 (w_{j,i} . x)(u_{j,i} . x) + c_j   (w fixed, u and c trained)

by one-pass SGD on the loss mean_b (y_b - f_j(x_b))^2 (fresh samples every step; the step
size eta_j times the schedule's multiplier). One configuration at a time, a step of such a
small network is a few dozen kernel launches that each do little work. Here the G members
share one stream of samples and their hidden units are concatenated into one (P, d) matrix,
P = sum_j N_j: a step of all of them is two (NT: three) GEMMs and a few elementwise
operations, whatever G is. Each member's output is a per-block sum, never a product with a
0/1 matrix, so a member that overflows leaves NaNs in its own block only: ``index_add`` on a
CPU; on a GPU one reduction per run of equal-sized members (:data:`_SEGMENT_SUMS`), since
CUDA's deterministic ``index_add`` accumulates each member's rows one after another.
On a CPU the step runs over chunks of whole members (:data:`_CPU_CHUNK_ELEMENTS`), so that its
(rows, B) temporaries stay in cache; on a GPU the pack is one chunk. A member wider than d
whose second layer is fixed trains as its exact d-unit equivalent
(:mod:`lazylab.train.rowspace`; ``rowspace=False`` keeps every unit), and comes back at its
full width.

The gradients are written out (no autograd), for r_{b,j} = f_j(x_b) - y_b and
h_{b,i} = w_i . x_b:

    dL_j/dc_j = (2/B) sum_b r_{b,j}   (stepped at ``offset_lr_scale`` x step_j for NT),
    NN: dL_j/dw_{j,i} = (2/B) sum_b r_{b,j} 2 a_{j,i} h_{b,i} x_b,
        dL_j/da_{j,i} = (2/B) sum_b r_{b,j} h_{b,i}^2,
    NT: dL_j/du_{j,i} = (2/B) sum_b r_{b,j} 2 h_{b,i} x_b,

and each member's update follows plain SGD (``lazylab.train.fit`` with ``optimizer=
"one_pass"``, no momentum) to rounding. Divergence is decided as ``fit`` decides it: a member
whose batch loss is not finite at a multiple of ``check_every`` steps or at a logged step, or
whose final loss is not finite, has diverged; it is then dropped from the packed matrices, so
it stops costing work. At the ``log_steps`` each live member's batch loss (before that step's
update, as ``fit`` logs it) and ``eval_fn`` of its parameters are recorded.

Example
-------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> def sampler(n, gen):
...     X = torch.randn(n, 3, generator=gen, dtype=torch.float64)
...     return X, X[:, 0] ** 2 - 1
>>> W0 = [0.1 * torch.randn(k, 3, generator=g, dtype=torch.float64) for k in (2, 5)]
>>> res = train_packed_quad(W0, [0.05, 0.05], sampler=sampler, steps=400, batch_size=20,
...                         generator=torch.Generator().manual_seed(1))
>>> [round(float(v), 2) for v in res.final_loss]  # both fit x_0^2 - 1 (loss ~ 0)
[0.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

import torch

from lazylab.train import capture as cg
from lazylab.train.meter import evaluation, loop_steps
from lazylab.train.rowspace import RowSpace, reduce_rows

Sampler = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]
#: eval_fn(member index j, (first, second, c_j)) -> float: NN (W_j, a_j, c_j), NT (W_j, U_j, c_j).
EvalFn = Callable[[int, tuple[torch.Tensor, torch.Tensor, float]], float]


@dataclass
class PackedQuadResult:
    """Trained members in input order: ``W[j]`` (N_j, d) and ``a[j]`` (N_j,) (NT: ``W[j]`` the
    fixed first layer, ``U[j]`` the trained direction), ``c`` (G,), ``final_loss`` (G,) on one
    extra batch after the last step (as ``fit`` logs it), and ``diverged`` (G,) booleans (a
    diverged member's parameters are those at detection). ``log_steps`` (L,) with
    ``log_loss`` and ``log_eval`` (G, L) where asked (NaN where a member had diverged)."""

    W: list[torch.Tensor]
    a: list[torch.Tensor]
    c: torch.Tensor
    final_loss: torch.Tensor
    diverged: torch.Tensor
    log_steps: list[int] = field(default_factory=list)
    log_loss: torch.Tensor | None = None
    log_eval: torch.Tensor | None = None

    @property
    def U(self) -> list[torch.Tensor]:
        """The trained directions of an NT run (the second of each member's pair)."""
        return self.a


#: Elements of one (rows, batch) temporary of a step on a CPU: the pack is stepped in chunks
#: of whole members of at most this many hidden units x batch, so that the step's
#: elementwise temporaries (8 MB in float32) stay in the last-level cache instead of streaming
#: through memory: at the Ghorbani width grids' paper shapes a sixth less CPU time a step on
#: a quiet machine, a quarter beside another job (``bench/bench_paper_scale.py --part ratios``).
#: On a GPU the pack is one chunk: there a step is bound by its launches. None: one chunk on a
#: CPU as well (``bench_paper_scale.py`` counts a GPU's operations that way).
_CPU_CHUNK_ELEMENTS: int | None = 2 ** 21
#: Per-member sums as one reduction per run of consecutive equal-sized members (a (k, N, B)
#: view summed over N) instead of one ``index_add``. Under ``torch.use_deterministic_algorithms``
#: (every lazylab run) CUDA's ``index_add`` becomes ``index_put_(accumulate=True)``, which sorts
#: the row indices and adds each member's rows serially: with members of up to 4500 rows the
#: mixture width grid's step is bound by that serial sum (``bench/bench_segment_sums.py``).
#: None: on CUDA devices only (a CPU's ``index_add`` is deterministic and one pass).
_SEGMENT_SUMS: bool | None = None
#: Row stride of a pack's (P, d) matrices, in elements: d rounded up to a multiple of this, so
#: that every row starts on a 64-byte line. The in-place update GEMM of the mixture grid at its
#: paper shapes ((20,971 x 100) x (100 x 450) into W, one thread, MKL, Zen 3) ran at 30-35
#: GFLOP/s on rows of 450 floats and at 53-60 on rows 464 apart (``bench/bench_paper_scale.py
#: --part ratios``). None: contiguous rows.
_ROW_ALIGN: int | None = 16


@dataclass
class _Chunk:
    """Views of consecutive members' rows of a pack: updates in place reach the pack."""

    first: torch.Tensor
    second: torch.Tensor
    c: torch.Tensor
    lr: torch.Tensor
    seg: torch.Tensor  # each row's member index within the chunk
    c_scale: float = 1.0  # the offsets' step sizes over the members' (``offset_lr_scale``)

    def __post_init__(self) -> None:
        # Column views made once: the in-place updates reach them, and a step then dispatches
        # no view for them (on a GPU an eager step is bound by its operations).
        self.c_col = self.c.unsqueeze(1)
        self.second_col = self.second.unsqueeze(1) if self.second.dim() == 1 else self.second
        self._batch: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        segment = _SEGMENT_SUMS if _SEGMENT_SUMS is not None else self.c.device.type == "cuda"
        self.runs = (_equal_runs(torch.bincount(self.seg, minlength=len(self.c)).tolist())
                     if segment else None)
        self._sums: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}

    def constants(self, B: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(4 step_j / B as a column (members, 1), ``c_scale`` x ones (B,)), made once per
        batch size."""
        if B not in self._batch:
            self._batch[B] = ((self.lr * (4.0 / B)).unsqueeze(1),
                              torch.full((B,), self.c_scale, dtype=self.c.dtype,
                                         device=self.c.device))
        return self._batch[B]

    def sum(self, Z: torch.Tensor, y: torch.Tensor | None = None, scale: float = 1.0
            ) -> torch.Tensor:
        """c + scale x the per-member sums of Z's rows (members, B), minus y (B,) if given."""
        base = self.c_col - y if y is not None else self.c_col.repeat(1, Z.shape[1])
        if self.runs is None:
            return base.index_add_(0, self.seg, Z, alpha=scale)
        return base.add_(self._segment_sums(Z), alpha=scale)

    def _segment_sums(self, Z: torch.Tensor) -> torch.Tensor:
        """The per-member sums of Z's rows, one reduction per run of equal-sized members
        (:data:`_SEGMENT_SUMS`), into a buffer made once per batch size."""
        assert self.runs is not None
        B = Z.shape[1]
        if B not in self._sums:
            buf = torch.empty(len(self.c), B, dtype=Z.dtype, device=Z.device)
            self._sums[B] = (buf, [buf[m0:m0 + k] for m0, k, _ in self.runs])
        buf, outs = self._sums[B]
        if len(self.runs) == 1:  # equal sizes (a step-size search): one view, one sum
            return torch.sum(Z.view(len(buf), -1, B), dim=1, out=buf)
        parts = Z.split([k * n for _, k, n in self.runs])
        for part, out, (_, k, n) in zip(parts, outs, self.runs, strict=True):
            torch.sum(part.view(k, n, B), dim=1, out=out)
        return buf

    def factor(self, r: torch.Tensor, mult: torch.Tensor) -> torch.Tensor:
        """2 step_j dL_j/df_j = (4 step_j / B) r_j, per member (members, B): what every
        gradient of the chunk is built from."""
        return r * (self.constants(r.shape[1])[0] * mult)

    def step_c(self, gs: torch.Tensor) -> None:
        """c_j -= c_scale step_j dL_j/dc_j = (c_scale/2) sum_b gs_{j,b}, as one
        matrix-vector product."""
        self.c.addmv_(gs, self.constants(gs.shape[1])[1], alpha=-0.5)


def _equal_runs(sizes: Sequence[int]) -> list[tuple[int, int, int]]:
    """(first member, members, rows each) of every run of consecutive equal sizes.

    >>> _equal_runs([3, 3, 5, 5, 5, 3])
    [(0, 2, 3), (2, 3, 5), (5, 1, 3)]
    """
    runs: list[tuple[int, int, int]] = []
    for j, n in enumerate(sizes):
        if runs and runs[-1][2] == n:
            m0, k, _ = runs[-1]
            runs[-1] = (m0, k + 1, n)
        else:
            runs.append((j, 1, n))
    return runs


def chunk_bounds(sizes: Sequence[int], rows: int | None) -> list[tuple[int, int]]:
    """Consecutive member ranges [k0, k1) of at most ``rows`` hidden units each (a member
    larger than that alone); one range when ``rows`` is None.

    >>> chunk_bounds([3, 3, 5, 1, 4], 6)
    [(0, 2), (2, 4), (4, 5)]
    """
    if rows is None:
        return [(0, len(sizes))]
    out, k0, total = [], 0, 0
    for k, n in enumerate(sizes):
        if k > k0 and total + n > rows:
            out.append((k0, k))
            k0, total = k, 0
        total += n
    out.append((k0, len(sizes)))
    return out


class _Pack:
    """The live members' two per-unit tensors concatenated (``first`` (P, d), ``second``),
    stepped chunk by chunk (:data:`_CPU_CHUNK_ELEMENTS`); subclasses write one chunk's step."""

    def __init__(self, first: list[torch.Tensor], second: list[torch.Tensor],
                 c: torch.Tensor, lrs: torch.Tensor, ids: list[int], rows: int | None = None,
                 c_scale: float = 1.0):
        self.ids = ids
        self.first = aligned_rows(torch.cat(first))
        self.second = aligned_rows(torch.cat(second))
        self.c = c.clone()
        self.lr = lrs.to(self.first)
        sizes = [len(w) for w in first]
        starts = [0, *accumulate(sizes)]
        self.chunks: list[_Chunk] = []
        for k0, k1 in chunk_bounds(sizes, rows):
            s, e = starts[k0], starts[k1]
            seg = torch.repeat_interleave(torch.arange(k1 - k0, device=self.first.device),
                                          torch.tensor(sizes[k0:k1], device=self.first.device))
            self.chunks.append(_Chunk(self.first[s:e], self.second[s:e], self.c[k0:k1],
                                      self.lr[k0:k1], seg, c_scale))

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Outputs (G, B) of the live members."""
        return _cat([self._forward(ch, X) for ch in self.chunks])

    def step(self, X: torch.Tensor, y: torch.Tensor, mult: torch.Tensor) -> torch.Tensor:
        """One SGD step of every member on (X, y); returns the batch losses (G,) before it."""
        return _cat([self._step(ch, X, y, mult) for ch in self.chunks])

    def _forward(self, ch: _Chunk, X: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _step(self, ch: _Chunk, X: torch.Tensor, y: torch.Tensor, mult: torch.Tensor
              ) -> torch.Tensor:
        raise NotImplementedError


def aligned_rows(A: torch.Tensor) -> torch.Tensor:
    """``A`` (a matrix) as a view of rows :data:`_ROW_ALIGN` elements apart, same values; a
    vector, or a matrix whose rows already are, as it is.

    >>> aligned_rows(torch.ones(3, 5)).stride()
    (16, 1)
    """
    if _ROW_ALIGN is None or A.dim() != 2:
        return A
    rows, d = A.shape
    ld = -(-d // _ROW_ALIGN) * _ROW_ALIGN
    if ld == d:
        return A
    out = A.new_zeros(rows, ld)[:, :d]
    return out.copy_(A)


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts)


class _QuadPack(_Pack):
    """NN members: ``first`` = W, ``second`` = a (trained when ``train_second``)."""

    train_second = False

    def _forward(self, ch: _Chunk, X: torch.Tensor) -> torch.Tensor:
        H = ch.first @ X.T  # hidden units along rows: per-member sums move whole rows
        return ch.sum(H * H * ch.second_col)

    def _step(self, ch: _Chunk, X: torch.Tensor, y: torch.Tensor, mult: torch.Tensor
              ) -> torch.Tensor:
        H = ch.first @ X.T
        HA = H * ch.second_col  # a before this update
        r = ch.sum(HA * H, y)
        loss = (r * r).mean(1)
        gs = ch.factor(r, mult)
        g_Z = gs.index_select(0, ch.seg)
        if self.train_second:  # a_i -= step sum_b dL/df_b h_bi^2
            ch.second.sub_((g_Z * H * H).sum(1), alpha=0.5)
        # w_i -= step 2 a_i sum_b dL/df_b h_bi x_b: the step folded into the (rows, B)
        # factor, so that the W update is one fused GEMM with no extra pass over W.
        ch.first.addmm_(g_Z.mul_(HA), X, alpha=-1.0)
        ch.step_c(gs)
        return loss


class _QuadPackBoth(_QuadPack):
    train_second = True


class _NTPack(_Pack):
    """NT members: ``first`` = W (fixed), ``second`` = U (trained)."""

    def _forward(self, ch: _Chunk, X: torch.Tensor) -> torch.Tensor:
        return ch.sum((ch.first @ X.T) * (ch.second @ X.T), scale=2.0)

    def _step(self, ch: _Chunk, X: torch.Tensor, y: torch.Tensor, mult: torch.Tensor
              ) -> torch.Tensor:
        H = ch.first @ X.T
        r = ch.sum(H * (ch.second @ X.T), y, 2.0)
        loss = (r * r).mean(1)
        gs = ch.factor(r, mult)  # u_i -= step 2 sum_b dL/df_b h_bi x_b
        ch.second.addmm_(gs.index_select(0, ch.seg).mul_(H), X, alpha=-1.0)
        ch.step_c(gs)
        return loss


def train_packed_quad(W0: Sequence[torch.Tensor], lrs: Sequence[float], *, sampler: Sampler,
                      steps: int, batch_size: int, generator: torch.Generator,
                      schedule: Callable[[int], float] | None = None,
                      a0: Sequence[torch.Tensor] | None = None, train_second: bool = False,
                      check_every: int = 50, capture: bool | None = None,
                      log_steps: Sequence[int] = (), eval_fn: EvalFn | None = None,
                      rowspace: bool = True) -> PackedQuadResult:
    """Train G quadratic networks (NN) from ``W0[j]`` (N_j, d) with step sizes ``lrs[j]`` on
    one stream of ``sampler(batch_size, generator)`` batches (module docstring).

    ``a0[j]`` are the second layers (default ones); ``train_second`` trains them too (else
    fixed). The offsets c_j start at 0 and are trained. ``schedule(t)`` multiplies every step
    size at step t (None: 1). ``capture``: replay the steps from a CUDA graph
    (:mod:`lazylab.train.capture`; None: where the device's probe passed and the loop is
    long, False: never, True: without consulting the probe). ``log_steps`` and ``eval_fn``:
    what is recorded along the way (module docstring), ``eval_fn(j, (W_j, a_j, c_j))``.
    ``rowspace``: a fixed second layer's rows of one value of a that outnumber d train as
    their d-row equivalent (:mod:`lazylab.train.rowspace`: exact, the same losses and the
    same W = Q R(t) to rounding); ignored with ``train_second``.
    """
    W = [w.detach().clone() for w in W0]
    a = ([x.detach().clone() for x in a0] if a0 is not None
         else [torch.ones(len(w), dtype=w.dtype, device=w.device) for w in W])
    kind = _QuadPackBoth if train_second else _QuadPack
    space = reduce_rows(W, a, trained_first=True) if rowspace and not train_second else None
    loop = _Loop(sampler, steps, batch_size, generator, schedule, check_every, capture,
                 log_steps, eval_fn)
    return _train(kind, W, a, lrs, loop, space)


def train_packed_nt(W: Sequence[torch.Tensor], lrs: Sequence[float], *, sampler: Sampler,
                    steps: int, batch_size: int, generator: torch.Generator,
                    schedule: Callable[[int], float] | None = None, check_every: int = 50,
                    capture: bool | None = None, log_steps: Sequence[int] = (),
                    eval_fn: EvalFn | None = None, rowspace: bool = True,
                    offset_lr_scale: float = 1.0) -> PackedQuadResult:
    """Train G neural tangent models f_j(x) = 2 sum_i (w_{j,i} . x)(u_{j,i} . x) + c_j, each
    at its own first layer ``W[j]`` (N_j, d) (fixed), from U = 0 and c = 0, with step sizes
    ``lrs[j]``; as :func:`train_packed_quad` otherwise (module docstring). The trained
    directions come back as ``result.U``; ``eval_fn(j, (W_j, U_j, c_j))``. ``rowspace``: a
    member of more than d units trains as d units (:mod:`lazylab.train.rowspace`: U stays
    W A(t), exact). ``offset_lr_scale``: the offsets c_j step at this multiple of their
    member's step size (a preconditioner: ``fit``'s ``{"lr_scale": s}`` group does the same)."""
    if not offset_lr_scale > 0:
        raise ValueError(f"offset_lr_scale must be > 0; got {offset_lr_scale}")
    first = [w.detach().clone() for w in W]
    U = [torch.zeros_like(w) for w in first]
    space = reduce_rows(first, U, trained_first=False) if rowspace else None
    loop = _Loop(sampler, steps, batch_size, generator, schedule, check_every, capture,
                 log_steps, eval_fn)
    return _train(_NTPack, first, U, lrs, loop, space, offset_lr_scale)


@dataclass(frozen=True)
class _Loop:
    """What one packed run draws and records (the trainers' keyword arguments): batches of
    ``batch_size`` from ``sampler(batch_size, generator)``, ``steps`` steps at ``schedule``
    (None: 1), divergence checked every ``check_every`` steps, ``capture`` as in
    :func:`train_packed_quad`, and the records at ``log_steps`` (``eval_fn``)."""

    sampler: Sampler
    steps: int
    batch_size: int
    generator: torch.Generator
    schedule: Callable[[int], float] | None = None
    check_every: int = 50
    capture: bool | None = None
    log_steps: Sequence[int] = ()
    eval_fn: EvalFn | None = None

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.sampler(self.batch_size, self.generator)

    def check(self, n_members: int, n_lrs: int) -> None:
        if n_members != n_lrs or not n_members:
            raise ValueError(f"W0 and lrs must be non-empty and of one length; got {n_members} "
                             f"and {n_lrs}")
        if any(s < 0 or s > self.steps for s in self.log_steps):
            raise ValueError(f"log_steps must lie in [0, steps={self.steps}]; got "
                             f"{sorted(self.log_steps)}")


class _Stepper:
    """Sampling and one step of the pack, at the schedule's multiplier: eager, or replayed
    from a CUDA graph captured once warm (:func:`lazylab.train.capture.capture`; a step that
    cannot be captured runs eagerly) and captured again after the pack changes."""

    def __init__(self, loop: _Loop, pack: _Pack, run: int):
        self.loop, self.pack, self.run = loop, pack, run
        self.device = pack.first.device
        self.graphs = (loop.capture if loop.capture is not None
                       else run >= cg.MIN_STEPS and cg.enabled(self.device))
        self.mult = torch.ones((), dtype=pack.first.dtype, device=self.device)
        self.replay: Callable[[], torch.Tensor] | None = None

    def _eager(self) -> torch.Tensor:
        X, y = self.loop.batch()
        return self.pack.step(X, y, self.mult)

    def step(self, t: int) -> torch.Tensor:
        """Step t's per-member batch losses."""
        if self.loop.schedule is not None:
            self.mult.fill_(self.loop.schedule(t))
        if (self.graphs and self.replay is None and t >= cg.WARMUP
                and self.run - t >= cg.MIN_STEPS // 2):
            pack = self.pack
            try:
                self.replay = cg.capture(self._eager, self.device, (self.loop.generator,),
                                         (pack.first, pack.second, pack.c))
            except Exception as exc:  # noqa: BLE001 - a step that cannot be captured runs eagerly
                cg.fell_back("packed", exc)
                self.graphs = False
        return self.replay() if self.replay is not None else self._eager()

    def repack(self, pack: _Pack) -> None:
        """Go on with ``pack`` (members dropped): a captured graph is of the old one."""
        self.pack, self.replay = pack, None


def _train(kind: type[_Pack], first: list[torch.Tensor], second: list[torch.Tensor],
           lrs: Sequence[float], loop: _Loop, space: RowSpace | None = None,
           c_scale: float = 1.0) -> PackedQuadResult:
    """The loop shared by both models, on the members' reduced parameters where ``space`` is
    given (expanded back at the end), in four pieces: the members packed (:func:`_start`),
    sampling and stepping with the schedule and CUDA-graph capture (:class:`_Stepper`), the
    records at ``log_steps`` (:class:`_Log`) and the divergence checks (:func:`_check`, a
    diverged member dropped from the pack); then the final loss (:func:`_finish`)."""
    loop.check(len(first), len(lrs))
    state, pack = _start(kind, first, second, lrs, loop.batch_size, space, c_scale)
    G = len(first)
    # replayed from a CUDA graph where the device captures (recorded for cost models)
    run = loop_steps(loop.steps, evaluations=len({int(s) for s in loop.log_steps}),
                     replayed=loop.capture is not False and loop.steps >= cg.MIN_STEPS)
    log = _Log(sorted({int(s) for s in loop.log_steps if s <= run}), G, loop.eval_fn)
    stepper = _Stepper(loop, pack, run)
    for t in range(run):
        logged = t in log.index
        if logged:
            with evaluation():  # kept apart from the steps' cost when measuring
                log.evaluate(t, stepper.pack, state)
        loss = stepper.step(t)
        bad = _check(t, logged, loss, log, stepper.pack, loop.check_every)
        if bad is not None:
            stepper.repack(state.drop(stepper.pack, bad))
            if not stepper.pack.ids:
                return state.result(torch.full((G,), float("nan")), log)
    return _finish(state, stepper.pack, log, loop, run)


def _start(kind: type[_Pack], first: list[torch.Tensor], second: list[torch.Tensor],
           lrs: Sequence[float], batch_size: int, space: RowSpace | None, c_scale: float
           ) -> tuple[_State, _Pack]:
    """Every member's state (offsets c = 0, none diverged) and the pack of all of them."""
    G = len(first)
    c = torch.zeros(G, dtype=first[0].dtype, device=first[0].device)
    rows = (None if first[0].device.type == "cuda" or _CPU_CHUNK_ELEMENTS is None
            else max(1, _CPU_CHUNK_ELEMENTS // batch_size))
    if space is not None:
        first, second = space.first, space.second
    state = _State(first, second, c, torch.zeros(G, dtype=torch.bool),
                   torch.tensor([float(v) for v in lrs], dtype=torch.float64), kind, rows,
                   space, c_scale)
    return state, state.pack(list(range(G)))


def _check(t: int, logged: bool, loss: torch.Tensor, log: _Log, pack: _Pack,
           check_every: int) -> torch.Tensor | None:
    """The members of ``pack`` that diverged at step t (:func:`_diverged`), checked at a
    logged step (whose losses are recorded first) and every ``check_every`` steps."""
    if logged:
        with evaluation(counted=False):  # the rest of this step's evaluation
            log.losses(t, pack, loss)
            return _diverged(loss)
    if check_every and t % check_every == 0:
        return _diverged(loss)
    return None


def _finish(state: _State, pack: _Pack, log: _Log, loop: _Loop, run: int
            ) -> PackedQuadResult:
    """The record at step ``run`` and every member's loss on one last batch (NaN for the
    diverged), the members unpacked into the result."""
    G = len(state.dead)
    logged = run in log.index
    if logged:
        with evaluation():
            log.evaluate(run, pack, state)
    X, y = loop.batch()
    with torch.no_grad():
        final = ((pack.forward(X) - y.unsqueeze(0)) ** 2).mean(1)
    if logged:
        with evaluation(counted=False):
            log.losses(run, pack, final)
    final_all = torch.full((G,), float("nan"), dtype=torch.float64)
    final_all[pack.ids] = final.detach().double().cpu()
    state.unpack(pack)
    state.dead |= ~torch.isfinite(final_all)
    return state.result(final_all, log)


def _diverged(loss: torch.Tensor) -> torch.Tensor | None:
    """The members (positions in the pack) whose batch loss is not finite, None if none."""
    bad = ~torch.isfinite(loss).cpu()
    return bad if bool(bad.any()) else None


@dataclass
class _State:
    """Every member's parameters (live ones are stale until :meth:`unpack`), who has
    diverged, the step sizes, and the pack class."""

    first: list[torch.Tensor]
    second: list[torch.Tensor]
    c: torch.Tensor
    dead: torch.Tensor
    lrs: torch.Tensor
    kind: type[_Pack]
    rows: int | None  # hidden units a chunk of the step may hold (None: one chunk)
    space: RowSpace | None = None  # how the members were reduced (None: full width)
    c_scale: float = 1.0  # the offsets' step sizes over the members'

    def full(self, j: int, first: torch.Tensor, second: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Member j's parameters at full width."""
        return (first, second) if self.space is None else self.space.expand(j, first, second)

    def pack(self, ids: list[int]) -> _Pack:
        return self.kind([self.first[j] for j in ids], [self.second[j] for j in ids],
                         self.c[ids], self.lrs[ids], ids, self.rows, self.c_scale)

    def unpack(self, pack: _Pack) -> None:
        """Copy the live members' packed parameters back into the per-member lists."""
        start = 0
        for k, j in enumerate(pack.ids):
            n = len(self.first[j])
            self.first[j] = pack.first[start:start + n].clone()
            self.second[j] = pack.second[start:start + n].clone()
            self.c[j] = pack.c[k]
            start += n

    def drop(self, pack: _Pack, bad: torch.Tensor) -> _Pack:
        """Mark the members flagged ``bad`` (positions in the pack) diverged; repack the rest."""
        self.unpack(pack)
        for k, j in enumerate(pack.ids):
            if bad[k]:
                self.dead[j] = True
        ids = [j for j in pack.ids if not self.dead[j]]
        if not ids:
            pack.ids = []
            return pack
        return self.pack(ids)

    def result(self, final: torch.Tensor, log: _Log) -> PackedQuadResult:
        full = [self.full(j, f, s) for j, (f, s) in enumerate(zip(self.first, self.second,
                                                                   strict=True))]
        return PackedQuadResult([f for f, _ in full], [s for _, s in full], self.c, final,
                                self.dead.clone(), log.steps, log.loss, log.eval)


class _Log:
    """Batch losses and evaluations (G, L) at the logged steps; NaN for dead members."""

    def __init__(self, steps: list[int], G: int, eval_fn: EvalFn | None):
        self.steps, self.index = steps, {s: i for i, s in enumerate(steps)}
        self.eval_fn = eval_fn
        nan = torch.full((G, len(steps)), float("nan"), dtype=torch.float64)
        self.loss: torch.Tensor | None = nan if steps else None
        self.eval: torch.Tensor | None = nan.clone() if steps and eval_fn else None

    def losses(self, t: int, pack: _Pack, loss: torch.Tensor) -> None:
        assert self.loss is not None
        self.loss[pack.ids, self.index[t]] = loss.detach().double().cpu()

    def evaluate(self, t: int, pack: _Pack, state: _State) -> None:
        if self.eval is None or self.eval_fn is None:
            return
        start = 0
        for k, j in enumerate(pack.ids):
            n = len(state.first[j])
            part = (*state.full(j, pack.first[start:start + n], pack.second[start:start + n]),
                    float(pack.c[k]))
            start += n
            # Parameters that overflowed: the member diverges at this step's loss check, and
            # eval_fn is never handed non-finite numbers.
            if all(bool(torch.isfinite(x).all()) for x in part[:2]) and math.isfinite(part[2]):
                self.eval[j, self.index[t]] = float(self.eval_fn(j, part))


def _capture_probe(dev: torch.device, captured: bool) -> tuple[float, list[torch.Tensor]]:
    """The packed trainers' capture probe (:func:`lazylab.train.capture.capture_works`):
    seconds and trained parameters of a small Ghorbani-type grid (2 members, 4 MIN_STEPS
    steps), eager or captured."""
    gen = torch.Generator(device=dev)

    def sampler(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        X = torch.randn(n, 16, generator=g, device=dev)
        return X, X[:, 0] ** 2 - 1

    W0 = [0.1 * torch.randn(k, 16, generator=gen.manual_seed(0), device=dev) for k in (4, 8)]
    return cg.timed(dev, lambda: train_packed_quad(
        W0, [0.01, 0.02], sampler=sampler, steps=4 * cg.MIN_STEPS, batch_size=32,
        generator=torch.Generator(dev).manual_seed(1), capture=captured).W)


cg.register_probe("packed", _capture_probe)
