"""Batched groups in the runner and --max-time, on the toy experiment: membership is a function
of the parameters, a resumed or time-limited run is byte-identical to an uninterrupted one,
and workers do not change the numbers."""

from __future__ import annotations

import pytest
import torch

from lazylab.errors import OutOfTime
from lazylab.runner import plan_groups, plan_units, resolve_spec, run_experiment
from lazylab.runner.job import Clock
from lazylab.store import STORE_NAME, Store
from toy_experiment import ToyMean, cli

CPU = torch.device("cpu")
NS = "100,200,300,400,500"



pytestmark = pytest.mark.usefixtures("toy_hooks")


def spec_of(exp, seeds: int = 2, **sets: str):
    return resolve_spec(exp, "quick", {"ns": NS, "groups": "2", **sets}, seeds, CPU)


def run(spec, out, **kw):
    with Store(out / STORE_NAME) as store:
        return run_experiment(spec, out, store, **kw)


@pytest.fixture(scope="module")
def reference(toy, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    run(spec_of(toy), out)
    return (out / "toy-mean" / "results.csv").read_bytes()


def test_groups_follow_the_parameters(toy):
    spec = spec_of(toy, seeds=2)
    groups = plan_groups(spec)
    # ns 100..500 in pairs (g0, g1, g2 with one member), each at seed index 0 and 1.
    assert [(g.label, g.seed_index, [u.key["n"] for u in g.units]) for g in groups] == [
        ("g0", 0, [100, 200]), ("g0", 1, [100, 200]), ("g1", 0, [300, 400]),
        ("g1", 1, [300, 400]), ("g2", 0, [500]), ("g2", 1, [500])]
    assert sorted((u.key_json, u.seed_index) for g in groups for u in g.units) == sorted(
        (u.key_json, u.seed_index) for u in plan_units(spec))
    # The group seed depends on the label and seed index only, not on what else runs.
    fewer = plan_groups(spec, [u for u in plan_units(spec) if u.key["n"] != 100])
    assert {(g.label, g.seed_index): g.seed for g in fewer} == {
        (g.label, g.seed_index): g.seed for g in groups}
    assert len({g.seed for g in groups}) == len(groups)
    alone = plan_groups(resolve_spec(toy, "quick", {"ns": NS}, 1, CPU))
    assert all(g.label is None and len(g.units) == 1 for g in alone)


def test_a_group_is_one_call(toy, tmp_path, reference):
    out = run(spec_of(toy), tmp_path)
    assert (out.computed, ToyMean.group_calls) == (10, 6)
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference


class StopAfter:
    """Interrupts the run (like Ctrl-C) after k stored units."""

    def __init__(self, k: int):
        self.k, self.seen = k, 0

    def started(self, spec, pending, total):
        pass

    def unit_done(self, spec, unit):
        self.seen += 1
        if self.seen == self.k:
            raise KeyboardInterrupt


def test_resume_inside_a_group_recomputes_it_and_stores_the_rest(toy, tmp_path, reference):
    spec = spec_of(toy)
    with pytest.raises(KeyboardInterrupt):
        run(spec, tmp_path, progress=StopAfter(1))  # one member of group g0 is stored
    ToyMean.group_calls = 0
    out = run(spec, tmp_path, resume=True)
    assert (out.computed, out.reused) == (9, 1)
    assert ToyMean.group_calls == 6  # g0 at seed 0 ran again, as a whole group
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference


def test_two_workers_match_one(toy, tmp_path, reference):
    out = run(spec_of(toy), tmp_path, workers=2)
    assert out.computed == 10 and ToyMean.group_calls == 0  # computed in the workers
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference


class VirtualTime:
    """A clock that only the toy's ``sleep`` advances: the runner's deadline arithmetic runs
    on it, so where a run stops does not depend on the machine's speed or load."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_max_time_stops_between_groups_and_resume_finishes(toy, tmp_path, reference,
                                                           monkeypatch):
    import toy_experiment
    from lazylab.runner import job, serial

    clock = VirtualTime()
    for module in (job, serial, toy_experiment):
        monkeypatch.setattr(module, "time", clock)
    spec = spec_of(toy, sleep="0.5")
    # The cost model's prior (0.17 s a unit) lets the first group start; it takes 1 s (two
    # units of 0.5 s), which leaves no room for a second one within 1.5 s.
    with pytest.raises(OutOfTime) as err:
        run(spec, tmp_path, deadline=clock.monotonic() + 1.5)
    assert clock.now == 1001.0  # exactly one group of two units ran
    assert err.value.exit_code == 3 and "--resume" in str(err.value)
    with Store(tmp_path / STORE_NAME) as st:
        assert st.count("toy-mean") == 2
    out = run(spec, tmp_path, resume=True)
    assert (out.computed, out.reused) == (8, 2)
    # sleep does not change the numbers: the same table as the uninterrupted reference
    assert (tmp_path / "toy-mean" / "results.csv").read_bytes() == reference


def test_clock_uses_the_prior_then_the_slowest_measured_rate(toy, monkeypatch):
    from lazylab.runner import job

    monkeypatch.setattr(job, "time", VirtualTime())  # no real time passes between the lines
    g = plan_groups(spec_of(toy))[0]  # two units
    now = job.time.monotonic()
    assert Clock(None).fits(g)
    assert not Clock(now + 10, prior=6.0).fits(g)  # 12 s expected > 10 s left
    c = Clock(now + 10, prior=6.0)
    c.seen(g, 2.0)  # measured 1 s per unit replaces the prior
    assert c.fits(g)
    c.seen(g, 30.0)
    assert not c.fits(g)
    assert not Clock(now - 1).fits(g)


def test_cli_max_time(toy, tmp_path, monkeypatch):
    """Exit 3 after progress: the first unit (0.5 s by the cost model) starts; it takes 6 s,
    so the second (6 s measured) does not fit in the 10 s budget; --resume finishes. The
    command's clock is virtual (the units' sleeps advance it), so load cannot move the stop."""
    import toy_experiment
    from lazylab import cli as cli_module
    from lazylab.runner import job, serial

    clock = VirtualTime()
    for module in (cli_module, job, serial, toy_experiment):
        monkeypatch.setattr(module, "time", clock)
    out = str(tmp_path / "o")
    args = ("reproduce", "toy-mean", "--set", "ns=200,800", "--set", "sleep=6", "--seeds",
            "1", "--out", out)
    r = cli(*args, "--max-time", "10s")
    assert r.exit_code == 3, r.output
    assert "--resume" in r.output
    with Store(tmp_path / "o" / STORE_NAME) as st:
        assert st.count("toy-mean") == 1
    r = cli(*args, "--resume", "--max-time", "1h")
    assert r.exit_code == 0, r.output
    for bad in ("abc", "0", "-5m", "9x", "0.1s"):
        r = cli("reproduce", "toy-mean", "--out", out, "--max-time", bad)
        assert r.exit_code == 2 and "--max-time" in r.output, (bad, r.output)
