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


@pytest.mark.parametrize("widths", [[180] * 4, [45, 45, 450, 450, 1200]])
def test_packed_segment_sums_on_cuda_match_the_cpu_and_repeat(widths):
    """The packed step's per-member sums on CUDA (one reduction per run of equal sizes,
    lazylab.train.packed._SEGMENT_SUMS) give the CPU's index_add results to float64 rounding
    and the same bits twice, deterministic algorithms on."""
    from lazylab.train import packed

    def run(device: str) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(0)
        first = [torch.randn(n, 32, generator=g, dtype=torch.float64) / 6 for n in widths]
        second = [torch.ones(n, dtype=torch.float64) for n in widths]
        G = len(widths)
        pack = packed._QuadPack([w.to(device) for w in first], [a.to(device) for a in second],
                                torch.zeros(G, dtype=torch.float64, device=device),
                                torch.full((G,), 1e-3, dtype=torch.float64, device=device),
                                list(range(G)))
        X = torch.randn(64, 32, generator=g, dtype=torch.float64).to(device)
        y = X[:, 0] ** 2
        mult = torch.ones((), dtype=torch.float64, device=device)
        losses = [pack.step(X, y, mult) for _ in range(5)]
        return [t.cpu() for t in (*losses, pack.first, pack.c)]

    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        cpu, gpu, again = run("cpu"), run("cuda"), run("cuda")
    finally:
        torch.use_deterministic_algorithms(was)
    assert all(torch.equal(a, b) for a, b in zip(gpu, again, strict=True))
    for a, b in zip(cpu, gpu, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
