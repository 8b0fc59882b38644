"""Empirical (finite-width) neural tangent kernel K(x, z) = <grad_theta f(x), grad_theta f(z)>.

For the two-layer net f(x) = s sum_r a_r sigma(w_r . x) (+ c) (:class:`TwoLayerNet`) the
gradients are explicit, df/dw_r = s a_r sigma'(w_r.x) x, df/da_r = s sigma(w_r.x), df/dc = 1,
so with S_X = sigma(X W^T), S'_X = sigma'(X W^T) (n, m) the kernel is a few matrix products
(Arora et al. 2019, Eq. (2)-(3); Jacot et al. 2018):

    W trained:  s^2 (S'_X diag(a^2) S'_Z^T) * (X Z^T)     (* elementwise)
    a trained:  s^2 S_X S_Z^T
    c trained:  1

costing O(n n' m + (n + n') m d) instead of the O(n n' m d) of contracting Jacobians; the
hidden units are processed in chunks so memory stays O((n + n') chunk). For relu with a = +-1
the first factor is an integer count of co-activations, computed exactly either as an int8
GEMM or a float32 GEMM of 0/1 matrices, whichever a one-time probe measures faster on the
device (:func:`coactivation_path`).

Any other ``torch.nn.Module`` (or a TwoLayerNet with another method) goes through one of three
exact methods of :mod:`lazylab.kernels.entk_methods`, blocked over rows and columns: Jacobian
contraction (``"jacobian"``, alias ``"autodiff"``), NTK-vector products (``"ntvp"``) or
structured derivatives (``"structured"``, Novak et al. 2022: Linear/Conv layers by their input
and output-cotangent Gram matrices, :mod:`lazylab.kernels.structured`); ``"auto"`` takes the
cheapest by a flop-and-bytes cost model and says which (``return_info=True``).

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet
>>> net = TwoLayerNet(3, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
>>> X = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
>>> K = empirical_ntk(net, X)
>>> bool(torch.allclose(K, empirical_ntk(net, X, method="autodiff"), atol=1e-12))
True
>>> seq = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(),
...                           torch.nn.Linear(8, 2)).double()
>>> K, info = empirical_ntk(seq, X, return_info=True)  # every parameter of seq
>>> K.shape, info.method
(torch.Size([5, 5, 2, 2]), 'structured')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Literal, overload

import torch
from torch import nn

from lazylab.device import block_elems
from lazylab.duals._inputs import check_choice
from lazylab.kernels.entk_methods import (
    METHODS,
    EntkInfo,
    check_deterministic,
    generic_ntk,
    output_spec,
)
from lazylab.models.groups import GROUP_NAMES, HasParamGroups, group_param_names, is_group_name
from lazylab.models.two_layer import TwoLayerNet

_STRUCTURED = frozenset({"W", "a", "c"})
# Default bound on the elements of the largest intermediate (Jacobian chunk or activation
# block) on CPU: block_elems(cpu) = 2^25 float64 values = 256 MiB (lazylab.device).
CHUNK_ELEMS = 1 << 25


def trained_names(net: nn.Module, trained: str | Sequence[str]) -> list[str]:
    """The parameter (or buffer) names a ``trained`` spec selects.

    ``"first"``, ``"hidden"``, ``"last"``: that group of the net's ``param_groups()``
    (:mod:`lazylab.models.groups`; for a TwoLayerNet ``"first"`` is ["W"]); ``"both"``:
    ["W", "a"] plus "c" when the net has a bias (TwoLayerNet only, whether or not a is
    trainable: the NTK of both layers); ``"all"``: the group ``"all"`` (every parameter with
    ``requires_grad`` for a model without ``param_groups()``); a list: those names, each a
    parameter or buffer of ``net``.
    """
    tensors = dict(net.named_parameters()) | dict(net.named_buffers())
    if isinstance(trained, str):
        if trained == "both":
            if not isinstance(net, TwoLayerNet):
                raise ValueError(f"trained='both' needs a TwoLayerNet; for "
                                 f"{type(net).__name__} use a group name "
                                 f"({', '.join(GROUP_NAMES)}) or a list of parameter names")
            return ["W", "a"] + (["c"] if net.c is not None else [])
        if is_group_name(trained):
            try:
                names = group_param_names(net, trained)
            except ValueError as err:
                raise ValueError(f"trained={trained!r}: {err}") from None
            if trained == "all" and not isinstance(net, HasParamGroups):
                names = [k for k in names if net.get_parameter(k).requires_grad]
            return names
        raise ValueError(f"trained must be one of {', '.join(GROUP_NAMES)}, both, or a list "
                         f"of parameter names; got {trained!r}")
    names = list(trained)
    unknown = [k for k in names if k not in tensors]
    if not names or unknown:
        raise ValueError(f"trained must name parameters or buffers of the net "
                         f"({', '.join(tensors)}); got {names!r}")
    return names


def _check_inputs(net: nn.Module, X: torch.Tensor, Z: torch.Tensor | None
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
    ref = next(iter(net.parameters()), None)
    if ref is None:
        raise ValueError("net must have at least one parameter")
    for name, T in (("X", X), ("Z", Z)):
        if T is None:
            continue
        if not isinstance(T, torch.Tensor) or T.ndim < 1 or not T.is_floating_point():
            raise ValueError(f"{name} must be a floating-point torch tensor with examples "
                             f"along dim 0; got {getattr(T, 'shape', type(T).__name__)}")
        if T.shape[0] == 0:
            raise ValueError(f"{name} must have at least one example (row); got shape "
                             f"{tuple(T.shape)}")
        if isinstance(net, TwoLayerNet) and (T.ndim != 2 or T.shape[1] != net.d):
            raise ValueError(f"{name} must have shape (n, {net.d}) for this net (d = "
                             f"{net.d}); got {tuple(T.shape)}")
    if Z is not None and Z.shape[1:] != X.shape[1:]:
        raise ValueError(f"Z must have the per-example shape of X {tuple(X.shape[1:])}; "
                         f"got {tuple(Z.shape[1:])}")
    X = X.to(device=ref.device, dtype=ref.dtype)
    Z = None if Z is None else Z.to(device=ref.device, dtype=ref.dtype)
    return X, Z


# The co-activation count sum_r 1{w_r.x > 0} 1{w_r.z > 0} is an exact integer either as an
# int8 x int8 -> int32 GEMM (torch._int_mm; ~3x faster than float32 on CPUs with AVX-512 VNNI,
# 30-45x slower on AVX2-only CPUs) or as a float32 GEMM of 0/1 matrices (exact while the count
# stays below 2^24). Which is faster is measured once per device by _probe.
_COACT_PATHS = ("int8", "float32")
_coact_choice: dict[str, str] = {}
_coact_forced: str | None = None
_PROBE_SHAPE = (256, 2048)  # (rows, hidden units): 0.27 GFLOP per GEMM
_FLOAT_EXACT = 1 << 24


def set_coactivation_path(path: str | None) -> None:
    """Force ``"int8"`` or ``"float32"`` for every device (None: back to the measured probe)."""
    global _coact_forced
    if path is not None:
        check_choice("path", path, _COACT_PATHS)
    _coact_forced = path


def _device_key(device: torch.device) -> str:
    return f"{device.type}:{device.index if device.index is not None else 0}"


def _int8_ok(device: torch.device) -> bool:
    return device.type == "cpu" and getattr(torch, "_int_mm", None) is not None


def _best_time(fn: Callable[[], torch.Tensor], repeats: int = 3) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _probe(device: torch.device) -> str:
    """Time one int8 and one float32 co-activation GEMM of a fixed shape; the faster wins."""
    if not _int8_ok(device):
        return "float32"
    n, m = _PROBE_SHAPE
    g = torch.Generator(device=device).manual_seed(0)
    B = torch.gt(torch.randn(n, m, generator=g, device=device), 0)
    Bi, Bf = B.view(torch.int8), B.to(torch.float32)
    try:
        t_int = _best_time(lambda: torch._int_mm(Bi, Bi.T))
    except RuntimeError:
        return "float32"
    t_float = _best_time(lambda: Bf @ Bf.T)
    return "int8" if t_int < t_float else "float32"


def coactivation_path(device: torch.device | str = "cpu") -> str:
    """The co-activation GEMM used on ``device``: ``"int8"`` or ``"float32"``.

    Measured once per device and process by timing both (best of 3 after a warm-up) on a
    (256 x 2048) problem, 0.1-0.3 s in all on a 2-core CPU; ``"float32"`` wherever
    torch._int_mm is unavailable (CUDA, old torch). Both paths give the same exact counts.
    """
    if _coact_forced is not None:
        return _coact_forced
    dev = torch.device(device)
    key = _device_key(dev)
    if key not in _coact_choice:
        _coact_choice[key] = _probe(dev)
    return _coact_choice[key]


def _coactivations(UX: torch.Tensor, UZ: torch.Tensor | None, total: int) -> torch.Tensor:
    """Integer counts sum_r 1{w_r.x > 0} 1{w_r.z > 0} = relu'(U_X) relu'(U_Z)^T, exactly.

    ``total`` is the number of hidden units counted in all (the float path accumulates in
    float32 only while that stays below 2^24, where every integer is exact).
    """
    BX = torch.gt(UX, 0)
    BZ = BX if UZ is None else torch.gt(UZ, 0)
    if coactivation_path(UX.device) == "int8" and _int8_ok(UX.device):
        try:  # bool and int8 share the byte layout: no copy
            return torch._int_mm(BX.view(torch.int8), BZ.view(torch.int8).T)
        except RuntimeError:
            pass
    dtype = torch.float32 if total < _FLOAT_EXACT else torch.float64
    FX = BX.to(dtype)
    return FX @ (FX if UZ is None else BZ.to(dtype)).T


def _derivative(net: TwoLayerNet, U: torch.Tensor) -> torch.Tensor:
    """sigma'(U); for plain relu one heaviside pass (1{u > 0}) instead of compare-cast-scale."""
    if net.act.relu_power == 1 and net.act.relu_scale == 1.0:
        return torch.heaviside(U, U.new_zeros(()))
    return net.act.deriv(U, 1)


@torch.no_grad()
def _two_layer_ntk(net: TwoLayerNet, X: torch.Tensor, Z: torch.Tensor | None,
                   names: set[str], chunk_elems: int) -> torch.Tensor:
    """Structured empirical NTK of a TwoLayerNet, chunked over hidden units.

    Few, large operations on purpose (a single chunk for moderate n m): no zero-filled
    accumulators, the factor s^2 folded into the product s^2 X Z^T. Each multi-threaded torch
    call can stall for a scheduler time slice on a busy machine, so the count matters.
    """
    W, a = net.W.detach(), net.a.detach()
    Zm = X if Z is None else Z
    n, n2, m = X.shape[0], Zm.shape[0], W.shape[0]
    s2 = net.scale**2
    first, second = "W" in names, "a" in names
    a2 = a * a
    weighted = first and not bool(torch.all(a2 == 1))  # a = +-1 needs no weights
    counts = (first and not weighted and net.act.relu_power == 1
              and net.act.relu_scale == 1.0)  # relu' in {0, 1}: S'_X S'_Z^T counts
    K1: torch.Tensor | None = None
    K2: torch.Tensor | None = None
    chunk = max(1, chunk_elems // max(1, n + n2))
    for r0 in range(0, m if first or second else 0, chunk):
        Wc = W[r0:r0 + chunk]
        UX = X @ Wc.T
        UZ = UX if Z is None else Zm @ Wc.T
        if counts:
            C = _coactivations(UX, None if Z is None else UZ, m)
            K1 = C if K1 is None else K1.add_(C)
        elif first:
            DX = _derivative(net, UX)
            DZ = DX if Z is None else _derivative(net, UZ)
            if weighted:
                DX = DX * a2[r0:r0 + chunk]
            K1 = DX @ DZ.T if K1 is None else K1.addmm_(DX, DZ.T)
            del DX, DZ
        if second:
            SX = net.act(UX)
            SZ = SX if Z is None else net.act(UZ)
            K2 = SX @ SZ.T if K2 is None else K2.addmm_(SX, SZ.T)
    out: torch.Tensor | None = None
    if K1 is not None:
        G = torch.addmm(X.new_zeros(()), X, Zm.T, beta=0, alpha=s2)
        out = G.mul_(K1) if counts else K1.mul_(G)
    if K2 is not None:
        out = K2.mul_(s2) if out is None else out.add_(K2, alpha=s2)
    if "c" in names:
        out = X.new_ones(n, n2) if out is None else out.add_(1.0)
    if out is None:  # only reachable with an empty set of names, which trained_names forbids
        raise ValueError("trained selects no parameter of the net")
    return out


TrainedSpec = str | Sequence[str | nn.Module | torch.Tensor] | None


def _resolve_trained(net: nn.Module, trained: TrainedSpec) -> list[str]:
    """Canonical names of the trained tensors; None: the first layer of a TwoLayerNet, every
    parameter with requires_grad of any other module. A list may mix names, submodules (all
    their parameters) and parameter tensors; aliases of one tied tensor count once."""
    if trained is None:
        trained = "first" if isinstance(net, TwoLayerNet) else "all"
    if not isinstance(trained, str):
        # names of tied parameters (dropped by named_parameters) map to the kept name
        alias = {k: id(v) for k, v in net.named_parameters(remove_duplicate=False)}
        canon = {id(v): k for k, v in net.named_parameters()}
        names: list[str] = []
        for item in trained:
            if isinstance(item, nn.Module):
                names += [canon.get(id(p), "<a parameter outside net>")
                          for p in item.parameters()]
            elif isinstance(item, torch.Tensor):
                names.append(canon.get(id(item), "<a tensor outside net>"))
            else:
                names.append(canon[alias[item]] if item in alias else item)
        trained = names
    return list(dict.fromkeys(trained_names(net, trained)))


@overload
def empirical_ntk(net: nn.Module, X: torch.Tensor, Z: torch.Tensor | None = None, *,
                  trained: TrainedSpec = None, method: str = "auto",
                  output: int | str | None = None, chunk: int | None = None,
                  chunk_elems: int | None = None, max_bytes: int | None = None,
                  return_info: Literal[False] = False) -> torch.Tensor: ...


@overload
def empirical_ntk(net: nn.Module, X: torch.Tensor, Z: torch.Tensor | None = None, *,
                  trained: TrainedSpec = None, method: str = "auto",
                  output: int | str | None = None, chunk: int | None = None,
                  chunk_elems: int | None = None, max_bytes: int | None = None,
                  return_info: Literal[True]) -> tuple[torch.Tensor, EntkInfo]: ...


def empirical_ntk(net: nn.Module, X: torch.Tensor, Z: torch.Tensor | None = None, *,
                  trained: TrainedSpec = None, method: str = "auto",
                  output: int | str | None = None, chunk: int | None = None,
                  chunk_elems: int | None = None, max_bytes: int | None = None,
                  return_info: bool = False) -> torch.Tensor | tuple[torch.Tensor, EntkInfo]:
    """Empirical NTK sum_p df(x)/dtheta_p df(z)/dtheta_p over the trained parameters: in
    closed form (:func:`_structured_ntk`) or by :func:`lazylab.kernels.entk_methods.
    generic_ntk`, once the options are checked (:func:`_check_options`).

    Parameters
    ----------
    net : a :class:`TwoLayerNet` (closed-form structured path) or any ``torch.nn.Module``
        mapping a batch (examples along dim 0, each treated independently) to one tensor of
        outputs (n,) or (n, O) (or (n, ...), flattened to O per example). Dropout, RReLU and
        batch normalization must be in eval mode.
    X : (n, ...) inputs, n >= 1; Z : (n', ...) inputs or None (then Z = X). Cast to the net's
        dtype and device.
    trained : None (default: the first layer W of a TwoLayerNet, i.e. Arora et al.'s
        H-infinity; every parameter with ``requires_grad`` of any other module), a parameter
        group of the net (``"first"``, ``"hidden"``, ``"last"``, ``"all"``;
        :mod:`lazylab.models.groups`), ``"both"`` (W, a, and c if any, for a TwoLayerNet), or a
        list of parameter/buffer names, submodules (their parameters) and parameters. Tied
        parameters count once; buffers only when named.
    method : ``"auto"`` (the closed form for a TwoLayerNet, else the cheapest of the three
        by :func:`lazylab.kernels.entk_methods.plan_methods` that fits ``max_bytes``),
        ``"jacobian"`` (Jacobian contraction; ``"autodiff"`` is the same), ``"ntvp"``
        (NTK-vector products) or ``"structured"`` (structured derivatives, Novak et al.
        2022; :mod:`lazylab.kernels.structured`). All are exact.
    output : None ((n, n') for one output, (n, n', O, O) for O > 1), ``"full"`` (always
        (n, n', O, O)), ``"trace"`` (sum_o K[:, :, o, o], (n, n')), or an index o (output
        o's (n, n') kernel; only that output is differentiated).
    chunk : examples per row/column block (default: as many as ``chunk_elems`` allows).
    chunk_elems : bound on the elements of the per-block intermediates (default
        :func:`lazylab.device.block_elems` of the net's device: 2^25 on CPU); at least one
        example per block.
    max_bytes : hard memory cap: a method whose one-example blocks need more is refused
        (ValueError) before any compute; "auto" only considers methods that fit.
    return_info : also return an :class:`EntkInfo` (the method chosen, each method's modelled
        cost and smallest block, the block sizes, the route of each tensor).

    Returns
    -------
    The kernel on the net's device and dtype (shape as ``output`` says), and the info if
    asked. For trained="first" and a_r = +-1 at width m -> infinity (NTK scaling) a
    TwoLayerNet's kernel tends to :func:`lazylab.kernels.ntk` with trained="first".
    """
    elems = _check_options(net, method, chunk, chunk_elems, max_bytes)
    check_deterministic(net)
    names = _resolve_trained(net, trained)
    X, Z = _check_inputs(net, X, Z)
    if (method in ("auto", "structured") and type(net) is TwoLayerNet
            and set(names) <= _STRUCTURED):
        K, info = _structured_ntk(net, X, Z, names, output, elems)
    else:
        n_out = _output_count(net, X)
        K, info = generic_ntk(net, X, Z, names, method, output_spec(output, n_out), n_out,
                              chunk, elems, max_bytes)
    return (K, info) if return_info else K


def _check_options(net: nn.Module, method: str, chunk: int | None, chunk_elems: int | None,
                   max_bytes: int | None) -> int:
    """The block bound ``chunk_elems`` (default: :func:`lazylab.device.block_elems` of the
    net's device), once ``method``, ``net``, ``chunk``, ``chunk_elems`` and ``max_bytes`` of
    :func:`empirical_ntk` are checked (ValueError naming the bad one)."""
    check_choice("method", method, METHODS)
    if not isinstance(net, nn.Module):
        raise ValueError(f"net must be a torch.nn.Module; got {type(net).__name__}")
    if chunk_elems is None:
        ref = next(iter(net.parameters()), None)
        chunk_elems = block_elems(ref.device if ref is not None else "cpu")
    if int(chunk_elems) != chunk_elems or chunk_elems < 1:
        raise ValueError(f"chunk_elems must be a positive integer; got {chunk_elems!r}")
    for label, v in (("chunk", chunk), ("max_bytes", max_bytes)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{label} must be a positive integer or None; got {v!r}")
    return int(chunk_elems)


def _structured_ntk(net: TwoLayerNet, X: torch.Tensor, Z: torch.Tensor | None, names: list[str],
                    output: int | str | None, chunk_elems: int
                    ) -> tuple[torch.Tensor, EntkInfo]:
    """A TwoLayerNet's kernel in closed form (:func:`_two_layer_ntk`), shaped as ``output``
    says, and its info."""
    spec = output_spec(output, 1)
    K2 = _two_layer_ntk(net, X, Z, set(names), chunk_elems)
    info = EntkInfo("structured", rows=X.shape[0], cols=K2.shape[1],
                    routes={k: "closed form" for k in names})
    return spec.finish(K2[:, :, None] if spec.diag else K2[:, :, None, None]), info


def _output_count(net: nn.Module, X: torch.Tensor) -> int:
    """The number O of outputs per example, from the net run on X's first row (ValueError
    when it does not return one floating-point tensor)."""
    with torch.no_grad():
        probe = net(X[:1])
    if not isinstance(probe, torch.Tensor) or not probe.is_floating_point():
        raise ValueError(f"empirical_ntk needs net to return one floating-point tensor; it "
                         f"returned a {type(probe).__name__} (wrap it to return the output "
                         "whose kernel you want)")
    return probe.numel()
