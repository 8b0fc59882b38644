"""Structured derivatives for the empirical NTK of any module (Novak et al. 2022, ICML).

For a linear layer y = W x + b inside a network f, the chain rule gives the per-example,
per-output gradient df_o(x_i)/dW = dy_i^o x_i^T with dy_i^o = df_o(x_i)/dy_i, so the layer's
share of the NTK is, without ever forming df/dW,

    K_W[i, j, o, p] = sum_{t, s} <x_i(t), x_j(s)> <dy_i^o(t), dy_j^p(s)>,
    K_b[i, j, o, p] = <sum_t dy_i^o(t), sum_s dy_j^p(s)>,

where t, s run over the positions at which the layer is applied (one for a plain MLP; the
tokens of a sequence; every use of a shared layer). A convolution is the same rule over
patches: x_i(t) is the (zero-padded, dilated) input patch under output position t and the
sum runs per group (patches from ``F.unfold``). Per layer the cheaper of two contraction
orders is taken (Novak et al. Sec. 4, by the flop counts of :func:`linear_costs`):

* "pairwise": Gram matrices of inputs and of cotangents, b b' T^2 (k + O^2 c) flop;
* "grads": per-example gradients G_i^o = sum_t dy_i^o(t) x_i(t)^T, then <G_i^o, G_j^p>,
  b O T k c + b b' O^2 k c flop (better with many positions and few weights: early convs).

The inputs x come from forward hooks and the cotangents dy from one backward pass per output
through the batch (autodiff, so elementwise layers in between need nothing). Parameters of any
other module (LayerNorm, Embedding, BatchNorm in eval mode, a custom module) get the same
treatment with the module's own local vector-Jacobian product (``torch.func.vjp`` of that
module alone, vmapped over examples and outputs): the per-layer Jacobian, exact, without a
backward pass through the whole network per example. A parameter used outside the forward of
the module that owns it (or whose module is called with several inputs) falls back to the
Jacobian of the whole network (``vmap(jacrev)``), so the kernel is exact in every case.

Assumes the network treats the examples of a batch independently (true in eval mode for the
usual layers; train-mode batch normalization is refused by the caller).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vjp, vmap
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

_CONV = (nn.Conv1d, nn.Conv2d)
_SPECIAL = (nn.Linear, *_CONV)
# A subclass that overrides forward may compute something else: it takes the local route.
_SPECIAL_FORWARDS = tuple(c.forward for c in _SPECIAL)


# ------------------------------------------------------------------ probing the network


class _UseTracer(TorchFunctionMode):
    """Records, for every torch call that takes a watched tensor, which module forwards are
    active (so a parameter used outside its owner's forward is detected)."""

    def __init__(self, watched: dict[int, str], active: list[nn.Module]):
        super().__init__()
        self.watched, self.active = watched, active
        self.uses: dict[str, list[frozenset[int]]] = {}
        self.flop = 0.0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
        flat, _ = tree_flatten((args, kwargs or {}))
        for t in flat:
            if isinstance(t, torch.Tensor) and id(t) in self.watched:
                self.uses.setdefault(self.watched[id(t)], []).append(
                    frozenset(id(m) for m in self.active))
        out = func(*args, **(kwargs or {}))
        self.flop += _flop(func, args, out)
        return out


_MATMULS = {torch.matmul, torch.mm, torch.bmm, torch.Tensor.matmul, torch.Tensor.__matmul__,
            torch.Tensor.mm, torch.Tensor.bmm}
_CONVS = {F.conv1d, F.conv2d, F.conv3d}


def _flop(func: Any, args: Any, out: Any) -> float:
    """Flop of one torch call from its shapes: 2 k per output entry for linear maps and
    convolutions (k: the contracted length), one per output entry for anything else."""
    if not isinstance(out, torch.Tensor):
        return 0.0
    a = args[0] if args else None
    if func is F.linear and isinstance(a, torch.Tensor):
        return 2.0 * out.numel() * a.shape[-1]
    if func in _MATMULS and isinstance(a, torch.Tensor) and a.ndim >= 1:
        return 2.0 * out.numel() * a.shape[-1]
    if func in _CONVS and len(args) > 1 and isinstance(args[1], torch.Tensor):
        w = args[1]
        return 2.0 * out.numel() * (w.numel() // max(1, w.shape[0]))
    return float(out.numel())


@dataclass
class StructuredPlan:
    """How each trained tensor's share of the kernel is computed.

    ``special``: canonical name -> (modules calling it, role "weight"/"bias") for
    Linear/Conv parameters under the structured rule; ``local``: module id -> (module, [(local
    name, canonical name)]) for parameters under a module's local VJP; ``global_names``:
    parameters through the whole network's Jacobian. ``calls``: module id -> (input shape,
    output shape) of each probed call; ``flop``: flop of one forward pass of one example.
    """

    special: dict[str, tuple[list[nn.Module], str]] = field(default_factory=dict)
    local: dict[int, tuple[nn.Module, list[tuple[str, str]]]] = field(default_factory=dict)
    global_names: list[str] = field(default_factory=list)
    watch: dict[int, nn.Module] = field(default_factory=dict)
    calls: dict[int, list[tuple[tuple[int, ...], tuple[int, ...]]]] = field(default_factory=dict)
    n_out: int = 1
    flop: float = 0.0

    @property
    def routes(self) -> dict[str, str]:
        """Canonical name -> "structured", "local" or "jacobian"."""
        out = {k: "structured" for k in self.special}
        out.update({c: "local" for _, ps in self.local.values() for _, c in ps})
        out.update({k: "jacobian" for k in self.global_names})
        return out


def _same_config(mods: list[nn.Module]) -> bool:
    m0 = mods[0]
    if any(type(m) is not type(m0) for m in mods):
        return False
    if isinstance(m0, nn.Linear):
        return True
    keys = ("kernel_size", "stride", "padding", "dilation", "groups", "padding_mode")
    return all(getattr(m, k) == getattr(m0, k) for m in mods for k in keys) and \
        m0.padding_mode == "zeros"


def _probe(net: nn.Module, x1: torch.Tensor, watched: dict[int, str]
           ) -> tuple[dict[str, list[frozenset[int]]], dict[int, list[Any]], float]:
    """One forward pass of a probe batch recording parameter uses and module call signatures
    (a call counts as per-example when its one tensor input and output lead with the batch)."""
    nb = x1.shape[0]
    active: list[nn.Module] = []
    calls: dict[int, list[Any]] = {}
    handles = []

    def pre(m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        active.append(m)
        ok = (len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor)
              and args[0].ndim >= 1 and args[0].shape[0] == nb)
        calls.setdefault(id(m), []).append([ok, tuple(args[0].shape) if ok else None])

    def post(m: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        active.pop()
        rec = calls[id(m)][-1]
        rec[0] = rec[0] and isinstance(out, torch.Tensor) and out.ndim >= 1 \
            and out.shape[0] == nb
        rec.append(tuple(out.shape) if rec[0] else None)

    for m in net.modules():
        handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(m.register_forward_hook(post))
    tracer = _UseTracer(watched, active)
    try:
        with torch.no_grad(), tracer:
            net(x1)
    finally:
        for h in handles:
            h.remove()
    return tracer.uses, calls, tracer.flop / nb


def plan_structured(net: nn.Module, names: list[str], x1: torch.Tensor, n_out: int
                    ) -> StructuredPlan:
    """Assign each trained tensor (canonical ``names``) a route (see :class:`StructuredPlan`);
    ``x1`` is one example (probed as a batch of two equal rows, so the batch dim is seen)."""
    x1 = torch.cat([x1[:1], x1[:1]])
    tensors = dict(net.named_parameters()) | dict(net.named_buffers())
    watched = {id(tensors[k]): k for k in names}
    owners: dict[str, list[tuple[nn.Module, str]]] = {k: [] for k in names}
    for m in net.modules():
        for local, p in m.named_parameters(recurse=False):
            if id(p) in watched:
                owners[watched[id(p)]].append((m, local))
    uses, calls, flop = _probe(net, x1, watched)
    plan = StructuredPlan(n_out=n_out, flop=flop)
    for name in names:
        own = owners[name]
        mods = [m for m, _ in own]
        ids = {id(m) for m in mods}
        clean = bool(own) and all(len(ids & u) == 1 for u in uses.get(name, [])) and all(
            rec[0] for m in mods for rec in calls.get(id(m), []))
        if not clean:
            plan.global_names.append(name)
            continue
        roles = {local for _, local in own}
        if (all(type(m).forward in _SPECIAL_FORWARDS for m in mods) and len(roles) == 1
                and _same_config(mods)):
            plan.special[name] = (mods, roles.pop())
        else:
            for m, local in own:
                plan.local.setdefault(id(m), (m, []))[1].append((local, name))
        for m in mods:
            plan.watch[id(m)] = m
            plan.calls[id(m)] = [(rec[1], rec[2]) for rec in calls.get(id(m), [])]
    return plan


# ------------------------------------------------------------ capturing x and dy per block


@dataclass
class Features:
    """Per block of examples: inputs and output cotangents of every watched module call
    (dy: (b, O_sel, *y.shape[1:])), and the whole-network Jacobian of fallback parameters."""

    xs: dict[int, list[torch.Tensor]]
    dys: dict[int, list[torch.Tensor]]
    jac: list[torch.Tensor] | None
    cache: dict[str, Any] = field(default_factory=dict)


def structured_features(net: nn.Module, plan: StructuredPlan, X: torch.Tensor,
                        outs: list[int],
                        jac_fn: Callable[[torch.Tensor], list[torch.Tensor]] | None
                        ) -> Features:
    """Forward the block with hooks on the watched modules, then one batched backward pass per
    selected output for the cotangents of their outputs."""
    xs: dict[int, list[torch.Tensor]] = {k: [] for k in plan.watch}
    ys: dict[int, list[torch.Tensor]] = {k: [] for k in plan.watch}

    def hook(m: nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> torch.Tensor:
        xs[id(m)].append(args[0].detach())
        ys[id(m)].append(out)
        # A copy goes downstream, so an in-place op after the layer cannot alter ``out``.
        return out.clone()

    handles = [m.register_forward_hook(hook) for m in plan.watch.values()]
    try:
        with torch.enable_grad():
            Xg = X.detach().requires_grad_(True)
            f = net(Xg).reshape(X.shape[0], -1)[:, outs]
            flat = [y for k in plan.watch for y in ys[k]]
            dys_flat = _cotangents(f, flat) if flat else []
    finally:
        for h in handles:
            h.remove()
    dys: dict[int, list[torch.Tensor]] = {}
    it = iter(dys_flat)
    for k in plan.watch:
        dys[k] = [next(it) for _ in ys[k]]
    jac = jac_fn(X) if jac_fn is not None else None
    return Features(xs, dys, jac)


def _cotangents(f: torch.Tensor, ys: list[torch.Tensor]) -> list[torch.Tensor]:
    """d f[:, o].sum() / d y for every y and selected output o, as (b, O, *y.shape[1:]).

    One backward pass per output (examples are independent, so row i of the gradient is
    example i's cotangent). A plain loop rather than ``is_grads_batched``: the same flop on
    one core, and no batching-rule fallbacks or one-off import cost of the vmapped engine."""
    n_o = f.shape[1]
    per_o = [torch.autograd.grad(f[:, o].sum(), ys, retain_graph=o < n_o - 1,
                                 allow_unused=True) for o in range(n_o)]
    return [torch.stack([g[i].detach() if g[i] is not None else torch.zeros_like(y)
                         for g in per_o], dim=1) for i, y in enumerate(ys)]


# ------------------------------------------------------------------ per-layer rules


def _pieces(m: nn.Module, x: torch.Tensor, dy: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(patches (b, g, T, k), cotangents (b, O, g, T, c)) of one call of a Linear/Conv."""
    b, n_o = dy.shape[:2]
    if isinstance(m, nn.Linear):
        P = x.reshape(b, 1, -1, x.shape[-1])
        D = dy.reshape(b, n_o, 1, -1, dy.shape[-1])
        return P, D
    assert isinstance(m, _CONV)
    g = m.groups
    if isinstance(m, nn.Conv1d):
        x = x.unsqueeze(-2)
    ks = tuple(m.kernel_size) if isinstance(m, nn.Conv2d) else (1, m.kernel_size[0])
    st = tuple(m.stride) if isinstance(m, nn.Conv2d) else (1, m.stride[0])
    dl = tuple(m.dilation) if isinstance(m, nn.Conv2d) else (1, m.dilation[0])
    x = F.pad(x, _explicit_padding(m))
    cols = F.unfold(x, ks, dilation=dl, stride=st)  # (b, C k_h k_w, T), C outermost
    P = cols.reshape(b, g, -1, cols.shape[-1]).transpose(2, 3)
    c = dy.shape[2]
    D = dy.reshape(b, n_o, g, c // g, -1).transpose(3, 4)
    return P, D


def _explicit_padding(m: nn.Conv1d | nn.Conv2d) -> tuple[int, ...]:
    """(left, right[, top, bottom]) zero padding for F.pad, from int/tuple/'same'/'valid'."""
    k = list(m.kernel_size)
    d = list(m.dilation)
    if isinstance(m.padding, str):
        if m.padding == "valid":
            pads = [(0, 0)] * len(k)
        else:  # 'same' (stride 1): total d (k - 1), the extra one on the right as torch does
            pads = [(d[i] * (k[i] - 1) // 2, d[i] * (k[i] - 1) - d[i] * (k[i] - 1) // 2)
                    for i in range(len(k))]
    else:
        pads = [(p, p) for p in m.padding]
    out: list[int] = []
    for lo, hi in reversed(pads):  # F.pad starts from the last dimension
        out += [lo, hi]
    return tuple(out)


def linear_costs(b: int, b2: int, n_o: int, g: int, T: int, T2: int, k: int, c: int,
                 diag: bool) -> tuple[float, float]:
    """Flop of the (pairwise, grads) contraction orders for one Linear/Conv weight block."""
    oo = n_o if diag else n_o * n_o
    pairwise = g * b * b2 * T * T2 * (k + oo * c + oo)
    grads = g * n_o * k * c * (b * T + b2 * T2) + g * b * b2 * oo * k * c
    return float(pairwise), float(grads)


def _pairwise(Pi: torch.Tensor, Di: torch.Tensor, Pj: torch.Tensor, Dj: torch.Tensor,
              diag: bool) -> torch.Tensor:
    """sum_{g,t,s} <x_i(t), x_j(s)> <dy_i^o(t), dy_j^p(s)>: input and cotangent Grams."""
    Gx = torch.einsum("igtk,jgsk->ijgts", Pi, Pj)
    if diag:
        return torch.einsum("ijgts,ijogts->ijo", Gx,
                            torch.einsum("iogtc,jogsc->ijogts", Di, Dj))
    return torch.einsum("ijgts,ijopgts->ijop", Gx, torch.einsum("iogtc,jpgsc->ijopgts", Di, Dj))


def _grads(Pi: torch.Tensor, Di: torch.Tensor, Pj: torch.Tensor, Dj: torch.Tensor,
           diag: bool) -> torch.Tensor:
    """<G_i^o, G_j^p> with per-example gradients G_i^o = sum_t dy_i^o(t) x_i(t)^T."""
    Gi = torch.einsum("iogtc,igtk->iogck", Di, Pi)
    Gj = Gi if (Pj is Pi and Dj is Di) else torch.einsum("iogtc,igtk->iogck", Dj, Pj)
    return torch.einsum("iogck,jogck->ijo" if diag else "iogck,jpgck->ijop", Gi, Gj)


def _weight_share(Pi: torch.Tensor, Di: torch.Tensor, Pj: torch.Tensor, Dj: torch.Tensor,
                  diag: bool, budget: int) -> torch.Tensor:
    """K_W of one Linear/Conv weight between two blocks by the cheaper contraction order
    (:func:`linear_costs`), over sub-blocks of examples small enough that its largest
    intermediate stays within ``budget`` elements (down to one example per side)."""
    b, n_o, g, T, c = Di.shape
    b2, T2, k = Dj.shape[0], Dj.shape[3], Pi.shape[-1]
    pw, gr = linear_costs(b, b2, n_o, g, T, T2, k, c, diag)
    oo = n_o if diag else n_o * n_o
    if pw <= gr:
        fn, step = _pairwise, max(1, math.isqrt(budget // max(1, g * T * T2 * (oo + 1))))
    else:
        fn, step = _grads, max(1, budget // max(1, 2 * n_o * g * c * k))
    if step >= max(b, b2):
        return fn(Pi, Di, Pj, Dj, diag)
    out = Di.new_empty(b, b2, *((n_o,) if diag else (n_o, n_o)))
    for i0 in range(0, b, step):
        for j0 in range(0, b2, step):
            out[i0:i0 + step, j0:j0 + step] = fn(Pi[i0:i0 + step], Di[i0:i0 + step],
                                                 Pj[j0:j0 + step], Dj[j0:j0 + step], diag)
    return out


def _special_pieces(F_: Features, mods: list[nn.Module]) -> tuple[torch.Tensor, torch.Tensor]:
    """Patches and cotangents of every call of the modules sharing one tensor, concatenated
    along positions (so cross terms between uses of a shared weight are included)."""
    Ps, Ds = [], []
    for m in mods:
        for x, dy in zip(F_.xs[id(m)], F_.dys[id(m)], strict=True):
            P, D = _pieces(m, x, dy)
            Ps.append(P)
            Ds.append(D)
    return torch.cat(Ps, dim=2), torch.cat(Ds, dim=3)


def _local_grads(F_: Features, m: nn.Module, pairs: list[tuple[str, str]]
                 ) -> dict[str, torch.Tensor]:
    """Per-example, per-output gradients (b, O, *shape) of the module's own parameters, from
    the module's local VJP at the captured inputs and output cotangents, summed over calls."""
    own = dict(m.named_parameters(recurse=False))
    params = {local: own[local].detach() for local, _ in pairs}
    acc: dict[str, torch.Tensor] = {}
    for x, dy in zip(F_.xs[id(m)], F_.dys[id(m)], strict=True):
        def one(xi: torch.Tensor, dyi: torch.Tensor) -> dict[str, torch.Tensor]:
            def f(p: dict[str, torch.Tensor]) -> torch.Tensor:
                return functional_call(m, p, (xi.unsqueeze(0),)).squeeze(0)
            pull = vjp(f, params)[1]
            return vmap(pull)(dyi)[0]
        G = vmap(one)(x, dy)
        for local, canon in pairs:
            acc[canon] = G[local] if canon not in acc else acc[canon] + G[local]
    return acc


def structured_combine(plan: StructuredPlan, Fi: Features, Fj: Features, diag: bool,
                       budget: int) -> torch.Tensor:
    """The kernel block between two captured blocks: (b, b', O, O), or (b, b', O) if diag."""
    parts: list[torch.Tensor] = []
    eq = "iof,jof->ijo" if diag else "iof,jpf->ijop"
    for name, (mods, role) in plan.special.items():
        key = "special:" + name
        if key not in Fi.cache:
            Fi.cache[key] = _special_pieces(Fi, mods)
        if key not in Fj.cache:
            Fj.cache[key] = _special_pieces(Fj, mods)
        (Pi, Di), (Pj, Dj) = Fi.cache[key], Fj.cache[key]
        if role == "weight":
            parts.append(_weight_share(Pi, Di, Pj, Dj, diag, budget))
        else:  # bias: the gradient is the cotangent summed over positions
            bi, bj = Di.sum(3), Dj.sum(3)
            parts.append(torch.einsum(eq, bi.flatten(2), bj.flatten(2)))
    for mid, (m, pairs) in plan.local.items():
        key = f"local:{mid}"
        for F_ in (Fi, Fj):
            if key not in F_.cache:
                F_.cache[key] = _local_grads(F_, m, pairs)
        for canon in Fi.cache[key]:
            gi, gj = Fi.cache[key][canon], Fj.cache[key][canon]
            parts.append(torch.einsum(eq, gi.flatten(2), gj.flatten(2)))
    if Fi.jac is not None and Fj.jac is not None:
        parts += [torch.einsum(eq, a, b) for a, b in zip(Fi.jac, Fj.jac, strict=True)]
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out
