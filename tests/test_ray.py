"""The Ray backend against a real local Ray cluster (started here, stopped at the end).

Skipped when Ray is not installed (``pip install 'lazylab[ray]'``; ``make test`` installs it).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from lazylab.runner import resolve_spec, run_experiment
from lazylab.runner.ray_backend import resources_for
from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean

ray = pytest.importorskip("ray")

CPU = torch.device("cpu")



pytestmark = pytest.mark.usefixtures("toy_hooks")


@pytest.fixture(scope="module")
def cluster():
    """A two-CPU local Ray cluster whose workers can import the toy experiment."""
    tests = str(Path(__file__).parent)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = tests + (os.pathsep + old if old else "")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _run(toy, out: Path, backend: str, seeds: int = 3, **sets: str):
    spec = resolve_spec(toy, "quick", sets, seeds, CPU)
    with Store(out / STORE_NAME) as st:
        o = run_experiment(spec, out, st, backend=backend)
        return o, st.count(toy.id), (out / toy.id / "results.csv").read_bytes()


def test_ray_groups_are_byte_identical_to_serial_and_resume_in_a_group(toy, cluster, tmp_path):
    """Batched groups as Ray tasks: the same table as serial; a run stopped by --max-time
    inside the grid and resumed through Ray gives it too."""
    import time

    from lazylab.errors import OutOfTime

    sets = {"ns": "100,200,300,400,500", "groups": "2"}
    serial = _run(toy, tmp_path / "serial", "local", **sets)
    via_ray = _run(toy, tmp_path / "ray", "ray", **sets)
    assert via_ray[2] == serial[2] and via_ray[1] == 15
    spec = resolve_spec(toy, "quick", dict(sets, sleep="0.5"), 3, CPU)
    out = tmp_path / "stopped"
    with Store(out / STORE_NAME) as st, pytest.raises(OutOfTime):
        run_experiment(spec, out, st, backend="ray", deadline=time.monotonic() + 1.0)
    with Store(out / STORE_NAME) as st:
        o = run_experiment(spec, out, st, backend="ray", resume=True)
    assert o.computed + o.reused == 15 and o.computed > 0
    assert (out / toy.id / "results.csv").read_bytes() == serial[2]


def test_ray_results_are_byte_identical_to_serial(toy, cluster, tmp_path):
    serial = _run(toy, tmp_path / "serial", "local")
    via_ray = _run(toy, tmp_path / "ray", "ray")
    assert via_ray[2] == serial[2]
    assert via_ray[0].computed == serial[0].computed == 9 and via_ray[1] == 9
    assert ToyMean.calls == 9  # the serial run's calls only: Ray ran its units elsewhere


def test_a_killed_worker_is_retried_and_nothing_is_lost_or_duplicated(toy, cluster,
                                                                       tmp_path):
    """The first attempt of every unit kills its Ray worker process (SIGKILL mid-unit); Ray
    retries the task, and the stored results equal the serial run's."""
    crash = tmp_path / "crash"
    crash.mkdir()
    serial = _run(toy, tmp_path / "serial", "local", seeds=1)
    via_ray = _run(toy, tmp_path / "ray", "ray", seeds=1, crash_dir=str(crash))
    assert len(list(crash.iterdir())) == 3  # every unit's first worker died
    assert via_ray[2] == serial[2] and via_ray[1] == 3


def test_resource_hints():
    class Exp:
        ray_resources = {"num_gpus": 0.25, "memory": 2**30}

    assert resources_for(Exp(), "cuda") == {"num_gpus": 0.25, "memory": 2**30, "num_cpus": 1}
    assert resources_for(object(), "cuda") == {"num_cpus": 1, "num_gpus": 1}
    assert resources_for(object(), "cpu") == {"num_cpus": 1, "num_gpus": 0}
