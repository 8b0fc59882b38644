"""Paper-scale cost of the batched paths: operations, flop and time per step, projections.

For each experiment with a batched path, at the paper's shapes (``--scale paper`` parameters)
with the number of steps capped, this measures in one run on the device at hand:

* ``ops/cfg-step``: aten operations (what a GPU pays one kernel launch for) per configuration
  and step, counted with a dispatch mode, one by one (``lazylab.train.fit`` on each
  configuration, as before batching) and batched (the packed grid); their ratio;
* ``CPU-s/step`` (process time) of one step of the whole grid both ways, and their ratio,
  beside its ``bound``: the one-by-one CPU seconds over the batched step's flop at the
  measured GEMM rate, the ratio a batched step that did nothing but its GEMMs would reach;
* ``flop/step`` of the batched step (``torch.utils.flop_counter``);
* the measured seconds per batched step here, and the projected paper-scale time: step time
  x the paper's steps x groups (one group per seed);
* the compute-bound floor: flop x steps / the GEMM throughput measured here;
* a one-H100 model of the same steps: max(operations x LAUNCH_SECONDS, flop / H100_FLOPS)
  per step (a step is bound by its launches or its arithmetic, whichever is slower), with the
  constants measured on an H100 (bench/_projection.py).

Run: ``.venv/bin/python bench/bench_paper_scale.py [--steps 20] [--device cpu|cuda]
[--threads 1]``. Recorded in ``runs/bench.json`` under ``paper_scale``.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import _projection
from _assembly import assembly
from _parts import check_overrides, check_part, covers, parse_overrides
from _projection import (
    H100_FLOPS,
    H100_MEMORY_BYTES,
    H100_TF32_FLOPS,
    LAUNCH_SECONDS,
    OpCounter,
    Timeout,
    eigvalsh_as_run,
    flop_counter,
    gpu_paths,
    project,
    sync,
)
from _results import record
from lazylab.device import gpu_block_bytes, memory_budget, set_memory_budget
from lazylab.experiments import all_experiments, get_experiment
from lazylab.experiments.ghorbani import common as C
from lazylab.machine import keep_freed_memory
from lazylab.seeding import torch_generator
from lazylab.train import fit
from lazylab.train.packed import train_packed_quad


def gemm_flops_per_second(device: torch.device, n: int = 2048) -> float:
    """Measured float32 GEMM throughput (best of 3)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    best = float("inf")
    for _ in range(3):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best


@dataclass
class Row:
    experiment: str
    configs: int
    ops_alone: float
    ops_batched: float
    cpu_alone: float
    cpu_batched: float
    flop_step: float
    step_seconds: float
    paper_steps: int
    groups: int

    @property
    def projected(self) -> float:
        return self.step_seconds * self.paper_steps * self.groups

    @property
    def h100(self) -> float:
        """The one-H100 model of the paper's steps (module docstring)."""
        per_step = max(self.ops_batched * self.configs * LAUNCH_SECONDS,
                       self.flop_step / H100_FLOPS)
        return per_step * self.paper_steps * self.groups


def measure(fn: Callable[[int], Any], steps: int, device: torch.device,
            repeats: int = 3) -> tuple[float, float, float]:
    """(aten operations, process CPU seconds, wall seconds) per step of ``fn``: the
    difference between runs of ``steps`` and ``2 steps``, over ``steps`` (so set-up and the
    final evaluation, paid once per run of 10^5 steps, do not count); the times are the best
    of ``repeats`` runs of each length, which a busy machine only slows. The operations are
    counted on the paths a GPU takes (:func:`gpu_paths`: what a GPU pays per launch), the
    times on this device's own."""
    with gpu_paths(), OpCounter() as oc:
        fn(steps)
    ops1 = oc.n
    with gpu_paths(), OpCounter() as oc:
        fn(2 * steps)
    cpu = {steps: float("inf"), 2 * steps: float("inf")}
    wall = dict(cpu)
    for _ in range(repeats):
        for k in cpu:
            sync(device)
            c0, w0 = time.process_time(), time.perf_counter()
            fn(k)
            sync(device)
            cpu[k] = min(cpu[k], time.process_time() - c0)
            wall[k] = min(wall[k], time.perf_counter() - w0)
    return ((oc.n - ops1) / steps, max(cpu[2 * steps] - cpu[steps], 1e-9) / steps,
            max(wall[2 * steps] - wall[steps], 1e-9) / steps)


def flop_per_step(fn: Callable[[int], Any]) -> float:
    """flop of one step: the count at 2 steps minus the count at 1."""
    counts = []
    for k in (1, 2):
        with flop_counter() as fc:
            fn(k)
        counts.append(fc.get_total_flops())
    return float(counts[1] - counts[0])


def ghorbani_width(exp_id: str, steps: int, device: torch.device, rowspace: bool = True
                   ) -> Row:
    """The NN width x step-size grid of a Ghorbani width figure at paper shapes; with
    ``rowspace=False`` the batched step keeps every width's N rows (qf: the widths above d
    train as d rows by default, :mod:`lazylab.train.rowspace`)."""
    exp = get_experiment(exp_id)
    p = exp.resolve("paper")
    prob = exp.problem(p)
    mg = prob.kind == "mg"
    widths = exp.widths(p)
    base = C.nn_lr(p.d, p.batch_size, p.nn_lr, exp.nn_lr_coef)
    lrs = [base * f for f in p.lr_factors]
    nets = [C.nn_init(prob, N, p.init_scale, torch_generator(N, device), device) for N in widths]
    sampler = prob.sampler()
    G = len(widths) * len(lrs)

    def alone(k: int) -> None:
        for net0 in nets:
            for lr in lrs:
                net = C.nn_init(prob, net0.W.shape[0], p.init_scale,
                                torch_generator(0, device), device)
                fit(net, sampler=sampler, loss="mse", optimizer="one_pass", lr=lr, steps=k,
                    batch_size=p.batch_size, log_steps=[k],
                    generator=torch_generator(1, device))

    def batched(k: int) -> None:
        train_packed_quad([n.W for n in nets for _ in lrs], [lr for _ in nets for lr in lrs],
                          a0=[n.a.detach() for n in nets for _ in lrs], train_second=mg,
                          sampler=sampler, steps=k, batch_size=p.batch_size,
                          generator=torch_generator(1, device), rowspace=rowspace)

    ops_a, cpu_a, _ = measure(alone, steps, device)
    ops_b, cpu_b, wall_b = measure(batched, steps, device)
    name = exp_id if rowspace else f"{exp_id} full width"
    return Row(name, G, ops_a / G, ops_b / G, cpu_a, cpu_b, flop_per_step(batched), wall_b,
               p.sgd_steps, 1)


def allenzhu_grid(exp_id: str, steps: int, device: torch.device, arch: str = "3resnet",
                  m: int = 200) -> Row:
    """One (lr, wd) group of an Allen-Zhu learner grid at paper shapes (d = 30, k = 15, batch
    50, ``max_group`` configurations, all layers): each configuration alone with
    ``torch.optim.SGD`` (momentum 0.9, weight decay) against :func:`train_grid`'s step."""
    from lazylab.experiments.allenzhu.common import make_learner
    from lazylab.train.ensemble import train_grid

    p = get_experiment(exp_id).resolve("paper")
    k, bs = p.d // 2, p.batch_size
    cfgs = [(lr, wd) for lr in p.lrs for wd in p.wds][:p.max_group]
    net = make_learner(arch, p.d, k, m, untied=False, init=p.init,
                       generator=torch_generator(0, device), device=device)
    X = torch.randn(bs * 2 * steps, p.d, generator=torch_generator(1, device), device=device)
    Y = torch.randn(bs * 2 * steps, k, generator=torch_generator(2, device), device=device)

    def alone(n: int) -> None:
        for lr, wd in cfgs:
            one = make_learner(arch, p.d, k, m, untied=False, init=p.init,
                               generator=torch_generator(0, device), device=device)
            opt = torch.optim.SGD(one.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
            for s in range(n):
                opt.zero_grad()
                xb, yb = X[s * bs:(s + 1) * bs], Y[s * bs:(s + 1) * bs]
                (one(xb) - yb).square().sum(1).mean().backward()
                opt.step()

    def batched(n: int) -> None:
        train_grid(net, X[:n * bs], Y[:n * bs], lrs=p.lrs, wds=p.wds, epochs=1, batch_size=bs,
                   generator=torch_generator(3, device), max_group=p.max_group)

    G = len(cfgs)
    ops_a, cpu_a, _ = measure(alone, steps, device)
    ops_b, cpu_b, wall_b = measure(batched, steps, device)
    # train_grid trains every configuration of the grid, len(lrs) len(wds) / G groups.
    groups = len(p.lrs) * len(p.wds) / G
    return Row(f"{exp_id} {arch} m={m}", G, ops_a / G, ops_b / G / groups, cpu_a,
               cpu_b / groups, flop_per_step(batched) / groups, wall_b / groups, 0, 1)


#: (experiment, measurement) of the ratio table; qf-width twice: its widths above d trained as
#: d rows (the library's path) and at full width, which shows what the batching alone does.
BENCHES: list[tuple[str, Callable[..., Row]]] = [
    ("ghorbani-qf-width", ghorbani_width),
    ("ghorbani-qf-width", functools.partial(ghorbani_width, rowspace=False)),
    ("ghorbani-mg-width", ghorbani_width), ("allenzhu-performance", allenzhu_grid)]


#: Rows measured on an H100 (docs/paper-scale/measured.json), all in float32 (TF32 off):
#: seconds, how the card was shared, and the paper parameters they ran with where today's
#: differ (the model is checked against a row only in a projection with those parameters,
#: ``--set``, and at its float32 rate, ``h100_fp32``, where the experiment declares TF32 since).
MEASURED_H100: dict[str, tuple[float, str, dict[str, str]]] = {
    "arora-spectrum": (22, "12 processes on the card", {}),
    "bailee-coupling": (95, "12 processes on the card", {}),
    "bailee-xor": (195, "12 processes on the card", {}),
    "arora-convergence": (1370, "7 processes on the card", {}),
    "arora-learnability": (607, "alone", {}),
    "nichani-regularizer": (330, "alone", {}),
    # one sample size at a time (before n_batch)
    "nichani-mlp-scaling": (592, "6 workers", {"n_batch": "1"}),
    # alone on the card (31 s beside six GPU jobs and eleven CPU processes)
    "nichani-spectrum": (0.9, "alone", {}),
}
#: Complete paper-scale runs, with their device and wall time (docs/paper-scale.md's table).
MEASURED_RUNS = Path(__file__).resolve().parents[1] / "docs" / "paper-scale" / "measured.json"


def measured_cpu(exp_id: str) -> tuple[float, str] | None:
    """(wall seconds, device) of a complete paper-scale run of ``exp_id`` on a CPU, if any."""
    if not MEASURED_RUNS.is_file():
        return None
    for r in json.loads(MEASURED_RUNS.read_text())["runs"]:
        if r["id"] == exp_id and r["device"].startswith("CPU"):
            return float(r["wall_seconds"]), r["device"]
    return None
ESTIMATES = Path(__file__).resolve().parents[1] / "src" / "lazylab" / "experiments" / \
    "paper_estimates.json"


def ratio_table(steps: int, device: torch.device, only: list[str] | None,
                gemm_rate: float) -> dict[str, Any]:
    """Part 2: the batched paths against one configuration at a time. ``bound`` is the
    largest CPU ratio a batched step with the same flop could reach: the one-by-one CPU
    seconds over the batched step's flop at ``gemm_rate`` (the measured GEMM throughput), as if
    it did nothing but GEMMs at that rate. Where it is near 1 the step is bound by its
    arithmetic, which batching does not remove."""
    out: dict[str, Any] = {}
    print(f"\nbatched paths, {steps} capped steps: operations and CPU seconds per "
          "configuration-step, one by one vs batched; bound: the CPU ratio of a batched step "
          "at the GEMM rate")
    print(f"{'experiment':<20} {'cfgs':>5} {'ops alone':>10} {'batched':>8} {'ratio':>6} "
          f"{'CPU-s alone':>12} {'batched':>8} {'ratio':>6} {'bound':>6}")
    for exp_id, fn in BENCHES:
        if only and exp_id not in only:
            continue
        r = fn(exp_id, steps, device)
        bound = r.cpu_alone / (r.flop_step / gemm_rate)
        print(f"{r.experiment:<20} {r.configs:>5} {r.ops_alone:>10.1f} {r.ops_batched:>8.2f} "
              f"{r.ops_alone / r.ops_batched:>6.1f} {r.cpu_alone:>12.4f} {r.cpu_batched:>8.4f} "
              f"{r.cpu_alone / r.cpu_batched:>6.2f} {bound:>6.2f}")
        out[r.experiment] = {
            "configs": r.configs, "ops_per_config_step_alone": r.ops_alone,
            "ops_per_config_step_batched": r.ops_batched,
            "ops_ratio": r.ops_alone / r.ops_batched, "cpu_seconds_per_step_alone": r.cpu_alone,
            "cpu_seconds_per_step_batched": r.cpu_batched, "cpu_ratio": r.cpu_alone / r.cpu_batched,
            "flop_per_step": r.flop_step, "cpu_ratio_bound": bound}
    return out


def projection_table(a: argparse.Namespace, device: torch.device,
                     assembled: dict[str, Any] | None = None) -> dict[str, Any]:
    """Part 1: every experiment's projected paper-scale cost (bench/_projection.py); checked
    against a measured row with the outputs' assembly added (``assembled``: this run's
    :func:`assembly_table`, else the stored estimate)."""
    ids = _ids(a)
    print(f"\nprojection at paper scale: training loops capped at {a.cap} and {2 * a.cap} steps, "
          f"up to {a.sample} groups sampled, {a.limit:.0f} s limit a piece")
    print(f"{'experiment':<22} {'groups':>6} {'smpl':>4} {'loops':>5} {'GFLOP':>10} "
          f"{'Mops':>8} {device.type + ' here':>9} {'H100 model':>10} {'graphs':>9} "
          f"{'measured':>9} "
          f"{'ratio':>6}")
    out: dict[str, Any] = {}
    overrides = parse_overrides(a.set)
    for exp_id in ids:
        t0 = time.perf_counter()
        try:
            pr = project(exp_id, cap=a.cap, sample=a.sample, device=device, limit=a.limit,
                         tcap=a.tcap, verbose=a.verbose, fast=a.fast, overrides=overrides,
                         blocks=a.eval_blocks)
        except Timeout as e:
            print(f"{exp_id:<22} not projected: a piece ran {e}")
            out[exp_id] = {"error": f"a piece ran {e}"}
            continue
        tot = pr.total
        meas = MEASURED_H100.get(exp_id)
        if meas and meas[2] != overrides:
            print(f"    ({exp_id}'s measured row ran with --set "
                  f"{' '.join(f'{k}={v}' for k, v in meas[2].items())}: no check here)")
            meas = None
        asm = assembly_h100(exp_id, assembled)
        ratio = f"{(tot.h100_fp32 + asm) / meas[0]:>6.2f}" if meas else ""
        print(f"{exp_id:<22} {pr.groups:>6} {pr.sampled:>4} {pr.loops:>5} {tot.flop / 1e9:>10.0f} "
              f"{tot.ops / 1e6:>8.2f} {_dur(tot.wall):>9} {_dur(tot.h100):>10} "
              f"{_dur(tot.h100_graph):>9} {_dur(meas[0]) if meas else '':>9} {ratio}"
              f"{'' if pr.exact else '  (~ loops)'}"
              f"   [{time.perf_counter() - t0:.0f} s]")
        cpu_run = measured_cpu(exp_id) if device.type == "cpu" else None
        if cpu_run:
            print(f"    {exp_id} on this CPU: projected {_dur(tot.wall)}, measured "
                  f"{_dur(cpu_run[0])} ({cpu_run[1]}), measured / projected "
                  f"{cpu_run[0] / max(tot.wall, 1e-9):.2f}")
        if tot.h100_fp32 != tot.h100:
            print(f"    {exp_id} on the model in float32 (TF32 off): {_dur(tot.h100_fp32)}")
        if meas:
            print(f"    {exp_id} against its measured row ({meas[1]}): the model's "
                  f"{_dur(tot.h100_fp32)} + the outputs' assembly {_dur(asm)}")
        out[exp_id] = {"groups": pr.groups, "sampled": pr.sampled, "seeds": pr.seeds,
                       "loops": pr.loops, "exact": pr.exact, "flop": tot.flop, "ops": tot.ops,
                       "seconds_here": tot.wall, "cpu_seconds_here": tot.cpu,
                       "h100_model_seconds": tot.h100,
                       "h100_model_fp32_seconds": tot.h100_fp32,
                       "h100_model_graph_seconds": tot.h100_graph, "kernels": tot.kernels,
                       "measured_h100_seconds": meas[0] if meas else None,
                       "eval_blocks": a.eval_blocks}
        if a.write_estimates:  # as each experiment finishes: a cut run keeps what it measured
            write_estimates({exp_id: out[exp_id]}, device, quiet=True,
                            part=check_part(exp_id, overrides) if overrides else None)
    done = {k: v for k, v in out.items() if "error" not in v}
    asm = {k: assembly_h100(k, assembled) for k in done}
    total = sum(v["h100_model_seconds"] + asm[k] for k, v in done.items())
    graphs = sum(v["h100_model_graph_seconds"] + asm[k] for k, v in done.items())
    print(f"H100 model, {len(done)} experiments: {_dur(total)} in all ({_dur(graphs)} with the "
          "loops that capture replayed from CUDA graphs), the assembly of outputs "
          f"{_dur(sum(asm.values()))} of it; "
          f"largest {max(done, key=lambda k: done[k]['h100_model_seconds'], default='-')}")
    return out


def _ids(a: argparse.Namespace) -> list[str]:
    """``--only``, else every built-in experiment."""
    return a.only or [e.id for e in all_experiments()
                      if type(e).__module__.startswith("lazylab.")]


def _read_estimates() -> dict[str, Any]:
    return json.loads(ESTIMATES.read_text()) if ESTIMATES.exists() else {}


def assembly_h100(exp_id: str, assembled: dict[str, Any] | None) -> float:
    """The H100 model's seconds of an experiment's assembly (bench/_assembly.py): measured in
    this run, else stored with the estimates, else 0."""
    if assembled and exp_id in assembled:
        return float(assembled[exp_id]["h100_model_seconds"])
    cur = _read_estimates()
    return float(cur.get(exp_id, {}).get("paper_h100_assembly_seconds", 0.0))


def assembly_table(a: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Part 0: each experiment's assembly of results, claims and figure (bench/_assembly.py),
    timed on a quick-scale run's rows; with ``--write-estimates`` stored beside the
    projection, which the registry's estimate adds."""
    ids = _ids(a)
    print("\nassembly of results.csv, claims and figure, on a quick run's rows "
          "(least CPU time of 2)")
    print(f"{'experiment':<22} {'rows':>7} {'CPU-s here':>10} {'H100 model':>10}")
    out: dict[str, Any] = {}
    for exp_id in ids:
        r = assembly(exp_id, device)
        print(f"{exp_id:<22} {r.rows:>7} {r.cpu:>10.2f} {r.h100:>10.2f}", flush=True)
        out[exp_id] = {"rows": r.rows, "cpu_seconds_here": r.cpu, "h100_model_seconds": r.h100}
    if a.write_estimates:
        with open(ESTIMATES.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            cur = _read_estimates()
            for exp_id, v in out.items():
                cur.setdefault(exp_id, {})["paper_h100_assembly_seconds"] = round(
                    v["h100_model_seconds"], 2)
            ESTIMATES.write_text(json.dumps(dict(sorted(cur.items())), indent=1) + "\n")
    return out


def _dur(s: float) -> str:
    return f"{s:.1f} s" if s < 600 else (f"{s / 60:.1f} m" if s < 36000 else f"{s / 3600:.1f} h")


def write_estimates(out: dict[str, Any], device: torch.device, quiet: bool = False,
                    part: str | None = None) -> None:
    """Merge the H100-model seconds into the registry's estimate file (``lazylab list``).
    ``part``: the projections are of that part of each experiment (bench/_parts.py), stored
    under ``parts``; the estimate becomes their sum once the stored parts cover the experiment.
    A whole projection replaces any parts."""
    with open(ESTIMATES.with_suffix(".lock"), "w") as lock:  # parts finish side by side
        fcntl.flock(lock, fcntl.LOCK_EX)
        _merge_estimates(out, device, part)
    if not quiet:
        print(f"estimates written to {ESTIMATES}")


def _merge_estimates(out: dict[str, Any], device: torch.device, part: str | None) -> None:
    cur = _read_estimates()
    for exp_id, v in out.items():
        if "error" in v:
            continue
        here = {"paper_h100_seconds": round(v["h100_model_seconds"], 1),
                f"paper_{device.type}_seconds": round(v["seconds_here"], 1)}
        if v.get("h100_model_graph_seconds") is not None:
            here["paper_h100_graph_seconds"] = round(v["h100_model_graph_seconds"], 1)
        entry = dict(cur.get(exp_id, {}))
        if part is None:
            entry.pop("parts", None)
            entry.update(here)
        else:
            entry["parts"] = parts = {**entry.get("parts", {}), part: here}
            if covers(exp_id, list(parts)):  # the sums of what every part holds
                entry.update({k: round(sum(q[k] for q in parts.values()), 1) for k in here
                              if all(k in q for q in parts.values())})
        cur[exp_id] = entry
    ESTIMATES.write_text(json.dumps(dict(sorted(cur.items())), indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10, help="capped steps of the ratio table")
    ap.add_argument("--cap", type=int, default=2, help="training loops capped at cap, 2 cap")
    ap.add_argument("--tcap", type=int, default=100,
                    help="training loops timed at tcap, 2 tcap steps")
    ap.add_argument("--sample", type=int, default=3, help="groups measured per experiment")
    ap.add_argument("--limit", type=float, default=600.0, help="seconds a piece may take")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=None, help="experiment ids")
    ap.add_argument("--verbose", action="store_true", help="print every measured group")
    ap.add_argument("--part", choices=("all", "assembly", "projection", "ratios"),
                    default="all")
    ap.add_argument("--fast", action="store_true",
                    help="count only (no timed runs): half the measuring time")
    ap.add_argument("--eval-blocks", type=int, default=None, metavar="B",
                    help="measure B row blocks of each evaluation pass and extrapolate the "
                         "rest (lazylab.train.meter.sampled_blocks); default: all")
    ap.add_argument("--h100-blocks", action="store_true",
                    help="size memory blocks as on an 80 GiB H100 (lazylab.device."
                         "gpu_block_bytes: 5 GiB a block), so that a blocked evaluation's "
                         "operations are counted as the H100 launches them; needs that much "
                         "memory here")
    ap.add_argument("--keep-freed-memory", action="store_true",
                    help="glibc keeps freed memory (lazylab.machine.keep_freed_memory), so that "
                         "a CPU's munmap and page faults of large tensors, which a GPU's caching "
                         "allocator never pays, are not priced as host work; resident memory "
                         "can grow far past the peak (allenzhu-alpha: 22 GB)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a paper parameter set otherwise (e.g. panels=a); with "
                         "--write-estimates only a part of the experiment (a list parameter "
                         "narrowed), which its estimate adds up once the parts cover it")
    ap.add_argument("--write-estimates", action="store_true",
                    help="store the projections as the registry's paper-scale estimates")
    ap.add_argument("--replay-us", type=float, default=None, metavar="US",
                    help="microseconds a kernel of a step replayed from a CUDA graph costs on "
                         "the H100 (the graphs column; default: an eager launch, "
                         f"{LAUNCH_SECONDS * 1e6:g}, until a device measures it)")
    a = ap.parse_args()
    if a.eval_blocks is not None and a.eval_blocks < 1:
        ap.error(f"--eval-blocks must be a positive integer; got {a.eval_blocks}")
    if a.replay_us is not None:
        if not 0 <= a.replay_us <= 1e3:
            ap.error(f"--replay-us must be between 0 and 1000 microseconds; got {a.replay_us:g}")
        _projection.REPLAY_SECONDS = a.replay_us * 1e-6
    known = {e.id for e in all_experiments()}
    unknown = [x for x in a.only or [] if x not in known]
    if unknown:
        ap.error(f"--only: no experiment {unknown[0]!r}; `lazylab list` names them")
    if a.set and not a.only:
        ap.error("--set needs --only: the experiments whose parameters it sets")
    try:  # every --set checked before anything runs
        for exp_id in (a.only or []) if a.set else []:
            (check_part if a.write_estimates else check_overrides)(
                exp_id, parse_overrides(a.set))
    except ValueError as e:  # only parts of experiments add up (bench/_parts.py)
        ap.error(str(e))
    torch.set_num_threads(a.threads)
    kept = a.keep_freed_memory and keep_freed_memory()  # munmap is no GPU's host work
    device = torch.device(a.device)
    _projection.price_host_for(device)
    if a.h100_blocks:
        set_memory_budget(gpu_block_bytes(H100_MEMORY_BYTES))
    peak = gemm_flops_per_second(device)
    print(f"device {device}, threads {a.threads}, float32 GEMM {peak / 1e9:.1f} GFLOP/s, "
          f"freed memory {'kept' if kept else 'returned'} by the C allocator")
    out: dict[str, Any] = {"device": str(device), "gemm_flops": peak, "allocator_kept": kept,
                           "block_bytes": memory_budget(device),
                           "replay_seconds": _projection.REPLAY_SECONDS}
    if device.type == "cuda":  # the rate the model assumes for TF32 experiments, measured
        torch.backends.cuda.matmul.allow_tf32 = True
        out["gemm_flops_tf32"] = gemm_flops_per_second(device, 8192)
        torch.backends.cuda.matmul.allow_tf32 = False
        print(f"TF32 GEMM {out['gemm_flops_tf32'] / 1e12:.1f} TFLOP/s (8192^3; the model "
              f"assumes {H100_TF32_FLOPS / 1e12:.0f})")
    if a.part in ("all", "assembly"):
        out["assembly"] = assembly_table(a, device)
    if a.part in ("all", "projection"):
        with gpu_paths(), eigvalsh_as_run():  # the operations a GPU run launches
            out["projection"] = projection_table(a, device, out.get("assembly"))
    if a.part in ("all", "ratios"):
        out["ratios"] = ratio_table(a.steps, device, a.only, peak)
    record("paper_scale", out, device)


if __name__ == "__main__":
    main()
