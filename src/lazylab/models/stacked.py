"""Hand-written gradients of G stacked configurations of the Allen-Zhu & Li (2019) learners.

A hyper-parameter grid (:func:`lazylab.train.ensemble.train_grid`) trains G copies of one
network that differ only in their parameters, each on the same mini-batch. For the ReLU
learners of Sec. 8 (:class:`~lazylab.models.mlp.MLP2`, :class:`~lazylab.models.mlp.MLP3`,
:class:`~lazylab.models.resnet.ResNet3`) the forward and backward passes of all G copies are a
few batched GEMMs, written out here: about half the tensor operations of
``torch.func.vmap(torch.func.grad(...))`` of the same step (each launches one kernel on a GPU)
and 1.2-1.6x less CPU time at the quick scale's sizes.

Each pass takes ``params``, name -> (G, *shape) tensor (every parameter and buffer of the
module, stacked), and a shared batch X (B, d); with targets Y (B, k), ``stacked_grads``
returns the gradients of the per-configuration loss

    L_g = (1/B) sum_b ||out_g(x_b) - y_b||^2

(the loss of :func:`~lazylab.train.ensemble.train_grid`) for every parameter name, and the
losses (G,). With go = dL/dout = (2/B)(out - y), a ReLU layer h = sigma(z), z = W x + b takes
gW = (gh * 1[z > 0])^T x and gb = sum_b (gh * 1[z > 0]), gh the gradient reaching h
(1[z > 0] is the ReLU derivative autograd uses).

The "(NTK)" mode trains the first-order Taylor model at theta0 (Sec. 8.1),
out_lin(theta) = out(theta0) + J(theta0) (theta - theta0): its forward adds the tangent of
every layer at theta0 (the jvp), and its gradient J(theta0)^T go is the backward pass above
with the activations of theta0, shared by all G (``stacked_ntk_grads``, given ``base`` =
theta0).

Where the gradients go is the caller's (:class:`Into`): the grid trainer has each gradient's
GEMM add itself into its momentum buffer, b <- mu b + g (``baddbmm`` with beta = mu), so a
step of G copies at width m reads and writes the m x m layers' buffers once instead of writing
the gradient and then combining it with the buffer.

Each learner is one :class:`Passes` triple (forward, backward, tangent); a module names its
triple and inherits :class:`StackedGrads`, whose ``stacked_grads``, ``stacked_ntk_grads`` and
``stacked_forward`` the grid trainer and its predictions call.

Example
-------
>>> from lazylab.models.mlp import MLP2
>>> net = MLP2(4, 2, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
>>> params = {n: v.detach().expand(3, *v.shape) for n, v in net.named_parameters()}
>>> X = torch.randn(5, 4, dtype=torch.float64)
>>> out = net.stacked_forward(params, X)
>>> out.shape, bool(torch.allclose(out[0], net(X)))
(torch.Size([3, 5, 2]), True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import torch

Params = Mapping[str, torch.Tensor]
Grads = tuple[dict[str, torch.Tensor], torch.Tensor]
Acts = dict[str, torch.Tensor]
Fwd = Callable[[Params, torch.Tensor], tuple[torch.Tensor, Acts]]


@dataclass(frozen=True)
class Into:
    """Where gradients go: for each name in ``tensors``, a (G, *shape) tensor T takes

        T <- beta T + gradient

    inside the gradient's own GEMM (``baddbmm``); with beta = 0 its old contents, NaN
    included, are ignored. The grid trainer passes views of its flat momentum buffer and
    beta = mu, so b <- mu b + g costs the GEMM's write plus one read of b (instead of writing g,
    then reading g and b and writing b). Names not in ``tensors`` get fresh tensors."""

    tensors: Mapping[str, torch.Tensor] = field(default_factory=dict)
    beta: float = 0.0


NOWHERE = Into()


def deposit(into: Into, name: str, value: torch.Tensor) -> None:
    """``into.tensors[name] <- beta into.tensors[name] + value`` for a gradient computed apart."""
    t = into.tensors[name]
    if into.beta == 0.0:
        t.copy_(value)
    else:
        torch.add(value, t, alpha=into.beta, out=t)


Back = Callable[[torch.Tensor, Acts, Params, torch.Tensor, Into], dict[str, torch.Tensor]]
Tan = Callable[[Acts, Params, Params, torch.Tensor], torch.Tensor]


_RELU_BACKWARD = torch.ops.aten.threshold_backward.default


def _masked(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """g * 1[z > 0] in one pass (ReLU's backward: no boolean mask, no second pass)."""
    return _RELU_BACKWARD(g, z, 0.0)


def _T(W: torch.Tensor) -> torch.Tensor:
    return W.transpose(-1, -2)


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b: ``bmm`` when both are stacked (G, ., .) (matmul would add broadcasting views
    around the same kernel), else ``matmul`` (a shared operand broadcasts)."""
    return torch.bmm(a, b) if a.dim() == 3 and b.dim() == 3 else torch.matmul(a, b)


def _affine(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """z = x W^T + b: (B, out) for an unstacked W (out, in), (G, B, out) for a stacked one;
    x is (B, in) or (G, B, in)."""
    if W.dim() == 2 and x.dim() == 2:
        return torch.addmm(b, x, W.T)
    if x.dim() == 2:
        x = x.expand(W.shape[0], *x.shape)
    return torch.baddbmm(b.unsqueeze(-2), x, _T(W))


def _outer(g: torch.Tensor, x: torch.Tensor, into: Into = NOWHERE, name: str = ""
           ) -> torch.Tensor:
    """sum_b g_gb x_b^T: (G, out, in) from g (G, B, out) and x (B, in) or (G, B, in); for a
    ``name`` in ``into``, deposited into its tensor (:class:`Into`) by the GEMM itself."""
    gt = _T(g)
    if gt.dim() == 3 and x.dim() == 2:  # one batched GEMM (no copy to fold the batch)
        x = x.expand(gt.shape[0], *x.shape)
    out = into.tensors.get(name)
    if out is not None:
        return out.baddbmm_(gt, x, beta=into.beta)
    return _mm(gt, x)


def _bias(gz: torch.Tensor, into: Into, name: str) -> torch.Tensor:
    """sum_b gz_gb: a bias gradient (G, out), deposited for a ``name`` in ``into``."""
    out = into.tensors.get(name)
    if out is None:
        return gz.sum(-2)
    if into.beta == 0.0:
        return torch.sum(gz, -2, out=out)
    return torch.add(gz.sum(-2), out, alpha=into.beta, out=out)


def _residual(out: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(losses (G,), dL/dout = (2/B) (out - y))."""
    r = out - Y
    return r.square().sum(2).mean(1), r.mul_(2.0 / Y.shape[0])


def _relu_back(gh: torch.Tensor, z: torch.Tensor, x: torch.Tensor, W: str, b: str,
               grads: dict[str, torch.Tensor], into: Into) -> torch.Tensor:
    """Gradients of h = sigma(x W^T + b) given dL/dh: stores gW, gb (deposited
    :class:`Into` ``into`` for the names it holds) and returns dL/dz."""
    gz = _masked(gh, z)
    grads[W] = _outer(gz, x, into, W)
    grads[b] = _bias(gz, into, b)
    return gz


def _taylor(tan: Tan, acts0: Acts, base: Params, params: Params, X: torch.Tensor,
            out0: torch.Tensor) -> torch.Tensor:
    """out(theta0) + J(theta0) (theta - theta0) of G stacked copies, computed as
    J(theta0) theta + (out(theta0) - J(theta0) theta0): the tangent is linear in its direction,
    so the differences theta - theta0 (two passes over the stacked parameters) are never formed;
    J(theta0) theta0 is one unstacked pass shared by the G copies."""
    return tan(acts0, base, params, X).add_(out0 - tan(acts0, base, base, X))


# ------------------------------------------------------------------------------- MLP2
def _mlp2_fwd(P: Params, X: torch.Tensor) -> tuple[torch.Tensor, Acts]:
    z1 = _affine(X, P["W"], P["b1"])
    h1 = z1.clamp_min(0)
    return _mm(h1, _T(P["A"])), {"z1": z1, "h1": h1}


def _mlp2_back(go: torch.Tensor, a: Acts, P: Params, X: torch.Tensor, into: Into
               ) -> dict[str, torch.Tensor]:
    grads = {"A": _outer(go, a["h1"], into, "A")}
    _relu_back(_mm(go, P["A"]), a["z1"], X, "W", "b1", grads, into)
    return grads


def _mlp2_tan(a: Acts, P: Params, dP: Params, X: torch.Tensor) -> torch.Tensor:
    t1 = _masked(_affine(X, dP["W"], dP["b1"]), a["z1"])
    return _mm(a["h1"], _T(dP["A"])) + _mm(t1, _T(P["A"]))


# ------------------------------------------------------------------------------- MLP3
def _mlp3_fwd(P: Params, X: torch.Tensor) -> tuple[torch.Tensor, Acts]:
    z1 = _affine(X, P["W"], P["b1"])
    h1 = z1.clamp_min(0)
    z2 = _affine(h1, P["U"], P["b2"])
    h2 = z2.clamp_min(0)
    return _mm(h2, _T(P["A"])), {"z1": z1, "h1": h1, "z2": z2, "h2": h2}


def _mlp3_back(go: torch.Tensor, a: Acts, P: Params, X: torch.Tensor, into: Into
               ) -> dict[str, torch.Tensor]:
    grads = {"A": _outer(go, a["h2"], into, "A")}
    gz2 = _relu_back(_mm(go, P["A"]), a["z2"], a["h1"], "U", "b2", grads, into)
    _relu_back(_mm(gz2, P["U"]), a["z1"], X, "W", "b1", grads, into)
    return grads


def _mlp3_tan(a: Acts, P: Params, dP: Params, X: torch.Tensor) -> torch.Tensor:
    t1 = _masked(_affine(X, dP["W"], dP["b1"]), a["z1"])
    t2 = _affine(a["h1"], dP["U"], dP["b2"]) + _mm(t1, _T(P["U"]))
    return _mm(a["h2"], _T(dP["A"])) + _mm(_masked(t2, a["z2"]), _T(P["A"]))


# ------------------------------------------------------------------------------- ResNet3
def _inner(P: Params) -> torch.Tensor:
    """A_in: the frozen copy where the module has one (untied), else A (tied)."""
    return P["A_in"] if "A_in" in P else P["A"]


def _resnet_fwd(P: Params, X: torch.Tensor) -> tuple[torch.Tensor, Acts]:
    z1 = _affine(X, P["W"], P["b1"])
    h1 = z1.clamp_min(0)
    x2 = h1 if "U" in P else _mm(h1, _T(_inner(P)))     # the hidden block's input
    z2 = _affine(x2, P["U"] if "U" in P else P["V"], P["b2"])
    f = h1 + z2.clamp_min(0)
    return _mm(f, _T(P["A"])), {"z1": z1, "h1": h1, "x2": x2, "z2": z2, "f": f}


def _resnet_back(go: torch.Tensor, a: Acts, P: Params, X: torch.Tensor, into: Into
                 ) -> dict[str, torch.Tensor]:
    full = "U" in P
    W2 = P["U"] if full else P["V"]
    grads = {"A": _outer(go, a["f"], into, "A")}
    gf = _mm(go, P["A"])
    gz2 = _relu_back(gf, a["z2"], a["x2"], "U" if full else "V", "b2", grads, into)
    gx2 = _mm(gz2, W2)
    if full:
        gh1 = gf.add_(gx2)
    else:
        if "A_in" not in P:  # tied: A is also the inner A
            grads["A"].add_(_outer(gx2, a["h1"]))
        gh1 = gf.add_(_mm(gx2, _inner(P)))
    _relu_back(gh1, a["z1"], X, "W", "b1", grads, into)
    return grads


def _resnet_tan(a: Acts, P: Params, dP: Params, X: torch.Tensor) -> torch.Tensor:
    full = "U" in P
    t1 = _masked(_affine(X, dP["W"], dP["b1"]), a["z1"])
    if full:
        tx2, W2, dW2 = t1, P["U"], dP["U"]
    else:
        tx2 = _mm(t1, _T(_inner(P)))
        if "A_in" not in P:
            tx2 = tx2 + _mm(a["h1"], _T(dP["A"]))
        W2, dW2 = P["V"], dP["V"]
    t2 = _affine(a["x2"], dW2, dP["b2"]) + _mm(tx2, _T(W2))
    return _mm(a["f"], _T(dP["A"])) + _mm(t1.add_(_masked(t2, a["z2"])), _T(P["A"]))


# ------------------------------------------------------------------------------- the steps


def _grads(fwd: Fwd, back: Back, params: Params, X: torch.Tensor, Y: torch.Tensor,
           into: Into) -> Grads:
    out, acts = fwd(params, X)
    loss, go = _residual(out, Y)
    return back(go, acts, params, X, into), loss


def _ntk_grads(fwd: Fwd, back: Back, tan: Tan, params: Params, base: Params,
               X: torch.Tensor, Y: torch.Tensor, into: Into) -> Grads:
    out0, acts0 = fwd(base, X)                      # at theta0, shared by the G members
    loss, go = _residual(_taylor(tan, acts0, base, params, X, out0), Y)
    return back(go, acts0, base, X, into), loss


def stacked_forward(fwd: Fwd, tan: Tan, params: Params, X: torch.Tensor,
                    base: Params | None = None) -> torch.Tensor:
    """Outputs (G, n, k) of G stacked copies at inputs X; of their first-order Taylor models
    at ``base`` when given (out(theta0) + J (theta - theta0))."""
    if base is None:
        return fwd(params, X)[0]
    out0, acts0 = fwd(base, X)
    return _taylor(tan, acts0, base, params, X, out0)

@dataclass(frozen=True)
class Passes:
    """A learner's forward pass, backward pass and tangent (jvp) pass over G stacked copies."""

    fwd: Fwd
    back: Back
    tan: Tan


MLP2_PASSES = Passes(_mlp2_fwd, _mlp2_back, _mlp2_tan)
MLP3_PASSES = Passes(_mlp3_fwd, _mlp3_back, _mlp3_tan)
RESNET3_PASSES = Passes(_resnet_fwd, _resnet_back, _resnet_tan)


class StackedGrads:
    """Mixin of a module whose G stacked copies have hand-written passes: a subclass names
    them in ``stacked_passes``; :func:`~lazylab.train.ensemble.train_grid` and
    :meth:`~lazylab.train.ensemble.GridRun.predict` use these methods where they exist."""

    stacked_passes: ClassVar[Passes]

    def stacked_grads(self, params: Params, X: torch.Tensor, Y: torch.Tensor,
                      into: Into = NOWHERE) -> Grads:
        """Gradients and losses of G stacked copies on one batch; the names in ``into`` are
        deposited into its tensors (:class:`Into`), which are returned for them."""
        s = type(self).stacked_passes
        return _grads(s.fwd, s.back, params, X, Y, into)

    def stacked_ntk_grads(self, params: Params, base: Params, X: torch.Tensor,
                          Y: torch.Tensor, into: Into = NOWHERE) -> Grads:
        """The same for the first-order Taylor model at ``base`` (unstacked theta0)."""
        s = type(self).stacked_passes
        return _ntk_grads(s.fwd, s.back, s.tan, params, base, X, Y, into)

    def stacked_forward(self, params: Params, X: torch.Tensor,
                        base: Params | None = None) -> torch.Tensor:
        """Outputs (G, n, k) of G stacked copies (of their Taylor models at ``base``)."""
        s = type(self).stacked_passes
        return stacked_forward(s.fwd, s.tan, params, X, base)
