"""Crafted files never crash lazylab: ``lazylab report`` skips a config.json, claims.json or
robustness.json that fails its schema with one line naming it (a config.json the rebuild needs
exits 2), and an IDX header that declares more than its file or its labels is refused before
anything is allocated, as are train and test images of different sizes."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lazylab.data.idx import MAX_GZIP_RATIO, read_idx, read_idx_header, write_idx
from lazylab.data.real import load_raw
from lazylab.runner.schemas import CLAIMS, ConfigFile, JsonFileError, read_checked
from toy_experiment import cli

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads: RecursionError

CONFIG = {"experiment": "toy-mean", "paper": "toy", "figure": "Fig. T", "summary": "s",
          "params": {"sigma": 1.0, "ns": [200]}, "scale": "quick", "seeds": 1,
          "device": "cpu", "config_hash": "0123456789abcdef", "status": "complete"}
CLAIM = {"id": "second-moment", "statement": "s", "held": True, "status": "held",
         "measured": 1.0, "expected": 1.0, "tolerance": 0.1, "details": {}}


def _one_warning(res: Any, path: Path, exit_code: int = 0) -> str:
    """The run exited with ``exit_code``, without a traceback, and stderr is one line that
    names ``path``; returns that line."""
    assert res.exit_code == exit_code, res.output
    assert "Traceback" not in res.output
    lines = [ln for ln in res.stderr.strip().splitlines()
             if not ln.startswith("warning: no store")]  # a folder made by hand has none
    assert len(lines) == 1 and str(path) in lines[0], res.stderr
    return lines[0]


def _no_store_dir(tmp_path: Path, config: Any = None, claims: Any = None) -> Path:
    """An output folder without a store: ``toy-mean/config.json`` (and claims.json)."""
    d = tmp_path / "out" / "toy-mean"
    d.mkdir(parents=True)
    (d / "config.json").write_text(config if isinstance(config, str)
                                   else json.dumps(CONFIG if config is None else config))
    if claims is not None:
        (d / "claims.json").write_text(claims if isinstance(claims, str) else json.dumps(claims))
    return d.parent


# ---- the schemas ----------------------------------------------------------------------------
@pytest.mark.parametrize("config,why", [
    ({**CONFIG, "experiment": ["a"]}, "experiment: Input should be a valid string"),
    ({**CONFIG, "experiment": ".."}, "not a lower-case slug"),
    ({**CONFIG, "params": [1, 2]}, "params: Input should be a valid dictionary"),
    ({**CONFIG, "params": "x"}, "params: Input should be a valid dictionary"),
    ({**CONFIG, "seeds": "2"}, "seeds: Input should be a valid integer"),
    ({**CONFIG, "policy": {"threads": [1]}}, "policy.threads"),
    ([CONFIG], "the top level"),
    (DEEP, "nested too deeply"),
    ({**CONFIG, "params": {"a": json.loads("[" * 40 + "]" * 40)}}, "nested too deeply"),
    ("{", "is not JSON"),
])
def test_config_schema_refuses_in_one_line(tmp_path, config, why):
    path = tmp_path / "config.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    with pytest.raises(JsonFileError) as e:
        read_checked(path, ConfigFile)
    assert why in str(e.value) and str(e.value).startswith(str(path))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("claims,why", [
    ([{**CLAIM, "details": "x"}], "[0].details: Input should be a valid dictionary"),
    ([{**CLAIM, "id": ["a"]}], "[0].id: Input should be a valid string"),
    ([CLAIM, {**CLAIM, "measured": {"a": 1}}], "[1].measured"),
    ({"id": "x"}, "the top level: Input should be a valid list"),
    (DEEP, "nested too deeply"),
])
def test_claims_schema_refuses_in_one_line(tmp_path, claims, why):
    path = tmp_path / "claims.json"
    path.write_text(claims if isinstance(claims, str) else json.dumps(claims))
    with pytest.raises(JsonFileError, match=None) as e:
        read_checked(path, CLAIMS)
    assert why in str(e.value), str(e.value)


def test_files_lazylab_writes_pass_their_schemas(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "claims.json").write_text(json.dumps([CLAIM, {**CLAIM, "measured": None,
                                                                "status": "failed"}]))
    assert read_checked(tmp_path / "config.json", ConfigFile) == CONFIG
    assert read_checked(tmp_path / "claims.json", CLAIMS)[0] == CLAIM


# ---- lazylab report -------------------------------------------------------------------------
@pytest.mark.parametrize("claims", [[{**CLAIM, "details": "x"}], [{**CLAIM, "id": ["a"]}],
                                    DEEP, {"not": "a list"}])
def test_report_skips_a_crafted_claims_json(tmp_path, claims):
    out = _no_store_dir(tmp_path, claims=claims)
    line = _one_warning(cli("report", str(out)), out / "toy-mean" / "claims.json")
    assert "left out of the report" in line
    assert "toy-mean" in (out / "report.md").read_text()


@pytest.mark.parametrize("config", [{**CONFIG, "experiment": ["a"]}, {**CONFIG, "params": [1]},
                                    {**CONFIG, "params": "x"}, DEEP])
def test_report_without_a_store_skips_a_crafted_config_json(tmp_path, config):
    out = _no_store_dir(tmp_path, config=config)
    _one_warning(cli("report", str(out)), out / "toy-mean" / "config.json")
    assert "toy-mean" not in (out / "report.md").read_text()


@pytest.fixture(scope="module")
def finished(toy, tmp_path_factory):
    out = tmp_path_factory.mktemp("finished")
    res = cli("reproduce", "toy-mean", "--out", str(out), "--set", "ns=200", "--seeds", "1")
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("edit", [{"experiment": ["a"]}, {"experiment": "a/b"},
                                  {"params": [1]}, {"params": "x"}, {"details": None}])
def test_report_with_a_store_refuses_a_crafted_config_json_with_exit_2(finished, tmp_path,
                                                                        edit):
    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    cfg = out / "toy-mean" / "config.json"
    data = {**json.loads(cfg.read_text()), **edit}
    cfg.write_text(json.dumps(data))
    res = cli("report", str(out))
    if edit == {"details": None}:  # an extra field: allowed, the report is rebuilt
        assert res.exit_code == 0, res.output
        return
    line = _one_warning(res, cfg, exit_code=2)
    assert "cannot be read" in line


def test_report_with_a_store_refuses_a_deeply_nested_config_json(finished, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    cfg = out / "toy-mean" / "config.json"
    cfg.write_text(DEEP)
    assert "nested too deeply" in _one_warning(cli("report", str(out)), cfg, exit_code=2)


@pytest.mark.parametrize("rob", [DEEP, {"summary": "x"}, {"summary": {"a": 1}},
                                 {"summary": {}, "settings": "x"}, ["a"]])
def test_report_skips_a_crafted_robustness_json(finished, tmp_path, rob):
    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    path = out / "toy-mean" / "robustness.json"
    path.write_text(rob if isinstance(rob, str) else json.dumps(rob))
    line = _one_warning(cli("report", str(out)), path)
    assert "left out of the report" in line
    assert "## Robustness" not in (out / "report.md").read_text()


def test_report_keeps_a_valid_robustness_json(finished, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    (out / "toy-mean" / "robustness.json").write_text(json.dumps(
        {"experiment": "toy-mean", "summary": {"second-moment": "holds at 3/3"},
         "settings": [{}], "seeds": 2}))
    res = cli("report", str(out))
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert "second-moment: holds at 3/3" in (out / "report.md").read_text()


# ---- IDX headers ----------------------------------------------------------------------------
def _idx_header(code: int, shape: tuple[int, ...]) -> bytes:
    return bytes([0, 0, code, len(shape)]) + struct.pack(">" + "I" * len(shape), *shape)


def test_a_gzip_declaring_a_million_images_is_refused_from_its_size(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(_idx_header(0x08, (10**6, 28, 28)) + b"\x01" * 1000))
    assert path.stat().st_size < 200
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="truncated IDX data") as e:
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(e.value).startswith(str(path)) and f"{MAX_GZIP_RATIO} times" in str(e.value)
    assert peak < 1 << 20  # nothing of the declared 784 MB was allocated


def test_a_gzip_within_the_ratio_but_short_fails_when_its_data_ends(tmp_path):
    """A header declaring 2,000 x 28 x 28 bytes (1.57 MB) over 10^6 random bytes: within what
    deflate could hold, so the data is streamed, and the read fails where it ends."""
    path = tmp_path / "x.gz"
    payload = np.random.default_rng(0).integers(0, 256, 10**6, dtype=np.uint8).tobytes()
    path.write_bytes(gzip.compress(_idx_header(0x08, (2000, 28, 28)) + payload))
    assert 2000 * 28 * 28 < MAX_GZIP_RATIO * path.stat().st_size
    with pytest.raises(ValueError, match=r"truncated IDX data .*1000000 of 1568000 bytes"):
        read_idx(path)


def test_the_issue_bomb_is_refused_from_its_header(tmp_path):
    """2,500,000 x 28 x 28 declared (1.96 GB) in a gzip of 1.9 MB of zeros: over the 1 GiB
    an IDX file may declare, refused from its 16-byte header."""
    path = tmp_path / "train-images-idx3-ubyte.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(_idx_header(0x08, (2_500_000, 28, 28)))
        for _ in range(16):
            f.write(bytes(1 << 20))
    with pytest.raises(ValueError, match="1960000000 bytes; at most 1073741824") as e:
        read_idx(path)
    assert str(e.value).startswith(str(path))


def _fake_mnist(folder: Path, train_shape: tuple[int, ...] = (6, 4, 4),
                test_shape: tuple[int, ...] = (4, 4, 4)) -> list[Path]:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{s}.gz" for s in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")]
    for p, arr in zip(paths, (rng.integers(1, 256, train_shape, dtype=np.uint8),
                              np.arange(train_shape[0], dtype=np.uint8) % 10,
                              rng.integers(1, 256, test_shape, dtype=np.uint8),
                              np.arange(test_shape[0], dtype=np.uint8) % 10), strict=True):
        write_idx(p, arr)
    return paths


def test_images_declaring_more_than_their_labels_are_refused_from_the_headers(tmp_path):
    paths = _fake_mnist(tmp_path / "fashion-mnist")
    # 10^6 x 28 x 28 declared (784 MB) over 800 kB of random bytes: a header the file size
    # alone cannot refute (deflate could hold it), refuted by the 6 labels beside it
    payload = np.random.default_rng(1).integers(0, 256, 800_000, dtype=np.uint8).tobytes()
    paths[0].write_bytes(gzip.compress(_idx_header(0x08, (10**6, 28, 28)) + payload))
    assert read_idx_header(paths[0]).shape == (10**6, 28, 28)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as e:
            load_raw("fashion-mnist", root=tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(e.value)
    assert msg.startswith(str(paths[1])) and "6 labels for the 1000000 images" in msg, msg
    assert peak < 1 << 20


def test_train_and_test_images_of_different_sizes_are_named(tmp_path):
    _fake_mnist(tmp_path / "fashion-mnist", test_shape=(4, 5, 5))
    with pytest.raises(ValueError) as e:
        load_raw("fashion-mnist", root=tmp_path)
    msg = str(e.value)
    assert "train-images-idx3-ubyte.gz holds images of 4 x 4" in msg, msg
    assert "t10k-images-idx3-ubyte.gz of 5 x 5" in msg and "broadcast" not in msg


def test_consistent_fake_files_still_load(tmp_path):
    _fake_mnist(tmp_path / "fashion-mnist")
    Xtr, ytr, Xte, yte, scale = load_raw("fashion-mnist", root=tmp_path)
    assert Xtr.shape == (6, 16) and Xte.shape == (4, 16) and scale == 255.0
    assert ytr.tolist() == [0, 1, 2, 3, 4, 5]
