"""Gradient training of any torch model: full-batch GD, minibatch SGD, one-pass SGD, with
momentum, weight decay, a learning-rate schedule, gradient noise and a regularizer.

Update t (t = 0, ..., steps - 1), for each trained parameter theta with learning-rate scale s
and weight decay wd (per parameter group), eta_t = lr * schedule(t) * s:

    g_t = grad_theta [ loss(f(X_t), y_t) + R(model) ] + wd * theta_t + noise_std * xi_t
    b_t = momentum * b_{t-1} + g_t                       (b_{-1} = 0; skipped if momentum = 0)
    d_t = g_t + momentum * b_t  (nesterov)  or  b_t
    theta_{t+1} = theta_t - eta_t * d_t

which is torch.optim.SGD's convention (dampening 0). xi_t ~ N(0, I) entrywise, so the default
``noise_mode="gradient"`` is Nichani et al. (2022) Eq. (21), W <- W - eta (grad L + Xi) with
Xi_ij ~ N(0, sigma^2 / (md)), i.e. noise_std = sigma / sqrt(m d); ``noise_mode="langevin"``
instead adds sqrt(2 eta_t) * noise_std * xi_t after the step (Langevin dynamics at temperature
noise_std^2), the noisy GD used to escape saddles (Bai & Lee 2020, Sec. 3.6).

Batches (X_t, y_t): the whole training set (``"gd"``); minibatches of a fixed set, reshuffled
every epoch or drawn with replacement (``"sgd"``); fresh samples from ``sampler`` every step
(``"one_pass"``, as Ghorbani et al. 2019 and Allen-Zhu & Li 2019's Algorithm 1).

The loop composes three parts: :class:`lazylab.train.batches.Batches` (batch t),
:class:`lazylab.train.step.SGDStep` (the update: torch.optim.SGD plus noise) and the logging of
:class:`lazylab.train.history.History` at chosen steps, with an optional ``stop`` callback
(early stopping) and divergence checks.

Example
-------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> X = torch.randn(64, 3, generator=g, dtype=torch.float64)
>>> y = X @ torch.tensor([1.0, -1.0, 2.0], dtype=torch.float64)
>>> model = torch.nn.Linear(3, 1, bias=False).double()
>>> h = fit(model, data=(X, y.unsqueeze(1)), lr=0.1, steps=200, log_points=5)
>>> h.steps[0], h.steps[-1], h.train_loss[-1] < 1e-12
(0, 200, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import torch
from torch import nn

from lazylab.models.groups import is_group_name, param_group
from lazylab.train.batches import Batch, Batches, Sampler
from lazylab.train.history import History, TrainingDiverged, log_spaced_steps
from lazylab.train.losses import LossFn, get_loss
from lazylab.train.meter import evaluation, loop_steps, sampled_blocks
from lazylab.train.schedules import Schedule
from lazylab.train.step import ParamGroup, SGDStep

ParamSpec = torch.Tensor | str | Mapping[str, Any]
OPTIMIZERS = ("gd", "sgd", "one_pass")


def _nonneg(value: float, name: str, *, upper: float | None = None) -> float:
    v = float(value)
    if not (math.isfinite(v) and v >= 0 and (upper is None or v < upper)):
        bound = f" and < {upper}" if upper is not None else ""
        raise ValueError(f"{name} must be a finite number >= 0{bound}; got {value!r}")
    return v


def _expand(model: nn.Module, item: torch.Tensor | str) -> list[torch.Tensor]:
    """A tensor, a parameter name, or a group name of ``param_groups()`` -> tensors."""
    if isinstance(item, str) and is_group_name(item):
        try:
            group = param_group(model, item)
        except ValueError as err:
            raise ValueError(f"params={item!r}: {err}") from None
        trainable = [p for p in group if p.requires_grad]
        if not trainable:
            raise ValueError(f"params={item!r}: no parameter of the group requires grad")
        return trainable
    return [_resolve_tensor(model, item)]


def _resolve_tensor(model: nn.Module, item: torch.Tensor | str) -> torch.Tensor:
    if isinstance(item, str):
        try:
            item = model.get_parameter(item)
        except AttributeError as err:
            raise ValueError(f"params: model has no parameter named {item!r}") from err
    if not isinstance(item, torch.Tensor):
        raise ValueError(f"params entries must be tensors, parameter names or dicts; got "
                         f"{type(item).__name__}")
    if not (item.is_leaf and item.requires_grad):
        raise ValueError("params must be leaf tensors with requires_grad=True")
    return item


def _resolve_groups(model: nn.Module, params: Iterable[ParamSpec] | None,
                    weight_decay: float) -> list[ParamGroup]:
    """Parameter groups: tensors or names share the defaults; dicts
    {"params": [...], "lr_scale": s, "weight_decay": wd} form their own groups."""
    if params is None:
        ps = [p for p in model.parameters() if p.requires_grad]
        if not ps:
            raise ValueError("model has no parameter with requires_grad=True; pass params=")
        return [ParamGroup(ps, 1.0, weight_decay)]
    default: list[torch.Tensor] = []
    groups: list[ParamGroup] = []
    items = [params] if isinstance(params, torch.Tensor | str | Mapping) else list(params)
    for item in items:
        if isinstance(item, Mapping):
            unknown = set(item) - {"params", "lr_scale", "weight_decay"}
            if "params" not in item or unknown:
                raise ValueError("a params group must be a dict with key 'params' and optional "
                                 f"'lr_scale', 'weight_decay'; got keys {sorted(item)}")
            sub = item["params"]
            sub = [sub] if isinstance(sub, torch.Tensor | str) else list(sub)
            groups.append(ParamGroup([t for s in sub for t in _expand(model, s)],
                                 _nonneg(item.get("lr_scale", 1.0), "lr_scale"),
                                 _nonneg(item.get("weight_decay", weight_decay),
                                         "weight_decay")))
        else:
            default.extend(_expand(model, item))
    if default:
        groups.insert(0, ParamGroup(default, 1.0, weight_decay))
    seen: set[int] = set()
    for grp in groups:
        for p in grp.params:
            if id(p) in seen:
                raise ValueError("params lists a tensor twice")
            seen.add(id(p))
    if not seen:
        raise ValueError("params is empty")
    return groups


def _check_data(data: Any) -> Batch:
    if (not isinstance(data, tuple | list) or len(data) != 2
            or not all(isinstance(t, torch.Tensor) for t in data)):
        raise ValueError("data must be a pair (X, y) of tensors")
    X, y = data
    if X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise ValueError(f"data: X and y must have the same, positive number of rows; got "
                         f"{X.shape[0]} and {y.shape[0]}")
    return X, y


def _default_forward(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    return model(X)


def _check_numbers(optimizer: str, lr: float, steps: int, momentum: float,
                   weight_decay: float, noise_std: float, nesterov: bool, noise_mode: str,
                   sampling: str, check_every: int
                   ) -> tuple[float, int, float, float, float]:
    """ValueError naming a bad option of :func:`fit`; the numbers as floats and ints."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {optimizer!r}")
    lr = float(lr)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0; got {lr!r}")
    if isinstance(steps, bool) or int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0; got {steps!r}")
    momentum = _nonneg(momentum, "momentum", upper=1.0)
    weight_decay = _nonneg(weight_decay, "weight_decay")
    noise_std = _nonneg(noise_std, "noise_std")
    if nesterov and momentum == 0:
        raise ValueError("nesterov=True needs momentum > 0")
    if noise_mode not in ("gradient", "langevin"):
        raise ValueError(f"noise_mode must be 'gradient' or 'langevin'; got {noise_mode!r}")
    if sampling not in ("epoch", "replacement"):
        raise ValueError(f"sampling must be 'epoch' or 'replacement'; got {sampling!r}")
    if isinstance(check_every, bool) or int(check_every) != check_every or check_every < 0:
        raise ValueError(f"check_every must be an integer >= 0; got {check_every!r}")
    return lr, int(steps), momentum, weight_decay, noise_std


_CALLABLES = {"schedule": "a callable step -> lr multiplier",
              "regularizer": "a callable model -> scalar",
              "stop": "a callable (step, history) -> bool",
              "eval_fn": "a callable model -> dict[str, float]"}


def _check_callables(**fns: Any) -> None:
    for name, fn in fns.items():
        if fn is not None and not callable(fn):
            raise ValueError(f"{name} must be {_CALLABLES[name]}")


def _check_source(optimizer: str, data: Any, sampler: Sampler | None, batch_size: int | None,
                  noise_std: float, generator: torch.Generator | None) -> Batch | None:
    """ValueError when the data source, batch size or generator does not fit the optimizer;
    the checked data."""
    if optimizer == "gd":
        if batch_size is not None:
            raise ValueError("batch_size is not used by optimizer='gd' (full batch); use "
                             "optimizer='sgd' for minibatches")
    elif batch_size is None or isinstance(batch_size, bool) or int(batch_size) != batch_size \
            or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer for optimizer={optimizer!r}; "
                         f"got {batch_size!r}")
    if optimizer == "one_pass":
        if sampler is None or not callable(sampler):
            raise ValueError("optimizer='one_pass' needs sampler=callable(n, generator) -> "
                             "(X, y)")
        if data is not None:
            raise ValueError("data is not used by optimizer='one_pass' (it draws fresh samples "
                             "from sampler); use optimizer='sgd' for a fixed training set")
    else:
        if data is None:
            raise ValueError(f"optimizer={optimizer!r} needs data=(X, y)")
        if sampler is not None:
            raise ValueError(f"sampler is only used by optimizer='one_pass'; got "
                             f"optimizer={optimizer!r}")
        data = _check_data(data)
    if (optimizer != "gd" or noise_std > 0) and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator: optimizer={optimizer!r} with "
                         f"noise_std={noise_std:g} draws random numbers")
    return data


def _check_eval_rows(eval_rows: int | None) -> None:
    if eval_rows is not None and (isinstance(eval_rows, bool) or int(eval_rows) != eval_rows
                                  or eval_rows < 1):
        raise ValueError(f"eval_rows must be a positive integer or None; got {eval_rows!r}")


def _check_noise_device(flat: list[torch.Tensor], noise_std: float,
                        generator: torch.Generator | None) -> None:
    if noise_std > 0:
        assert generator is not None
        for p in flat:
            if p.device.type != generator.device.type:
                raise ValueError(f"generator is on {generator.device} but a parameter is on "
                                 f"{p.device}; noise is drawn on the parameters' device")


def _log_schedule(steps: int, log_points: int, log_steps: Iterable[int] | None
                  ) -> tuple[set[int], int]:
    """The steps to log and the number of updates to run: ``log_steps`` (checked to lie in
    [0, steps]) or :func:`log_spaced_steps`, both cut to a cap of :func:`loop_steps`."""
    if log_steps is not None:
        logs = sorted({int(s) for s in log_steps})
        if any(s < 0 or s > steps for s in logs):
            raise ValueError(f"log_steps must lie in [0, steps={steps}]; got {logs}")
    else:
        logs = log_spaced_steps(steps, log_points)
    run = loop_steps(steps, evaluations=len(logs))
    if run < steps:  # capped for measuring (lazylab.train.meter)
        # The last log moves to the last step run: a caller reading the final loss (e.g. to
        # tell a diverged run) sees one, and the run makes its final evaluation as the
        # uncapped one would.
        cut = [s for s in logs if s <= run] + ([run] if logs and logs[-1] > run else [])
        logs, steps = cut, run
    return set(logs), steps


_Forward = Callable[[nn.Module, torch.Tensor], torch.Tensor]


class _Tracker:
    """The history of one :func:`fit` run and the losses it records: the data loss
    L(f(X), y) of a batch or, in row blocks of ``eval_rows``, of the whole training set."""

    def __init__(self, model: nn.Module, loss_fn: LossFn, fwd: _Forward, data: Batch | None,
                 *, lr: float, eval_rows: int | None,
                 eval_fn: Callable[[nn.Module], Mapping[str, float]] | None,
                 regularizer: Callable[[nn.Module], torch.Tensor] | None,
                 raise_on_divergence: bool):
        self.model, self.loss_fn, self.fwd, self.data = model, loss_fn, fwd, data
        self.lr, self.eval_rows, self.eval_fn = lr, eval_rows, eval_fn
        self.regularizer, self.raise_on_divergence = regularizer, raise_on_divergence
        self.hist = History(steps=[], train_loss=[], evals=[], lr=lr)

    def loss(self, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(self.fwd(self.model, X), y)

    def reg(self) -> torch.Tensor | None:
        return self.regularizer(self.model) if self.regularizer is not None else None

    def full_loss(self) -> torch.Tensor:
        assert self.data is not None
        X, y = self.data
        rows = self.eval_rows
        with torch.no_grad():
            if rows is None or rows >= len(X):
                return self.loss(X, y)
            pred = torch.cat([self.fwd(self.model, X[i:i + rows])
                              for i in sampled_blocks(range(0, len(X), rows))])
            return self.loss_fn(pred, y[:len(pred)])  # a measuring run's prefix of X

    def record(self, t: int, data_loss: torch.Tensor, reg: torch.Tensor | None) -> float:
        """Log step t (and eval_fn there); the objective data loss + R as a float."""
        hist = self.hist
        value = float(data_loss)
        hist.steps.append(t)
        hist.train_loss.append(value)
        if reg is not None:
            hist.regularizer.append(float(reg))
        if self.eval_fn is not None:
            with torch.no_grad():
                out = self.eval_fn(self.model)
            if not isinstance(out, Mapping):
                raise ValueError("eval_fn must return a dict[str, float]")
            hist.evals.append({str(k): float(v) for k, v in out.items()})
        else:
            hist.evals.append({})
        return value + (hist.regularizer[-1] if reg is not None else 0.0)

    def diverge(self, t: int, value: float) -> History:
        """Mark the run diverged at step t; raise TrainingDiverged or return the history."""
        hist, lr = self.hist, self.lr
        msg = (f"training diverged at step {t} with lr={lr:g} (loss={value:g}); lower the "
               "learning rate")
        hist.diverged, hist.message = True, msg
        if not hist.steps or hist.steps[-1] != t:
            # Detected by a periodic check: log the non-finite value without calling eval_fn.
            hist.steps.append(t)
            hist.train_loss.append(value)
            hist.evals.append({})
            if self.regularizer is not None:
                hist.regularizer.append(math.nan)
        if self.raise_on_divergence:
            raise TrainingDiverged(msg, step=t, lr=lr, loss=value, history=hist)
        return hist


class _Loop:
    """The updates of :func:`fit`: batch t, its loss, logging and checks, then the step."""

    def __init__(self, tracker: _Tracker, optimizer: str, batches: Batches, update: SGDStep,
                 flat: list[torch.Tensor], *, lr: float, schedule: Schedule | None,
                 check_every: int, stop: Callable[[int, History], bool] | None):
        self.tracker, self.optimizer, self.batches = tracker, optimizer, batches
        self.update, self.flat, self.lr, self.schedule = update, flat, lr, schedule
        self.check_every, self.stop = check_every, stop

    def step(self, t: int, logged: bool) -> History | None:
        """Update t (t < steps), logged first if ``logged``; the history if the run ends
        here (divergence without raising, or ``stop``), else None."""
        tr = self.tracker
        Xb, yb = self.batches(t)
        data_loss = tr.loss(Xb, yb)
        reg = tr.reg()
        total = data_loss + reg if reg is not None else data_loss
        if logged:
            ended = self._log(t, data_loss, reg, total)
            if ended is not None:
                return ended
        elif self.check_every and t % self.check_every == 0 and not bool(torch.isfinite(total)):
            return tr.diverge(t, float(total.detach()))
        if logged and self.stop is not None and self.stop(t, tr.hist):
            tr.hist.stopped = True  # the parameters are those after t updates, the last logged
            return tr.hist
        grads = torch.autograd.grad(total, self.flat, allow_unused=True)
        self.update(grads, self.lr * (self.schedule(t) if self.schedule is not None else 1.0))
        return None

    def _log(self, t: int, data_loss: torch.Tensor, reg: torch.Tensor | None,
             total: torch.Tensor) -> History | None:
        tr = self.tracker
        sgd = self.optimizer == "sgd"
        with evaluation():  # kept apart from the steps' cost when measuring
            shown = tr.full_loss() if sgd else data_loss.detach()
            value = tr.record(t, shown, None if reg is None else reg.detach())
        if sgd and math.isfinite(value):
            value = float(total.detach())  # the minibatch objective that drives the update
        return tr.diverge(t, value) if not math.isfinite(value) else None

    def final(self, t: int, logged: bool) -> History:
        """After the last update t = steps: log it, or only check the parameters are finite."""
        tr = self.tracker
        if not logged:
            finite = torch.stack([torch.isfinite(p).all() for p in self.flat]).all()
            return tr.diverge(t, math.nan) if not bool(finite) else tr.hist
        with torch.no_grad(), evaluation():
            if self.optimizer == "one_pass":
                final = tr.loss(*self.batches(t))
            else:
                final = tr.full_loss()
            reg = tr.reg()
            value = tr.record(t, final, reg)
        return tr.diverge(t, value) if not math.isfinite(value) else tr.hist


def fit(model: nn.Module, *, data: Batch | None = None, sampler: Sampler | None = None,
        loss: str | LossFn = "mse", optimizer: Literal["gd", "sgd", "one_pass"] = "gd",
        lr: float, steps: int, batch_size: int | None = None, momentum: float = 0.0,
        weight_decay: float = 0.0, nesterov: bool = False, schedule: Schedule | None = None,
        noise_std: float = 0.0, regularizer: Callable[[nn.Module], torch.Tensor] | None = None,
        log_points: int = 30, log_steps: Iterable[int] | None = None,
        eval_fn: Callable[[nn.Module], Mapping[str, float]] | None = None,
        generator: torch.Generator | None = None, params: Iterable[ParamSpec] | None = None,
        noise_mode: Literal["gradient", "langevin"] = "gradient",
        sampling: Literal["epoch", "replacement"] = "epoch",
        forward: Callable[[nn.Module, torch.Tensor], torch.Tensor] | None = None,
        check_every: int = 50, raise_on_divergence: bool = True,
        stop: Callable[[int, History], bool] | None = None,
        eval_rows: int | None = None) -> History:
    """Train ``model`` in place by (stochastic) gradient descent; see the module docstring for
    the update rule.

    Parameters
    ----------
    model : the module; its forward maps X to predictions shaped like y.
    data : (X, y) training set, for "gd" (full batch) and "sgd".
    sampler : callable (n, generator) -> (X, y) of n fresh samples, for "one_pass".
    loss : "mse" (mean (y - f)^2), "half_mse", "half_sse" ((1/2) sum (y - f)^2), "logistic",
        or a callable (pred, y) -> scalar. See :mod:`lazylab.train.losses`.
    optimizer : "gd", "sgd" or "one_pass".
    lr : base learning rate (> 0); update t uses lr * schedule(t).
    steps : number of updates (>= 0).
    batch_size : minibatch size, required by "sgd" and "one_pass", not allowed with "gd".
    momentum, nesterov : heavy-ball momentum in [0, 1) and Nesterov's variant.
    weight_decay : coupled L2 decay, added to the gradient as wd * theta.
    schedule : callable step -> lr multiplier (:mod:`lazylab.train.schedules`).
    noise_std : standard deviation of the Gaussian noise (see ``noise_mode``).
    regularizer : callable model -> scalar added to the loss (R of the module docstring).
    log_points : number of log-spaced steps between 1 and ``steps`` to log; 0 and ``steps``
        are always logged.
    log_steps : explicit steps in [0, steps] to log instead.
    eval_fn : callable model -> {name: value}, called at every logged step under
        torch.no_grad() (wrap in torch.enable_grad() inside if it needs gradients).
    generator : the torch.Generator of every random draw (minibatches, samples, noise); it
        must live on the device of the parameters when noise_std > 0.
    params : what to train: default every parameter with requires_grad; else a group name of
        the model's ``param_groups()`` (``"first"``, ``"hidden"``, ``"last"``, ``"all"``;
        :mod:`lazylab.models.groups`), or a list of tensors, parameter names (``"W"``), group
        names and groups {"params": [...], "lr_scale": s,
        "weight_decay": wd} (e.g. Ghorbani et al.'s per-layer gradient rescaling).
    noise_mode : "gradient" (noise added to the gradient) or "langevin" (sqrt(2 eta) noise
        added to the parameters).
    sampling : "epoch" (reshuffle every epoch; the last batch of an epoch may be smaller) or
        "replacement", for "sgd".
    forward : callable (model, X) -> predictions, replacing model(X) (e.g. a Taylor model).
    check_every : besides logged steps, the loss is checked for finiteness every this many
        steps (one device sync each); 0 checks only at logged steps.
    raise_on_divergence : raise :class:`TrainingDiverged` (default) or return the history
        with ``diverged=True``.
    stop : callable (step, history) -> bool, called at every logged step t < steps after the
        step is recorded; True ends training there (parameters after t updates, the history
        ending at step t, ``history.stopped = True``), e.g. early stopping on an eval_fn value.
    eval_rows : the full-data loss of "sgd" (and of "gd" at the final step) is computed from
        predictions made in row blocks of at most this many examples, concatenated before the
        loss; bounds the activation memory of large models (a 512-channel CNN's quadratic
        Taylor model holds ~13 MB per 28 x 28 image, 130 GB for 10^4 images at once). None:
        one block.

    Returns
    -------
    History
        ``train_loss`` is the full-data loss for "gd"/"sgd" and the fresh batch loss for
        "one_pass" (one extra batch is drawn for the last logged step).

    Raises
    ------
    TrainingDiverged
        When a loss or the final parameters are not finite, e.g. "training diverged at step
        120 with lr=0.5 (loss=inf); lower the learning rate".
    """
    lr, steps, momentum, weight_decay, noise_std = _check_numbers(
        optimizer, lr, steps, momentum, weight_decay, noise_std, nesterov, noise_mode, sampling,
        check_every)
    _check_callables(schedule=schedule, regularizer=regularizer, stop=stop, eval_fn=eval_fn)
    _check_eval_rows(eval_rows)
    data = _check_source(optimizer, data, sampler, batch_size, noise_std, generator)
    groups = _resolve_groups(model, params, weight_decay)
    flat = [p for grp in groups for p in grp.params]
    _check_noise_device(flat, noise_std, generator)
    log_set, steps = _log_schedule(steps, log_points, log_steps)

    tracker = _Tracker(model, get_loss(loss), forward if forward is not None else _default_forward,
                       data, lr=lr, eval_rows=eval_rows, eval_fn=eval_fn,
                       regularizer=regularizer, raise_on_divergence=raise_on_divergence)
    batches = Batches(optimizer, data, sampler, batch_size, sampling, generator)
    update = SGDStep(groups, momentum=momentum, nesterov=nesterov, noise_std=noise_std,
                     noise_mode=noise_mode, generator=generator)
    loop = _Loop(tracker, optimizer, batches, update, flat, lr=lr, schedule=schedule,
                 check_every=check_every, stop=stop)
    for t in range(steps):
        ended = loop.step(t, t in log_set)
        if ended is not None:
            return ended
    return loop.final(steps, steps in log_set)
