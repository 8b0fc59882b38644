"""nichani-taylor: the full network vs its first- and second-order Taylor models (Nichani, Bai &
Lee 2022, Sec. 5, "On Second-Order Taylor Expansions of Standard Networks", and App. G).

From one initialization theta0, three models are trained separately with the same optimizer,
the same minibatch order and the square loss on a real two-class image task (labels +-1):

* the full network f(x; theta),
* the linearization f0 + f_L: f(x; theta0) + <grad f(x; theta0), U>,
* the quadratic model f0 + f_L + f_Q, adding U^T Hess f(x; theta0) U / 2,

(:class:`lazylab.models.TaylorModel`, nested forward-mode derivatives of any module; U starts at
0). Per epoch we record each model's train and test loss and the mean squared distance of the
Taylor models' test predictions from the full network's. The paper's claim: the quadratic model
tracks the training dynamics of the full network more closely than the linear one and reaches a
lower test loss.

Quick scale: Fashion-MNIST Pullover vs Shirt (2000 train images and all 2000 test images of the
two classes, as the paper's 2000 test images; 28 x 28, standardised), an MLP 784-256-256-1
(ReLU, PyTorch's default init), SGD batch 64 at the paper's lr 5e-3, 30 epochs. Shrink rule:
quick keeps a budget of 960 SGD steps (the paper: 10000 images x 100 epochs / 64 = 15600) and
spends it on as many of the paper's training images as keep >= 30 epochs, i.e. n_train = 2000 (a
fifth of the paper's 10000) for 30 epochs: fewer images leave the quadratic-vs-linear test gap
below resolution, and a larger step puts the full and quadratic models at the edge of stability
(the measurements: the documentation page docs/protocols/nichani-taylor.md). Paper scale: CIFAR-10
cat vs horse (10000 / 2000) with the paper's CNN (4 x [conv 3x3, 512 channels, ReLU, avgpool 2],
linear), SGD batch 64, lr 5e-3, 100 epochs; with ``dataset=auto`` it falls back to Fashion-MNIST
when CIFAR-10 is not found (``--set data_root=DIR`` points at ``cifar-10-batches-py``), and says
so in the title.

As a stated extra (no claim uses it), "NTK regression (infinite width)" is kernel regression
(ridgeless, the minimum-norm interpolant; :func:`lazylab.solve.kernel_ridge`) of the labels
with the closed-form NTK of the same architecture at its initialization, lifted from the
network (:func:`lazylab.kernels.deep.kernel_from_module`) in the standard parametrization of
PyTorch's default init (weights of variance 1 / (3 fan_in), W_std = 1/sqrt(3), biases
b_std^2 = 1 / (3 fan_in); neural-tangents' ``parameterization="standard"``, Sohl-Dickstein et
al. 2020, at the network's layer widths): the infinite-width limit of the linear model f0 + f_L
trained to convergence, on the same images. Its train and test loss are drawn as horizontal
lines at the final epoch. For the CNN the kernel tracks the full spatial covariance (average
pooling needs it), about (H W)^2 numbers per image pair at the first layer. At paper scale
that is 0.16 CPU s per pair of 32 x 32 x 3 images, about 6.6e6 CPU s for the 10,000 training
and 2,000 test images, so the extra is off there by default (``--set ntk_regression=true``
turns it on); at quick scale (the MLP) it takes about a second.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from lazylab.data.real import DatasetNotFound, find_dataset, load_dataset, load_raw
from lazylab.device import CPU_BLOCK_BYTES, block_elems
from lazylab.errors import DataNotFound, InputError
from lazylab.experiments import register
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row
from lazylab.experiments.cost import scaled_cost
from lazylab.experiments.nichani.common import PAPER, paired_gap
from lazylab.experiments.style import method_color
from lazylab.experiments.toolkit import K_SE, sub_generator
from lazylab.kernels.deep import Conv, DeepKernel, Dense, layers_from_module
from lazylab.models import TaylorModel
from lazylab.solve import kernel_ridge
from lazylab.train import fit
from lazylab.train.meter import sampled_blocks

FULL, LIN, QUAD = "full network", "f0 + f_L", "f0 + f_L + f_Q"
#: The method of the infinite-width kernel regression rows (a stated extra).
INFINITE = "NTK regression (infinite width)"
X_NAME = "epoch"
CLASSES = {"fashion-mnist": ("Pullover", "Shirt"), "cifar10": ("cat", "horse")}


def image_net(arch: Literal["mlp", "cnn"], shape: tuple[int, int, int], width: int, *,
              generator: torch.Generator) -> nn.Module:
    """The compared architecture, initialised from ``generator`` (PyTorch's default uniform
    weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)), biases likewise).

    ``"mlp"``: flatten -> [linear(width), ReLU] x 2 -> linear(1).
    ``"cnn"``: 4 x [conv 3x3 (width channels, padding 1), ReLU, avgpool 2] -> flatten ->
    linear(1) (the paper's CIFAR network with width 512).
    """
    c, h, w = shape
    if arch == "mlp":
        net: nn.Module = nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, width), nn.ReLU(),
                                       nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
    else:
        layers: list[nn.Module] = []
        ch = c
        for _ in range(4):
            layers += [nn.Conv2d(ch, width, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2)]
            ch = width
            h, w = h // 2, w // 2
        if h < 1 or w < 1:
            raise ValueError(f"images of shape {shape} are too small for 4 poolings")
        net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(width * h * w, 1))
    net = net.to(generator.device)
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, nn.Linear | nn.Conv2d):
                fan_in = mod.weight[0].numel()
                bound = 1.0 / math.sqrt(fan_in)
                for t in (mod.weight, mod.bias):
                    t.copy_((2 * torch.rand(t.shape, generator=generator,
                                            device=generator.device) - 1) * bound)
    return net


def infinite_ntk(net: nn.Module) -> DeepKernel:
    """The closed-form NTK of :func:`image_net`'s architecture at PyTorch's default init
    (module docstring): lifted from ``net`` in the standard parametrization, W_std = 1/sqrt(3)
    and each layer's b_std = 1/sqrt(3 fan_in), float64."""
    desc = layers_from_module(net, W_std=1 / math.sqrt(3), b_std=1.0,
                              parameterization="standard")
    fans = iter(mod.weight[0].numel() for mod in net.modules()
                if isinstance(mod, nn.Linear | nn.Conv2d))
    layers = [replace(layer, b_std=1 / math.sqrt(3 * next(fans)))
              if isinstance(layer, Dense | Conv) else layer for layer in desc.layers]
    return DeepKernel(layers, dtype=torch.float64)


#: CPU seconds per covariance entry of the kernel (an entry of one layer's NNGP/NTK for one
#: image pair, summed over the layers of the plan; float64, one core of the development
#: machine: the paper's CNN on 32 x 32 x 3 images, 2.3e6 entries a pair, took 0.16 s a pair).
KERNEL_ENTRY_SECONDS = 7e-8
#: CPU seconds per flop of a float64 GEMM on one core (the MLP kernel's input covariance)
#: and per image pair of the MLP kernel's dense layers: the quick MLP's 6.0e6 pairs took
#: 0.81 s.
GEMM_FLOP_SECONDS = 5e-11
DENSE_PAIR_SECONDS = 6e-8


def kernel_pairs(p: TaylorParams) -> float:
    """Image pairs of the kernel regression: the symmetric training Gram (each pair once)
    and the test rows."""
    return p.n_train * (p.n_train + 1) / 2 + p.n_test * p.n_train


def kernel_seconds(p: TaylorParams) -> float:
    """CPU seconds of :func:`kernel_rows`: the pairs times their work, for the MLP the
    flattened images' GEMM (:data:`GEMM_FLOP_SECONDS`) and a few entries per layer, for the
    CNN the full spatial covariance entries of every layer of the kernel's plan
    (:data:`KERNEL_ENTRY_SECONDS` each)."""
    if not p.ntk_regression:
        return 0.0
    c, h, w = _shape(p)
    if p.arch == "mlp":
        # the flattened images' GEMM, then the dense layers' few entries a pair
        return kernel_pairs(p) * (2.0 * c * h * w * GEMM_FLOP_SECONDS + DENSE_PAIR_SECONDS)
    else:
        net = image_net("cnn", (c, h, w), 4, generator=torch.Generator().manual_seed(0))
        plan = infinite_ntk(net).plan((c, h, w))
        entries = float(sum(math.prod(t.shape[1:]) ** (2 if t.full else 1) for t in plan))
    return kernel_pairs(p) * entries * KERNEL_ENTRY_SECONDS


def kernel_bytes(p: TaylorParams) -> float:
    """Peak float64 bytes of :func:`kernel_rows`: the training Gram's NNGP and NTK with the
    Cholesky factor and its copies (about five n^2), and the test rows' NNGP and NTK."""
    if not p.ntk_regression:
        return 0.0
    return 8.0 * (5.0 * p.n_train ** 2 + 2.0 * p.n_test * p.n_train)


def kernel_rows(net: nn.Module, Xtr: torch.Tensor, ytr: torch.Tensor, Xte: torch.Tensor,
                yte: torch.Tensor, epoch: float) -> list[dict[str, Any]]:
    """Train and test loss of ridgeless regression with :func:`infinite_ntk` (``INFINITE``
    rows at x = ``epoch``), computed in float64."""
    kernel = infinite_ntk(net)
    if isinstance(net, nn.Sequential) and isinstance(net[0], nn.Flatten):
        # the same kernel (Flatten averages the spatial diagonal), from one GEMM of the
        # flattened images instead of per-position products
        Xtr, Xte = Xtr.flatten(1), Xte.flatten(1)
    K = kernel(Xtr)
    alpha = kernel_ridge(K, ytr.double())
    fit = K @ alpha
    test = kernel(Xte, Xtr) @ alpha
    return [row(INFINITE, X_NAME, epoch, "train_loss", float(((fit - ytr) ** 2).mean())),
            row(INFINITE, X_NAME, epoch, "test_loss", float(((test - yte) ** 2).mean()))]


class TaylorParams(ExperimentParams):
    dataset: Literal["auto", "fashion-mnist", "cifar10"] = Field(
        "fashion-mnist", description="two-class image task (auto: CIFAR-10 if found, else "
                                     "Fashion-MNIST)")
    data_root: str | None = Field(None, description="folder with the data set (CIFAR-10: "
                                                    "cifar-10-batches-py)")
    arch: Literal["mlp", "cnn"] = Field("mlp", description="compared network")
    width: int = Field(256, ge=4, le=4096, description="hidden width / conv channels")
    n_train: int = Field(2000, ge=64, le=60_000, description="training images")
    n_test: int = Field(2000, ge=64, le=10_000, description="test images")
    epochs: int = Field(30, ge=1, le=1000, description="SGD epochs")
    batch_size: int = Field(64, ge=1, le=4096, description="minibatch size")
    lr: float = Field(5e-3, gt=0, le=10.0, description="SGD step size (the paper's 5e-3)")
    ntk_regression: bool = Field(
        True, description="also fit kernel regression with the network's closed-form "
                          "infinite-width NTK (a stated extra; the CNN's kernel tracks the full "
                          "spatial covariance: about 0.16 CPU s an image pair on 32 x 32 x 3)")


@register
class TaylorExperiment(Experiment):
    id = "nichani-taylor"
    paper = PAPER
    figure = "App. G, Taylor expansion experiment"
    summary = ("full network vs first- and second-order Taylor models trained from the same "
               "init with the same SGD: train and test loss vs epoch on a real image task")
    Params = TaylorParams
    scales = {"quick": {}, "paper": {"dataset": "auto", "arch": "cnn", "width": 512,
                                      "n_train": 10_000, "n_test": 2000, "epochs": 100,
                                      "lr": 5e-3, "ntk_regression": False}}
    default_seeds = {"quick": 1, "paper": 1}
    est_seconds = {"quick": 50.0}
    #: GEMM-bound at paper scale (full-batch GD / the CNN's Taylor model): TF32 on a GPU.
    precision = {"paper": "tf32"}
    robustness_axes = {"lr": [0.004, 0.005, 0.006], "n_train": [1600, 2000, 2400]}
    smoke = {"n_train": 64, "n_test": 64, "epochs": 2, "width": 16}
    claim_statements = {
        "quad-closer": "the quadratic model stays closer to the full network than the linear "
                       "one (mean squared test-prediction distance, final epoch)",
        "quad-lower-test": "the quadratic model reaches a lower test loss than the linear one",
    }

    # ---- data ------------------------------------------------------------------------------
    @staticmethod
    def resolved_dataset(p: TaylorParams) -> str:
        if p.dataset != "auto":
            return p.dataset
        try:
            find_dataset("cifar10", p.data_root)
            return "cifar10"
        except (DatasetNotFound, FileNotFoundError):
            return "fashion-mnist"

    def data_sources(self, p: TaylorParams) -> list[tuple[str, str | None]]:
        return [(self.resolved_dataset(p), p.data_root)]

    def peak_bytes(self, p: TaylorParams) -> float:
        """The data set's files read whole (about 14 bytes a pixel at the peak of loading,
        measured: the raw bytes with float64 and float32 copies), the standardised
        train and test images, and the activations: a training batch of the quadratic Taylor
        model (about 16 float32 values per unit of the widest layer and example: the primal,
        two nested tangents, their gradients) and an evaluation block (at most the CPU block
        budget, :func:`lazylab.device.memory_budget`)."""
        name = self.resolved_dataset(p)
        c, h, w = (3, 32, 32) if name == "cifar10" else (1, 28, 28)
        pixels = c * h * w
        file_images = 60_000 if name == "cifar10" else 70_000
        act = p.width * (h * w if p.arch == "cnn" else 1)
        data = 14.0 * file_images * pixels + 8.0 * (p.n_train + p.n_test) * pixels
        evals = min(float(CPU_BLOCK_BYTES), 32.0 * act * max(p.n_train, p.n_test))
        return data + max(64.0 * act * p.batch_size + evals, kernel_bytes(p))

    def cost(self, p: TaylorParams, scale: str = "quick") -> tuple[float, float | None]:
        """The size-scaled estimate of the three trainings (:attr:`cost_sizes`, anchored at
        ``est_seconds``, which covers them alone) plus the infinite-width kernel regression
        (:func:`kernel_seconds`, which grows like the number of image pairs and, for the CNN,
        like the squared image area)."""
        secs, peak = scaled_cost(self, p, scale, self.cost_sizes, peak=self.peak_bytes)
        return secs + kernel_seconds(p), peak

    def validate(self, p: TaylorParams) -> None:
        name = self.resolved_dataset(p)
        try:
            find_dataset(name, p.data_root)
        except (DatasetNotFound, FileNotFoundError) as e:
            raise DataNotFound(f"--set data_root: {name} not found ({e})") from None
        try:
            load_raw(name, p.data_root)  # the files' contents, checked before any compute
        except ValueError as e:
            raise InputError(f"--set dataset={name}: {e}") from None
        if name == "cifar10" and p.arch == "mlp" and p.width * 3072 > 5e7:
            raise DataNotFound("--set width: too wide for an MLP on CIFAR-10 (use arch=cnn)")

    def _data(self, p: TaylorParams, seed: int, device: torch.device):
        name = self.resolved_dataset(p)
        Xtr, ytr, Xte, yte = load_dataset(name, classes=CLASSES[name], n_train=p.n_train,
                                          n_test=p.n_test, root=p.data_root, normalize="none",
                                          center=False, seed=seed % (2**31), device=device)
        shape = (3, 32, 32) if name == "cifar10" else (1, 28, 28)
        Xtr, Xte = Xtr.reshape(-1, *shape), Xte.reshape(-1, *shape)
        # per-channel standardisation with the training statistics (the paper's protocol)
        mean = Xtr.mean(dim=(0, 2, 3), keepdim=True)
        std = Xtr.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-8)
        return name, shape, (Xtr - mean) / std, ytr, (Xte - mean) / std, yte

    # ---- computation -----------------------------------------------------------------------
    # Cost guard: the unit-count estimate times the growth of each size, a lower bound
    # (lazylab.experiments.cost.scaled_cost).
    cost_sizes: ClassVar[dict[str, float]] = {"epochs": 1, "n_train": 1, "width": 1}

    def units(self, p: TaylorParams) -> list[dict[str, Any]]:
        return [{"models": "full, linear, quadratic"}]

    def run_unit(self, p: TaylorParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        self.validate(p)
        _, shape, Xtr, ytr, Xte, yte = self._data(p, seed, device)
        net = image_net(p.arch, shape, p.width, generator=sub_generator(seed, "init", device))
        # widest activation of one example: the first conv layer's (width, h, w), else width
        act = p.width * (shape[1] * shape[2] if p.arch == "cnn" else 1)
        rows_eval = _block_rows(Xtr, act, chunk=len(Xtr))
        models = {LIN: TaylorModel(net, 1), QUAD: TaylorModel(net, 2), FULL: net}
        steps_per_epoch = -(-p.n_train // p.batch_size)
        steps = p.epochs * steps_per_epoch
        log_steps = [e * steps_per_epoch for e in range(p.epochs + 1)]
        preds: dict[str, list[torch.Tensor]] = {}
        hist = {}
        for name, model in models.items():
            preds[name] = []

            def evaluate(mod: nn.Module, name: str = name) -> dict[str, float]:
                out = _predict(mod, Xte, act)
                preds[name].append(out)
                return {"test_loss": float(((out - yte[:len(out)]) ** 2).mean())}

            hist[name] = fit(model, data=(Xtr, ytr.unsqueeze(1)), optimizer="sgd",
                             batch_size=p.batch_size, lr=p.lr, steps=steps, log_steps=log_steps,
                             eval_fn=evaluate, generator=sub_generator(seed, "batches", device),
                             eval_rows=rows_eval)
        rows: list[dict[str, Any]] = []
        for name, h in hist.items():
            for i, step in enumerate(h.steps):
                ep = step / steps_per_epoch
                rows.append(row(name, X_NAME, ep, "train_loss", h.train_loss[i]))
                rows.append(row(name, X_NAME, ep, "test_loss", h.evals[i]["test_loss"]))
        full = preds[FULL]
        for name in (LIN, QUAD):
            for i, step in enumerate(hist[name].steps):
                dist = float(((preds[name][i] - full[i]) ** 2).mean())
                rows.append(row(name, X_NAME, step / steps_per_epoch, "dist_to_full", dist))
        # paired per-test-point differences at the final epoch, and their Monte Carlo SEs
        ep = p.epochs
        dl = (preds[LIN][-1] - full[-1]) ** 2 - (preds[QUAD][-1] - full[-1]) ** 2
        y_end = yte[:len(full[-1])]  # all of it, but a measuring run's prefix (_predict)
        tl = (preds[LIN][-1] - y_end) ** 2 - (preds[QUAD][-1] - y_end) ** 2
        rows.append(row(QUAD, X_NAME, ep, "dist_gap_se", float(dl.std() / math.sqrt(len(dl)))))
        rows.append(row(QUAD, X_NAME, ep, "test_gap_se", float(tl.std() / math.sqrt(len(tl)))))
        if p.ntk_regression:
            rows += kernel_rows(net, Xtr, ytr, Xte, yte, ep)
        return rows

    # ---- claims ------------------------------------------------------------------------------
    def claims(self, p: TaylorParams, results: Results) -> list[Claim]:
        st = self.claim_statements
        out = []
        for cid, metric, se_metric in (("quad-closer", "dist_to_full", "dist_gap_se"),
                                       ("quad-lower-test", "test_loss", "test_gap_se")):
            lin = results.series(LIN, metric)
            quad = results.series(QUAD, metric)
            se_rows = results.series(QUAD, se_metric)
            if not (len(lin.x) and len(quad.x)):
                out.append(Claim.missing(cid, st, "no rows", tolerance=0.0, op="below",
                                         error_model="no rows"))
                continue
            ml, mq = float(lin.mean[-1]), float(quad.mean[-1])
            k = int(quad.n[-1])
            se_mc = float(se_rows.mean[-1]) / math.sqrt(k) if len(se_rows.x) else 0.0
            # paired over seeds: both models share each seed's data, init and batch order
            gap, se_seed, _ = paired_gap(results, (LIN, {}), (QUAD, {}), metric)
            se = max(se_mc, se_seed if math.isfinite(se_seed) else 0.0)
            if not math.isfinite(gap):
                out.append(Claim.missing(cid, st, "no seed ran both models", expected=ml,
                                         tolerance=K_SE * se, op="below",
                                         error_model="paired over seeds"))
                continue
            # the paired gap is linear - quadratic at each seed's end: quadratic below linear
            out.append(Claim.test(
                cid, st, mq, "below", ml, K_SE * se,
                error_model="paired: the larger of the Monte Carlo SE over the test points of "
                            "the per-point gap (linear minus quadratic) and the seed spread of "
                            "the per-seed gaps / sqrt(seeds) (same data, init and batch order "
                            f"per seed); the gap must exceed {K_SE:g} SE (one-sided); "
                            "measured = quadratic, expected = linear",
                details={"linear": ml, "quadratic": mq, "gap": gap, "se_mc": se_mc,
                         "se_seed": se_seed, "comparison": "below",
                         "full": float(results.series(FULL, "test_loss").mean[-1])
                         if metric == "test_loss" else 0.0}))
        return out

    # ---- figure --------------------------------------------------------------------------------
    def plot(self, p: TaylorParams, results: Results):
        from matplotlib.figure import Figure

        fig = Figure(figsize=(12, 3.8))
        titles = (("train_loss", "train loss"), ("test_loss", "test loss"),
                  ("dist_to_full", "mean (f_model - f_full)^2 on test"))
        styles = {FULL: "-", LIN: "--", QUAD: "-."}
        for i, (metric, ylabel) in enumerate(titles):
            ax = fig.add_subplot(1, 3, i + 1)
            for meth in (FULL, LIN, QUAD):
                s = results.series(meth, metric)
                if len(s.x):
                    std = s.sem * np.sqrt(np.maximum(s.n, 1))
                    ax.plot(s.x, s.mean, styles[meth], color=method_color(meth), label=meth)
                    ax.fill_between(s.x, s.mean - std, s.mean + std, color=method_color(meth),
                                    alpha=0.2)
            v = results.select(method=INFINITE, metric=metric)
            if v:
                ax.axhline(sum(r["value"] for r in v) / len(v), color="black", ls=":", lw=1.2,
                           label=INFINITE)
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7, frameon=False)
            ax.spines["top"].set_visible(False)
            ax.spines["right"].set_visible(False)
        name = self.resolved_dataset(p)
        pair = " vs ".join(CLASSES[name])
        fig.suptitle(f"{name} {pair}: {p.arch} width {p.width}, SGD lr {p.lr:g}, batch "
                     f"{p.batch_size}, n = {p.n_train}", fontsize=10)
        fig.tight_layout()
        return fig


def _block_rows(X: torch.Tensor, act_elems: int, chunk: int = 1024) -> int:
    """Examples per forward block: at most ``chunk``, fewer where the memory budget of the
    device (:func:`lazylab.device.block_elems`) requires: an example holds about ``act_elems``
    float32 activations per layer, times 8 for the primal, the two nested jvp tangents of the
    quadratic Taylor model and temporaries. (The paper's CNN at width 512 on 28 x 28 images
    needs 13 MB an example: 1024 at once took 46 GB of a GPU, and the full-data train loss over
    10^4 images asked for 15 GiB more than an 80 GB card had.)"""
    return min(chunk, max(1, block_elems(X.device, itemsize=4) // (8 * act_elems)))


def _predict(model: nn.Module, X: torch.Tensor, act_elems: int) -> torch.Tensor:
    """Model outputs (n,) in row blocks of :func:`_block_rows` examples (a prefix of them in
    a measuring run, :func:`lazylab.train.meter.sampled_blocks`)."""
    size = _block_rows(X, act_elems)
    outs = [model(X[i:i + size]).reshape(-1) for i in sampled_blocks(range(0, len(X), size))]
    return torch.cat(outs).detach()


def _shape(p: TaylorParams) -> tuple[int, int, int]:
    """(channels, height, width) of the run's images."""
    return (3, 32, 32) if TaylorExperiment.resolved_dataset(p) == "cifar10" else (1, 28, 28)
