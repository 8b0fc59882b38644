"""One path per run: the grid and the cost are computed once and passed on, several experiments
run through ``run_many`` (whose summary holds the exit-code policy), and the TF32 switch has one
spelling with documented aliases (issue 50, items 2 and 3)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from lazylab.errors import InputError, OutOfTime, UnitFailed
from lazylab.runner import (
    ExecutionPolicy,
    RunSummary,
    check_precision,
    resolve_spec,
    run_many,
)
from lazylab.runner.params import with_precision
from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean, cli

CPU = torch.device("cpu")


@pytest.fixture
def counted(toy, monkeypatch):
    """Count ``units`` calls per parameter object and ``cost`` calls of the toy experiment."""
    units: Counter[int] = Counter()
    costs: list[int] = []
    real_units, real_cost = ToyMean.units, ToyMean.cost

    def count_units(self, p):
        units[id(p)] += 1
        return real_units(self, p)

    def count_cost(self, p, scale="quick"):
        costs.append(id(p))
        return real_cost(self, p, scale)

    monkeypatch.setattr(ToyMean, "units", count_units)
    monkeypatch.setattr(ToyMean, "cost", count_cost)
    return units, costs


def test_a_reproduce_run_computes_its_grid_and_its_cost_once(counted, tmp_path):
    """Validation, the cost guard, the --max-time pre-check and clock, the GPU reservation,
    planning and assembling all read the one grid and the one cost of the run."""
    units, costs = counted
    res = cli("reproduce", "toy-mean", "--set", "ns=100,200,300", "--out", str(tmp_path),
              "--max-time", "1h")
    assert res.exit_code == 0, res.output
    assert len(costs) == 1, costs
    run_p = costs[0]
    assert units[run_p] == 1, units  # the run's own parameters: one grid
    # every other call prices the anchor (the scale's defaults), once
    assert sum(units.values()) - units[run_p] <= 1, units


def test_resolve_spec_keeps_the_grid_it_validated(counted):
    units, _ = counted
    spec = resolve_spec(ToyMean(), "quick", {"ns": "5,6"}, 1, CPU)
    assert spec.unit_keys == [{"n": 5}, {"n": 6}]
    spec.seed_cost  # noqa: B018 (priced once, from the grid it holds)
    spec.seed_cost  # noqa: B018
    assert units[id(spec.params)] == 1


def _specs(toy, *changes: dict[str, str]):
    return [resolve_spec(toy, "quick", c, 1, CPU, ExecutionPolicy(threads=1)) for c in changes]


def test_run_many_runs_on_after_a_failure_and_sums_up(toy, tmp_path):
    """A failing experiment ends only itself: the next one runs, ``on_done`` hears both in
    order, and the summary's exit code is the failure's."""
    seen = []
    specs = _specs(toy, {"ns": "100,200", "fail_n": "200"}, {"ns": "100,200"})
    with Store(tmp_path / STORE_NAME) as store:
        summary = run_many(specs, tmp_path, store, fresh=True,
                           on_done=lambda spec, r: seen.append(type(r).__name__))
    assert seen == ["UnitFailed", "RunOutcome"]
    assert [type(e) for e in summary.failures] == [UnitFailed]
    assert len(summary.outcomes) == 1 and not summary.stopped
    assert summary.computed == 1 + 2  # the failed run's first unit, then both of the second
    assert summary.exit_status() == (1, [])


def test_run_many_strict_fails_on_a_failed_claim(toy, tmp_path):
    specs = _specs(toy, {"ns": "100,200", "shift": "100"})
    with Store(tmp_path / STORE_NAME) as store:
        summary = run_many(specs, tmp_path, store)
    assert any(c.failed for c in summary.outcomes[0].claims)
    assert summary.exit_status() == (0, [])
    assert summary.exit_status(strict=True) == (1, ["--strict: at least one claim failed"])


def test_the_exit_policy_of_stopped_runs():
    """Stopped with progress: 3 and the --resume advice; without any unit computed: 2 (the
    same command would never progress); a failure's code wins over a stop."""
    stop = OutOfTime("toy-mean: --max-time reached")
    code, lines = RunSummary(stopped=[stop], computed=2).exit_status()
    assert code == 3 and lines == ["--max-time: 1 experiment(s) not finished; rerun the same "
                                   "command with --resume to carry on"]
    code, lines = RunSummary(stopped=[stop]).exit_status(max_time="10s")
    assert code == 2 and len(lines) == 1 and lines[0].startswith("--max-time 10s: no unit fitted")
    fail = UnitFailed("toy-mean: unit failed")
    assert RunSummary(failures=[fail], stopped=[stop]).exit_status() == (1, [])


@pytest.mark.parametrize(("precision", "allow_tf32", "want"), [
    ("auto", False, "auto"), ("fp32", False, "fp32"), ("tf32", False, "tf32"),
    ("auto", True, "tf32"), ("tf32", True, "tf32"),
])
def test_precision_has_one_spelling(precision, allow_tf32, want):
    assert check_precision(precision, allow_tf32=allow_tf32) == want


def test_precision_aliases_that_contradict_are_refused():
    with pytest.raises(InputError, match="--allow-tf32 and --precision fp32 exclude each other"):
        check_precision("fp32", allow_tf32=True)
    with pytest.raises(InputError, match="--precision must be one of auto, fp32, tf32"):
        check_precision("bf16")


def test_the_policy_alias_asks_for_tf32_on_a_gpu_only():
    class Silent:
        precision: dict[str, str] = {}

    pol = ExecutionPolicy(threads=1, allow_tf32=True)
    assert with_precision(pol, Silent, "quick", torch.device("cuda"), "auto").allow_tf32
    assert not with_precision(pol, Silent, "quick", CPU, "auto").allow_tf32


def test_the_cli_refuses_contradicting_precision_spellings(toy, tmp_path):
    for cmd in ("reproduce", "robustness"):
        res = cli(cmd, "toy-mean", "--precision", "fp32", "--allow-tf32", "--out",
                  str(tmp_path))
        assert res.exit_code == 2, res.output
        assert "--allow-tf32 and --precision fp32 exclude each other" in res.stderr


def test_robustness_checks_the_worker_count_as_reproduce_does(toy, tmp_path):
    for cmd in ("reproduce", "robustness"):
        res = cli(cmd, "toy-mean", "--workers", "300", "--out", str(tmp_path))
        assert res.exit_code == 2, res.output
        assert "--workers must be between 1 and 256; got 300" in res.stderr


def test_a_repeated_unit_key_is_refused_before_the_store_changes(toy, tmp_path):
    """``--set ns=100,100`` with ``--fresh`` is refused (exit 2) before the stored units are
    discarded, and before anything is computed."""
    assert cli("reproduce", "toy-mean", "--set", "ns=100,200", "--out", str(tmp_path),
               "--seeds", "1").exit_code == 0
    calls = ToyMean.calls
    res = cli("reproduce", "toy-mean", "--set", "ns=100,100", "--fresh", "--out",
              str(tmp_path))
    assert res.exit_code == 2 and "repeats the unit key" in res.stderr, res.output
    assert ToyMean.calls == calls
    with Store(tmp_path / STORE_NAME) as store:
        assert store.count("toy-mean") == 2
    spec = resolve_spec(toy, "quick", {"ns": "100,100"}, 1, CPU)
    with Store(tmp_path / STORE_NAME) as store, pytest.raises(InputError, match="repeats"):
        run_many([spec], tmp_path, store, fresh=True)
    with Store(tmp_path / STORE_NAME) as store:
        assert store.count("toy-mean") == 2
