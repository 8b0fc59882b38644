"""Every experiment's smallest paper-scale unit on CUDA (skipped without a GPU).

The smallest unit is the one with the smallest product of the numbers in its key (widths,
sample sizes, dimensions); it runs twice under the runner's execution policy
(deterministic algorithms, TF32 off, the cuBLAS workspace setting) and must give the same rows
both times: the determinism policy holds on the GPU.

Every size stays the paper's; only the iteration counts are capped (:data:`ITERATION_CAPS`):
which kernels run, at which shapes, and whether they reduce in a fixed order does not depend
on how many times they run, while the papers' 2 x 10^4 GD steps or 100 CNN epochs would make
one case take minutes to an hour. ``LAZYLAB_CUDA_FULL=1`` runs the uncapped units.
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import torch

from lazylab.errors import DataNotFound, InputError
from lazylab.experiments import all_experiments
from lazylab.runner import ExecutionPolicy, make_backend, plan_groups, resolve_spec
from lazylab.runner.backends import make_job

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")

EXPERIMENTS = all_experiments()

#: Upper bounds on the iteration-count parameters (where an experiment has them) for the CUDA
#: check; ``steps`` of None (a derived budget) is capped too.
ITERATION_CAPS = {"steps": 200, "epochs": 2, "sgd_steps": 2000, "hand_steps": 200}


def capped(exp) -> dict[str, str]:
    """``--set`` assignments that cap the paper scale's iteration counts (empty with
    ``LAZYLAB_CUDA_FULL=1``)."""
    if os.environ.get("LAZYLAB_CUDA_FULL") == "1":
        return {}
    paper = exp.resolve("paper", {})
    out = {}
    for k, cap in ITERATION_CAPS.items():
        v = getattr(paper, k, "absent")
        if v is None or (isinstance(v, int) and not isinstance(v, bool) and v > cap):
            out[k] = str(cap)
    return out


def size(key: dict[str, Any]) -> float:
    nums = [abs(float(v)) for v in key.values()
            if isinstance(v, int | float) and not isinstance(v, bool) and v]
    return math.prod(nums) if nums else 0.0


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=[e.id for e in EXPERIMENTS])
def test_smallest_paper_scale_unit_runs_on_cuda_deterministically(exp):
    dev = torch.device("cuda")
    try:
        spec = resolve_spec(exp, "paper", capped(exp), 1, dev, ExecutionPolicy(threads=4))
    except DataNotFound as e:
        pytest.skip(str(e))
    except InputError as e:
        pytest.fail(f"paper scale does not resolve: {e}")
    # The group (a batched grid, or a unit alone) holding the smallest unit.
    group = min(plan_groups(spec), key=lambda g: min(size(u.key) for u in g.units))
    unit = min(group.units, key=lambda u: size(u.key))
    try:
        prep = exp.prepare(spec.params, dev)
    except FileNotFoundError as e:
        pytest.skip(f"data not on this machine: {e}")
    runs = []
    for _ in range(2):
        try:
            rows = [r for _, r, _ in make_backend("serial").run(exp, make_job(spec, prep),
                                                                 [group])]
        except DataNotFound as e:
            pytest.skip(str(e))
        runs.append(rows)
    assert runs[0] == runs[1], f"{exp.id} {unit.key_json}: not deterministic on CUDA"
    assert runs[0][0], "the unit returned rows"


TF32 = [e for e in EXPERIMENTS if e.precision.get("paper") == "tf32"]


@pytest.mark.parametrize("exp", TF32, ids=[e.id for e in TF32])
def test_tf32_leaves_every_claim_verdict_of_the_capped_paper_scale_unchanged(exp, tmp_path):
    """An experiment that declares TF32 for its paper scale: the capped paper scale run in
    float32 and in TF32 gives every claim the same status (held, failed, inconclusive)."""
    import json
    import subprocess
    import sys

    sets = [a for k, v in capped(exp).items() for a in ("--set", f"{k}={v}")]
    status = {}
    for prec in ("fp32", "tf32"):
        out = tmp_path / prec
        r = subprocess.run([sys.executable, "-m", "lazylab", "reproduce", exp.id, "--scale",
                            "paper", "--seeds", "1", "--device", "cuda", "--precision", prec,
                            "--out", str(out), "--yes", *sets],
                           capture_output=True, text=True, timeout=1800)
        if r.returncode == 2 and "not found" in r.stderr.lower():
            pytest.skip(r.stderr.strip().splitlines()[-1])
        assert r.returncode in (0, 1), r.stderr[-2000:]
        claims = json.loads((out / exp.id / "claims.json").read_text())
        status[prec] = {c["id"]: c["status"] for c in claims}
    assert status["fp32"] == status["tf32"]
