"""An experiment whose units record the BLAS thread-pool sizes they see (runner thread tests).

Importable by module name, so spawned pool workers can unpickle its class.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from pydantic import Field

from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row


class ProbeParams(ExperimentParams):
    units: int = Field(3, ge=1, le=20, description="number of units")


class BlasProbe(Experiment):
    """Each unit reports the smallest and largest BLAS pool size and torch's thread count."""

    id = "blas-probe"
    paper = "toy"
    figure = "none"
    summary = "BLAS and torch thread counts inside a unit"
    Params = ProbeParams
    default_seeds = {"quick": 1, "paper": 1}
    est_seconds = {"quick": 1.0, "paper": 1.0}

    def units(self, p: ProbeParams) -> list[dict[str, Any]]:
        return [{"i": i} for i in range(p.units)]

    def run_unit(self, p: ProbeParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        import numpy as np
        from threadpoolctl import threadpool_info

        np.linalg.eigvalsh(np.eye(4))  # BLAS is loaded and used
        blas = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        i = key["i"]
        return [row("probe", "i", i, "blas_min", min(blas)),
                row("probe", "i", i, "blas_max", max(blas)),
                row("probe", "i", i, "torch", torch.get_num_threads()),
                row("probe", "i", i, "pid", os.getpid())]

    def claims(self, p: ProbeParams, results: Results) -> list[Claim]:
        return []

    def plot(self, p: ProbeParams, results: Results):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        s = results.series("probe", "blas_max")
        ax.plot(s.x, s.mean)
        return fig
