"""A tiny, fast experiment used only by the runner, store and CLI tests.

Monte Carlo estimate of the second moment of X ~ N(0, sigma^2): from n samples,
``m_n = (1/n) sum_i X_i^2`` has mean ``sigma^2`` and standard error
``sqrt(Var X^2 / n) = sqrt(2) sigma^2 / sqrt(n)`` (since E X^4 = 3 sigma^4). The grid is the list
of sample sizes ``ns``; the theory rows are sigma^2 and that standard error; the one claim is
that the estimate at the largest n, pooled over seeds, is within 4 standard errors of
sigma^2 (+ ``shift``, a knob that makes the claim fail on purpose).

Test hooks (class attributes, reset by :func:`registered`): ``calls`` counts ``run_unit``
calls in this process; ``fail_on_call = k`` makes the k-th call raise, like a diverging
training run would.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field

from lazylab.experiments import REGISTRY
from lazylab.experiments.base import Claim, Experiment, ExperimentParams, Results, row
from lazylab.seeding import torch_generator


class ToyParams(ExperimentParams):
    sigma: float = Field(1.0, gt=0, description="standard deviation of X")
    ns: list[int] = Field([200, 800, 3200], min_length=1, description="sample sizes (the grid)")
    d: int = Field(3, ge=2, description="unused; exercises a lower bound")
    estimator: Literal["plain", "centered"] = Field("plain", description="unused; a choice")
    shift: float = Field(0.0, description="added to the claim's expected value")
    data_path: str | None = Field(None, description="a file each unit must find")
    fail_n: int | None = Field(None, description="units with this n raise (in any process)")
    sleep: float = Field(0.0, ge=0, le=10, description="seconds each unit waits (kill tests)")
    gate: str | None = Field(None, description="each unit waits until this file exists: holds "
                             "a run open for as long as a test needs, whatever the load")
    crash_dir: str | None = Field(None, description="the first attempt of each unit kills its "
                                  "worker process (leaving a marker file here): Ray tests")
    groups: int = Field(0, ge=0, description="0: every unit alone; k: consecutive sample sizes "
                        "fuse in groups of k (run_group), sharing a stream from the group seed")


class ToyMean(Experiment):
    id = "toy-mean"
    paper = "toy"
    figure = "Fig. T"
    summary = "Monte Carlo second moment of a Gaussian vs sample size"
    Params = ToyParams
    scales = {"quick": {}, "paper": {"ns": [1000, 10000, 100000]}}
    default_seeds = {"quick": 2, "paper": 3}
    est_seconds = {"quick": 1.0, "paper": 20.0}
    claim_statements = {
        "second-moment": "the estimate at the largest n is within 4 standard errors of sigma^2",
    }

    calls: ClassVar[int] = 0
    group_calls: ClassVar[int] = 0
    fail_on_call: ClassVar[int | None] = None

    def units(self, p: ToyParams) -> list[dict[str, Any]]:
        return [{"n": n} for n in p.ns]

    def group(self, p: ToyParams, key: dict[str, Any]) -> str | None:
        if not p.groups:
            return None
        return f"g{p.ns.index(int(key['n'])) // p.groups}"

    def run_group(self, p: ToyParams, members, group_seed: int, device: torch.device,
                  prep: Any = None) -> list[list[dict[str, Any]]]:
        """Each member's own rows plus one draw of the group's shared stream."""
        type(self).group_calls += 1
        shared = float(torch.randn(1, generator=torch_generator(group_seed),
                                   dtype=torch.float64))
        return [self.run_unit(p, key, seed, device)
                + [row("mc", "n", int(key["n"]), "shared", shared)] for key, seed in members]

    def run_unit(self, p: ToyParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        type(self).calls += 1
        if self.fail_on_call is not None and type(self).calls == self.fail_on_call:
            raise RuntimeError("training diverged (test hook)")
        if p.data_path is not None:
            try:
                open(p.data_path).close()
            except FileNotFoundError:
                raise FileNotFoundError(f"toy data set not found at {p.data_path}") from None
        if p.fail_n is not None and key["n"] == p.fail_n:
            raise RuntimeError(f"training diverged at n={p.fail_n} (test parameter)")
        if p.crash_dir is not None:
            marker = Path(p.crash_dir) / f"crashed-{key['n']}-{seed}"
            if not marker.exists():
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)  # the worker process dies mid-unit
        if p.sleep:
            time.sleep(p.sleep)
        while p.gate is not None and not os.path.exists(p.gate):
            time.sleep(0.02)  # a gate, not a delay: the test opens it when it is done
        n = int(key["n"])
        g = torch_generator(seed, device)
        x = p.sigma * torch.randn(n, generator=g, dtype=torch.float64, device=device)
        est = float((x**2).mean())
        return [row("mc", "n", n, "second_moment", est),
                row("mc", "n", n, "abs_error", abs(est - p.sigma**2))]

    def theory(self, p: ToyParams, prep: Any = None) -> list[dict[str, Any]]:
        s2 = p.sigma**2
        return [r for n in p.ns for r in (
            row("theory", "n", n, "second_moment", s2, kind="theory"),
            row("theory", "n", n, "std_error", math.sqrt(2) * s2 / math.sqrt(n), kind="theory"))]

    def claims(self, p: ToyParams, results: Results) -> list[Claim]:
        n = max(p.ns)
        vals = [r["value"] for r in results.select(method="mc", metric="second_moment",
                                                   x=float(n))]
        measured = sum(vals) / len(vals)
        tol = 4 * math.sqrt(2) * p.sigma**2 / math.sqrt(n * len(vals))
        expected = p.sigma**2 + p.shift
        return [Claim.test("second-moment", self.claim_statements, measured, "within",
                           expected, tol, "Monte Carlo error of the mean of x^2")]

    def plot(self, p: ToyParams, results: Results):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(4, 3))
        x, mean, sem, _ = results.series("mc", "abs_error")
        ax.errorbar(x, mean, yerr=sem, fmt="o", label="|m_n - sigma^2|")
        xt, se, _, _ = results.series("theory", "std_error", kind="theory")
        ax.plot(xt, se, "-", label="standard error")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="error")
        ax.legend()
        return fig


@contextmanager
def registered() -> Iterator[ToyMean]:
    """Register the toy experiment for the duration of a test, with fresh hooks."""
    assert ToyMean.id not in REGISTRY
    ToyMean.calls, ToyMean.group_calls, ToyMean.fail_on_call = 0, 0, None
    REGISTRY[ToyMean.id] = ToyMean()
    try:
        yield REGISTRY[ToyMean.id]  # type: ignore[misc]
    finally:
        REGISTRY.pop(ToyMean.id, None)
        ToyMean.calls, ToyMean.fail_on_call = 0, None


#: Environment of in-process CLI calls: wide tables, no debug tracebacks.
CLI_ENV = {"COLUMNS": "200", "LAZYLAB_DEBUG": ""}


def cli(*args: str):
    """Run ``lazylab ARGS`` in this process (Typer's runner) and return its result."""
    from typer.testing import CliRunner

    from lazylab.cli import app

    return CliRunner().invoke(app, list(args), env=CLI_ENV)


def one_line_exit_2(res, *texts: str) -> None:
    """A refused command: exit 2, no traceback, one line on stderr holding every text."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    for t in texts:
        assert t in res.stderr, (t, res.stderr)
