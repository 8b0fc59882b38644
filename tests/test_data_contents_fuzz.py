"""Data files of the right format but wrong contents, for every experiment that reads an IDX
data set (found from the registry: a ``data_root`` parameter and a ``dataset`` choice): each
is refused with exit 2 and one line naming the file, before compute."""

from __future__ import annotations

import struct
import typing

import numpy as np
import pytest

from lazylab.experiments import all_experiments
from toy_experiment import cli

STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")
IDX_SETS = ("mnist", "fashion-mnist")


def _idx(code: int, arr: np.ndarray) -> bytes:
    head = struct.pack(">BBBB", 0, 0, code, arr.ndim)
    return head + b"".join(struct.pack(">I", s) for s in arr.shape) + arr.tobytes()


def _good(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.integers(1, 256, (n, 28, 28), dtype=np.uint8),
            (np.arange(n) % 10).astype(np.uint8))


def _bad_contents() -> dict[str, tuple[np.ndarray, np.ndarray, int, str]]:
    """name -> (images, labels, IDX type code of the images, what the message says)."""
    X, y = _good()
    blank = X.copy()
    blank[3] = 0
    return {
        "labels outside 0..9": (X, np.full(len(y), 99, np.uint8), 0x08, "digits 0..9"),
        "blank images": (blank, y, 0x08, "blank"),
        "no images": (X[:0], y[:0], 0x08, "no images"),
        "fewer labels than images": (X, y[:10], 0x08, "for the 40 images of"),
        "non-finite float pixels": (np.where(X > 128, np.inf, 1.0).astype(">f4"), y, 0x0D,
                                    "finite"),
    }


def _idx_experiments() -> list[tuple[str, str]]:
    out = []
    for e in all_experiments():
        fields = e.Params.model_fields
        if "data_root" in fields and "dataset" in fields:
            choices = typing.get_args(fields["dataset"].annotation)
            out += [(e.id, name) for name in IDX_SETS if name in choices][:1]
    return out


CASES = [(e, d, c) for e, d in _idx_experiments() for c in _bad_contents()]


@pytest.mark.parametrize(("exp_id", "dataset", "case"), CASES,
                         ids=[f"{e}-{d}-{c}" for e, d, c in CASES])
def test_wrong_contents_exit_2_naming_the_file(tmp_path, monkeypatch, exp_id, dataset, case):
    monkeypatch.delenv("LAZYLAB_DATA", raising=False)
    X, y, code, message = _bad_contents()[case]
    folder = tmp_path / "data" / dataset
    folder.mkdir(parents=True)
    for stem, arr, c in zip(STEMS, (X, y, X, y), (code, 0x08, code, 0x08), strict=True):
        (folder / stem).write_bytes(_idx(c, arr))
    res = cli("reproduce", exp_id, "--set", f"dataset={dataset}", "--set",
              f"data_root={tmp_path / 'data'}", "--out", str(tmp_path / "out"), "--threads", "1")
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "ubyte" in res.stderr, res.stderr
    assert "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "out" / exp_id / "results.csv").exists()
