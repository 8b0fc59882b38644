"""Nothing is written outside the output folder: the registry refuses ids that are not slugs,
repeated unit keys, a plugin reusing a built-in id and an entry-point name other than the class
id, each with one line naming the plugin; a refused plugin leaves the others usable.

Plugins are fake entry points (``plugin_entry_points`` monkeypatched), not installed packages.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import lazylab.experiments as registry
from lazylab.errors import InputError
from lazylab.experiments import Experiment, register
from lazylab.experiments.grid_check import check_scales, check_unit_keys, duplicate_unit_keys
from lazylab.ids import id_problem
from lazylab.runner.lock import RunLock, lock_path
from toy_experiment import ToyMean, cli


class FakeDist:
    name = "toy-plugin-dist"


class FakeEntryPoint:
    """An entry point of group ``lazylab.experiments`` whose ``load`` returns ``obj`` (or calls
    it, for a module-style plugin that registers experiments when imported)."""

    def __init__(self, name: str, obj: Any, *, module: bool = False):
        self.name, self.obj, self.module = name, obj, module
        self.value = f"toy_plugin:{name}"
        self.dist = FakeDist()

    def load(self) -> Any:
        if self.module:
            self.obj()
            return object()  # the imported module: not an Experiment
        return self.obj


def toy_class(exp_id: str, **attrs: Any) -> type[Experiment]:
    """A subclass of the toy experiment with another id (and optional overrides)."""
    return type("Toy_" + exp_id.replace("-", "_").replace("/", "_").replace(".", "_"),
                (ToyMean,), {"id": exp_id, **attrs})


@pytest.fixture
def plugins(monkeypatch):
    """Install fake plugins: ``plugins(ep, ...)`` loads them into a copy of the registry (the
    built-in experiments stay), and returns :data:`REFUSED`."""
    registry.all_experiments()  # the built-in experiments (and installed plugins) loaded
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    monkeypatch.setattr(registry, "REFUSED", {})

    def install(*eps: FakeEntryPoint) -> dict[str, str]:
        monkeypatch.setattr(registry, "plugin_entry_points", lambda: list(eps))
        monkeypatch.setattr(registry, "_loaded", False)
        with pytest.warns(registry.PluginWarning) if any(_bad(ep) for ep in eps) else _nothing():
            registry.all_experiments()
        return registry.REFUSED

    return install


def _bad(ep: FakeEntryPoint) -> bool:
    return ep.name not in ("good-one", "good-paper")


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# ---- ids ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["..", ".", "a/b", "../x", "A-b", "a--b", "-a", "a-", "", "a b",
                                 "a_b", "é", "a" * 65])
def test_id_problem_refuses_what_is_not_a_slug(bad):
    assert id_problem(bad) is not None


@pytest.mark.parametrize("good", ["a", "bailee-xor", "ghorbani-qf-width", "x2-y3", "a" * 64])
def test_id_problem_accepts_slugs(good):
    assert id_problem(good) is None


@pytest.fixture
def scratch_registry(monkeypatch):
    """A copy of the loaded registry, so that a test's registrations do not outlive it."""
    registry.all_experiments()
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))


def test_register_refuses_a_bad_builtin_style_id(scratch_registry):
    for bad in ("..", "a/b", "Toy"):
        with pytest.raises(ValueError, match="not a lower-case slug"):
            register(toy_class(bad))
        assert bad not in registry.REGISTRY


def test_register_refuses_a_builtin_id(scratch_registry):
    with pytest.raises(ValueError, match=r"duplicate experiment id 'bailee-xor' \(a built-in"):
        register(toy_class("bailee-xor"))


def test_lock_path_refuses_ids_that_leave_the_folder(tmp_path):
    for bad in ("..", "a/b", "../../etc"):
        with pytest.raises(InputError, match="not a lower-case slug"):
            lock_path(tmp_path, bad)
    assert list(tmp_path.iterdir()) == []


# ---- plugins --------------------------------------------------------------------------------
@pytest.mark.parametrize("name,obj,why", [
    ("dotdot", toy_class(".."), "experiment id '..' is not a lower-case slug"),
    ("a-b", toy_class("a/b"), "experiment id 'a/b' is not a lower-case slug"),
    ("bailee-xor", toy_class("bailee-xor"), "duplicate experiment id 'bailee-xor' (a built-in"),
    ("other-name", toy_class("toy-plugin"), "entry-point name must be the experiment id "
                                            "'toy-plugin'"),
    ("Bad_Name", toy_class("bad-name"), "entry-point name 'Bad_Name' is not a lower-case slug"),
    ("toy-dup", toy_class("toy-dup", units=lambda self, p: [{"n": 1}, {"n": 2}, {"n": 1}]),
     """units() at scale 'quick' repeats the unit key(s) {"n":1}"""),
])
def test_a_refused_plugin_is_named_in_one_line(plugins, name, obj, why):
    before = set(registry.REGISTRY)
    refused = plugins(FakeEntryPoint(name, obj))
    assert list(refused) == [name]
    line = refused[name]
    assert "\n" not in line and why in line, line
    assert line.startswith(f"lazylab plugin {name!r} (toy_plugin:{name}, distribution "
                           "toy-plugin-dist) refused: "), line
    assert set(registry.REGISTRY) == before  # nothing of it registered
    assert registry.REGISTRY["bailee-xor"].__class__.__name__ != obj.__name__
    if name == "bailee-xor":  # the name still means the built-in experiment
        registry.check_targets([name])
    else:
        with pytest.raises(InputError, match="refused"):
            registry.check_targets([name])
    with pytest.raises(InputError, match="`all` includes it"):
        registry.check_targets(["all"])


def test_a_module_plugin_that_fails_midway_leaves_nothing_registered(plugins):
    def import_module() -> None:
        register(toy_class("toy-first"))
        register(toy_class(".."))

    refused = plugins(FakeEntryPoint("toy", import_module, module=True))
    assert "experiment id '..' is not a lower-case slug" in refused["toy"]
    assert "toy-first" not in registry.REGISTRY


def test_a_module_plugin_must_be_named_by_its_paper_key_or_an_id(plugins):
    refused = plugins(FakeEntryPoint("wrong", lambda: register(toy_class("toy-second")),
                                     module=True))
    assert "entry-point name must be the paper key or an id" in refused["wrong"]
    assert "toy-second" not in registry.REGISTRY


def test_good_plugins_register_beside_a_refused_one(plugins):
    refused = plugins(FakeEntryPoint("good-one", toy_class("good-one")),
                      FakeEntryPoint("good-paper", lambda: register(toy_class(
                          "good-two", paper="good-paper")), module=True),
                      FakeEntryPoint("dotdot", toy_class("..")))
    assert list(refused) == ["dotdot"]
    assert {"good-one", "good-two", "bailee-xor"} <= set(registry.REGISTRY)
    registry.check_targets(["good-one", "good-paper", "bailee-xor"])  # unaffected
    with pytest.raises(InputError) as e:
        registry.check_targets(["bailee-xor", "dotdot"])
    assert str(e.value) == refused["dotdot"]
    with pytest.raises(InputError, match="`all` includes it"):
        registry.check_targets(["all"])


def test_list_still_works_and_asking_for_the_refused_plugin_exits_2(plugins):
    plugins(FakeEntryPoint("dotdot", toy_class("..")))
    res = cli("list")
    assert res.exit_code == 0 and "bailee-xor" in res.stdout, res.output
    res = cli("show", "dotdot")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output


def test_no_plugin_refused_by_default():
    assert registry.refused_plugins() == {}


# ---- unit keys ------------------------------------------------------------------------------
def test_duplicate_unit_keys_are_canonical():
    assert duplicate_unit_keys([{"a": 1, "b": 2}, {"b": 2, "a": 1}]) == ['{"a":1,"b":2}']
    assert duplicate_unit_keys([{"n": 1}, {"n": 1.0}]) == []  # JSON tells 1 and 1.0 apart
    with pytest.raises(ValueError, match="repeats the unit key"):
        check_unit_keys("x", [{"n": 1}, {"n": 1}])


def test_every_builtin_grid_has_distinct_keys_at_every_scale():
    builtin = [e for e in registry.all_experiments() if e.paper in registry.PAPERS]
    assert len(builtin) >= 22
    for exp in builtin:
        check_scales(exp)


# ---- the lock -------------------------------------------------------------------------------
def test_a_hard_linked_lock_is_refused_and_the_victim_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious data\n")
    out = tmp_path / "out"
    out.mkdir()
    os.link(victim, lock_path(out, "toy-mean"))
    with pytest.raises(InputError, match="has 2 hard links"):
        with RunLock(out, "toy-mean"):
            pass
    assert victim.read_bytes() == b"precious data\n"


def test_reproduce_refuses_a_hard_linked_lock(tmp_path, toy):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious data\n")
    out = tmp_path / "out"
    out.mkdir()
    os.link(victim, out / ".toy-mean.lock")
    res = cli("reproduce", "toy-mean", "--out", str(out), "--set", "ns=200")
    assert res.exit_code == 2, res.output
    assert "hard links" in res.output and "Traceback" not in res.output
    assert victim.read_bytes() == b"precious data\n"
    assert not (out / "toy-mean" / "results.csv").exists()


def test_the_lock_keeps_a_plain_file_working(tmp_path):
    path: Path = lock_path(tmp_path, "toy-mean")
    path.write_text("stale 123\n")
    with RunLock(tmp_path, "toy-mean"):
        assert path.read_text() == f"{os.getpid()}\n"
    assert path.read_text() == ""


def test_an_id_that_bypassed_registration_never_reaches_the_disk(tmp_path, monkeypatch):
    """Registration refuses ``..``; an experiment put into the registry directly is refused
    by the run lock, before the output folder or anything beside it is written."""
    registry.all_experiments()
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    registry.REGISTRY[".."] = toy_class("..")()
    out = tmp_path / "parent" / "out"
    out.mkdir(parents=True)
    res = cli("reproduce", "..", "--out", str(out), "--set", "ns=200")
    assert res.exit_code == 2 and "not a lower-case slug" in res.stderr, res.output
    assert "Traceback" not in res.output
    assert sorted(p.name for p in (tmp_path / "parent").iterdir()) == ["out"]
    assert [p.name for p in out.iterdir() if p.name != "lazylab.sqlite"] == []


def test_is_held_sees_another_holder_and_writes_nothing(tmp_path):
    """The report's check of a running writer opens the lock read-only: a hard-linked lock
    file is not altered, and a lock held by another process is seen as held."""
    import subprocess
    import sys

    from lazylab.runner.lock import is_held

    assert not is_held(tmp_path, "toy-mean")  # no lock file: nothing created
    assert list(tmp_path.iterdir()) == []
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious data\n")
    os.link(victim, lock_path(tmp_path, "toy-mean"))
    assert not is_held(tmp_path, "toy-mean")
    assert victim.read_bytes() == b"precious data\n"
    lock_path(tmp_path, "toy-mean").unlink()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from lazylab.runner.lock import RunLock\n"
         f"with RunLock(Path({str(tmp_path)!r}), 'toy-mean'):\n"
         "    print('locked', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"  # handshake: no sleep
        assert is_held(tmp_path, "toy-mean")
    finally:
        holder.communicate("\n", timeout=300)
    assert not is_held(tmp_path, "toy-mean")


def test_reproduce_all_with_a_refused_plugin_exits_2_naming_it(plugins, tmp_path):
    refused = plugins(FakeEntryPoint("dotdot", toy_class("..")))
    res = cli("reproduce", "all", "--out", str(tmp_path))
    assert res.exit_code == 2, res.output
    assert refused["dotdot"] in " ".join(res.output.split())
    assert not any(tmp_path.iterdir())  # refused before anything was written
    res = cli("show", "dotdot")
    assert res.exit_code == 2 and "refused" in res.output


def test_a_set_value_that_repeats_a_unit_key_is_refused_before_compute(tmp_path):
    res = cli("reproduce", "bailee-generalization", "--out", str(tmp_path), "--set",
              "dists=sphere,sphere", "--set", "ds=8,12,16")
    assert res.exit_code == 2, res.output
    assert "repeats the unit key" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "bailee-generalization" / "results.csv").exists()
