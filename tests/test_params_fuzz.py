"""Property tests of the parameter layer: ``--set`` coercion, the canonical unit key, and a
fuzz of ``--set`` keys and values across every registered experiment (exit 2 with one line,
never a traceback)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import lazylab.cli as cli_mod
from lazylab.errors import InputError
from lazylab.experiments import all_experiments
from lazylab.runner import resolve_spec
from lazylab.seeding import canonical_key, derive_seed
from toy_experiment import registered

CPU = torch.device("cpu")
EXPERIMENTS = all_experiments()
FIXTURE_OK = [HealthCheck.function_scoped_fixture]
KEYS = sorted({k for e in EXPERIMENTS for k in e.Params.model_fields})

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
unit_keys = st.dictionaries(st.text(min_size=1, max_size=6), json_scalars, max_size=5)


@pytest.fixture(scope="module")
def toy():
    with registered() as exp:
        yield exp


@given(unit_keys, st.randoms(use_true_random=False), st.integers(0, 10**6))
def test_canonical_key_is_order_free_and_round_trips(key, rnd, s):
    items = list(key.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    assert canonical_key(shuffled) == canonical_key(key)
    assert json.loads(canonical_key(key)) == key
    seed = derive_seed("exp", key, s)
    assert seed == derive_seed("exp", shuffled, s) and 0 <= seed < 2**63
    assert seed != derive_seed("exp", key, s + 1)


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_OK)
@given(ns=st.lists(st.integers(1, 10**6), min_size=1, max_size=6),
       sigma=st.floats(min_value=1e-300, max_value=1e300),
       spaces=st.sampled_from(["", " ", "  "]))
def test_set_coercion_round_trips(toy, ns, sigma, spaces):
    text = ("," + spaces).join(map(str, ns))
    p = resolve_spec(toy, "quick", {"ns": text, "sigma": repr(sigma)}, 1, CPU).params
    assert p.ns == ns and p.sigma == sigma


@settings(max_examples=30, deadline=None, suppress_health_check=FIXTURE_OK)
@given(bad=st.sampled_from(["inf", "-inf", "nan", "NaN", "1e999", "-1e999", "Infinity"]),
       key=st.sampled_from(["sigma", "shift"]))
def test_non_finite_floats_are_refused(toy, bad, key):
    with pytest.raises(InputError, match=f"{key} must be a finite number|{key} must be > 0"):
        resolve_spec(toy, "quick", {key: bad}, 1, CPU)


values = st.one_of(
    st.text(max_size=24),
    st.integers(-10**12, 10**12).map(str),
    st.floats().map(repr),
    st.sampled_from(["inf", "-inf", "nan", "1e308", "-1", "0", "", ",", "1,2,3", "none", "true",
                     "10000000000", "0.5,0.25", "relu", "a=b", "1;rm -rf /", "\u00e9"]),
    st.lists(st.integers(-5, 10**7), min_size=1, max_size=5).map(
        lambda xs: ",".join(map(str, xs))),
)
keys = st.one_of(st.sampled_from(KEYS), st.text(min_size=1, max_size=12))


@settings(max_examples=250, deadline=None)
@given(exp=st.sampled_from(EXPERIMENTS), key=keys, value=values)
def test_fuzzed_set_is_accepted_or_exits_2_with_one_line(exp, key, value, monkeypatch_run):
    res = CliRunner().invoke(cli_mod.app, ["reproduce", exp.id, "--set", f"{key}={value}",
                                           "--yes"], env={"COLUMNS": "200"})
    assert "Traceback" not in res.output
    assert res.exit_code in (0, 2), (exp.id, key, value, res.output)
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    else:  # accepted: the resolved spec reached the run (not computed here)
        assert monkeypatch_run[-1].exp.id == exp.id


@pytest.fixture(scope="module")
def monkeypatch_run():
    """Stop ``reproduce`` right before it would compute: the fuzz checks arguments only."""
    seen: list[object] = []
    real = cli_mod._run_all
    cli_mod._run_all = lambda specs, *a, **k: seen.extend(specs)
    try:
        yield seen
    finally:
        cli_mod._run_all = real


def test_every_registered_float_parameter_refuses_infinity(monkeypatch_run):
    """For every experiment and float parameter, ``inf`` exits 2 naming the parameter."""
    import typing

    checked = 0
    for exp in EXPERIMENTS:
        for name, f in exp.Params.model_fields.items():
            ann = f.annotation
            if typing.get_origin(ann) is typing.Union or ann is not float:
                continue
            res = CliRunner().invoke(cli_mod.app, ["reproduce", exp.id, "--set",
                                                   f"{name}=inf"], env={"COLUMNS": "200"})
            assert res.exit_code == 2 and name in res.stderr, (exp.id, name, res.output)
            checked += 1
    assert checked > 0


RANGE_PAIRS = [(e, name) for e in EXPERIMENTS for name in e.Params.model_fields
               if name.endswith("_min") and f"{name[:-4]}_max" in e.Params.model_fields]


@pytest.mark.parametrize("exp, name", RANGE_PAIRS, ids=[f"{e.id}:{n}" for e, n in RANGE_PAIRS])
def test_every_min_max_pair_refuses_a_reversed_or_empty_range(exp, name):
    """Found by name, so a new X_min / X_max pair is covered without being listed."""
    q = exp.resolve("quick")
    hi_name = f"{name[:-4]}_max"
    lo, hi = getattr(q, name), getattr(q, hi_name)
    messages = []
    for a, b in ((hi, hi), (lo, lo), (1, 1), (hi, lo)):  # empty or reversed, in field bounds
        try:
            resolve_spec(exp, "quick", {name: str(a), hi_name: str(b)}, 1, CPU)
        except InputError as e:
            messages.append(str(e))
        else:
            messages.append("accepted")
    assert any(f"--set {name}=" in m and "must be below" in m for m in messages), messages
    assert "accepted" not in messages, messages


GRIDS = [e for e in EXPERIMENTS if e.min_distinct]


@pytest.mark.parametrize("exp", GRIDS, ids=[e.id for e in GRIDS])
def test_grids_with_too_few_points_are_refused(exp):
    """A grid whose claims fit along a key must have the stated number of distinct values:
    checked on the experiment's own quick grid (it has them), and a one-point grid made by
    keeping a single unit per value is refused by the same rule."""
    from lazylab.runner.params import check_grid

    p = exp.resolve("quick")
    units = exp.units(p)
    check_grid(exp, p, units)
    (key, need), = exp.min_distinct.items()
    first = next(u[key] for u in units if key in u)
    few = [u for u in units if u.get(key, first) == first]
    with pytest.raises(InputError, match=f"distinct value.* of {key}"):
        check_grid(exp, p, few)
