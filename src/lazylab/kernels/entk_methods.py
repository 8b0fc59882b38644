"""Three exact ways to form the empirical NTK of any module, blocked, and a cost model to pick.

With J_X = d f(X) / d theta (n O x P for O outputs and P trained parameters) the kernel is
K[i, j, o, p] = <J[i, o], J[j, p]>. Novak et al. 2022 ("Fast finite width neural tangent
kernel", ICML) compare three ways to form it (F: flop of one forward pass of one example):

* ``"jacobian"`` (Jacobian contraction): per-example Jacobians by ``vmap(jacrev)``, then
  J_X J_Z^T; about (n + n') O 3F + n n' O^2 P flop, (n + n') O P memory per block.
* ``"ntvp"`` (NTK-vector products): the rows J_X^T e_(i, o) by one vmapped VJP over the block,
  then J_Z t for each of them by a vmapped JVP over the column block; about n O 3F + n n' O 3F
  flop; never contracts over P.
* ``"structured"`` (structured derivatives, :mod:`lazylab.kernels.structured`): Linear and
  Conv layers through their input Gram and output-cotangent Gram; other layers by their local
  Jacobian; about (n + n') (1 + O) F flop for the passes plus the per-layer contractions.

Every method works on blocks of rows and columns (the last one may be smaller) sized so that
the per-block intermediates stay within ``chunk_elems`` elements; with ``max_bytes`` a method
whose smallest block (one example per side) does not fit is refused before any compute.
:func:`plan_methods` estimates each method's cost as flop + bytes of its largest intermediates
(from the flop of one forward pass and the shapes, both seen by a probe pass) and ``"auto"``
takes the cheapest that fits, and says so (``EntkInfo.method``, and a DEBUG record on the
``lazylab.kernels.entk_methods`` logger).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call, jacrev, jvp, vjp, vmap

from lazylab.kernels.structured import (
    StructuredPlan,
    linear_costs,
    plan_structured,
    structured_combine,
    structured_features,
)

_log = logging.getLogger(__name__)

METHODS = ("auto", "jacobian", "ntvp", "structured", "autodiff")
_REAL = ("jacobian", "ntvp", "structured")
# Relative cost of moving one byte versus one flop in the cost model (a CPU core does a few
# flop per byte of memory traffic; the model only needs the order of magnitude).
_FLOP_PER_BYTE = 1.0


@dataclass(frozen=True)
class EntkInfo:
    """What :func:`lazylab.kernels.empirical_ntk` did (``return_info=True``).

    method: the method run; estimates: method -> modelled cost (flop + bytes); min_bytes:
    method -> bytes of its smallest block; rows, cols: examples per row / column block;
    routes: trained tensor -> "structured" / "local" / "jacobian" (structured method).
    """

    method: str
    estimates: dict[str, float] = field(default_factory=dict)
    min_bytes: dict[str, int] = field(default_factory=dict)
    rows: int = 0
    cols: int = 0
    routes: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------ checks


def check_deterministic(net: nn.Module) -> None:
    """Refuse dropout / RReLU / batch normalization in training mode (a random or
    batch-dependent function has no kernel), and batch normalization that always uses batch
    statistics (``track_running_stats=False``)."""
    bad = [f"{name or '(the net itself)'} -> {type(m).__name__}" for name, m in
           net.named_modules() if m.training and isinstance(
               m, (nn.modules.dropout._DropoutNd, nn.RReLU, nn.modules.batchnorm._BatchNorm))]
    if bad:
        raise ValueError(f"empirical_ntk needs a deterministic net, but net is in training "
                         f"mode with {', '.join(bad[:3])}; call net.eval() first (dropout and "
                         "batch normalization are then fixed functions)")
    stats = [name for name, m in net.named_modules()
             if isinstance(m, nn.modules.batchnorm._BatchNorm) and not m.track_running_stats]
    if stats:
        raise ValueError(f"empirical_ntk needs a function of each example alone, but "
                         f"{', '.join(stats[:3])} normalizes by batch statistics even in eval "
                         "mode (track_running_stats=False)")


@dataclass(frozen=True)
class OutputSpec:
    """Selected outputs, whether only o = p entries are formed, and the final reshape."""

    outs: list[int]
    diag: bool
    finish: Callable[[torch.Tensor], torch.Tensor]


def output_spec(output: Any, n_out: int) -> OutputSpec:
    """``None``: (n, n') for one output, else (n, n', O, O); ``"full"``: (n, n', O, O);
    ``"trace"``: sum_o K[:, :, o, o]; an int o: that output's (n, n') kernel."""
    every = list(range(n_out))
    if output is None:
        return OutputSpec(every, False, lambda K: K[:, :, 0, 0] if n_out == 1 else K)
    if output == "full":
        return OutputSpec(every, False, lambda K: K)
    if output == "trace":
        return OutputSpec(every, True, lambda K: K.sum(-1))
    if isinstance(output, int) and not isinstance(output, bool) and 0 <= output < n_out:
        return OutputSpec([int(output)], False, lambda K: K[:, :, 0, 0])
    raise ValueError(f"output must be None, 'full', 'trace' or an output index in "
                     f"[0, {n_out}); got {output!r}")


def model_function(net: nn.Module, names: list[str]
                   ) -> tuple[Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor],
                              dict[str, torch.Tensor]]:
    """(f(params, X) -> (b, O) by ``functional_call``, the trained tensors detached)."""
    tensors = {k: v.detach() for k, v in
               (dict(net.named_parameters()) | dict(net.named_buffers())).items()}
    primals = {k: tensors[k] for k in names}
    rest = {k: v for k, v in tensors.items() if k not in primals}

    def f(p: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        out = functional_call(net, {**rest, **p}, (X,))
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"empirical_ntk needs net to return one tensor; it returned a "
                             f"{type(out).__name__} (wrap it to return the output whose kernel "
                             "you want)")
        return out.reshape(X.shape[0], -1)

    return f, primals


# -------------------------------------------------------------------- the three methods


class _Method:
    """Features of a block of examples and the kernel block between two feature sets."""

    def features(self, X: torch.Tensor) -> Any:
        raise NotImplementedError

    def combine(self, Fi: Any, Fj: Any) -> torch.Tensor:
        raise NotImplementedError


class _Jacobian(_Method):
    def __init__(self, f: Callable[..., torch.Tensor], primals: dict[str, torch.Tensor],
                 spec: OutputSpec):
        self.spec, self.names = spec, list(primals)
        self.primals = primals
        outs = spec.outs

        def single(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
            return f(p, x.unsqueeze(0))[0, outs]

        self.jac = vmap(jacrev(single), in_dims=(None, 0))

    def features(self, X: torch.Tensor) -> list[torch.Tensor]:
        """Per-parameter Jacobians (b, O, p_k): kept apart, so no concatenated copy is made
        and each parameter's share is summed in its own GEMM (as the torch.func tutorial)."""
        J = self.jac(self.primals, X)  # name -> (b, O, *shape)
        return [J[k].reshape(X.shape[0], len(self.spec.outs), -1) for k in self.names]

    def combine(self, Fi: list[torch.Tensor], Fj: list[torch.Tensor]) -> torch.Tensor:
        eq = "iof,jof->ijo" if self.spec.diag else "iof,jpf->ijop"
        out = torch.einsum(eq, Fi[0], Fj[0])
        for a, b in zip(Fi[1:], Fj[1:], strict=True):
            out += torch.einsum(eq, a, b)
        return out


class _Ntvp(_Method):
    def __init__(self, f: Callable[..., torch.Tensor], primals: dict[str, torch.Tensor],
                 spec: OutputSpec):
        self.f, self.primals, self.spec = f, primals, spec

    def features(self, X: torch.Tensor) -> dict[str, Any]:
        return {"X": X}

    def _rows(self, Fi: dict[str, Any]) -> dict[str, torch.Tensor]:
        """J_X^T e_(i, o) for every row i and output o of the block: one VJP, vmapped."""
        if "T" not in Fi:
            X, outs = Fi["X"], self.spec.outs
            pull = vjp(lambda p: self.f(p, X)[:, outs], self.primals)[1]
            b, n_o = X.shape[0], len(outs)
            basis = torch.eye(b * n_o, dtype=X.dtype, device=X.device).reshape(b * n_o, b, n_o)
            Fi["T"] = vmap(pull)(basis)[0]
        return Fi["T"]

    def combine(self, Fi: dict[str, Any], Fj: dict[str, Any]) -> torch.Tensor:
        T = self._rows(Fi)
        Z, outs = Fj["X"], self.spec.outs
        b, n_o = Fi["X"].shape[0], len(outs)

        def push(t: dict[str, torch.Tensor]) -> torch.Tensor:
            return jvp(lambda p: self.f(p, Z)[:, outs], (self.primals,), (t,))[1]

        R = vmap(push)(T).reshape(b, n_o, Z.shape[0], n_o).permute(0, 2, 1, 3)
        return torch.diagonal(R, dim1=2, dim2=3) if self.spec.diag else R


class _Structured(_Method):
    def __init__(self, net: nn.Module, plan: StructuredPlan, f: Callable[..., torch.Tensor],
                 primals: dict[str, torch.Tensor], spec: OutputSpec, budget: int):
        self.net, self.plan, self.spec, self.budget = net, plan, spec, budget
        self.jac = _Jacobian(f, {k: primals[k] for k in plan.global_names}, spec) \
            if plan.global_names else None

    def features(self, X: torch.Tensor) -> Any:
        return structured_features(self.net, self.plan, X, self.spec.outs,
                                   self.jac.features if self.jac is not None else None)

    def combine(self, Fi: Any, Fj: Any) -> torch.Tensor:
        return structured_combine(self.plan, Fi, Fj, self.spec.diag, self.budget)


# --------------------------------------------------------------------- blocked driver


def _blocked(m: _Method, X: torch.Tensor, Z: torch.Tensor | None, rows: int, cols: int,
             tail: tuple[int, ...], cache_cols: bool) -> torch.Tensor:
    """Fill the (n, n', *tail) kernel block by block; with Z None only blocks on and above
    the diagonal are computed (rows == cols then) and the others are their transposes."""
    sym = Z is None
    Zm = X if Z is None else Z
    n, n2 = X.shape[0], Zm.shape[0]
    out = X.new_empty(n, n2, *tail)
    col_cache: dict[int, Any] = {}
    for i0 in range(0, n, rows):
        Fi = m.features(X[i0:i0 + rows])
        for j0 in range(0, n2, cols):
            if sym and j0 < i0:
                continue
            if sym and j0 == i0:
                Fj = Fi
            elif j0 in col_cache:
                Fj = col_cache[j0]
            else:
                Fj = m.features(Zm[j0:j0 + cols])
                if cache_cols:
                    col_cache[j0] = Fj
            blk = m.combine(Fi, Fj)
            out[i0:i0 + rows, j0:j0 + cols] = blk
            if sym and j0 > i0:
                blk_t = blk.transpose(0, 1)
                out[j0:j0 + cols, i0:i0 + rows] = blk_t.transpose(2, 3) if len(tail) == 2 \
                    else blk_t
    return out


# ------------------------------------------------------------------------ cost model


def _special_flop(plan: StructuredPlan, n: int, n2: int, n_o: int, diag: bool) -> float:
    """Modelled flop of the Linear/Conv shares (the cheaper order of each weight)."""
    total = 0.0
    for mods, role in plan.special.values():
        shapes = [s for m in mods for s in plan.calls[id(m)]]
        m0 = mods[0]
        T = sum(math.prod(_positions(m0, xs, ys)) for xs, ys in shapes)
        if isinstance(m0, nn.Linear):
            c, g, k = m0.out_features, 1, m0.in_features
        else:
            conv = cast(nn.Conv1d | nn.Conv2d, m0)
            c, g = conv.out_channels, conv.groups
            k = conv.in_channels // g * math.prod(conv.kernel_size)
        if role == "bias":
            total += n_o * c * T * (n + n2) + n * n2 * n_o * n_o * c
            continue
        pw, gr = linear_costs(n, n2, n_o, g, T, T, k, c // g, diag)
        total += min(pw, gr)
    return total


def _positions(m: nn.Module, xs: tuple[int, ...], ys: tuple[int, ...]) -> tuple[int, ...]:
    """Positions at which a Linear/Conv is applied, from the probed output shape."""
    return tuple(ys[1:-1]) if isinstance(m, nn.Linear) else tuple(ys[2:])


@dataclass
class _Plan:
    estimates: dict[str, float]
    per_example: dict[str, int]


def plan_methods(net: nn.Module, X: torch.Tensor, n2: int, spec: OutputSpec,
                 primals: dict[str, torch.Tensor], plan: StructuredPlan) -> _Plan:
    """Modelled cost (flop + bytes) and elements held per example, for each method."""
    n, n_o = X.shape[0], len(spec.outs)
    itemsize = X.element_size()
    oo = n_o if spec.diag else n_o * n_o
    Fw = max(1.0, plan.flop)
    P = sum(t.numel() for t in primals.values())
    pairs = n * n2
    jac_el = n_o * P
    cost = {"jacobian": (n + n2) * (Fw + 2 * Fw * n_o) + pairs * oo * P
            + _FLOP_PER_BYTE * (n + n2) * jac_el * itemsize,
            "ntvp": n * (Fw + 2 * Fw * n_o) + pairs * n_o * 3 * Fw
            + _FLOP_PER_BYTE * n * jac_el * itemsize}
    tensors = dict(net.named_parameters()) | dict(net.named_buffers())
    P_glob = sum(tensors[k].numel() for k in plan.global_names)
    P_loc = sum(tensors[c].numel() for _, ps in plan.local.values() for _, c in ps)
    captured = 0
    for mid, m in plan.watch.items():
        for xs, ys in plan.calls[mid]:
            expand = math.prod(getattr(m, "kernel_size", (1,)))
            captured += math.prod(xs[1:]) * expand + n_o * math.prod(ys[1:])
    struct_el = captured + n_o * (P_glob + P_loc)
    cost["structured"] = ((n + n2) * (Fw + Fw * n_o) + _special_flop(plan, n, n2, n_o,
                                                                     spec.diag)
                          + (n + n2) * 6 * n_o * captured + pairs * oo * (P_glob + P_loc)
                          + ((n + n2) * 2 * Fw * n_o if P_glob else 0)
                          + _FLOP_PER_BYTE * (n + n2) * struct_el * itemsize)
    per = {"jacobian": jac_el, "ntvp": jac_el, "structured": struct_el}
    return _Plan({k: float(v) for k, v in cost.items()}, per)


# ---------------------------------------------------------------------------- driver


def generic_ntk(net: nn.Module, X: torch.Tensor, Z: torch.Tensor | None, names: list[str],
                method: str, spec: OutputSpec, n_out: int, chunk: int | None,
                chunk_elems: int, max_bytes: int | None) -> tuple[torch.Tensor, EntkInfo]:
    """The kernel by ``method`` (or the cheapest, for "auto"), blocked; see the module doc."""
    f, primals = model_function(net, names)
    n2 = X.shape[0] if Z is None else Z.shape[0]
    plan = plan_structured(net, names, X[:1], n_out)
    pm = plan_methods(net, X, n2, spec, primals, plan)
    itemsize = X.element_size()
    min_bytes = {k: 2 * v * itemsize for k, v in pm.per_example.items()}
    fits = [k for k in _REAL if max_bytes is None or min_bytes[k] <= max_bytes]
    if method == "autodiff":
        method = "jacobian"
    if method == "auto":
        if not fits:
            raise ValueError(_refusal("every method", min(min_bytes.values()), max_bytes))
        method = min(fits, key=lambda k: pm.estimates[k])
        _log.debug("empirical_ntk: method='auto' chose %r; modelled cost (flop + bytes) %s",
                   method, {k: f"{v:.3g}" for k, v in pm.estimates.items()})
    elif method not in fits:
        raise ValueError(_refusal(f"method={method!r}", min_bytes[method], max_bytes))
    per = pm.per_example[method]
    limit = chunk_elems if max_bytes is None else min(chunk_elems, max_bytes // itemsize)
    rows = chunk if chunk is not None else max(1, limit // (2 * max(1, per)))
    rows = min(rows, X.shape[0]) if Z is None else rows
    cols = rows if Z is None else min(rows, n2)
    rows = min(rows, X.shape[0])
    impl: _Method
    if method == "jacobian":
        impl = _Jacobian(f, primals, spec)
    elif method == "ntvp":
        impl = _Ntvp(f, primals, spec)
    else:
        impl = _Structured(net, plan, f, primals, spec, chunk_elems)
    n_o = len(spec.outs)
    tail = (n_o,) if spec.diag else (n_o, n_o)
    cache = Z is not None and n2 * per <= limit // 2
    with torch.no_grad():
        K = _blocked(impl, X, Z, rows, cols, tail, cache)
    info = EntkInfo(method, pm.estimates, min_bytes, rows, cols,
                    plan.routes if method == "structured" else {})
    return spec.finish(K), info


def _refusal(what: str, need: int, max_bytes: int | None) -> str:
    return (f"max_bytes={max_bytes} is too small: {what} needs at least {need} bytes for one "
            "block of one example per side; raise max_bytes or pick a method whose "
            "smallest block fits (see return_info=True for each method's need)")
