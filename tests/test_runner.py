"""The runner on the toy experiment: grid order, seeds, outputs, interruption and resumption,
worker pools, parameter resolution."""

from __future__ import annotations

import csv
import importlib.util
import json
import math

import pytest
import torch

from lazylab.experiments.base import COLUMNS
from lazylab.runner import (
    InputError,
    RunSpec,
    UnitFailed,
    WorkUnit,
    check_resume,
    execute,
    plan_groups,
    plan_units,
    resolve_spec,
    run_experiment,
)
from lazylab.runner.outputs import read_results
from lazylab.seeding import canonical_key, derive_seed
from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean

CPU = torch.device("cpu")



pytestmark = pytest.mark.usefixtures("toy_hooks")


@pytest.fixture(scope="module")
def reference(toy, tmp_path_factory):
    """An uninterrupted in-process run with 2 seeds: (results.csv bytes, outcome)."""
    out_dir = tmp_path_factory.mktemp("ref")
    out = run(spec_of(toy, seeds=2), out_dir)
    return (out_dir / "toy-mean" / "results.csv").read_bytes(), out


def spec_of(exp, seeds: int = 2, **sets: str) -> RunSpec:
    return resolve_spec(exp, "quick", dict(sets), seeds, CPU)


def run(spec: RunSpec, out, **kw):
    with Store(out / STORE_NAME) as store:
        return run_experiment(spec, out, store, **kw)


class StopAfter:
    """A progress sink that interrupts the run (like Ctrl-C) after k stored units."""

    def __init__(self, k: int):
        self.k, self.seen = k, 0

    def started(self, spec, pending, total):
        pass

    def unit_done(self, spec, unit: WorkUnit):
        self.seen += 1
        if self.seen == self.k:
            raise KeyboardInterrupt


def test_plan_is_grid_order_then_seed_index(toy):
    spec = spec_of(toy, seeds=3)
    plan = plan_units(spec)
    assert [(u.key["n"], u.seed_index) for u in plan] == [
        (n, s) for n in (200, 800, 3200) for s in range(3)]
    assert all(u.seed == derive_seed("toy-mean", u.key, u.seed_index) for u in plan)
    assert len({u.seed for u in plan}) == len(plan)
    assert all(u.key_json == canonical_key(u.key) for u in plan)


def test_outputs_and_claims_are_computed_from_results(toy, reference, tmp_path_factory):
    out = reference[1]
    base = out.exp_dir.parent
    d = out.exp_dir
    for name in ("results.csv", "claims.json", "config.json", "toy-mean.png", "toy-mean.svg"):
        assert (d / name).is_file(), name
    with open(d / "results.csv") as fh:
        table = list(csv.reader(fh))
    assert tuple(table[0]) == COLUMNS
    body = [dict(zip(COLUMNS, r, strict=True)) for r in table[1:]]
    sim = [r for r in body if r["kind"] == "simulation"]
    assert [(r["x"], r["seed"]) for r in sim][::2] == [
        (repr(float(n)), str(s)) for n in (200, 800, 3200) for s in range(2)]
    assert all(r["seed"] == "" for r in body if r["kind"] == "theory")
    assert len(body) - len(sim) == 6

    # The stored numbers come back from the CSV bit for bit.
    with Store(base / STORE_NAME) as st:
        stored = st.units("toy-mean", out.spec.config_hash)
    res = read_results(d / "results.csv")
    for (kj, s), rows in stored.items():
        n = json.loads(kj)["n"]
        for r in rows:
            assert res.value("mc", r["metric"], n, seed=s) == r["value"]

    # The verdict recomputed independently from the CSV: pooled estimate at the largest n.
    vals = [float(r["value"]) for r in sim
            if r["metric"] == "second_moment" and float(r["x"]) == 3200]
    measured = sum(vals) / 2
    tol = 4 * math.sqrt(2) / math.sqrt(3200 * 2)
    (claim,) = json.loads((d / "claims.json").read_text())
    assert claim["measured"] == measured and claim["tolerance"] == tol
    assert claim["held"] == (abs(measured - 1.0) <= tol) == out.claims[0].held
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["status"] == "complete" and cfg["params"]["ns"] == [200, 800, 3200]
    assert set(cfg["versions"]) == {"python", "torch", "numpy", "scipy", "lazylab"}

    shifted = run(spec_of(toy, seeds=2, shift="1.0"), tmp_path_factory.mktemp("shifted"))
    assert not shifted.claims[0].held  # 1 is ~ 70 standard errors away from the estimate


def test_interrupted_then_resumed_is_bitwise_identical(toy, reference, tmp_path):
    ref, ref_out = reference
    assert ref_out.computed == 6
    spec = spec_of(toy, seeds=2)
    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path / "cut", progress=StopAfter(4))
    with Store(tmp_path / "cut" / STORE_NAME) as st:
        assert len(st.done("toy-mean", spec.config_hash)) == 4
    cfg = json.loads((tmp_path / "cut" / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "interrupted"
    ToyMean.calls = 0
    out = run(spec, tmp_path / "cut", resume=True)
    assert (ToyMean.calls, out.computed, out.reused) == (2, 2, 4)
    assert (tmp_path / "cut" / "toy-mean" / "results.csv").read_bytes() == ref

    # More seeds on resume: only the new seed index is computed.
    ToyMean.calls = 0
    more = run(spec_of(toy, seeds=3), tmp_path / "cut", resume=True)
    assert (ToyMean.calls, more.reused) == (3, 6)


def test_unit_failure_keeps_finished_units(toy, tmp_path):
    spec = spec_of(toy, seeds=2)
    ToyMean.fail_on_call = 3
    with pytest.raises(UnitFailed, match="training diverged") as info:
        run(spec, tmp_path)
    assert '{"n":800}' in str(info.value) and "seed index 0" in str(info.value)
    with Store(tmp_path / STORE_NAME) as st:
        assert st.done("toy-mean", spec.config_hash) == {('{"n":200}', 0), ('{"n":200}', 1)}


def test_resume_with_another_configuration_is_refused(toy, reference, monkeypatch):
    base = reference[1].exp_dir.parent
    with Store(base / STORE_NAME) as st:
        check_resume(st, spec_of(toy, seeds=5), base)  # more seeds: same configuration
        with pytest.raises(InputError, match=r"changed: d 3 -> 4, sigma 1.0 -> 2.0"):
            check_resume(st, spec_of(toy, sigma="2", d="4"), base)
        # A change to the experiment's source, or to torch's version, is refused too.
        real_code = ToyMean.code_identity()
        edited = {**real_code, "toy_experiment": {"toy_experiment.py": "edited"}}
        monkeypatch.setattr(ToyMean, "code_identity", classmethod(lambda cls: edited))
        with pytest.raises(InputError, match=r"plugin toy_experiment source changed "
                                             r"\(toy_experiment\.py\)"):
            check_resume(st, spec_of(toy), base)
        monkeypatch.undo()
        import lazylab.runner.spec as spec_mod

        real = spec_mod.package_versions
        monkeypatch.setattr(spec_mod, "package_versions",
                            lambda: {**real(), "torch": "9.9.9"})
        with pytest.raises(InputError, match=r"torch .* -> 9.9.9"):
            check_resume(st, spec_of(toy), base)


def test_code_version_hashes_the_module_source(toy):
    import inspect

    v = ToyMean.code_version()
    assert len(v) == 16 and v == ToyMean.code_version()
    src = inspect.getfile(ToyMean)
    assert src.endswith("toy_experiment.py")
    from lazylab.experiments import get_experiment

    # Every built-in experiment runs lazylab's code: they share one code identity, and a
    # plugin adds its own module's hash to it.
    a, b = get_experiment("arora-spectrum"), get_experiment("nichani-taylor")
    assert type(a).code_version() == type(b).code_version() != v
    assert set(ToyMean.code_identity()) == {"lazylab", "toy_experiment"}
    assert set(type(a).code_identity()) == {"lazylab"}


def test_two_workers_match_one(toy, reference, tmp_path):
    out = run(spec_of(toy, seeds=2), tmp_path, workers=2)
    assert out.computed == 6 and ToyMean.calls == 0  # all computed in the worker processes
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference[0]


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="ray is installed")
def test_ray_backend_without_ray_says_how_to_install(toy):
    spec = spec_of(toy, seeds=1)
    with pytest.raises(InputError, match=r"pip install 'lazylab\[ray\]'"):
        list(execute(spec, plan_groups(spec), backend="ray"))


def test_set_values_are_coerced_and_validated(toy):
    p = spec_of(toy, ns="10, 20,30", estimator="centered", data_path="none", sigma="0.5").params
    assert p.ns == [10, 20, 30] and p.estimator == "centered" and p.data_path is None
    assert p.sigma == 0.5
    cases = {
        ("d", "1"): "--set d=1: d must be >= 2 (toy-mean)",
        ("sigma", "-1"): "--set sigma=-1: sigma must be > 0",
        ("estimator", "fancy"): "estimator must be 'plain' or 'centered'",
        ("ns", "10,x"): "ns[1] must be an integer",
        ("ns", ""): "ns must have at least 1 item",
        ("d", "two"): "d must be an integer (allowed: >= 2)",
    }
    for (k, v), msg in cases.items():
        with pytest.raises(InputError) as info:
            spec_of(toy, **{k: v})
        assert msg in str(info.value), (k, v, str(info.value))


def test_arora_spectrum_results_do_not_depend_on_workers(tmp_path):
    """Issue 12 item 1: one fixed thread policy in the main process and in every worker, so 1
    and 2 workers, and a resume with one unit pending (run in the main process), agree to the
    byte."""
    from lazylab.experiments import get_experiment
    from lazylab.runner import ExecutionPolicy

    exp = get_experiment("arora-spectrum")
    policy = ExecutionPolicy(threads=2)
    spec = resolve_spec(exp, "quick", {}, None, CPU, policy)
    csvs = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        assert run(spec, out, workers=workers).spec.policy.threads == 2
        csvs.append((out / exp.id / "results.csv").read_bytes())
    assert csvs[0] == csvs[1]
    out = tmp_path / "w2"
    with Store(out / STORE_NAME) as st:
        (last,) = [max(st.done(exp.id, spec.config_hash))]
        assert st.delete_units(exp.id, {last}) == 1
    resumed = run(spec, out, workers=2, resume=True)
    assert (resumed.computed, resumed.reused) == (1, len(plan_units(spec)) - 1)
    assert (out / exp.id / "results.csv").read_bytes() == csvs[0]
    cfg = json.loads((out / exp.id / "config.json").read_text())
    assert cfg["policy"] == {"threads": 2, "deterministic": True, "allow_tf32": False,
                             "memory_budget": None, "blas_threads": 2}


def test_prepare_runs_once_and_reaches_units_and_theory(toy, reference, tmp_path, monkeypatch):
    """An experiment overriding ``prepare`` gets its output as ``prep=`` in every unit (also in
    pool workers, shipped once through the initializer) and in ``theory``."""
    seen = {"prepare": 0}

    def prepare(self, p, device):
        seen["prepare"] += 1
        return {"offset": 0.0, "token": "prepared"}

    def run_unit(self, p, key, seed, device, prep=None):
        assert prep == {"offset": 0.0, "token": "prepared"}
        return ToyMean._orig_run_unit(self, p, key, seed, device)

    def theory(self, p, prep=None):
        assert prep["token"] == "prepared"
        return ToyMean._orig_theory(self, p)

    monkeypatch.setattr(ToyMean, "_orig_run_unit", ToyMean.run_unit, raising=False)
    monkeypatch.setattr(ToyMean, "_orig_theory", ToyMean.theory, raising=False)
    monkeypatch.setattr(ToyMean, "prepare", prepare)
    monkeypatch.setattr(ToyMean, "run_unit", run_unit)
    monkeypatch.setattr(ToyMean, "theory", theory)
    out = run(spec_of(toy, seeds=2), tmp_path)
    assert seen["prepare"] == 1 and out.computed == 6
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference[0]


def test_registration_refuses_methods_without_prep():
    """The runner always passes ``prep=``: an experiment whose ``run_unit``, ``run_group`` or
    ``theory`` cannot take it is refused when it registers, with the fix in the message."""
    from lazylab.experiments import REGISTRY, register

    for name in ("run_unit", "run_group", "theory"):
        def without_prep(self, p, *args):
            return []

        exp_id = f"no-prep-{name.replace('_', '-')}"  # ids are lower-case slugs
        cls = type(f"NoPrep{name}", (ToyMean,), {"id": exp_id, name: without_prep})
        with pytest.raises(TypeError, match=rf"NoPrep{name}\.{name} must accept the keyword "
                                            r"argument prep"):
            register(cls)
        assert exp_id not in REGISTRY


def test_validate_refuses_before_the_store_is_touched(toy, tmp_path, monkeypatch):
    def validate(self, p):
        if p.d > 10:
            raise InputError("--set d: must be <= 10 for this toy")

    monkeypatch.setattr(ToyMean, "validate", validate)
    with pytest.raises(InputError, match="--set d: must be <= 10"):
        spec_of(toy, d="11")
    assert not (tmp_path / STORE_NAME).exists()


def test_a_failing_unit_in_the_pool_keeps_finished_units(toy, tmp_path):
    spec = spec_of(toy, seeds=2, fail_n="3200")
    with pytest.raises(UnitFailed, match=r'unit \{"n":3200\} \(seed index \d\) failed: '
                                         r"RuntimeError: training diverged at n=3200"):
        run(spec, tmp_path, workers=2)
    with Store(tmp_path / STORE_NAME) as st:
        done = st.done("toy-mean", spec.config_hash)
    assert {('{"n":200}', 0), ('{"n":200}', 1), ('{"n":800}', 0), ('{"n":800}', 1)} <= done
    assert not any(k == '{"n":3200}' for k, _ in done)
    cfg = json.loads((tmp_path / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "failed"


def test_ctrl_c_in_the_pool_stops_workers_and_resumes_identically(toy, reference, tmp_path):
    spec = spec_of(toy, seeds=2)
    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path, workers=2, progress=StopAfter(2))
    cfg = json.loads((tmp_path / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "interrupted"
    import multiprocessing

    assert not [c for c in multiprocessing.active_children() if c.is_alive()]
    with Store(tmp_path / STORE_NAME) as st:
        assert len(st.done("toy-mean", spec.config_hash)) >= 2
    out = run(spec, tmp_path, workers=2, resume=True)
    assert out.computed + out.reused == 6
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference[0]


def test_a_broken_figure_does_not_fail_the_run(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(ToyMean, "plot", lambda *a, **k: None)
    spec = spec_of(toy, seeds=1)
    with pytest.warns(RuntimeWarning, match="plot must return a matplotlib Figure"):
        out = run(spec, tmp_path)
    assert out.claims and (tmp_path / "toy-mean" / "claims.json").is_file()
    cfg = json.loads((tmp_path / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "complete"


@pytest.mark.parametrize("broken", ["claims", "theory"])
def test_assembly_errors_keep_units_and_name_the_step(toy, tmp_path, monkeypatch, broken):
    def boom(self, *a, **k):
        raise ValueError(f"{broken} broke")

    monkeypatch.setattr(ToyMean, broken, boom)
    spec = spec_of(toy, seeds=1)
    msg = f"{broken} broke"
    with pytest.raises(UnitFailed, match=f"assembling the results failed: .*{msg}"):
        run(spec, tmp_path)
    with Store(tmp_path / STORE_NAME) as st:
        assert len(st.done("toy-mean", spec.config_hash)) == 3  # every unit kept
    cfg = json.loads((tmp_path / "toy-mean" / "config.json").read_text())
    assert cfg["status"] == "failed"
    monkeypatch.undo()
    out = run(spec, tmp_path, resume=True)  # fixed: assembles from the store, computes nothing
    assert out.computed == 0 and out.reused == 3


def test_backends_are_registered_by_name(monkeypatch):
    """make_backend looks the name up in the registry: the built-ins, and one a user adds."""
    from lazylab.errors import InputError
    from lazylab.runner import backends
    from lazylab.runner.pool import PoolBackend
    from lazylab.runner.serial import SerialBackend

    assert isinstance(backends.make_backend("local", 1), SerialBackend)
    assert isinstance(backends.make_backend("local", 3, n_pending=5), PoolBackend)
    assert isinstance(backends.make_backend("local", 3, n_pending=1), SerialBackend)
    monkeypatch.setattr(backends, "_FACTORIES", dict(backends._FACTORIES))
    made = []
    backends.register_backend("mine", lambda w, a, n: made.append((w, a, n)) or
                              SerialBackend())
    assert isinstance(backends.make_backend("mine", 2, "addr", 7), SerialBackend)
    assert made == [(2, "addr", 7)]
    with pytest.raises(InputError, match="one of local, serial, pool, ray, mine"):
        backends.check_backend("nope")
