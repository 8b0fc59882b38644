"""Batched full-batch (perturbed) GD on Nichani et al.'s Taylor model f_L + f_Q + lambda3 R3.

For a batch of B regularization strengths lambda3_b sharing one initialization and data set,
every step updates W (B, m, d) by perturbed gradient descent (Eq. (21)):

    W <- W - eta (grad_W [ E_n (y - f)^2 + lambda3 R3(W) ] + Xi),  Xi_ij ~ N(0, s^2/(m d)),

with f = f_L + f_Q (or one of them: the ``terms`` argument) and the square loss as a plain mean
(as in the authors' code for Fig. 1, Sec. 5). The gradient is closed form (from Eq. (12)):

    grad_W = [ diag(c + lambda3 (2/n) P2 f_L) D1 + diag(c) D2 * Z ]^T X,
    c = (2/n)(f - y),  Z = X W^T,  f_L = rowsum(D1 * Z),  f_Q = rowsum(D2 * Z * Z)/2,

so one step is two batched GEMMs of size n x m x d (Z and the pull-back) plus six
elementwise passes over (B, n, m) in preallocated buffers (D1 * Z, D2 * Z, D2 * Z * Z and
the in-place build of the pull-back weights); the B values share D1, D2 and X and run as one
batched computation. On a GPU, where each of those passes costs as much as a tenth of a GEMM
(0.36 GB at the paper's sizes), the elementwise work is fused by ``torch.compile`` into two
kernels, one that reads Z once for D2 * Z, f_L and f_Q and one for the pull-back weights
(:func:`fused_path`: a one-time probe per device, the eager passes as the fallback). On a
CPU the step runs over blocks of :data:`CPU_COLUMNS` hidden units, so that those passes stay
in cache (:func:`_step_grad_blocks`). With
s = 0 (the experiments' setting) this is plain GD. R3 comes from
:class:`~lazylab.train.nichani.regularizers.R3Empirical`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from lazylab.models.nichani.network import TaylorFeatures
from lazylab.train.meter import evaluation, loop_steps
from lazylab.train.nichani.regularizers import R3Empirical

TERMS = ("L", "Q")


@dataclass
class TaylorRun:
    """Logged trajectory: arrays of shape (len(steps), B) per metric, and the final W."""

    steps: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    W: torch.Tensor | None = None


def _masks(terms: Sequence[str] | Sequence[Sequence[str]], B: int, like: torch.Tensor,
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 1) float masks of f_L and f_Q: one ``terms`` for all members or one per member."""
    per = [terms] * B if all(isinstance(t, str) for t in terms) else list(terms)
    if len(per) != B:
        raise ValueError(f"terms must be one subset of {TERMS} or one per lam3 value ({B})")
    for t in per:
        if not t or any(x not in TERMS for x in t):
            raise ValueError(f"terms must be non-empty subsets of {TERMS}; got {list(t)}")
    ml = torch.tensor([[float("L" in t)] for t in per], dtype=like.dtype, device=like.device)
    mq = torch.tensor([[float("Q" in t)] for t in per], dtype=like.dtype, device=like.device)
    return ml, mq


def _buf(work: dict[str, torch.Tensor] | None, name: str, shape: tuple[int, ...],
         like: torch.Tensor) -> torch.Tensor | None:
    """A reusable workspace tensor (None without a workspace: torch allocates)."""
    if work is None:
        return None
    b = work.get(name)
    if b is None or b.shape != shape or b.dtype != like.dtype or b.device != like.device:
        b = torch.empty(shape, dtype=like.dtype, device=like.device)
        work[name] = b
    return b


def taylor_step_grad(feats: TaylorFeatures, W: torch.Tensor, y: torch.Tensor,
                     lam3: torch.Tensor | None, r3: R3Empirical | None, *,
                     ml: torch.Tensor | None = None, mq: torch.Tensor | None = None,
                     work: dict[str, torch.Tensor] | None = None,
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradient of E_n (y - f)^2 + lam3 R3 at W (B, m, d), f = ml f_L + mq f_Q.

    ``ml``, ``mq``: (B, 1) 0/1 masks of the two terms (default both on). ``work``: a dict
    reused across steps for the (B, n, m) intermediates (no allocation, hence no page faults,
    per step); the returned gradient then lives in it until the next call. Returns
    (grad (B, m, d), f (B, n), f_L (B, n)).
    """
    n, X = feats.n, feats.X
    big = (*W.shape[:-2], n, feats.m)
    cols = CPU_COLUMNS
    if work is not None and X.device.type == "cpu" and cols is not None and feats.m > cols:
        return _step_grad_blocks(feats, W, y, lam3, r3, ml, mq, work, cols)
    Z = torch.matmul(X, W.transpose(-1, -2), out=_buf(work, "Z", big, X))  # GEMM 1: X W^T
    fused = fused_for(X.device, Z.numel())
    if fused is not None:
        T, fl, fq = fused[0](Z, feats.D1, feats.D2)
    else:
        P = torch.mul(Z, feats.D1, out=_buf(work, "P", big, X))
        fl = P.sum(-1)                                   # f_L = sum_r D1 Z
        T = torch.mul(Z, feats.D2, out=_buf(work, "T", big, X))
        fq = 0.5 * torch.mul(T, Z, out=P).sum(-1)        # f_Q = sum_r D2 Z^2 / 2
    f, cl, cq = _output_factors(fl, fq, y, n, lam3, r3, ml, mq)
    if fused is not None:
        G = fused[1](T, feats.D1, cq, cl)
    else:
        # G = diag(cq) D2 * Z + diag(cl) D1, built in place in T (two passes, no new (B, n, m))
        G = T.mul_(cq.unsqueeze(-1)).addcmul_(feats.D1, cl.unsqueeze(-1))
    # GEMM 2, G^T X, formed as its transpose X^T G (B, d, m): the GEMM without a transposed
    # (n, m) operand is 1.4x faster on a CPU at the quick sizes; the gradient is its view.
    out = _buf(work, "grad", (*W.shape[:-2], X.shape[1], feats.m), X)
    return torch.matmul(X.T, G, out=out).transpose(-1, -2), f, fl


#: Hidden units of one column block of a CPU step (:func:`_step_grad_blocks`), so that its
#: (B, n, block) intermediates stay in cache; None: the whole (B, n, m) arrays at once.
CPU_COLUMNS: int | None = 512


def _output_factors(fl: torch.Tensor, fq: torch.Tensor, y: torch.Tensor, n: int,
                    lam3: torch.Tensor | None, r3: R3Empirical | None,
                    ml: torch.Tensor | None, mq: torch.Tensor | None
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(f, c_L, c_Q): the output and the per-sample factors of the pull-back weights,
    c = (2/n)(f - y), c_L = ml c + lam3 (2/n) P2 f_L, c_Q = mq c."""
    f = (fl if ml is None else ml * fl) + (fq if mq is None else mq * fq)
    c = (2.0 / n) * (f - y)
    cl = c if ml is None else ml * c
    cq = c if mq is None else mq * c
    if r3 is not None and lam3 is not None:
        cl = cl + lam3.unsqueeze(-1) * (2.0 / n) * r3.project(fl)
    return f, cl, cq


def _step_grad_blocks(feats: TaylorFeatures, W: torch.Tensor, y: torch.Tensor,
                      lam3: torch.Tensor | None, r3: R3Empirical | None,
                      ml: torch.Tensor | None, mq: torch.Tensor | None,
                      work: dict[str, torch.Tensor], cols: int
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`taylor_step_grad` over blocks of ``cols`` hidden units, in two passes: Z, f_L,
    f_Q and T = D2 * Z block by block (T kept), then the pull-back weights and GEMM 2. Each
    block's (B, n, cols) intermediates stay in cache, where the whole arrays' elementwise
    passes stream through memory (``bench/bench_nichani_step.py``); f_L and f_Q are sums of
    the blocks' sums (the same up to rounding). The blocks of D1, D2 and T are contiguous
    copies kept in ``work`` (:func:`_column_blocks`): column slices of the (n, m) arrays cost
    the elementwise passes a fifth of a step more (``bench/bench_nichani_step.py``)."""
    X, m = feats.X, feats.m
    lead = tuple(W.shape[:-2])
    blocks = [slice(a, min(a + cols, m)) for a in range(0, m, cols)]
    d1, d2, ts = _column_blocks(feats, blocks, lead, work)
    fl, fq = (X.new_zeros(*lead, feats.n) for _ in range(2))
    for b, d1b, d2b, tb in zip(blocks, d1, d2, ts, strict=True):
        Z = torch.matmul(X, W[..., b, :].transpose(-1, -2))
        torch.mul(Z, d2b, out=tb)
        fl.add_((Z * d1b).sum(-1))
        fq.add_((tb * Z).sum(-1))
    f, cl, cq = _output_factors(fl, fq.mul_(0.5), y, feats.n, lam3, r3, ml, mq)
    out = _buf(work, "grad", (*lead, X.shape[1], m), X)
    assert out is not None
    cq, cl = cq.unsqueeze(-1), cl.unsqueeze(-1)
    for b, d1b, tb in zip(blocks, d1, ts, strict=True):
        torch.matmul(X.T, tb.mul_(cq).addcmul_(d1b, cl), out=out[..., b])
    return out.transpose(-1, -2), f, fl


def _column_blocks(feats: TaylorFeatures, blocks: list[slice], lead: tuple[int, ...],
                   work: dict[str, torch.Tensor]
                   ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    """Contiguous column blocks of D1 and D2 (copied once per ``feats``) and of the T
    workspace (lead + (n, block)), cached in ``work`` under "D1:a:b", "D2:a:b", "T:a:b" for
    the columns a:b (so another partition never reads a block of this one)."""
    if work.get("D1:src") is not feats.D1 or work.get("D2:src") is not feats.D2:
        for k in [k for k in work if k[:3] in ("D1:", "D2:")]:
            del work[k]
        work["D1:src"], work["D2:src"] = feats.D1, feats.D2
    d1, d2, ts = [], [], []
    for b in blocks:
        cols = f"{b.start}:{b.stop}"
        for name, src, acc in (("D1", feats.D1, d1), ("D2", feats.D2, d2)):
            key = f"{name}:{cols}"
            if key not in work:
                work[key] = src[:, b].contiguous()
            acc.append(work[key])
        t = _buf(work, f"T:{cols}", (*lead, feats.n, b.stop - b.start), feats.X)
        assert t is not None
        ts.append(t)
    return d1, d2, ts


def _forward_terms(Z: torch.Tensor, D1: torch.Tensor, D2: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(T = D2 * Z, f_L = rowsum(D1 * Z), f_Q = rowsum(T * Z) / 2) from one read of Z."""
    T = Z * D2
    return T, (Z * D1).sum(-1), 0.5 * (T * Z).sum(-1)


def _pullback_weights(T: torch.Tensor, D1: torch.Tensor, cq: torch.Tensor, cl: torch.Tensor
                      ) -> torch.Tensor:
    """G = diag(cq) D2 * Z + diag(cl) D1, with T = D2 * Z."""
    return T * cq.unsqueeze(-1) + D1 * cl.unsqueeze(-1)


_FUSED: dict[str, tuple[Callable, Callable] | None] = {}
#: Fuse only from this many (B, n, m) elements (64 MB in float32). Measured on an H100: at the
#: paper's 9 x 10^7 the fused step takes 1.92 ms against 3.23 ms eager (1.06 ms of GEMMs); at
#: the quick sizes' ~10^6 the step is launch-bound and the compiled functions' call overhead
#: makes it slower (0.33 ms against 0.22 ms eager).
FUSE_MIN_ELEMS = 1 << 24


def fused_path(device: torch.device) -> tuple[Callable, Callable] | None:
    """The ``torch.compile``-fused (forward terms, pull-back weights) for ``device``, or None.

    Only on CUDA (on a CPU the eager passes in reused buffers already keep the step within
    1.3x of its GEMMs, and compiling needs a C++ toolchain). The first call per device compiles
    both functions and checks them against the eager ones on a small problem (relative error
    <= 1e-5); a failure of either, or ``LAZYLAB_FUSED_STEP=0``, selects the eager path for the
    rest of the process. The choice is reported by ``bench/bench_nichani_step.py``.
    """
    if device.type != "cuda" or os.environ.get("LAZYLAB_FUSED_STEP", "1") == "0":
        return None
    key = str(device)
    if key not in _FUSED:
        _FUSED[key] = _probe(device)
    return _FUSED[key]


def fused_for(device: torch.device, elems: int) -> tuple[Callable, Callable] | None:
    """:func:`fused_path` for a step whose (B, n, m) intermediates have ``elems`` elements:
    None below :data:`FUSE_MIN_ELEMS`, where the eager passes are faster."""
    return fused_path(device) if elems >= FUSE_MIN_ELEMS else None


def _probe(device: torch.device) -> tuple[Callable, Callable] | None:
    try:
        fwd = torch.compile(_forward_terms, fullgraph=True, dynamic=False)
        pull = torch.compile(_pullback_weights, fullgraph=True, dynamic=False)
        g = torch.Generator(device=device).manual_seed(0)
        Z, D1, D2 = (torch.randn(3, 8, 64, generator=g, device=device) for _ in range(3))
        D1, D2 = D1[0], D2[0]
        cq, cl = torch.randn(2, 3, 8, generator=g, device=device)
        for got, ref in zip((*fwd(Z, D1, D2), pull(Z, D1, cq, cl)),
                            (*_forward_terms(Z, D1, D2), _pullback_weights(Z, D1, cq, cl)),
                            strict=True):
            if not bool(((got - ref).abs().max() <= 1e-5 * ref.abs().max()).item()):
                return None
        return fwd, pull
    except Exception:  # noqa: BLE001 - any compile or run failure selects the eager path
        return None


def train_taylor(train: TaylorFeatures, y: torch.Tensor, *, steps: int, lr: float,
                 log_steps: Sequence[int], lam3: Sequence[float] = (0.0,),
                 r3: R3Empirical | None = None,
                 terms: Sequence[str] | Sequence[Sequence[str]] = TERMS,
                 test: TaylorFeatures | None = None, y_test: torch.Tensor | None = None,
                 W_init: torch.Tensor | None = None, noise_std: float = 0.0,
                 generator: torch.Generator | None = None) -> TaylorRun:
    """Train B = len(lam3) models as one batched computation; log losses, R3 and movement.

    The pieces: the arguments checked (:func:`_check_taylor`), the start W (:func:`_start`),
    the logged steps (:func:`_logged`), then per step the gradient
    (:func:`taylor_step_grad`), the record (:func:`_log`) and the noisy GD update (Eq. (21)).

    Parameters
    ----------
    train, y : training features and targets (n,).
    steps, lr : number of GD steps and step size eta.
    log_steps : steps (0..steps) at which metrics are recorded.
    lam3 : regularization strengths (one trajectory each); needs ``r3`` if any is nonzero.
    r3 : the empirical R3 of the training set (also logged when given).
    terms : ("L", "Q") for f_L + f_Q, ("L",) for f_L only, ("Q",) for f_Q only; one subset
        for every member or a list of one subset per member.
    test, y_test : optional test set (test loss logged).
    W_init : (m, d) or (B, m, d) start (default 0; f_Q alone needs a small random start,
        W = 0 is a saddle of f_Q).
    noise_std : s in Eq. (21): Xi entries N(0, s^2/(m d)); needs ``generator`` when > 0.

    Returns
    -------
    TaylorRun with metrics ``train_loss``, ``test_loss``, ``test_loss_se`` (the test set's
    Monte Carlo SE of the test loss: std over test points of (f - y)^2 / sqrt(n_test)),
    ``R3``, ``fro`` (||W||_F) and ``max_row`` (max_r ||w_r||), each (len(log_steps), B).
    """
    lam = _check_taylor(train, steps, lam3, r3, noise_std, generator)
    B, m, d = len(lam), train.m, train.X.shape[1]
    ml, mq = _masks(terms, B, train.X)
    W = _start(train, B, W_init)
    y = y.to(train.X.dtype)
    steps, logs = _logged(steps, log_steps)
    log_set = set(logs)
    out: dict[str, list[np.ndarray]] = {k: [] for k in
                                        ("train_loss", "test_loss", "test_loss_se", "R3",
                                         "fro", "max_row")}
    noise_scale = noise_std / (m * d) ** 0.5
    work: dict[str, torch.Tensor] = {}
    for t in range(int(steps) + 1):
        grad, f, fl = taylor_step_grad(train, W, y, lam if r3 is not None else None, r3,
                                       ml=ml, mq=mq, work=work)
        if t in log_set:
            with evaluation():
                _log(out, t, lr, f, fl, y, W, train, r3, test, y_test, ml, mq)
        if t == steps:
            break
        if noise_std > 0:
            grad = grad + noise_scale * torch.randn(W.shape, generator=generator,
                                                    device=W.device, dtype=W.dtype)
        W.sub_(grad, alpha=lr)
    metrics = {k: np.stack(v) for k, v in out.items() if v}
    return TaylorRun(np.array(logs), metrics, W.contiguous())


def _check_taylor(train: TaylorFeatures, steps: int, lam3: Sequence[float],
                  r3: R3Empirical | None, noise_std: float,
                  generator: torch.Generator | None) -> torch.Tensor:
    """The strengths lam3 as a tensor on the data's device, once the arguments of
    :func:`train_taylor` are checked (ValueError naming the bad one)."""
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0; got {steps!r}")
    lam = torch.as_tensor(list(lam3), dtype=train.X.dtype, device=train.X.device)
    if lam.ndim != 1 or len(lam) == 0 or bool((lam < 0).any()):
        raise ValueError(f"lam3 must be a non-empty list of numbers >= 0; got {list(lam3)}")
    if r3 is None and bool((lam > 0).any()):
        raise ValueError("lam3 > 0 needs the r3 regularizer")
    if noise_std > 0 and generator is None:
        raise ValueError("noise_std > 0 needs a generator")
    return lam


def _start(train: TaylorFeatures, B: int, W_init: torch.Tensor | None) -> torch.Tensor:
    """The start W (B, m, d): ``W_init`` broadcast, or 0.

    W is a view of (B, d, m) storage, the layout of the gradient (formed as X^T G): the
    update then reads both in memory order (at the quick sizes, B = 7, m = 7000, d = 25, one
    thread: 0.45 ms against 3.8 ms with W contiguous), and X W^T is a product with no
    transposed operand."""
    W = torch.zeros(B, train.X.shape[1], train.m, dtype=train.X.dtype,
                    device=train.X.device).transpose(-1, -2)
    if W_init is not None:
        W.add_(W_init.to(W))
    return W


def _logged(steps: int, log_steps: Sequence[int]) -> tuple[int, list[int]]:
    """(steps to run, the sorted logged steps among them): the run shortened where a cost
    measurement asks (:func:`lazylab.train.meter.loop_steps`)."""
    n_logs = len({int(s) for s in log_steps if 0 <= int(s) <= steps})
    steps = loop_steps(steps, evaluations=n_logs)
    return steps, sorted({int(s) for s in log_steps if 0 <= int(s) <= steps})


def _log(out: dict[str, list[np.ndarray]], t: int, lr: float, f: torch.Tensor,
         fl: torch.Tensor, y: torch.Tensor, W: torch.Tensor, train: TaylorFeatures,
         r3: R3Empirical | None, test: TaylorFeatures | None, y_test: torch.Tensor | None,
         ml: torch.Tensor, mq: torch.Tensor) -> None:
    """Append step t's metrics (:func:`train_taylor`) to ``out``."""
    loss = ((f - y) ** 2).mean(-1)
    if not bool(torch.isfinite(loss).all()):
        raise FloatingPointError(f"GD diverged at step {t} (lr={lr})")
    out["train_loss"].append(loss.cpu().numpy())
    if r3 is not None:
        out["R3"].append(((fl * r3.project(fl)).sum(-1) / train.n).cpu().numpy())
    out["fro"].append(W.pow(2).sum((-1, -2)).sqrt().cpu().numpy())
    out["max_row"].append(W.pow(2).sum(-1).amax(-1).sqrt().cpu().numpy())
    if test is not None and y_test is not None:
        te_loss, te_se = _loss(test, W, y_test, ml, mq)
        out["test_loss"].append(te_loss.cpu().numpy())
        out["test_loss_se"].append(te_se.cpu().numpy())


#: Elements of one (B, rows, m) block of a logged test evaluation (2^22: 16 MB in float32).
#: Whole, the quick scale's (6, 2000, 7000) blocks took 1.7 GB of fresh pages per evaluation,
#: more system time than the training; blocks this size are reused from the allocator.
EVAL_BLOCK_ELEMS = 1 << 22


def _predict(feats: TaylorFeatures, W: torch.Tensor, ml: torch.Tensor, mq: torch.Tensor
             ) -> torch.Tensor:
    """f = ml f_L + mq f_Q at every point of ``feats`` (B, N), a block of rows at a time and
    one product Z = X W^T per block for both terms."""
    B, N, m = W.shape[0], feats.n, feats.m
    rows = max(1, EVAL_BLOCK_ELEMS // (B * m))
    f = torch.empty(B, N, dtype=W.dtype, device=W.device)
    Z = P = None
    for s in range(0, N, rows):
        e = min(N, s + rows)
        shape = (B, e - s, m)
        if Z is None or Z.shape != shape:
            Z, P = W.new_empty(shape), W.new_empty(shape)
        torch.matmul(feats.X[s:e], W.transpose(-1, -2), out=Z)
        fl = torch.mul(Z, feats.D1[s:e], out=P).sum(-1)
        fq = 0.5 * torch.mul(Z, feats.D2[s:e], out=P).mul_(Z).sum(-1)
        f[:, s:e] = ml * fl + mq * fq
    return f


def _loss(feats: TaylorFeatures, W: torch.Tensor, y: torch.Tensor, ml: torch.Tensor,
          mq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean of e = (f - y)^2 over the points, its Monte Carlo SE std(e) / sqrt(N)), (B,)."""
    e2 = (_predict(feats, W, ml, mq) - y.to(W.dtype)) ** 2
    se = e2.std(-1) / e2.shape[-1] ** 0.5 if e2.shape[-1] > 1 else torch.zeros_like(e2[..., 0])
    return e2.mean(-1), se
