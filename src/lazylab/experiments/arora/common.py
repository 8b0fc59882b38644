"""Shared machinery of the Arora, Du, Hu, Li, Wang (2019) experiments.

* Parameters: :class:`DataParams` (the two-class problem, App. A of the paper) and
  :class:`NetParams` (the network and GD of Sec. 3.1).
* :func:`load_problem`: the training/test sets with H_inf, its eigendecomposition and its
  Cholesky factor computed lazily once per process (they depend only on the inputs, which a
  fixed ``data_seed`` keeps identical across work units: at the paper's n = 10^4 they are
  800 MB each and minutes of CPU).
* :func:`train`: the paper's network trained by full-batch GD on Phi = (1/2) sum (y - u)^2
  (:func:`lazylab.train.fit`), logging ||W(k) - W(0)||_F, the share of changed activation
  patterns and any test metric; it can stop early once the loss has converged.

Choices where the paper is silent (spec Sec. 8), documented once here:

* Centring (item 2): ``center=True`` by default, i.e. the per-pixel mean of the training
  sample is subtracted before scaling every image to unit norm. Without it the inputs are all
  positively correlated and lambda_max(H_inf) ~ 0.3 n (Fashion-MNIST 0/1; spec: 0.28 n on
  digits), so the paper's eta = 1e-3 on the summed loss at n = 10^4 has eta lambda_max ~ 3 > 2
  and GD diverges; centred, eta lambda_max ~ 0.9.
* Learning rate: ``lr=None`` means eta = 1 / lambda_max(H_inf) (every mode of Eq. (7) decays
  monotonically); the paper scale uses the paper's 1e-3. A step with eta lambda_max >= 2 is
  refused, since GD on the network then diverges.
* Initialization: ``init="gaussian"`` is the paper's w_r ~ N(0, kappa^2 I), a_r = +-1.
  ``init="symmetric"`` (an extension, spec Sec. 8 item 10) pairs every neuron with a copy of
  opposite a_r so that u(0) = 0 exactly. Theorem 4.1 and Lemma 5.3 need kappa -> 0 only to
  make u(0) negligible, and m >= poly(n) / kappa^2 to keep the activation patterns fixed; at
  the small widths of the quick scale, kappa = 1 with u(0) = 0 is the regime they describe
  (at kappa = 0.01 and m = 10^4 the patterns move a lot and the predictions are qualitative,
  spec C3/C6). Quick scale: symmetric, kappa = 1; paper scale: gaussian, kappa = 0.01.
* Stopping rule (item 3): ``loss_tol`` > 0 stops GD once Phi(k) <= loss_tol * Phi(0); the
  steps actually run are reported. ``loss_tol=0`` runs exactly ``steps`` steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator

from lazylab.data import load_dataset, sphere
from lazylab.experiments.base import ExperimentParams
from lazylab.models import TwoLayerNet
from lazylab.seeding import derive_seed, torch_generator
from lazylab.theory.arora import GramSolver, Spectrum, eigendecompose, h_infinity
from lazylab.train import fit, log_spaced_steps

__all__ = [
    "DataParams", "NetParams", "Problem", "Run", "load_problem", "train", "learning_rate",
    "sub_generator", "LABEL_METHODS", "COLORS",
]

#: Legend names of Fig. 1's label vectors, by unit key.
LABEL_METHODS = {"true": "true labels", "random": "random labels",
                 "worst-case": "worst-case labels"}

#: Fig. 1's colours: eigenvalues blue, true labels red, random labels cyan (paper Sec. 4).
COLORS = {"true labels": "#D62728", "random labels": "#17BECF", "worst-case labels": "#7F7F7F",
          "H-infinity": "#1F4E9C"}

Dataset = Literal["digits", "fashion-mnist", "mnist", "cifar10"]


class DataParams(ExperimentParams):
    """The two-class problem (paper App. A: first two classes, labels +-1, unit-norm inputs)."""

    dataset: Dataset = Field("digits", description="digits (bundled), fashion-mnist (Debian's "
                             "dataset-fashion-mnist), mnist or cifar10 (from data_root)")
    data_root: str | None = Field(None, description="folder holding mnist / cifar10 files "
                                  "(searched before $LAZYLAB_DATA and system folders)")
    classes: list[int] = Field([0, 1], min_length=2, max_length=2,
                               description="the two classes 0..9 (first -> +1, second -> -1)")
    n_train: int = Field(256, ge=2, le=60000, description="training points")
    n_test: int = Field(100, ge=1, le=10000, description="test points")
    center: bool = Field(True, description="subtract the training mean before unit-normalizing "
                         "(see the module docstring)")
    data_seed: int = Field(0, ge=0, description="seed of the train/test subsample (the same in "
                           "every work unit, so H_inf is shared)")

    @field_validator("classes")
    @classmethod
    def _class_labels(cls, v: list[int]) -> list[int]:
        if any(not 0 <= c <= 9 for c in v) or v[0] == v[1]:
            raise ValueError(f"classes must be two distinct labels in 0..9; got {v}")
        return v


class NetParams(DataParams):
    """The paper's network and full-batch GD (Sec. 3.1, App. A)."""

    width: int = Field(4000, ge=2, le=1_000_000, description="hidden units m (paper: 10^4)")
    kappa: float = Field(1.0, gt=0, le=1, description="init scale: w_r ~ N(0, kappa^2 I) "
                         "(paper: 0.01)")
    init: Literal["gaussian", "symmetric"] = Field(
        "symmetric", description="gaussian (the paper) or symmetric (paired neurons, u(0) = 0)")
    lr: float | None = Field(None, gt=0, description="GD step eta on (1/2) sum (y - u)^2; none: "
                             "1 / lambda_max(H_inf) (paper: 1e-3)")
    steps: int = Field(500, ge=1, le=10_000_000, description="GD steps (the maximum when "
                       "loss_tol > 0)")
    loss_tol: float = Field(0.0, ge=0, lt=1, description="stop once Phi(k) <= loss_tol * Phi(0) "
                            "(0: run all steps)")
    log_points: int = Field(30, ge=2, le=1000, description="log-spaced steps recorded")
    precision: Literal["float32", "float64"] = Field("float32", description="dtype of the "
                                                     "network (theory is always float64)")

    @model_validator(mode="after")
    def _even_width(self) -> NetParams:
        if self.init == "symmetric" and self.width % 2:
            raise ValueError(f"width must be even for init='symmetric'; got {self.width}")
        return self


# ---------------------------------------------------------------------------- the problem
@dataclass
class Problem:
    """Training and test data (float64, on one device) with H_inf and its factorizations,
    each computed on first use."""

    X: torch.Tensor
    y: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @cached_property
    def H(self) -> torch.Tensor:
        return h_infinity(self.X)

    @cached_property
    def spectrum(self) -> Spectrum:
        return eigendecompose(self.H)

    @cached_property
    def solver(self) -> GramSolver:
        return GramSolver(self.H)


@lru_cache(maxsize=1)
def _cached_problem(dataset: str, data_root: str | None, classes: tuple[int, int],
                    n_train: int, n_test: int, center: bool, data_seed: int,
                    device: str) -> Problem:
    Xtr, ytr, Xte, yte = load_dataset(dataset, classes=classes, n_train=n_train, n_test=n_test,
                                      root=data_root, normalize="unit", center=center,
                                      seed=data_seed, device=device, dtype=torch.float64)
    return Problem(Xtr, ytr, Xte, yte)


def load_problem(p: DataParams, device: torch.device) -> Problem:
    """The problem of ``p`` on ``device`` (cached: the last one stays in memory).

    Raises :class:`lazylab.data.DatasetNotFound` (a FileNotFoundError, reported by the CLI as a
    missing data set with where it looked) when the files are absent.
    """
    return _cached_problem(p.dataset, p.data_root, tuple(p.classes), p.n_train, p.n_test,
                           p.center, p.data_seed, str(device))


@lru_cache(maxsize=1)
def sphere_problem(n: int, d: int, data_seed: int, device: str) -> Problem:
    """n points uniform on the unit sphere S^{d-1} (no labels: zeros), for Sec. 6's targets."""
    g = torch_generator(derive_seed("arora-sphere", n, d, data_seed), device)
    X = sphere(n, d, generator=g, device=device, dtype=torch.float64)
    zeros = torch.zeros(n, dtype=torch.float64, device=device)
    return Problem(X, zeros, X[:1], zeros[:1])


def sub_generator(seed: int, purpose: str, device: torch.device) -> torch.Generator:
    """An independent stream of the unit seed for one purpose ("init", "labels", ...)."""
    return torch_generator(derive_seed(seed, purpose), device)


def learning_rate(p: NetParams, spectrum: Spectrum) -> float:
    """eta: ``p.lr`` or 1/lambda_max(H_inf); refuses eta lambda_max >= 2 (GD diverges)."""
    eta = p.lr if p.lr is not None else 1.0 / spectrum.lambda_max
    if eta * spectrum.lambda_max >= 2:
        raise ValueError(
            f"lr={eta:g} is too large: eta * lambda_max(H_inf) = {eta * spectrum.lambda_max:.3g}"
            f" >= 2, so GD on (1/2) sum (y - u)^2 diverges; use lr < "
            f"{2 / spectrum.lambda_max:.3g}, lr=none (1/lambda_max), or center=true")
    return eta


# ---------------------------------------------------------------------------- training
#: Below this many multiply-adds per product (n m d), GD runs on one CPU thread: a product of
#: <= 1e9 gains less than 2x from a second core, while thread hand-offs on a shared machine
#: cost far more (measured: n = 200, m = 2000, d = 64 took 6 ms per step on one thread and
#: 40-96 ms on two at load 6 on 2 cores).
ONE_THREAD_MACS = 1 << 30


@contextmanager
def _threads(device: torch.device, macs: int) -> Iterator[None]:
    if device.type != "cpu" or macs >= ONE_THREAD_MACS:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class Run:
    """A GD trajectory at logged steps, and the trained net."""

    steps: list[int]
    loss: list[float]
    distance: list[float]
    pattern_change: list[float]
    evals: list[dict[str, float]]
    net: TwoLayerNet
    converged: bool

    @property
    def steps_run(self) -> int:
        return self.steps[-1]


def train(X: torch.Tensor, y: torch.Tensor, p: NetParams, eta: float, seed: int,
          device: torch.device, *, eval_fn: Callable[[TwoLayerNet], dict[str, float]] | None
          = None) -> Run:
    """Train the paper's network on (X, y) by full-batch GD with step ``eta``.

    f(x) = m^-1/2 sum_r a_r relu(w_r.x), a_r = +-1 fixed, w_r(0) ~ N(0, kappa^2 I) (or the
    symmetric init), only W trained, on Phi = (1/2) sum_i (y_i - u_i)^2 (loss "half_sse").
    GD keeps no state, so running it as consecutive :func:`lazylab.train.fit` calls between
    logged steps is the same trajectory; between calls we log ||W(k) - W(0)||_F, the share of
    (i, r) with 1{w_r(k).x_i >= 0} != 1{w_r(0).x_i >= 0}, and ``eval_fn(net)``, and stop early
    when Phi(k) <= loss_tol Phi(0).
    """
    dtype = getattr(torch, p.precision)
    Xd, yd = X.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)
    net = TwoLayerNet(X.shape[1], p.width, activation="relu", init=p.init, scaling="ntk",
                      a_init="sign", weight_std=p.kappa, train_second=False,
                      generator=sub_generator(seed, "init", device), device=device, dtype=dtype)
    W0 = net.W.detach().clone()
    with torch.no_grad():
        pattern0 = net.preactivation(Xd) >= 0
        u0 = net(Xd).detach()
    run = Run([], [], [], [], [], net, converged=False)

    def log(k: int, loss: float) -> None:
        with torch.no_grad():
            run.steps.append(k)
            run.loss.append(loss)
            run.distance.append(float((net.W - W0).norm()))
            changed = (net.preactivation(Xd) >= 0) != pattern0
            run.pattern_change.append(float(changed.float().mean()))
            run.evals.append(eval_fn(net) if eval_fn is not None else {})

    loss0 = 0.5 * float((yd - u0).square().sum())
    log(0, loss0)
    logs = log_spaced_steps(p.steps, p.log_points)
    with _threads(device, Xd.shape[0] * p.width * Xd.shape[1]):
        for k0, k1 in zip(logs[:-1], logs[1:], strict=True):
            hist = fit(net, data=(Xd, yd), loss="half_sse", optimizer="gd", lr=eta,
                       steps=k1 - k0, log_steps=[k1 - k0], params=[net.W])
            log(k1, hist.final_loss)
            if p.loss_tol > 0 and hist.final_loss <= p.loss_tol * loss0:
                run.converged = True
                break
    if not math.isfinite(run.loss[-1]):
        raise RuntimeError(f"training diverged (loss {run.loss[-1]}) with lr={eta:g}; lower lr")
    return run
