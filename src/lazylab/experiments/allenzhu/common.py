"""Shared pieces of the Allen-Zhu & Li (2019) experiments: the N grid and the Sec. 8.1 protocol
(T1 data, the three learners, SGD grid / ridge / kernel fits with paper (test) and validation
selection)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from lazylab.data import HierarchicalParity
from lazylab.experiments.toolkit import sub_generator
from lazylab.ids import paper_of
from lazylab.kernels import ntk
from lazylab.models.mlp import MLP2, MLP3
from lazylab.models.resnet import ResNet3
from lazylab.solve import kernel_ridge, lstsq
from lazylab.train.ensemble import ACTIVATION_ELEMENTS, best_index, train_grid

PAPER = paper_of(__name__)  # the key of this package in lazylab.ids.PAPERS


def n_grid(lo: int, hi: int, num: int) -> list[int]:
    """Sorted unique integers on a geometric grid from lo to hi (both included)."""
    if hi <= lo:
        return [int(lo)]
    return sorted({int(v) for v in np.round(np.geomspace(lo, hi, num))})


# ---------------------------------------------------------------------------- Sec. 8.1 protocol


ARCHS = ("3resnet", "3layer", "2layer")
#: Ridge penalties tried for the closed-form (last) and kernel baselines, relative to the mean
#: diagonal of the Gram matrix (best over the grid, selected like the SGD grid).
RIDGE_GRID = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)


@dataclass
class T1Data:
    """Training, validation and test sets of task T1 (uniform {-1, 1}^d inputs)."""

    X: torch.Tensor
    Y: torch.Tensor
    Xv: torch.Tensor
    Yv: torch.Tensor
    Xt: torch.Tensor
    Yt: torch.Tensor


def t1_data(d: int, alpha: float, beta: float, n: int, n_val: int, n_test: int, seed: int,
            device: torch.device | str = "cpu") -> T1Data:
    """Fresh uniform cube samples, H = beta F + alpha G(F) (float32)."""
    target = HierarchicalParity(alpha=alpha, beta=beta, d=d)
    out = []
    for name, size in (("train", n), ("val", n_val), ("test", n_test)):
        g = sub_generator(seed, f"data-{name}")
        X = (2 * torch.randint(0, 2, (size, d), generator=g) - 1).float().to(device)
        out += [X, target(X)]
    return T1Data(*out)


def make_learner(arch: str, d: int, k: int, m: int, *, untied: bool, init: str,
                 generator: torch.Generator, device: torch.device | str = "cpu"):
    """3resnet (bottleneck, tied unless ``untied``), 3layer or 2layer at width m (float32),
    drawn on the CPU from ``generator`` (a CPU generator: the same weights on every device)
    and moved to ``device``."""
    if generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator (the nets are drawn on the CPU, "
                         f"then moved to {device}); got one on {generator.device}")
    kw = {"init": init, "generator": generator}
    if arch == "3resnet":
        net = ResNet3(d, k, m, tied=not untied, **kw)
    elif arch == "3layer":
        net = MLP3(d, k, m, **kw)
    elif arch == "2layer":
        net = MLP2(d, k, m, **kw)
    else:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}; got {arch!r}")
    return net.to(device)


def learner_params(arch: str, d: int, k: int, m: int) -> int:
    """Parameters of :func:`make_learner`'s net: W and b1, the hidden layer (3resnet: V and
    b2, m x k; 3layer: U and b2, m x m) and the output layer A (k x m)."""
    hidden = {"3resnet": m * k + m, "3layer": m * m + m, "2layer": 0}[arch]
    return m * d + m + hidden + k * m


#: Hidden (G, rows, width) float32 activations live at once in GridRun.predict, by learner
#: (measured peaks of single units: about 5.5 for the ResNet's h1, z2, h2, h1 + h2 and their
#: temporaries, 4 for the 3layer MLP, 3 for the 2layer one; the linearized "(NTK)" mode's
#: tangents added less than one more).
ACTIVATIONS = {"3resnet": 6, "3layer": 4, "2layer": 3}


def grid_peak_bytes(n_params: int, width: int, configs: int, group: int, n_eval: int,
                    batch: int, activations: float) -> float:
    """Peak float32 bytes of :func:`lazylab.train.ensemble.train_grid` and
    :meth:`GridRun.predict` for ``configs`` (lr, wd) pairs of ``n_params`` trainable numbers,
    trained ``group`` at a time: the stacked parameters while a group trains (parameters,
    momentum, gradient and its flattened copy of the group, with the finished groups) or
    after (the groups and their concatenation), plus ``activations`` (G, rows, width) hidden
    activations of a prediction block (rows capped by ACTIVATION_ELEMENTS and the default chunk
    8192) or of a training batch."""
    gc = min(configs, group)
    params = n_params * max(4 * gc + configs, 2 * configs)
    rows = max(1, min(n_eval, 8192, ACTIVATION_ELEMENTS // max(1, configs * width)))
    act = max(configs * rows, gc * batch) * width
    return 4.0 * (params + activations * act)


def ridge_peak_bytes(n: int, n_val: int, n_test: int, m: int) -> float:
    """Peak bytes of a "(last)" unit (:func:`fit_ridge`): the frozen features of the training,
    validation and test points in float32 and float64 (three numbers per point and unit) and
    the min(n, m)^2 normal-equation matrix with its Cholesky factor (float64)."""
    return 8.0 * (3 * (n + n_val + n_test) * m + 3 * min(n, m) ** 2)


def kernel_peak_bytes(n: int, n_val: int, n_test: int) -> float:
    """Peak float64 bytes of a kernel baseline (:func:`fit_kernel`): the n x n Gram matrix with
    the Cholesky solve's symmetrised copy, identity, shifted copy and factor (about six n^2),
    and the (n_val + n_test) x n cross-kernels with the cdist / exp temporaries (four)."""
    return 8.0 * (6 * n * n + 4 * (n_val + n_test) * n)


def hidden_names(net: torch.nn.Module) -> list[str]:
    """Names of the "hidden" training mode: every group but the output layer A."""
    groups = net.param_groups()
    by_id = {id(p): n for n, p in net.named_parameters()}
    return [by_id[id(p)] for g in ("first", "hidden") for p in groups.get(g, [])]


@dataclass
class Fit:
    """Test error (and its Monte Carlo SE) of the configuration chosen by each selection."""

    test: dict[str, float]
    se: dict[str, float]
    train: dict[str, float]
    choice: dict[str, str]


def _per_sample(pred: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    return (pred - Y).double().square().sum(dim=-1)


def _select(test_err: torch.Tensor, val_err: torch.Tensor) -> dict[str, int]:
    return {"test": best_index(test_err), "val": best_index(val_err)}


def fit_sgd(net: torch.nn.Module, data: T1Data, *, mode: str, lrs, wds, epochs: int,
            batch_size: int, seed: int, max_group: int | None = None) -> Fit:
    """SGD grid (all / hidden / NTK) as one ensemble; both selections."""
    trainable = hidden_names(net) if mode == "hidden" else "all"
    run = train_grid(net, data.X, data.Y, lrs=lrs, wds=wds, trainable=trainable,
                     epochs=epochs, batch_size=batch_size, linearize=(mode == "NTK"),
                     generator=sub_generator(seed, "batches", data.X.device),
                     max_group=max_group)
    pt = run.predict(data.Xt)
    per = torch.stack([_per_sample(pt[g], data.Yt) for g in range(len(run.configs))])
    test_err = torch.where(torch.isfinite(per.mean(1)), per.mean(1), torch.inf)
    sel = _select(test_err, run.errors(data.Xv, data.Yv))
    train_err = run.errors(data.X, data.Y)
    return _fit(sel, per, test_err, train_err,
                [f"lr={lr:g}, wd={wd:g}" for lr, wd in run.configs])


def _fit(sel: dict[str, int], per: torch.Tensor, test_err: torch.Tensor,
         train_err: torch.Tensor, labels: list[str]) -> Fit:
    test, se, train, choice = {}, {}, {}, {}
    for s, i in sel.items():
        if i < 0:
            test[s], se[s], train[s], choice[s] = math.inf, 0.0, math.inf, "all diverged"
            continue
        test[s] = float(test_err[i])
        se[s] = float(per[i].std() / math.sqrt(per.shape[1]))
        train[s] = float(train_err[i])
        choice[s] = labels[i]
    return Fit(test, se, train, choice)


def fit_ridge(F: torch.Tensor, Fv: torch.Tensor, Ft: torch.Tensor, data: T1Data) -> Fit:
    """Ridge on frozen features F (the "(last)" mode = conjugate kernel), best over RIDGE_GRID."""
    F, Fv, Ft = F.double(), Fv.double(), Ft.double()
    scale = float(F.square().sum(dim=1).mean())
    preds = [(Fv @ c, Ft @ c, F @ c) for c in
             (lstsq(F, data.Y.double(), ridge=lam * scale) for lam in RIDGE_GRID)]
    return _from_preds(preds, data)


def fit_kernel(kernel: str | Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
               data: T1Data) -> Fit:
    """Kernel ridge with the Gaussian kernel exp(-||x - y||^2 / (2d)), the two-layer ReLU NTK
    (both layers) on (x / sqrt(d), 1) / sqrt(2), or a Gram function (A, B) -> K(A, B) (such as
    :func:`lazylab.experiments.allenzhu.infinite.infinite_ntk`), in float64; best over
    RIDGE_GRID x mean diag."""
    d = data.X.shape[1]

    def gram(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.double(), B.double()
        if callable(kernel):
            return kernel(A, B)
        if kernel == "gaussian":
            return torch.exp(-torch.cdist(A, B).square() / (2 * d))
        aug = [torch.cat([Z / math.sqrt(d), torch.ones(len(Z), 1, dtype=Z.dtype)], 1)
               / math.sqrt(2) for Z in (A, B)]
        return ntk(aug[0], aug[1], activation="relu", trained="both")

    K = gram(data.X, data.X)
    Kv, Kt = gram(data.Xv, data.X), gram(data.Xt, data.X)
    scale = float(K.diagonal().mean())
    preds = []
    for lam in RIDGE_GRID:
        a = kernel_ridge(K, data.Y.double(), ridge=lam * scale)
        preds.append((Kv @ a, Kt @ a, K @ a))
    return _from_preds(preds, data)


def _from_preds(preds, data: T1Data) -> Fit:
    per = torch.stack([_per_sample(pt, data.Yt) for _, pt, _ in preds])
    test_err = per.mean(1)
    val_err = torch.stack([_per_sample(pv, data.Yv).mean() for pv, _, _ in preds])
    train_err = torch.stack([_per_sample(ptr, data.Y).mean() for _, _, ptr in preds])
    return _fit(_select(test_err, val_err), per, test_err, train_err,
                [f"ridge={lam:g}" for lam in RIDGE_GRID])
