"""Many two-layer quadratic networks trained as ONE block-diagonal network by one-pass SGD.

Ghorbani et al. (2019, Sec. 2.3 and the companion code) train, for every width N of a grid
and every step size of a search, the network

    f_j(x) = sum_{i <= N_j} a_{j,i} (w_{j,i} . x)^2 + c_j

by one-pass SGD on the loss mean_b (y_b - f_j(x_b))^2 (fresh samples every step; the step
size eta_j times the schedule's multiplier). One configuration at a time, a step of such a
small network is a few dozen kernel launches that each do little work. Here the G members
share one stream of samples and their hidden units are concatenated into one (P, d) matrix,
P = sum_j N_j: a step of all of them is two GEMMs and a few elementwise operations, whatever
G is. Each member's output is a per-block sum (``index_add``, never a product with a 0/1
matrix), so a member that overflows leaves NaNs in its own block only.

The gradients are written out (no autograd), for r_{b,j} = f_j(x_b) - y_b:

    dL_j/dc_j = (2/B) sum_b r_{b,j},
    dL_j/dw_{j,i} = (2/B) sum_b r_{b,j} 2 a_{j,i} (w_{j,i} . x_b) x_b,
    dL_j/da_{j,i} = (2/B) sum_b r_{b,j} (w_{j,i} . x_b)^2,

and each member's update follows plain SGD (``lazylab.train.fit`` with ``optimizer=
"one_pass"``, no momentum) to rounding. Divergence is decided as ``fit`` decides it: a member
whose batch loss is not finite at a multiple of ``check_every`` steps, or whose final loss is
not finite, has diverged; it is then dropped from the packed matrices, so it stops costing
work.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from lazylab.train import capture as cg
from lazylab.train.meter import loop_steps

__all__ = ["PackedQuadResult", "train_packed_quad"]

Sampler = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class PackedQuadResult:
    """Trained members in input order: ``W[j]`` (N_j, d), ``a[j]`` (N_j,), ``c`` (G,),
    ``final_loss`` (G,) on one extra batch after the last step (as ``fit`` logs it), and
    ``diverged`` (G,) booleans (a diverged member's parameters are those at detection)."""

    W: list[torch.Tensor]
    a: list[torch.Tensor]
    c: torch.Tensor
    final_loss: torch.Tensor
    diverged: torch.Tensor


class _Pack:
    """The live members' parameters concatenated, with each hidden unit's member index."""

    def __init__(self, W: list[torch.Tensor], a: list[torch.Tensor], c: torch.Tensor,
                 lrs: torch.Tensor, ids: list[int]):
        self.ids = ids
        self.W = torch.cat(W)
        self.a = torch.cat(a)
        self.c = c.clone()
        sizes = torch.tensor([len(w) for w in W], device=self.W.device)
        self.seg = torch.repeat_interleave(torch.arange(len(ids), device=self.W.device), sizes)
        self.lr = lrs.to(self.W)
        self.lr_unit = self.lr[self.seg]

    def forward(self, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(pre-activations H (P, B), outputs (G, B)): hidden units along rows, so the
        per-member sums and gathers move whole contiguous rows."""
        H = self.W @ X.T
        out = torch.zeros(len(self.ids), X.shape[0], dtype=X.dtype, device=X.device)
        out.index_add_(0, self.seg, H * H * self.a.unsqueeze(1))
        return H, out + self.c.unsqueeze(1)

    def step(self, X: torch.Tensor, y: torch.Tensor, mult: torch.Tensor,
             train_second: bool) -> torch.Tensor:
        """One SGD step of every member on (X, y); returns the batch losses (G,) before it."""
        H, out = self.forward(X)
        r = out - y.unsqueeze(0)
        loss = (r * r).mean(1)
        g_out = r * (2.0 / X.shape[0])
        g_Z = g_out.index_select(0, self.seg)
        step = mult * self.lr_unit
        # The step size folded into the (P, B) factor: the W update is one fused GEMM,
        # W <- W - (step g_H) X, with no extra pass over the (P, d) matrix.
        g_Hs = g_Z * H * (2.0 * step * self.a).unsqueeze(1)  # with a before this update
        if train_second:
            self.a -= step * (g_Z * H * H).sum(1)
        self.W.addmm_(g_Hs, X, alpha=-1.0)
        self.c -= (mult * self.lr) * g_out.sum(1)
        return loss


def train_packed_quad(W0: Sequence[torch.Tensor], lrs: Sequence[float], *, sampler: Sampler,
                      steps: int, batch_size: int, generator: torch.Generator,
                      schedule: Callable[[int], float] | None = None,
                      a0: Sequence[torch.Tensor] | None = None, train_second: bool = False,
                      check_every: int = 50, capture: bool | None = None
                      ) -> PackedQuadResult:
    """Train G quadratic networks from ``W0[j]`` (N_j, d) with step sizes ``lrs[j]`` on one
    stream of ``sampler(batch_size, generator)`` batches (module docstring).

    ``a0[j]`` are the second layers (default ones); ``train_second`` trains them too (else
    fixed). The offsets c_j start at 0 and are trained. ``schedule(t)`` multiplies every step
    size at step t (None: 1). ``capture``: replay the steps from a CUDA graph
    (:mod:`lazylab.train.capture`; None: where the device's probe passed and the loop is
    long, False: never, True: without consulting the probe).
    """
    if len(W0) != len(lrs) or not W0:
        raise ValueError(f"W0 and lrs must be non-empty and of one length; got {len(W0)} and "
                         f"{len(lrs)}")
    W = [w.detach().clone() for w in W0]
    a = ([x.detach().clone() for x in a0] if a0 is not None
         else [torch.ones(len(w), dtype=w.dtype, device=w.device) for w in W])
    c = torch.zeros(len(W), dtype=W[0].dtype, device=W[0].device)
    dead = torch.zeros(len(W), dtype=torch.bool)
    lr_all = torch.tensor([float(v) for v in lrs], dtype=torch.float64)
    pack = _Pack(W, a, c, lr_all, list(range(len(W))))
    steps = loop_steps(steps)
    device = pack.W.device
    graphs = (capture if capture is not None
              else steps >= cg.MIN_STEPS and cg.enabled(device))
    mult = torch.ones((), dtype=pack.W.dtype, device=device)
    replay = None

    def one_step() -> torch.Tensor:
        X, y = sampler(batch_size, generator)
        return pack.step(X, y, mult, train_second)

    for t in range(steps + 1):
        if t == steps:
            X, y = sampler(batch_size, generator)
            with torch.no_grad():
                _, out = pack.forward(X)
                final = ((out - y.unsqueeze(0)) ** 2).mean(1)
            break
        if schedule is not None:
            mult.fill_(schedule(t))
        if graphs and replay is None and t >= cg.WARMUP and steps - t >= cg.MIN_STEPS // 2:
            try:
                replay = cg.capture(one_step, device, (generator,))
            except Exception:  # noqa: BLE001 - a step that cannot be captured runs eagerly
                graphs = False
        loss = replay() if replay is not None else one_step()
        if check_every and t % check_every == 0:
            bad = ~torch.isfinite(loss).cpu()
            if bool(bad.any()):
                pack, replay = _drop(pack, bad, W, a, c, dead, lr_all), None
                if not pack.ids:
                    return _result(W, a, c, torch.full((len(W),), float("nan")), dead)
    final_all = torch.full((len(W),), float("nan"), dtype=torch.float64)
    final_all[pack.ids] = final.detach().double().cpu()
    _unpack(pack, W, a, c)
    dead |= ~torch.isfinite(final_all)
    return _result(W, a, c, final_all, dead)


def _unpack(pack: _Pack, W: list[torch.Tensor], a: list[torch.Tensor], c: torch.Tensor) -> None:
    """Copy the live members' packed parameters back into the per-member lists."""
    start = 0
    for k, j in enumerate(pack.ids):
        n = len(W[j])
        W[j], a[j] = pack.W[start:start + n].clone(), pack.a[start:start + n].clone()
        c[j] = pack.c[k]
        start += n


def _drop(pack: _Pack, bad: torch.Tensor, W: list[torch.Tensor], a: list[torch.Tensor],
          c: torch.Tensor, dead: torch.Tensor, lr_all: torch.Tensor) -> _Pack:
    """Mark the members flagged ``bad`` (positions in the pack) diverged and repack the rest."""
    _unpack(pack, W, a, c)
    for k, j in enumerate(pack.ids):
        if bad[k]:
            dead[j] = True
    ids = [j for j in pack.ids if not dead[j]]
    if not ids:
        pack.ids = []
        return pack
    return _Pack([W[j] for j in ids], [a[j] for j in ids], c[ids], lr_all[ids], ids)


def _result(W: list[torch.Tensor], a: list[torch.Tensor], c: torch.Tensor, final: torch.Tensor,
            dead: torch.Tensor) -> PackedQuadResult:
    return PackedQuadResult(W, a, c, final, dead.clone())
