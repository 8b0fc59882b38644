"""The cost guard's peak-memory estimates against measured peaks (within 2x, both ways).

Each case runs in a fresh process (its peak resident set is then the experiment's own) at
sizes where the experiment's arrays, not the interpreter, dominate where possible.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FASHION = Path("/usr/share/datasets/fashion-mnist")

CASES = [
    ("nichani-regularizer", {"d": 16, "m": 4000, "n_test": 3000, "steps": 30}),
    ("nichani-regularizer", {"d": 16, "m": 2000, "n_test": 6000, "steps": 30}),
    ("arora-spectrum", {}),
    # NT by CG caches its 3e6 samples (d = 20): the cache dominates
    ("ghorbani-qf-width", {"d": 20, "nt_samples": 3_000_000, "n_widths": 3, "sgd_steps": 200,
                           "rf_reps": 1, "nt_reps": 1, "gap_targets": 0}),
    ("ghorbani-qf-samples", {"sgd_steps": 200}),
    ("nichani-spectrum", {}),
    # full-batch GD on n = 32 x 60^2 samples
    ("nichani-mlp-scaling", {"ds": "4,5,60", "i_grid": "16,32", "steps": 5, "stop_after": 2}),
    # reading Fashion-MNIST's files dominates
    pytest.param("nichani-taylor", {"n_train": 200, "n_test": 100, "epochs": 1},
                 marks=pytest.mark.skipif(not FASHION.is_dir(),
                                          reason="dataset-fashion-mnist is not installed")),
]

SCRIPT = """
import json, resource, sys, torch
from lazylab.experiments import get_experiment
from lazylab.runner import ExecutionPolicy, resolve_spec
from lazylab.experiments.cost import estimate
from lazylab.testing import run_in_memory
exp_id, sets = sys.argv[1], json.loads(sys.argv[2])
torch.set_num_threads(1)  # as ExecutionPolicy(threads=1) would in a worker
spec = resolve_spec(get_experiment(exp_id), "quick", {k: str(v) for k, v in sets.items()},
                    1, torch.device("cpu"), ExecutionPolicy(threads=1))
run_in_memory(exp_id, {k: spec.params.model_dump()[k] for k in sets})
try:  # this process's own high-water mark (ru_maxrss also counts the forking parent's pages)
    peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
                if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"estimate": estimate(spec).peak_bytes, "measured": peak}))
"""


def _id(case) -> str:
    exp_id, sets = case.values if hasattr(case, "values") else case
    return f"{exp_id}-{'-'.join(f'{k}{v}' for k, v in sets.items())}"


@pytest.mark.parametrize(("exp_id", "sets"), CASES, ids=[_id(c) for c in CASES])
def test_peak_estimate_within_2x_of_the_measured_peak(exp_id, sets):
    out = subprocess.run([sys.executable, "-c", SCRIPT, exp_id, json.dumps(sets)],
                         capture_output=True, text=True, timeout=600, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["estimate"] is not None, f"{exp_id} has no memory model"
    ratio = got["measured"] / got["estimate"]
    assert 0.5 <= ratio <= 2.0, (exp_id, sets, got)
