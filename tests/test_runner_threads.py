"""Issue 12 item 1 and the BLAS pools: inside a unit, numpy/scipy BLAS and torch use exactly the
execution policy's thread count, in the main process and in pool workers alike."""

from __future__ import annotations

import csv

import pytest
import torch

from blas_probe import BlasProbe
from lazylab.runner import ExecutionPolicy, resolve_spec, run_experiment
from lazylab.runner.policy import limit_blas
from lazylab.store import STORE_NAME, Store


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.parametrize("workers", [1, 2])
def test_blas_and_torch_pools_follow_the_policy_inside_units(tmp_path, workers):
    exp = BlasProbe()
    before = torch.get_num_threads()
    spec = resolve_spec(exp, "quick", {"units": "3"}, 1, torch.device("cpu"),
                        ExecutionPolicy(threads=1))
    try:
        with Store(tmp_path / STORE_NAME) as store:
            run_experiment(spec, tmp_path, store, workers=workers)
    finally:
        torch.set_num_threads(before)
        limit_blas(before)
    with open(tmp_path / exp.id / "results.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] == "simulation"]
    by_metric: dict[str, list[float]] = {}
    for r in rows:
        by_metric.setdefault(r["metric"], []).append(float(r["value"]))
    assert len(by_metric["blas_max"]) == 3
    assert set(by_metric["blas_min"]) == set(by_metric["blas_max"]) == {1.0}
    assert set(by_metric["torch"]) == {1.0}
    if workers == 2:  # the units really ran in worker processes
        import os

        assert os.getpid() not in {int(v) for v in by_metric["pid"]}


def test_limit_blas_reaches_every_loaded_blas_library():
    assert _blas_threads(), "numpy/scipy load at least one BLAS library"
    before = max(_blas_threads())
    try:
        limit_blas(1)
        assert set(_blas_threads()) == {1}
        limit_blas(2)
        assert set(_blas_threads()) == {2}
    finally:
        limit_blas(before)
