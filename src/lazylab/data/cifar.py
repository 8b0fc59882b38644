"""Reader of the CIFAR-10 "python version" batches (``cifar-10-batches-py``).

Each batch file (``data_batch_1`` .. ``data_batch_5``, ``test_batch``) is a pickled dict with
``b"data"``: a (10000, 3072) uint8 array, rows = 1024 red, 1024 green, 1024 blue values of a
32x32 image in row-major order, and ``b"labels"``: 10000 integers in 0..9
(Krizhevsky 2009, https://www.cs.toronto.edu/~kriz/cifar.html).

The "binary version" (``cifar-10-batches-bin``: ``data_batch_1.bin`` .. ``data_batch_5.bin``,
``test_batch.bin``) stores each image as 3073 bytes: the label (0..9), then the same 3072
channel-major pixels; :func:`read_cifar_bin` reads it without pickle.

Pickle can run arbitrary code, so batches are read with an unpickler that only admits the
few numpy constructors an array needs (plain dicts, lists, bytes and numbers need no global);
anything else, e.g. a reference to ``os.system``, is refused with a ValueError.

Example
-------
>>> import numpy as np, pickle, tempfile, pathlib
>>> from lazylab.data.cifar import read_cifar_batch
>>> p = pathlib.Path(tempfile.mkdtemp()) / "data_batch_1"
>>> batch = {b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 5]}
>>> p.write_bytes(pickle.dumps(batch, protocol=2)) > 0
True
>>> X, y = read_cifar_batch(p)
>>> X.shape, y.tolist()
((2, 3072), [3, 5])
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")
CIFAR10_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST = ("test_batch",)
CIFAR10_BIN_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
CIFAR10_BIN_TEST = ("test_batch.bin",)
_RECORD = 1 + 3072  # label byte + 32 x 32 x 3 pixels

# Globals that pickled numpy arrays refer to, across numpy 1.x / 2.x and pickle protocols 2-5.
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR batch")
        return super().find_class(module, name)


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of one batch: X (N, 3072) uint8 in CIFAR's channel-major order, y (N,) int64."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            batch = _ArrayUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, LookupError,
            UnicodeDecodeError, ValueError, TypeError, IndexError) as err:
        raise ValueError(f"{path}: not a CIFAR-10 python batch ({type(err).__name__}: "
                         f"{err})") from err
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: not a CIFAR-10 python batch (expected a dict)")
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if data is None or labels is None:
        raise ValueError(f"{path}: a CIFAR-10 batch needs the keys b'data' and b'labels'")
    try:
        X = np.asarray(data)
        y = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"{path}: not a CIFAR-10 python batch (data or labels are not "
                         f"arrays: {err})") from err
    if X.dtype != np.uint8 or X.ndim != 2 or X.shape[1] != 3072 or y.shape != (X.shape[0],):
        raise ValueError(f"{path}: expected uint8 data of shape (N, 3072) and N labels; got "
                         f"data {X.dtype}{tuple(X.shape)} and {y.shape[0]} labels")
    if X.shape[0] == 0:
        raise ValueError(f"{path}: the batch holds no images")
    if y.size and (y.min() < 0 or y.max() > 9):
        raise ValueError(f"{path}: labels must be CIFAR-10 classes 0..9; found "
                         f"{int(y.min())}..{int(y.max())}")
    return X, y


def read_cifar_bin(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of one binary batch (records of 1 label byte + 3072 pixel bytes)."""
    path = Path(path)
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % _RECORD:
        raise ValueError(f"{path}: not a CIFAR-10 binary batch ({raw.size} bytes is not a "
                         f"positive multiple of the {_RECORD}-byte record)")
    rec = raw.reshape(-1, _RECORD)
    y = rec[:, 0].astype(np.int64)
    if y.max() > 9:
        raise ValueError(f"{path}: not a CIFAR-10 binary batch (label {int(y.max())} > 9)")
    return np.ascontiguousarray(rec[:, 1:]), y


def read_cifar_batches(folder: str | Path, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the named batches of ``folder`` (e.g. ``CIFAR10_TRAIN``); names ending in
    ``.bin`` are read as binary batches, the others as python pickles."""
    parts = [(read_cifar_bin if n.endswith(".bin") else read_cifar_batch)(Path(folder) / n)
             for n in names]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
