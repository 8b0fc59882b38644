"""The torch-free parameter manifest (lazylab.runner.manifest): equal to the registry, refuses a
bad ``--set`` before torch is imported, and never refuses what the full validation accepts."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lazylab.errors import InputError
from lazylab.experiments import all_experiments
from lazylab.runner import resolve_spec
from lazylab.runner.manifest import build_manifest, check_assignments, check_value, load_manifest

EXPERIMENTS = all_experiments()
MANIFEST = load_manifest()


def test_manifest_equals_registry():
    assert build_manifest(EXPERIMENTS) == MANIFEST, (
        "src/lazylab/runner/param_manifest.json is stale: run "
        "`python -m lazylab.runner.manifest` and commit it")


def _cli_in_subprocess(*args: str) -> tuple[list[str], str]:
    code = ("import sys\nfrom lazylab.cli import main\nsys.argv = ['lazylab', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('torch' in sys.modules, 'lazylab.experiments' in sys.modules, code)")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=900)
    return out.stdout.split()[-3:], out.stderr


@pytest.mark.parametrize("args, message", [
    (["bailee-xor", "--set", "mm=100"], "unknown --set key 'mm'"),
    (["bailee-xor", "--set", "lr_scale=inf"], "lr_scale must be a finite number"),
    (["bailee", "--set", "m=abc"], "m must be an integer"),
    (["arora-spectrum", "--set", "n_train=1e12"], "n_train must be <= 60000"),
    (["all", "--set", "nosuch=1"], "unknown --set key 'nosuch'"),
    (["bailee-generalization", "--set", "B_x=1e308"], "B_x must be <= 1000000.0"),
])
def test_bad_set_is_refused_before_torch_is_imported(args, message):
    flags, stderr = _cli_in_subprocess("reproduce", *args)
    assert flags == ["False", "False", "2"], stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], stderr


def test_bad_vary_is_refused_before_torch_is_imported():
    flags, stderr = _cli_in_subprocess("robustness", "arora-spectrum", "--vary", "n_test=10,nan")
    assert flags == ["False", "False", "2"], stderr
    assert "--vary n_test=nan: n_test must be a finite number" in stderr


def test_huge_input_radius_is_refused_when_parameters_resolve():
    """issue 12 item 2: B_x = 1e308 failed inside a unit (eigh of an overflowing X^T X)."""
    exp = next(e for e in EXPERIMENTS if e.id == "bailee-generalization")
    with pytest.raises(InputError, match="B_x must be <= 1000000.0"):
        resolve_spec(exp, "quick", {"B_x": "1e308"}, 1, torch.device("cpu"))


@pytest.mark.parametrize("sets", [{"B_x": "1e308"}, {"B_x": "1e-100"}, {"alpha": "1e200"},
                                  {"beta_norm": "1e60"},
                                  {"alpha": "1e99", "B_x": "10", "ps": "2,4"}])
def test_expressivity_refuses_amplitudes_that_overflow(sets):
    """B_x = 1e308 overflowed inside a unit (exit 1); alpha, B_x and ||beta|| set the amplitude
    |alpha| (B_x ||beta||)^p of everything computed, refused outside [1e-100, 1e100]."""
    exp = next(e for e in EXPERIMENTS if e.id == "bailee-expressivity")
    with pytest.raises(InputError, match="target amplitude"):
        resolve_spec(exp, "quick", sets, 1, torch.device("cpu"))
    resolve_spec(exp, "quick", {"B_x": "1e6"}, 1, torch.device("cpu"))  # the edge is accepted


def test_a_plugin_experiment_is_not_judged_by_the_manifest():
    check_assignments(["my-plugin-exp"], {"anything": "1"}, MANIFEST)  # the registry decides
    with pytest.raises(InputError, match="did you mean ds"):
        check_assignments(["bailee-xor"], {"d": "1"}, MANIFEST)


def test_a_stale_manifest_never_refuses_a_parameter_defined_in_the_source():
    stale = {**MANIFEST, "bailee-xor": {k: v for k, v in MANIFEST["bailee-xor"].items()
                                        if k != "stop_after"}}
    check_assignments(["bailee-xor"], {"stop_after": "3"}, stale)  # left to the registry
    with pytest.raises(InputError, match="unknown --set key 'stepz'"):
        check_assignments(["bailee-xor"], {"stepz": "10"}, stale)


FIELDS = [(e, name) for e in EXPERIMENTS for name in e.Params.model_fields
          if name in MANIFEST.get(e.id, {})]  # (a stale manifest: the equality test says so)
values = st.one_of(
    st.integers(-10**9, 10**12).map(str),
    st.floats().map(repr),
    st.text(max_size=10),
    st.sampled_from(["inf", "nan", "-1", "0", "1.5", "1e3", "", "none", "true", "1,2", "2,x",
                     "10,20,30", "1_000", "0x10"]),
    st.lists(st.integers(-5, 10**7), min_size=1, max_size=4).map(
        lambda xs: ",".join(map(str, xs))),
)


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELDS), raw=values)
def test_the_fast_check_refuses_only_what_the_full_validation_refuses(field, raw):
    exp, name = field
    raw = raw.strip()
    why = check_value(MANIFEST[exp.id][name], raw)
    if why is None:
        return
    with pytest.raises(InputError):
        resolve_spec(exp, "quick", {name: raw}, 1, torch.device("cpu"))


def test_check_value_on_every_shape():
    assert check_value({"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                  {"type": "null"}]}, "none") is None
    assert check_value({"anyOf": [{"type": "number", "exclusiveMinimum": 0},
                                  {"type": "null"}]}, "0") == "must be > 0"
    pair = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}],
            "minItems": 2, "maxItems": 2}
    assert check_value(pair, "1,2") is None
    assert check_value(pair, "1,2,3") == "must have at most 2 item(s)"
    assert check_value(pair, "1,x") == "item 2 ('x') must be an integer"
    assert check_value({"type": "boolean"}, "maybe") == "must be true or false"
    assert check_value({"type": "integer", "maximum": 10}, "11") == "must be <= 10"
    assert check_value({"type": "number", "exclusiveMaximum": 1}, "1") == "must be < 1"
