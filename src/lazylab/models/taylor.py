"""Taylor models of a network around its initialization, of any order.

For parameters theta0 and a direction U (the movement, trained from 0),

    f(x; theta0 + t U) = sum_{j >= 0} t^j f^(j)(x; U),
    f^(j)(x; U) = (1/j!) d^j/dt^j f(x; theta0 + t U) |_{t=0},

so f^(0) = f(x; theta0), f^(1) = f_L = <grad f(x; theta0), U> (the linearized / NTK model;
Chizat et al. 2019; Ghorbani et al. 2019, Eq. (7)) and f^(2) = f_Q = U^T Hess f U / 2 (the
quadratic model, QuadNTK: Bai & Lee 2020, Sec. 2.4; Nichani et al. 2022, Eqs. (11)-(12)). A
Taylor model is f^(j) summed over chosen orders j, trained in U with theta0 frozen (Nichani et
al. 2022, App. G, compare the full network with its first- and second-order Taylor models).

Two paths compute the terms:
- closed form for :class:`TwoLayerNet` (Bai & Lee 2020, Sec. 6):
  f^(j)(x; U) = s_m sum_r a_r sigma^(j)(w_r.x) (u_r.x)^j / j!  (see ``TwoLayerNet.taylor_terms``);
- any ``nn.Module`` via ``torch.func``: nested forward-mode derivatives (jvp) of
  theta -> functional_call(model, theta, X) along U at theta0 (cost ~2^k forward passes at
  order k).

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet, QuadraticModel
>>> net = TwoLayerNet(4, 10, activation="tanh", init="symmetric", dtype=torch.float64,
...                   generator=torch.Generator().manual_seed(0))
>>> q = QuadraticModel(net, include_linear=True)      # f_L + f_Q (Nichani et al. 2022)
>>> float(q(torch.randn(3, 4, dtype=torch.float64)).detach().abs().max())  # U starts at 0
0.0
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call, jvp

from lazylab.models.groups import GROUP_NAMES, group_param_names, is_group_name, param_groups
from lazylab.models.two_layer import TwoLayerNet

_CLOSED_FORM_PARAMS = {"W", "a", "c"}


def _one_tensor(out: Any, who: str) -> torch.Tensor:
    """``out`` when the model returned one tensor; a model returning a tuple or dict would
    otherwise fail deep inside torch.func with a message about autograd."""
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{who} needs model to return one tensor; it returned a "
                         f"{type(out).__name__} (wrap model in a module whose forward returns "
                         "the one output to expand)")
    return out


def _check_order(order: int) -> int:
    if int(order) != order or order < 0:
        raise ValueError(f"order must be a non-negative integer; got {order!r}")
    return int(order)


def taylor_terms(model: nn.Module, params0: Mapping[str, torch.Tensor] | None,
                 direction: Mapping[str, torch.Tensor], X: torch.Tensor,
                 order: int) -> list[torch.Tensor]:
    """Taylor terms of t -> model(X; params0 + t direction) at t = 0, by nested jvp.

    f^(j) = (1/j!) d^j/dt^j functional_call(model, params0 + t direction, X) |_{t=0}.

    Parameters
    ----------
    model : any module; parameters and buffers not named in ``params0`` are its own.
    params0 : base values theta0 by name (None: the model's current parameters, detached).
    direction : U by parameter name (a subset of the parameters); may require grad, and the
        terms are then differentiable in it (reverse mode through forward mode).
    X : the model's input.
    order : highest order k >= 0.

    Returns
    -------
    [f^(0), ..., f^(k)].
    """
    order = _check_order(order)
    named = dict(model.named_parameters())
    if params0 is None:
        params0 = {k: v.detach() for k, v in named.items()}
    unknown = [k for k in direction if k not in named and k not in params0]
    if unknown:
        raise ValueError(f"direction names {unknown} are not parameters of the model; "
                         f"allowed: {sorted(named)}")
    if not direction:
        raise ValueError("direction must name at least one parameter")
    base = {k: (params0[k] if k in params0 else named[k]) for k in direction}
    for k, v in direction.items():
        if v.shape != base[k].shape:
            raise ValueError(f"direction[{k!r}] must have shape {tuple(base[k].shape)}; "
                             f"got {tuple(v.shape)}")
    names = list(direction)
    dirs = tuple(direction[k] for k in names)

    def g(*ps: torch.Tensor) -> torch.Tensor:
        return _one_tensor(functional_call(
            model, {**params0, **dict(zip(names, ps, strict=True))}, (X,)), "taylor_terms")

    # derivs(j)(theta) returns (g, D g[U], ..., D^j g[U, ..., U]) at theta; one more jvp along
    # U adds the next directional derivative. The jvps run over the parameters with U as the
    # tangent, not over a scalar t in theta0 + t U: functorch would run theta0 + t U through
    # Python reference decompositions at every level (4x slower end to end, same values).
    def derivs(j: int) -> Callable[..., tuple[torch.Tensor, ...]]:
        if j == 0:
            return lambda *ps: (g(*ps),)
        prev = derivs(j - 1)

        def step(*ps: torch.Tensor) -> tuple[torch.Tensor, ...]:
            # Without has_aux, jvp returns a pair (its annotation also admits the triple).
            out, tangent = cast(tuple[Any, Any], jvp(prev, ps, dirs))
            return tuple(out) + (tangent[-1],)

        return step

    vals = derivs(order)(*(base[k] for k in names))
    return [v / math.factorial(j) for j, v in enumerate(vals)]


class _LinearTerm(torch.autograd.Function):
    """(f(X; theta0), J(theta0; X) U) by one forward-mode pass, with the backward to U by one
    reverse-mode pass: dL/dU = J^T dL/d(JU) (a vjp at theta0; f_L is linear in U). Autograd
    through the jvp instead (reverse over forward) costs several times more per step."""

    @staticmethod
    def forward(ctx, f, base, X, *dirs):
        out0, ju = cast(tuple[Any, Any], jvp(lambda *p: f(p, X), tuple(base), tuple(dirs)))
        ctx.f, ctx.base, ctx.X = f, base, X
        ctx.mark_non_differentiable(out0)
        return out0, ju

    @staticmethod
    def backward(ctx, _g0, g_ju):
        from torch.func import vjp

        _, pullback = cast(tuple[Any, Callable[..., Any]],
                           vjp(lambda *p: ctx.f(p, ctx.X), *ctx.base))
        return (None, None, None, *pullback(g_ju))


def _check_terms(order: int, terms: Sequence[int] | None) -> tuple[int, ...]:
    """The sorted orders j in 0..order that ``forward`` sums (default all)."""
    orders = tuple(range(order + 1)) if terms is None else tuple(terms)
    if not orders or any(int(j) != j or not 0 <= j <= order for j in orders):
        raise ValueError(f"terms must be a non-empty subset of 0..{order}; got {terms!r}")
    return tuple(sorted({int(j) for j in orders}))


def _wrt_names(model: nn.Module, wrt: str | Sequence[str] | None) -> list[str]:
    """The perturbed parameter names: the trainable ones, a group's, or the given names."""
    named = dict(model.named_parameters())
    if wrt is None:
        names = [k for k, v in named.items() if v.requires_grad]
    elif is_group_name(wrt):
        names = group_param_names(model, wrt)
    else:
        names = [wrt] if isinstance(wrt, str) else list(wrt)
    bad = [k for k in names if k not in named]
    if bad or not names:
        raise ValueError(f"wrt must be a group name ({', '.join(GROUP_NAMES)}) or name "
                         f"parameters of the model among {sorted(named)}; got "
                         f"{wrt if wrt is not None else names!r}")
    return names


def _choose_path(model: nn.Module, names: list[str], path: str) -> str:
    """The path for ``path``: "auto" takes "closed_form" when it applies, else "autodiff"."""
    if path not in ("auto", "closed_form", "autodiff"):
        raise ValueError(f"path must be one of auto, closed_form, autodiff; got {path!r}")
    closed_ok = isinstance(model, TwoLayerNet) and set(names) <= _CLOSED_FORM_PARAMS
    if path == "closed_form" and not closed_ok:
        raise ValueError("path='closed_form' needs a TwoLayerNet and wrt within W, a, c")
    return ("closed_form" if closed_ok else "autodiff") if path == "auto" else path


def _initial_directions(model: nn.Module, names: Sequence[str], init_std: float,
                        generator: torch.Generator | None) -> list[nn.Parameter]:
    """U per name: zeros, or init_std * N(0, 1) drawn in ``names`` order."""
    named = dict(model.named_parameters())
    dirs = []
    for k in names:
        p = named[k]
        U = torch.zeros_like(p, requires_grad=False)
        if init_std > 0:
            assert generator is not None  # checked with init_std by the caller
            noise = torch.randn(p.shape, generator=generator, device=generator.device,
                                dtype=p.dtype)
            U = init_std * noise.to(p.device)
        dirs.append(nn.Parameter(U))
    return dirs


class TaylorModel(nn.Module):
    """f(x; U) = sum_{j in terms} f^(j)(x; U), a Taylor model of ``model`` around its weights.

    The base weights theta0 are a frozen copy of ``model`` at construction (training the
    original afterwards does not move them); the direction U (one tensor per perturbed
    parameter) is trainable and starts at 0 (or small noise: U = 0 is a stationary point of
    the pure quadratic model, Bai & Lee 2020, Sec. 3.3).

    Parameters
    ----------
    model : the network; a :class:`TwoLayerNet` gets the closed-form path.
    order : k, the highest order kept (>= 0).
    terms : which orders j in 0..k are summed by ``forward`` (default all 0..k).
    wrt : what is perturbed: a group name of the model's ``param_groups()`` (``"first"``,
        ``"hidden"``, ``"last"``, ``"all"``; :mod:`lazylab.models.groups`), a parameter name,
        or a sequence of parameter names (default: the model's trainable parameters; for a
        TwoLayerNet with a fixed second layer that is ``("W",)``).
    path : ``"auto"`` (closed form when possible), ``"closed_form"`` (TwoLayerNet and wrt
        within W, a, c) or ``"autodiff"`` (torch.func, any module).
    init_std : the direction starts at init_std * N(0, 1) entries (needs ``generator``).
    generator : the source of that noise.

    Attributes
    ----------
    base : the frozen copy of the model (theta0).
    wrt : the perturbed parameter names; ``direction`` maps them to the trainable U;
        ``U`` is the first-layer direction of a TwoLayerNet (``direction["W"]``).
    orders : the orders summed by ``forward``.
    """

    def __init__(self, model: nn.Module, order: int = 1, *, terms: Sequence[int] | None = None,
                 wrt: str | Sequence[str] | None = None, path: str = "auto", init_std: float = 0.0,
                 generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(model, nn.Module):
            raise ValueError(f"model must be a torch.nn.Module; got {type(model).__name__}")
        self.order = _check_order(order)
        self.orders = _check_terms(self.order, terms)
        names = _wrt_names(model, wrt)
        self.path = _choose_path(model, names, path)
        if init_std < 0 or (init_std > 0 and generator is None):
            raise ValueError(f"init_std must be >= 0 and needs a generator when > 0; got "
                             f"init_std={init_std!r}, generator={generator!r}")
        self.base = copy.deepcopy(model).requires_grad_(False)
        self.wrt = tuple(names)
        self._dirs = nn.ParameterList(_initial_directions(model, self.wrt, init_std, generator))
        # The base model's roles, restricted to the perturbed parameters (names per group).
        self._group_names = {g: [k for k in group_param_names(model, g) if k in self.wrt]
                             for g, ps in param_groups(model).items() if ps}

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """The directions by the base model's roles (:mod:`lazylab.models.groups`): the
        direction of W is in ``"first"`` when the base model's W is; ``"all"`` is every
        direction."""
        d = self.direction
        out = {g: [d[k] for k in ks] for g, ks in self._group_names.items() if ks}
        out["all"] = list(self._dirs)
        return out

    @property
    def direction(self) -> dict[str, nn.Parameter]:
        return dict(zip(self.wrt, self._dirs, strict=True))

    @property
    def U(self) -> nn.Parameter:
        if "W" not in self.wrt:
            raise ValueError(f"U is the direction of 'W'; this model perturbs {self.wrt}")
        return self.direction["W"]

    def _resolve(self, U) -> Mapping[str, torch.Tensor]:
        if U is None:
            return self.direction
        if isinstance(U, torch.Tensor):
            if len(self.wrt) != 1:
                raise ValueError(f"U must be a mapping over {self.wrt} (several parameters "
                                 "are perturbed)")
            return {self.wrt[0]: U}
        if not isinstance(U, Mapping) or any(k not in self.wrt for k in U):
            raise ValueError(f"U must be a tensor or a mapping with keys among {self.wrt}")
        return dict(U)

    def _cast(self, X: torch.Tensor) -> torch.Tensor:
        """Floating-point X in the base model's dtype and on its device, as
        :func:`lazylab.kernels.empirical_ntk` casts its inputs (a float32 batch for a float64
        model would otherwise fail inside a matmul); other inputs (indices) unchanged."""
        ref = next(self.base.parameters(), None)
        if ref is None or not isinstance(X, torch.Tensor) or not X.is_floating_point():
            return X
        return X.to(device=ref.device, dtype=ref.dtype)  # the same tensor when they match

    def _terms(self, X: torch.Tensor, dirs: Mapping[str, torch.Tensor],
               order: int) -> list[torch.Tensor]:
        X = self._cast(X)
        if self.path == "closed_form":
            assert isinstance(self.base, TwoLayerNet)  # the closed form is only chosen for one
            return self.base.taylor_terms(X, dirs.get("W"), order, delta_a=dirs.get("a"),
                                          delta_c=dirs.get("c"))
        if not dirs:  # only f^(0) is nonzero along a zero direction
            f0 = self.base(X)
            return [f0] + [torch.zeros_like(f0) for _ in range(order)]
        if order == 1 and self._fast_linear(X):
            return list(self._linear_terms(X, dirs))
        return taylor_terms(self.base, None, dirs, X, order)

    def _fast_linear(self, X: torch.Tensor) -> bool:
        """Whether the first-order terms may take :class:`_LinearTerm`: not under a
        ``torch.func`` transform (empirical NTKs of the model, per-example gradients), not
        differentiated in X, not asked for higher derivatives."""
        return (torch._C._functorch.peek_interpreter_stack() is None and not X.requires_grad
                and self.path == "autodiff")

    def _linear_terms(self, X: torch.Tensor, dirs: Mapping[str, torch.Tensor]):
        names = list(dirs)
        params = {k: v.detach() for k, v in self.base.named_parameters()}
        base = [params[k] for k in names]

        def f(ps, x):
            return _one_tensor(functional_call(
                self.base, {**params, **dict(zip(names, ps, strict=True))}, (x,)),
                type(self).__name__)

        return _LinearTerm.apply(f, base, X, *[dirs[k] for k in names])

    def terms(self, X: torch.Tensor, U=None) -> list[torch.Tensor]:
        """[f^(0)(X), ..., f^(k)(X; U)] along U (default: the trained direction).

        U may be a tensor (when one parameter is perturbed) or a mapping name -> tensor
        (missing names count as zero).
        """
        return self._terms(X, self._resolve(U), self.order)

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        ts = self._terms(X, self.direction, max(self.orders))
        out = ts[self.orders[0]]
        for j in self.orders[1:]:
            out = out + ts[j]
        return out

    def network(self, X: torch.Tensor, t: float = 1.0, U=None) -> torch.Tensor:
        """The full network at the moved weights, f(X; theta0 + t U), which the model expands."""
        dirs = self._resolve(U)
        params: dict[str, torch.Tensor] = dict(self.base.named_parameters())
        for k, v in dirs.items():
            params[k] = params[k] + t * v
        return functional_call(self.base, params, (self._cast(X),))

    def extra_repr(self) -> str:
        return f"order={self.order}, terms={self.orders}, wrt={self.wrt}, path={self.path}"


class LinearizedModel(TaylorModel):
    """f = f^(0) + f_L (``include_f0``) or f_L alone: the NTK / lazy model, linear in U.

    f_L(x; U) = <grad_theta f(x; theta0), U>; for a TwoLayerNet with U on the first layer,
    f_L = s_m sum_r a_r sigma'(w_r.x) (u_r.x) (Bai & Lee 2020, Sec. 2.4; with a trainable
    second layer and offset, ``wrt=("W", "a", "c")``, it is the NT class of Ghorbani et al.
    2019, Eq. (3), plus the random-features term).
    """

    def __init__(self, model: nn.Module, *, include_f0: bool = True,
                 wrt: str | Sequence[str] | None = None, path: str = "auto", init_std: float = 0.0,
                 generator: torch.Generator | None = None):
        super().__init__(model, 1, terms=(0, 1) if include_f0 else (1,), wrt=wrt, path=path,
                         init_std=init_std, generator=generator)


class QuadraticModel(TaylorModel):
    """f_Q alone (Bai & Lee 2020's L^Q model) or f_L + f_Q (``include_linear``, Nichani et
    al. 2022, Sec. 5), optionally + f^(0).

    f_Q(x; U) = s_m/2 sum_r a_r sigma''(w_r.x) (u_r.x)^2 for a TwoLayerNet.
    """

    def __init__(self, model: nn.Module, *, include_linear: bool = False,
                 include_f0: bool = False, wrt: str | Sequence[str] | None = None,
                 path: str = "auto", init_std: float = 0.0,
                 generator: torch.Generator | None = None):
        terms = (0,) * include_f0 + (1,) * include_linear + (2,)
        super().__init__(model, 2, terms=terms, wrt=wrt, path=path, init_std=init_std,
                         generator=generator)
