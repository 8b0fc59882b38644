"""What a run pays after its units: the assembly of its outputs, priced on the H100 model.

A run's wall time (``config.json``'s ``timing.wall_seconds``, what the measured rows of
``docs/paper-scale/measured.json`` report) ends after
:func:`lazylab.runner.assemble.finish_experiment`:
results.csv, the claims' verdicts and the figure (PNG and SVG). The projection
(bench/_projection.py) prices ``prepare``, ``theory`` and the groups only. The assembly is host
work (matplotlib, numpy, the CSV writer), so the model prices it like the projection's host
term:

    assembly on the H100 = CPU seconds here / HOST_SPEEDUP (1 on a CUDA machine).

It is timed on the rows of a quick-scale run of the experiment, made in a temporary directory
first: a figure costs about the same for few rows as for many (``nichani-spectrum``: 722 quick
rows and 5519 paper rows each take 2.0-2.3 CPU-s here), and a paper-scale run is not to be had
here. Of ``repeats`` calls the least CPU time is kept (the first one also imports matplotlib,
which a run of several experiments pays once).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

import _projection
from lazylab.experiments import get_experiment
from lazylab.runner import ExecutionPolicy, resolve_spec, run_experiment
from lazylab.runner.assemble import finish_experiment
from lazylab.runner.outputs import read_results
from lazylab.store import STORE_NAME, Store


@dataclass(frozen=True)
class Assembly:
    experiment: str
    rows: int
    cpu: float  # CPU seconds here, the least of the repeats

    @property
    def h100(self) -> float:
        return self.cpu / _projection.HOST_SPEEDUP


def assembly(exp_id: str, device: torch.device, repeats: int = 2) -> Assembly:
    """The assembly of ``exp_id``'s outputs, timed here on a quick-scale run's rows."""
    if repeats < 1:
        raise ValueError(f"repeats must be a positive integer; got {repeats}")
    exp = get_experiment(exp_id)
    spec = resolve_spec(exp, "quick", {}, None, device, ExecutionPolicy(threads=1))
    with tempfile.TemporaryDirectory(prefix="lazylab-assembly-") as tmp:
        out = Path(tmp)
        run_experiment(spec, out, Store(out / STORE_NAME))
        rows = read_results(out / exp.id / "results.csv").rows
        best = float("inf")
        for i in range(repeats):
            c0 = time.process_time()
            finish_experiment(exp, spec.params, rows, out / f"again{i}")
            best = min(best, time.process_time() - c0)
    return Assembly(exp_id, len(rows), best)
