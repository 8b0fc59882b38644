"""Offline real data sets: digits, Fashion-MNIST, IDX and CIFAR readers, missing-data errors."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from lazylab.data import real
from lazylab.data.cifar import read_cifar_batch
from lazylab.data.idx import read_idx, write_idx
from lazylab.data.real import DatasetNotFound, find_dataset, load_dataset, load_raw

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
IDX_STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")


@pytest.fixture(autouse=True)
def _no_env_data(monkeypatch):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)


def _unit_norms(X: torch.Tensor) -> bool:
    return bool(torch.allclose(X.double().norm(dim=1), torch.ones(len(X), dtype=torch.float64),
                               atol=1e-6))


# ----------------------------------------------------------------------------- digits

def test_digits_shapes_labels_norms():
    Xtr, ytr, Xte, yte = load_dataset("digits", n_train=200, n_test=60, seed=3)
    assert Xtr.shape == (200, 64) and Xte.shape == (60, 64)
    assert set(ytr.tolist()) == {-1.0, 1.0} and set(yte.tolist()) <= {-1.0, 1.0}
    assert _unit_norms(Xtr) and _unit_norms(Xte)
    assert Xtr.dtype == torch.float32


def test_digits_subsampling_deterministic_nested_and_label_map():
    a = load_dataset("digits", n_train=100, n_test=50, seed=1, dtype=torch.float64)
    b = load_dataset("digits", n_train=100, n_test=50, seed=1, dtype=torch.float64)
    for s, t in zip(a, b, strict=True):
        assert torch.equal(s, t)
    c = load_dataset("digits", n_train=100, n_test=50, seed=2, dtype=torch.float64)
    assert not torch.equal(a[0], c[0])
    big = load_dataset("digits", n_train=200, n_test=50, seed=1, dtype=torch.float64)
    assert torch.equal(big[0][:100], a[0])  # a smaller n is a prefix of a larger one
    swapped = load_dataset("digits", classes=(1, 0), n_train=100, n_test=50, seed=1,
                           dtype=torch.float64)
    assert torch.equal(swapped[0], a[0]) and torch.equal(swapped[1], -a[1])
    # 360 images of digits 0/1 in the bundled set: train and test are disjoint parts of them.
    all_pool = load_dataset("digits", seed=1)
    assert len(all_pool[0]) + len(all_pool[2]) == 360


def test_digits_labels_match_raw_images():
    X, y, _, _, scale = load_raw("digits")
    Xtr, ytr, _, _ = load_dataset("digits", classes=(3, 8), n_train=30, n_test=10,
                                  normalize="none", dtype=torch.float64)
    raw = {tuple(row): lab for row, lab in zip(X / scale, y, strict=True)}
    for row, lab in zip(Xtr.numpy(), ytr.tolist(), strict=True):
        assert raw[tuple(row)] == (3 if lab == 1.0 else 8)


def test_digits_centering_and_validation():
    Xtr, *_ = load_dataset("digits", n_train=150, n_test=40, center=True, normalize="none",
                           dtype=torch.float64)
    assert torch.allclose(Xtr.mean(0), torch.zeros(64, dtype=torch.float64), atol=1e-12)
    with pytest.raises(ValueError, match="n_train"):
        load_dataset("digits", n_train=10_000, n_test=10)
    with pytest.raises(ValueError, match="classes"):
        load_dataset("digits", classes=(2, 2))
    with pytest.raises(ValueError, match="name must be one of"):
        load_dataset("svhn")
    with pytest.raises(ValueError, match="normalize"):
        load_dataset("digits", normalize="l1")


# ----------------------------------------------------------------------------- Fashion-MNIST

@pytest.mark.skipif(not FASHION_DIR.is_dir(), reason="dataset-fashion-mnist is not installed")
def test_fashion_mnist_from_debian_package():
    assert find_dataset("fashion-mnist") == FASHION_DIR
    Xtr_raw, ytr_raw, Xte_raw, yte_raw, _ = load_raw("fashion-mnist")
    assert Xtr_raw.shape == (60_000, 784) and Xte_raw.shape == (10_000, 784)
    # Fashion-MNIST is balanced: 6000 train and 1000 test images per class.
    assert np.bincount(ytr_raw).tolist() == [6000] * 10
    assert np.bincount(yte_raw).tolist() == [1000] * 10
    Xtr, ytr, Xte, yte = load_dataset("fashion-mnist", classes=("Trouser", "Bag"),
                                      n_train=500, n_test=100, root=FASHION_DIR)
    assert Xtr.shape == (500, 784) and Xte.shape == (100, 784)
    assert set(ytr.tolist()) == {-1.0, 1.0}
    assert _unit_norms(Xtr) and _unit_norms(Xte)


# ----------------------------------------------------------------------------- IDX reader

def _idx_bytes(code: int, shape: tuple[int, ...], payload: bytes) -> bytes:
    return bytes([0, 0, code, len(shape)]) + struct.pack(">" + "I" * len(shape), *shape) + payload


@pytest.mark.parametrize("compressed", [False, True])
def test_idx_reader_hand_written_files(tmp_path, compressed):
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    body = _idx_bytes(0x08, (2, 3, 4), data.tobytes())
    vals = [-2, 300, 7]  # int16 checks the big-endian byte order
    body16 = _idx_bytes(0x0B, (3,), struct.pack(">hhh", *vals))
    name = "a-idx3-ubyte" + (".gz" if compressed else "")
    (tmp_path / name).write_bytes(gzip.compress(body) if compressed else body)
    (tmp_path / "b").write_bytes(gzip.compress(body16) if compressed else body16)
    np.testing.assert_array_equal(read_idx(tmp_path / name), data)
    assert read_idx(tmp_path / "b").tolist() == vals


def test_idx_reader_rejects_bad_files(tmp_path):
    (tmp_path / "magic").write_bytes(b"\x01\x00\x08\x01" + struct.pack(">I", 1) + b"\x00")
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "magic")
    (tmp_path / "short").write_bytes(_idx_bytes(0x08, (5,), b"\x00\x01"))
    with pytest.raises(ValueError, match="truncated IDX data"):
        read_idx(tmp_path / "short")
    (tmp_path / "code").write_bytes(_idx_bytes(0x07, (1,), b"\x00"))
    with pytest.raises(ValueError, match="type code"):
        read_idx(tmp_path / "code")
    x = np.linspace(-1, 1, 6).reshape(2, 3)
    write_idx(tmp_path / "f.gz", x)
    np.testing.assert_array_equal(read_idx(tmp_path / "f.gz"), x)


def test_idx_reader_stops_at_the_declared_size(tmp_path):
    """A gzip bomb: a 5-byte IDX payload followed by 256 MiB of zeros (a file of ~250 KB) is
    refused after reading one byte past the declared size, never inflated whole."""
    import gzip

    with gzip.open(tmp_path / "bomb.gz", "wb") as f:
        f.write(_idx_bytes(0x08, (5,), b"\x00" * 5))
        block = b"\x00" * (1 << 20)
        for _ in range(256):
            f.write(block)
    assert (tmp_path / "bomb.gz").stat().st_size < 1 << 20
    with pytest.raises(ValueError, match="more data than the IDX header"):
        read_idx(tmp_path / "bomb.gz")
    (tmp_path / "huge").write_bytes(_idx_bytes(0x08, (1 << 20, 1 << 14), b""))
    with pytest.raises(ValueError, match="at most"):
        read_idx(tmp_path / "huge")


def _write_fake_mnist(folder: Path, n_train: int = 40, n_test: int = 20, *, dotted: bool = False
                      ) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    arrays = (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              np.arange(n_train, dtype=np.uint8) % 10,
              rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              np.arange(n_test, dtype=np.uint8) % 10)
    folder.mkdir(parents=True, exist_ok=True)
    for stem, arr in zip(IDX_STEMS, arrays, strict=True):
        name = stem.replace("-idx", ".idx") if dotted else stem
        (folder / name).write_bytes(_idx_bytes(0x08, arr.shape, arr.tobytes()))
    return arrays


def test_mnist_from_user_folder_raw_idx(tmp_path):
    Xtr_raw, ytr_raw, _, _ = _write_fake_mnist(tmp_path / "mnist", dotted=True)
    Xtr, ytr, Xte, yte = load_dataset("mnist", root=tmp_path, n_train=6, n_test=3,
                                      dtype=torch.float64)
    assert Xtr.shape == (6, 784) and Xte.shape == (3, 784)
    assert _unit_norms(Xtr)
    # Each returned row is a raw image of class 0 (+1) or 1 (-1) scaled to unit norm.
    flat = Xtr_raw.reshape(len(Xtr_raw), -1).astype(np.float64)
    unit = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    for row, lab in zip(Xtr.numpy(), ytr.tolist(), strict=True):
        i = int(np.argmin(np.abs(unit - row).sum(1)))
        assert np.abs(unit[i] - row).max() < 1e-12
        assert ytr_raw[i] == (0 if lab == 1.0 else 1)


# ----------------------------------------------------------------------------- CIFAR reader

def _write_fake_cifar(folder: Path, per_batch: int = 6) -> None:
    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": [int(v) for v in np.arange(per_batch) % 3],
                 b"batch_label": name.encode()}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))


def test_cifar_reader_and_loader(tmp_path):
    _write_fake_cifar(tmp_path / "cifar-10-batches-py")
    X, y = read_cifar_batch(tmp_path / "cifar-10-batches-py" / "data_batch_2")
    assert X.shape == (6, 3072) and X.dtype == np.uint8 and y.tolist() == [0, 1, 2, 0, 1, 2]
    Xtr, ytr, Xte, yte = load_dataset("cifar10", classes=("airplane", "automobile"),
                                      root=tmp_path, seed=0)
    # 5 batches x 6 images, two thirds in classes 0/1; test batch: 4 of 6.
    assert Xtr.shape == (20, 3072) and Xte.shape == (4, 3072)
    assert ytr.sum().item() == 0  # 10 airplanes (+1) and 10 automobiles (-1)
    assert _unit_norms(Xtr)


def test_cifar_reader_refuses_code_in_pickles(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (tmp_path / "data_batch_1").write_bytes(pickle.dumps({b"data": Evil(), b"labels": []}))
    with pytest.raises(ValueError, match="not allowed"):
        read_cifar_batch(tmp_path / "data_batch_1")


# ----------------------------------------------------------------------------- missing data

def test_dataset_not_found_message_lists_paths_and_remedy(tmp_path, monkeypatch):
    env = tmp_path / "envdata"
    monkeypatch.setenv("LAZYLAB_DATA", str(env))
    root = tmp_path / "mine"
    with pytest.raises(DatasetNotFound) as info:
        load_dataset("mnist", root=root)
    msg = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    for expected in ("'mnist'", str(root), str(root / "mnist"), str(env),
                     "/usr/share/datasets/mnist", "data_root", "LAZYLAB_DATA",
                     "train-images-idx3-ubyte.gz"):
        assert expected in msg, expected
    # Fashion-MNIST's message names the Debian package (hide the system copy to trigger it).
    monkeypatch.setitem(real._SYSTEM, "fashion-mnist", (str(tmp_path / "none"),))
    with pytest.raises(DatasetNotFound, match="apt-get install dataset-fashion-mnist"):
        find_dataset("fashion-mnist", root=root)
    # A folder with only some of the files does not count as the data set.
    _write_fake_mnist(env / "mnist")
    (env / "mnist" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetNotFound):
        find_dataset("mnist")


def test_missing_data_is_an_input_error_and_a_file_not_found(tmp_path):
    from lazylab.errors import DataNotFound, InputError

    with pytest.raises(DatasetNotFound) as info:
        find_dataset("cifar10", tmp_path)
    err = info.value
    assert isinstance(err, DataNotFound) and isinstance(err, InputError)
    assert isinstance(err, FileNotFoundError) and err.exit_code == 2
    assert str(tmp_path) in str(err) and "never downloads" in str(err)


# ----------------------------------------------------------------------------- CIFAR binary

def _write_fake_cifar_bin(folder: Path, per_batch: int = 6) -> list[np.ndarray]:
    """The binary version: records of one label byte then 3072 pixel bytes."""
    rng = np.random.default_rng(2)
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = (np.arange(per_batch) % 3).astype(np.uint8)[:, None]
        rec = np.concatenate([labels, rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)],
                             axis=1)
        (folder / name).write_bytes(rec.tobytes())
        records.append(rec)
    return records


def test_cifar_binary_version_reader_and_loader(tmp_path):
    from lazylab.data.cifar import read_cifar_bin

    records = _write_fake_cifar_bin(tmp_path / "cifar-10-batches-bin")
    X, y = read_cifar_bin(tmp_path / "cifar-10-batches-bin" / "data_batch_3.bin")
    assert X.shape == (6, 3072) and X.dtype == np.uint8
    assert y.tolist() == [0, 1, 2, 0, 1, 2] and np.array_equal(X, records[2][:, 1:])
    assert find_dataset("cifar10", tmp_path) == tmp_path / "cifar-10-batches-bin"
    Xtr, ytr, Xte, yte = load_dataset("cifar10", root=tmp_path, dtype=torch.float64)
    # classes 0 (airplane, +1) and 1 (automobile, -1): 2 of every 3 records
    assert Xtr.shape == (20, 3072) and Xte.shape == (4, 3072)
    assert sorted(ytr.tolist()) == [-1.0] * 10 + [1.0] * 10 and _unit_norms(Xte)
    # each test row is its record's pixels / 255 scaled to unit norm, with the record's label
    test = records[5][records[5][:, 0] < 2]
    unit = test[:, 1:] / np.linalg.norm(test[:, 1:].astype(np.float64), axis=1, keepdims=True)
    for row, lab in zip(Xte.numpy(), yte.tolist(), strict=True):
        i = int(np.argmin(np.abs(unit - row).sum(1)))
        assert np.abs(unit[i] - row).max() < 1e-12 and test[i, 0] == (0 if lab == 1 else 1)
    # a truncated record is refused, naming the file
    bad = tmp_path / "bad.bin"
    bad.write_bytes(records[0].tobytes()[:-1])
    with pytest.raises(ValueError, match="bad.bin.*3073-byte record"):
        read_cifar_bin(bad)


def test_cifar_unpickler_refuses_os_system_and_keeps_plain_containers(tmp_path):
    import os

    class Shell:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    (tmp_path / "data_batch_1").write_bytes(
        pickle.dumps({b"data": Shell(), b"labels": [0]}, protocol=2))
    with pytest.raises(ValueError, match="(posix|nt|os).system is not allowed"):
        read_cifar_batch(tmp_path / "data_batch_1")
    assert not (tmp_path / "pwned").exists()
    # a batch made of plain dicts, lists, bytes and a numpy array (any protocol) is accepted
    for proto in (2, 4, 5):
        batch = {b"data": np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072) % 251,
                 b"labels": [1, 0], b"batch_label": b"testing", b"filenames": [b"a", b"b"]}
        (tmp_path / "ok").write_bytes(pickle.dumps(batch, protocol=proto))
        X, y = read_cifar_batch(tmp_path / "ok")
        assert np.array_equal(X, batch[b"data"]) and y.tolist() == [1, 0]


def test_missing_cifar_message_names_both_versions(tmp_path):
    with pytest.raises(DatasetNotFound) as info:
        find_dataset("cifar10", tmp_path)
    msg = str(info.value)
    for expected in (str(tmp_path / "cifar-10-batches-py"), str(tmp_path / "cifar-10-batches-bin"),
                     "data_batch_1..5", "test_batch", "data_batch_1.bin", "test_batch.bin"):
        assert expected in msg, expected


def test_cifar_reader_refuses_wrong_contents_naming_the_file(tmp_path):
    """Right format, wrong contents: an unknown text encoding inside the pickle, labels outside
    0..9, no images: each a ValueError naming the file (exit 2 through the loaders)."""
    good = np.zeros((2, 3072), dtype=np.uint8)
    cases = {
        "label99": ({b"data": good, b"labels": [0, 99]}, "classes 0..9"),
        "empty": ({b"data": np.zeros((0, 3072), dtype=np.uint8), b"labels": []}, "no images"),
    }
    for name, (obj, msg) in cases.items():
        (tmp_path / name).write_bytes(pickle.dumps(obj))
        with pytest.raises(ValueError, match=msg) as err:
            read_cifar_batch(tmp_path / name)
        assert name in str(err.value)
    # _codecs.encode is allowed (pickles of bytes use it); an unknown codec name made the
    # reader raise LookupError, which escaped as exit 1.
    class UnknownCodec:
        def __reduce__(self):
            import _codecs

            return (_codecs.encode, ("x", "no-such-codec"))

    (tmp_path / "enc").write_bytes(pickle.dumps({b"data": UnknownCodec(), b"labels": []}))
    with pytest.raises(ValueError, match="LookupError") as err:
        read_cifar_batch(tmp_path / "enc")
    assert "enc" in str(err.value)


def test_the_data_read_is_part_of_the_resume_identity(tmp_path, monkeypatch):
    """Same file names, other bytes (pixels inverted) in another folder: the run's identity
    differs, config.json would record it, and --resume onto the first run's store is refused
    naming the data set, before anything is computed."""
    import torch

    from lazylab.errors import InputError
    from lazylab.experiments import get_experiment
    from lazylab.runner import check_resume, resolve_spec
    from lazylab.store import STORE_NAME, Store

    a, b = tmp_path / "A", tmp_path / "B"
    arrays = _write_fake_mnist(a)
    _write_fake_mnist(b)
    img = b / IDX_STEMS[0]
    (img).write_bytes(_idx_bytes(0x08, arrays[0].shape, (255 - arrays[0]).tobytes()))
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    exp = get_experiment("arora-spectrum")
    sets = {"dataset": "mnist", "n_train": "6", "n_test": "4", "classes": "0,1"}
    spec_a = resolve_spec(exp, "quick", {**sets, "data_root": str(a)}, 1, torch.device("cpu"))
    spec_b = resolve_spec(exp, "quick", {**sets, "data_root": str(a)}, 1, torch.device("cpu"))
    assert spec_a.identity["data"] == spec_b.identity["data"]
    monkeypatch.setenv("LAZYLAB_DATA", str(b))
    spec_c = resolve_spec(exp, "quick", sets, 1, torch.device("cpu"))
    monkeypatch.setenv("LAZYLAB_DATA", str(a))
    spec_d = resolve_spec(exp, "quick", sets, 1, torch.device("cpu"))
    assert spec_c.identity["data"] != spec_d.identity["data"] == spec_a.identity["data"]
    with Store(tmp_path / STORE_NAME) as st:
        st.begin(exp.id, spec_d.config_hash, spec_d.identity, fresh=True)
        with pytest.raises(InputError, match="mnist"):
            check_resume(st, spec_c, tmp_path)
