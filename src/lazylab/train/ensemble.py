"""A hyper-parameter grid trained as ONE batched ensemble (Allen-Zhu & Li 2019, Sec. 8).

The paper trains each (learning rate, weight decay) pair on the {1, 2, 5} x 10^k grid for 800
epochs of SGD (momentum 0.9, batch 50, lr / 10 at half the epochs) and reports the best. Here the
G = |lrs| x |wds| configurations share the model's initialization and the mini-batch order, so
their trainable parameters are stacked along a leading axis and one step of all of them is
batched GEMMs instead of a Python loop over configurations (``bench/bench_ensemble_grid.py``
measures the ratio to one configuration): the model's hand-written stacked gradients where it
has them (``stacked_grads``: the Sec. 8 learners, :mod:`lazylab.models.stacked`), otherwise
one call of ``torch.func.vmap(torch.func.grad(loss))``.

Each configuration follows the update of ``torch.optim.SGD`` (PyTorch semantics, dampening 0;
equal to float rounding, which may differ in the last bit):

    g <- grad L(theta) + wd theta,  b <- mu b + g  (b = g at step 1),  theta <- theta - lr b,

with lr divided by ``decay_factor`` from epoch ``floor(decay_at * epochs)`` on. The loss is the
batch mean of ||f(x) - y||^2 (summed over outputs, no 1/2; the paper's test error). With
``linearize=True`` the model is replaced by its first-order Taylor expansion at the init,
f(theta0; x) + J(theta0) (theta - theta0) (computed with ``torch.func.jvp``): the paper's "(NTK)"
mode, all layers trained in the tangent kernel regime.

Example
-------
>>> import torch
>>> from lazylab.models.mlp import MLP2
>>> g = torch.Generator().manual_seed(0)
>>> net = MLP2(4, 1, 8, generator=g, dtype=torch.float64)
>>> X = torch.randn(20, 4, generator=g, dtype=torch.float64); Y = X[:, :1] ** 2
>>> res = train_grid(net, X, Y, lrs=[0.01, 0.1], wds=[0.0], trainable="all", epochs=3,
...                  batch_size=5, generator=torch.Generator().manual_seed(1))
>>> res.errors(X, Y).shape
torch.Size([2])
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, jvp, vmap

from lazylab.models.resnet import ResNet3
from lazylab.models.stacked import Into, deposit
from lazylab.train import capture as cg
from lazylab.train.fused_update import momentum_update_
from lazylab.train.meter import loop_steps

#: Elements of one hidden activation of every configuration during :meth:`GridRun.predict`
#: (2^25: 128 MiB in float32). At the paper's m = 10^4 with 75 configurations, 5000 rows at
#: once would be 15 GB per activation.
ACTIVATION_ELEMENTS = 2 ** 25


def decade_grid(k_min: int, k_max: int, mantissas: Sequence[float] = (1, 2, 5)) -> list[float]:
    """Sorted {1, 2, 5} x 10^k for k in [k_min, k_max] (the paper's lr and wd grid).

    >>> decade_grid(-2, -1)
    [0.01, 0.02, 0.05, 0.1, 0.2, 0.5]
    """
    if k_min > k_max:
        raise ValueError(f"k_min must be <= k_max; got {k_min} > {k_max}")
    return sorted(float(f"{mu}e{k}") for k in range(k_min, k_max + 1) for mu in mantissas)


def best_index(values: torch.Tensor) -> int:
    """Index of the smallest finite value (diverged configurations are skipped); -1 if none."""
    v = torch.as_tensor(values, dtype=torch.float64)
    ok = torch.isfinite(v)
    if not bool(ok.any()):
        return -1
    return int(torch.where(ok, v, torch.inf).argmin())


def _names(model: nn.Module, trainable: str | Sequence[str]) -> list[str]:
    """Parameter names of a group of ``model.param_groups()`` or an explicit name list."""
    by_id = {id(p): n for n, p in model.named_parameters()}
    if isinstance(trainable, str):
        groups = model.param_groups() if hasattr(model, "param_groups") else {
            "all": list(model.parameters())}
        if trainable not in groups:
            raise ValueError(f"trainable must be one of {', '.join(groups)}; got {trainable!r}")
        return [by_id[id(p)] for p in groups[trainable]]
    names = list(trainable)
    unknown = sorted(set(names) - set(by_id.values()))
    if unknown:
        raise ValueError(f"unknown parameter names {unknown}")
    return names


@dataclass
class GridRun:
    """The trained ensemble: ``params[name]`` has shape (G, *shape) for trainable names.

    ``configs[g] = (lr, wd)``; ``train_loss[g, e]`` is the mean mini-batch loss during epoch
    e, before each step (NaN/inf once a configuration diverged).
    """

    model: nn.Module
    configs: list[tuple[float, float]]
    params: dict[str, torch.Tensor]
    fixed: dict[str, torch.Tensor]
    theta0: dict[str, torch.Tensor]
    linearize: bool
    train_loss: torch.Tensor

    def _fn(self):
        return _forward_fn(self.model, self.fixed, self.theta0, self.linearize)

    def _stacked_forward(self):
        """The model's hand-written forward of all G (of their Taylor models when
        linearized) as ``fn(params, X)``, or None (then vmap of the module's forward)."""
        if not hasattr(self.model, "stacked_forward") or \
                os.environ.get(STACKED_ENV, "1") == "0":
            return None
        base = {**self.fixed, **self.theta0} if self.linearize else None

        def fn(params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
            return self.model.stacked_forward(_stacked(self.fixed, params), X, base)
        return fn

    @torch.no_grad()
    def predict(self, X: torch.Tensor, *, chunk: int = 8192) -> torch.Tensor:
        """Outputs of every configuration, (G, n, ...), ``chunk`` rows of X at a time or
        fewer: a hidden activation of all G configurations on a chunk (G x rows x width,
        width the largest parameter dimension) stays within :data:`ACTIVATION_ELEMENTS`."""
        fn = self._stacked_forward() or vmap(self._fn(), in_dims=(0, None))
        width = max((max(t.shape[1:]) for t in self.params.values() if t.dim() > 1),
                    default=1)
        rows = max(1, min(int(chunk), ACTIVATION_ELEMENTS // (len(self.configs) * width)))
        return torch.cat([fn(self.params, X[i:i + rows]) for i in range(0, len(X), rows)],
                         dim=1)

    @torch.no_grad()
    def errors(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        """Mean over x of ||f(x) - y||^2 per configuration (G,); non-finite -> inf."""
        out = self.predict(X)
        diff = (out - Y.to(out.dtype)).reshape(out.shape[0], out.shape[1], -1)
        err = diff.square().sum(dim=2).mean(dim=1)
        return torch.where(torch.isfinite(err), err, torch.full_like(err, math.inf))

    def norms(self, names: Sequence[str]) -> torch.Tensor:
        """Frobenius norm of the trained tensors ``names`` together, per configuration (G,)."""
        tot = sum(self.params[n].reshape(len(self.configs), -1).square().sum(dim=1)
                  for n in names)
        return tot.sqrt()


def _forward_fn(model: nn.Module, fixed: dict[str, torch.Tensor],
                theta0: dict[str, torch.Tensor], linearize: bool):
    def f(params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        return functional_call(model, {**fixed, **params}, (X,))

    if not linearize:
        return f

    def f_lin(params: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
        delta = {n: params[n] - theta0[n] for n in params}
        out0, tangent = jvp(lambda p: f(p, X), (theta0,), (delta,))
        return out0 + tangent
    return f_lin


@dataclass(frozen=True)
class _Schedule:
    """The SGD protocol of :func:`train_grid`."""

    epochs: int
    decay_epoch: int
    decay_factor: float
    batch_size: int
    momentum: float


class _Flat:
    """The stacked parameters of G configurations in one (G, T) tensor, with a (G, *shape)
    view per name: the momentum-SGD update is two operations over one tensor (after the
    gradients' GEMMs deposit into the momentum buffer), whatever the number of parameter
    tensors."""

    def __init__(self, theta0: dict[str, torch.Tensor], G: int):
        self.names = list(theta0)
        self.shapes = [theta0[nm].shape for nm in self.names]
        self.sizes = [int(math.prod(s)) for s in self.shapes]
        self.data = torch.cat([theta0[nm].reshape(1, -1).expand(G, -1) for nm in self.names],
                              dim=1).contiguous()

    @property
    def data(self) -> torch.Tensor:
        return self._data

    @data.setter
    def data(self, value: torch.Tensor) -> None:
        # The parameters' views stay valid through in-place updates; a new tensor needs new
        # ones (made once, not every step: each view is an operation).
        self._data = value
        self._views: dict[str, torch.Tensor] | None = None

    def views(self, data: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """name -> (G, *shape) view of ``data`` (default: the parameters)."""
        if data is None:
            if self._views is None:
                self._views = self._split(self._data)
            return self._views
        return self._split(data)

    def _split(self, base: torch.Tensor) -> dict[str, torch.Tensor]:
        out, off = {}, 0
        for nm, shape, k in zip(self.names, self.shapes, self.sizes, strict=True):
            out[nm] = base[:, off:off + k].view(base.shape[0], *shape)
            off += k
        return out

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only the configurations ``rows`` (a boolean mask)."""
        self.data = self.data[rows]


class _Chunk:
    """The live configurations of a chunk: their stacked parameters, momentum buffer (with a
    (G, *shape) view per name, ``bufs``, into which each step deposits its gradient),
    learning rates and weight decays as (G_live, 1) columns, and their indices in the chunk."""

    def __init__(self, theta0: dict[str, torch.Tensor], cfg: list[tuple[float, float]],
                 X: torch.Tensor):
        self.flat = _Flat(theta0, len(cfg))
        self._buf(torch.empty_like(self.flat.data))
        self.first = True  # before the first step: b = g (torch.optim.SGD), not mu b + g
        self.live = torch.arange(len(cfg))
        self.lr0 = torch.tensor([c[0] for c in cfg], dtype=X.dtype, device=X.device).unsqueeze(1)
        self.wd = torch.tensor([c[1] for c in cfg], dtype=X.dtype, device=X.device).unsqueeze(1)

    def _buf(self, buf: torch.Tensor) -> None:
        self.buf, self.bufs = buf, self.flat.views(buf)

    def into(self, momentum: float) -> Into:
        """Where the step's gradients go: b <- mu b + g (b <- g at the first step)."""
        return Into(self.bufs, 0.0 if self.first else momentum)

    def update(self, lr: torch.Tensor) -> None:
        """The rest of one momentum-SGD step of every live configuration, once the gradients
        are in the buffer (b = mu b + g): b <- b + wd theta, theta <- theta - lr b, one
        operator (:mod:`lazylab.train.fused_update`: four passes over the (G, T) parameters
        where a GPU fuses it, six otherwise)."""
        momentum_update_(self.flat.data, self.buf, self.wd, lr)
        self.first = False

    def keep(self, ok: torch.Tensor) -> None:
        """Keep only the live configurations where the boolean mask ``ok`` holds."""
        self.flat.keep(ok.to(self.flat.data.device))
        self._buf(self.buf[ok.to(self.buf.device)])
        self.lr0, self.wd = self.lr0[ok.to(self.lr0.device)], self.wd[ok.to(self.wd.device)]
        self.live = self.live[ok]

    def result(self, G: int) -> _Flat:
        """The parameters of all G configurations, NaN for the diverged ones."""
        flat = self.flat
        full = torch.full((G, flat.data.shape[1]), math.nan, dtype=flat.data.dtype,
                          device=flat.data.device)
        full[self.live.to(full.device)] = flat.data
        flat.data = full
        return flat


def _epoch(step_grad, chunk: _Chunk, X: torch.Tensor, Y: torch.Tensor, perm: torch.Tensor,
           lr: torch.Tensor, sched: _Schedule, tot: torch.Tensor | None = None) -> torch.Tensor:
    """One epoch of mini-batches in the order ``perm``; the mean loss before each step per live
    configuration, (G_live,) float64 on the device (in ``tot`` when given)."""
    n = X.shape[0]
    if tot is None:
        tot = torch.zeros(len(chunk.live), dtype=torch.float64, device=X.device)
    else:
        tot.zero_()
    for s in range(0, n, sched.batch_size):
        idx = perm[s:s + sched.batch_size]
        val = step_grad(chunk.flat.views(), X.index_select(0, idx), Y.index_select(0, idx),
                        chunk.into(sched.momentum))
        with torch.no_grad():
            chunk.update(lr)
            tot.add_(val, alpha=len(idx))  # one operation; float64, exact as val.double() * n
    return tot.div_(n)


class _Replay:
    """One chunk's epoch captured in a CUDA graph (:mod:`lazylab.train.capture`): the batch
    order and the step sizes are copied into the graph's inputs, the losses read from its
    output. Valid while the live configurations stay the same."""

    def __init__(self, step_grad, chunk: _Chunk, X: torch.Tensor, Y: torch.Tensor,
                 perm: torch.Tensor, lr: torch.Tensor, sched: _Schedule):
        if chunk.first:  # the recorded steps all deposit with beta = mu
            raise RuntimeError("capture after the first eager epoch")
        self.perm, self.lr = perm.clone(), lr.clone()
        tot = torch.zeros(len(chunk.live), dtype=torch.float64, device=X.device)
        self.replay = cg.capture(
            lambda: _epoch(step_grad, chunk, X, Y, self.perm, self.lr, sched, tot),
            X.device, state=(chunk.flat.data, chunk.buf))

    def __call__(self, perm: torch.Tensor, lr: torch.Tensor) -> torch.Tensor:
        self.perm.copy_(perm)
        self.lr.copy_(lr)
        return self.replay()


def _train_chunk(step_grad, theta0: dict[str, torch.Tensor],
                 cfg: list[tuple[float, float]], X: torch.Tensor, Y: torch.Tensor,
                 perms: list[torch.Tensor], sched: _Schedule, graphs: bool = False,
                 ) -> tuple[_Flat, torch.Tensor]:
    """Train one chunk of configurations; returns their parameters and epoch losses.

    A configuration whose epoch loss is not finite has diverged (a non-finite loss makes the
    next gradient, hence the parameters, non-finite for good): from then on it is left out of
    the computation, its parameters are NaN and its later epoch losses NaN. With ``graphs``
    the epochs after the first :data:`~lazylab.train.capture.WARMUP` replay from a CUDA graph
    (recaptured when configurations leave; eager where a capture fails).
    """
    chunk = _Chunk(theta0, cfg, X)
    ep_loss = torch.full((len(cfg), sched.epochs), math.nan, dtype=torch.float64)
    replay: _Replay | None = None
    for e in range(sched.epochs):
        lr = chunk.lr0 / sched.decay_factor if e >= sched.decay_epoch else chunk.lr0
        if graphs and replay is None and \
                _capture_at(e, sched.epochs, len(perms[e]), sched.batch_size):
            try:
                replay = _Replay(step_grad, chunk, X, Y, perms[e], lr, sched)
            except Exception as exc:  # noqa: BLE001 - an epoch that cannot be captured runs eagerly
                cg.fell_back("grid", exc)
                graphs = False
        ep = (replay(perms[e], lr) if replay is not None
              else _epoch(step_grad, chunk, X, Y, perms[e], lr, sched)).cpu()
        ep_loss[chunk.live, e] = ep
        ok = torch.isfinite(ep)
        if not bool(ok.all()):
            chunk.keep(ok)
            replay = None
            if not len(chunk.live):
                break
    return chunk.result(len(cfg)), ep_loss


def _capture_at(e: int, epochs: int, n: int, batch_size: int) -> bool:
    """Whether epoch e of ``epochs`` (of n examples) may be captured: after the warm-up
    epochs, with enough steps left to pay for the capture
    (:data:`~lazylab.train.capture.MIN_STEPS`)."""
    return e >= cg.WARMUP and (epochs - e) * n >= batch_size * cg.MIN_STEPS // 2


def _check_protocol(lrs: Sequence[float], wds: Sequence[float], epochs: int,
                    batch_size: int) -> None:
    if int(epochs) != epochs or epochs < 1:
        raise ValueError(f"epochs must be a positive integer; got {epochs!r}")
    if int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}")
    if not lrs or any(lr <= 0 for lr in lrs) or not wds or any(w < 0 for w in wds):
        raise ValueError("lrs must be non-empty and > 0, wds non-empty and >= 0")


def _split_init(model: nn.Module, names: list[str]
                ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(theta0, fixed): the detached trainable tensors ``names`` and every other parameter or
    buffer."""
    all_tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    theta0 = {n: all_tensors[n].detach() for n in names}
    fixed = {n: t.detach() for n, t in all_tensors.items() if n not in theta0}
    return theta0, fixed


def _batched_grad(fwd):
    """(params stacked over G, xb, yb, into) -> losses of every configuration, for the loss
    mean_x ||f(x) - y||^2, the gradients deposited :class:`~lazylab.models.stacked.Into`
    ``into``."""
    def loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor
             ) -> torch.Tensor:
        diff = (fwd(params, xb) - yb).reshape(xb.shape[0], -1)
        return diff.square().sum(dim=1).mean()

    grad = vmap(grad_and_value(loss), in_dims=(0, None, None))

    def step(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor,
             into: Into) -> torch.Tensor:
        g, val = grad(params, xb, yb)
        with torch.no_grad():
            for nm in into.tensors:
                deposit(into, nm, g[nm])
        return val

    return step


#: Set to "0" to train every grid through ``torch.func.vmap(grad)`` even where the model has
#: hand-written stacked gradients (``stacked_grads``), e.g. to compare the two paths.
STACKED_ENV = "LAZYLAB_STACKED_GRADS"


def _stacked(fixed: dict[str, torch.Tensor], params: dict[str, torch.Tensor]
             ) -> dict[str, torch.Tensor]:
    """Every tensor of the module over the configurations: the stacked trained ``params``
    (G, *shape) and the fixed tensors broadcast to G (views, no copy)."""
    G = next(iter(params.values())).shape[0]
    return {**{n: t.expand(G, *t.shape) for n, t in fixed.items()}, **params}


def _stacked_grad(model: nn.Module, fixed: dict[str, torch.Tensor],
                  theta0: dict[str, torch.Tensor], linearize: bool):
    """The model's hand-written gradients of G stacked configurations
    (:mod:`lazylab.models.stacked`; of its Taylor model at theta0 when ``linearize``) with
    the :func:`_batched_grad` interface: the fixed tensors are broadcast to the live
    configurations, the trainable names' gradients deposited ``into`` (by their GEMMs)."""
    base = {**fixed, **theta0}

    def step(views: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor,
             into: Into) -> torch.Tensor:
        params = _stacked(fixed, views)
        if linearize:
            grads, loss = model.stacked_ntk_grads(params, base, xb, yb, into)
        else:
            grads, loss = model.stacked_grads(params, xb, yb, into)
        for nm, t in into.tensors.items():  # a model that allocated its own gradient tensor
            if grads[nm] is not t:
                deposit(into, nm, grads[nm])
        return loss

    return step


def _step_grad(model: nn.Module, fixed: dict[str, torch.Tensor],
               theta0: dict[str, torch.Tensor], linearize: bool, Y: torch.Tensor):
    """Hand-written stacked gradients where the model has them (not for 1-d targets), else
    ``vmap(grad)`` of its forward."""
    has = hasattr(model, "stacked_ntk_grads" if linearize else "stacked_grads")
    if has and Y.dim() == 2 and os.environ.get(STACKED_ENV, "1") != "0":
        return _stacked_grad(model, fixed, theta0, linearize)
    return _batched_grad(_forward_fn(model, fixed, theta0, linearize))


def _train_chunks(step_grad, theta0: dict[str, torch.Tensor],
                  configs: list[tuple[float, float]], X: torch.Tensor, Y: torch.Tensor,
                  perms: list[torch.Tensor], sched: _Schedule, size: int, graphs: bool,
                  ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The configurations ``size`` at a time: (G, *shape) parameters and (G, epochs) losses."""
    out_params: dict[str, list[torch.Tensor]] = {nm: [] for nm in theta0}
    losses = []
    for lo in range(0, len(configs), size):
        flat, ep_loss = _train_chunk(step_grad, theta0, configs[lo:lo + size], X, Y, perms,
                                     sched, graphs)
        for nm, v in flat.views().items():
            out_params[nm].append(v)
        losses.append(ep_loss)
    return {nm: torch.cat(v) for nm, v in out_params.items()}, torch.cat(losses)


def train_grid(model: nn.Module, X: torch.Tensor, Y: torch.Tensor, *, lrs: Sequence[float],
               wds: Sequence[float], trainable: str | Sequence[str] = "all", epochs: int,
               batch_size: int = 50, momentum: float = 0.9, decay_at: float = 0.5,
               decay_factor: float = 10.0, linearize: bool = False,
               generator: torch.Generator, max_group: int | None = None,
               capture: bool | None = None) -> GridRun:
    """Train every (lr, wd) in ``lrs x wds`` from the same init and batch order, batched.

    Parameters
    ----------
    model : an ``nn.Module`` (its current parameters are the shared init; it is not modified).
    X, Y : training inputs (n, d) and targets (n, k) or (n,).
    lrs, wds : learning rates (> 0) and weight decays (>= 0); G = len(lrs) * len(wds).
    trainable : a key of ``model.param_groups()`` ("all", "first", "last", ...) or names.
    epochs, batch_size, momentum : SGD protocol (paper: 800, 50, 0.9).
    decay_at, decay_factor : lr / decay_factor from epoch floor(decay_at * epochs).
    linearize : train the first-order Taylor model at the init instead ("NTK" mode).
    generator : the mini-batch order (one permutation per epoch, shared by all configurations).
    max_group : train at most this many configurations at once (memory); None = all.
    capture : replay each chunk's epochs from a CUDA graph (:mod:`lazylab.train.capture`;
        None: where the device's "grid" probe passed, False: never, True: without the probe).

    Returns
    -------
    :class:`GridRun` with the stacked trained parameters.
    """
    _check_protocol(lrs, wds, epochs, batch_size)
    theta0, fixed = _split_init(model, _names(model, trainable))
    configs = list(itertools.product([float(v) for v in lrs], [float(v) for v in wds]))
    n = X.shape[0]
    Y = Y.to(X.dtype)
    step_grad = _step_grad(model, fixed, theta0, linearize, Y)
    # the epochs after the warm-up replay from a CUDA graph where the device captures
    # (recorded for cost models)
    epochs = loop_steps(epochs, replayed=capture is not False
                        and _capture_at(cg.WARMUP, epochs, n, batch_size))
    # The batch order: one permutation per epoch, drawn up front (shared by all groups).
    perms = [torch.randperm(n, generator=generator, device=generator.device).to(X.device)
             for _ in range(int(epochs))]
    sched = _Schedule(int(epochs), math.floor(decay_at * epochs), decay_factor, batch_size,
                      momentum)
    size = len(configs) if max_group is None else max(1, int(max_group))
    graphs = capture if capture is not None else cg.enabled(X.device, "grid")
    params, losses = _train_chunks(step_grad, theta0, configs, X, Y, perms, sched, size, graphs)
    return GridRun(model, configs, params, fixed, theta0, linearize, losses)


def _capture_probe(dev: torch.device, captured: bool) -> tuple[float, list[torch.Tensor]]:
    """The learning-rate x weight-decay grid's capture probe (:func:`lazylab.train.capture.
    capture_works`): :func:`train_grid` on a 3resnet, 6 configurations, 40 epochs of 10 steps,
    eager or captured."""
    g = torch.Generator(device=dev).manual_seed(0)
    net = ResNet3(12, 6, 32, generator=g, device=dev)
    X = torch.randn(200, 12, generator=g, device=dev)
    Y = torch.randn(200, 6, generator=g, device=dev)
    return cg.timed(dev, lambda: list(train_grid(
        net, X, Y, lrs=[0.005, 0.01, 0.02], wds=[0.0, 1e-3], epochs=40, batch_size=20,
        generator=torch.Generator(dev).manual_seed(1), capture=captured).params.values()))


cg.register_probe("grid", _capture_probe)
