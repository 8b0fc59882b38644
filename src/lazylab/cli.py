"""The ``lazylab`` command line: list, show, reproduce, report.

Bad input (unknown id, paper or key, bad ``KEY=VALUE``, value out of range, missing data set,
unreadable directory) prints one line ``error: ...`` on stderr and exits with code 2; a failing
work unit exits with code 1 after keeping every finished unit; ``--strict`` exits with code 1
when a claim did not hold. Set ``LAZYLAB_DEBUG=1`` to also see the traceback behind an error.
"""

from __future__ import annotations

import difflib
import os
import shlex
import sqlite3
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import progress as rp
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lazylab.device import resolve_device
from lazylab.experiments import PAPERS, all_experiments
from lazylab.experiments.base import Experiment
from lazylab.report import format_value, rebuild, write_report
from lazylab.runner import (
    DataNotFound,
    InputError,
    LazylabError,
    RunOutcome,
    RunSpec,
    UnitFailed,
    WorkUnit,
    check_backend,
    check_resume,
    resolve_spec,
    run_experiment,
)
from lazylab.store import STORE_NAME, Store

__all__ = ["app", "main", "parse_assignments", "select_experiments"]

SCALES = ("quick", "paper")
DEVICES = ("auto", "cpu", "cuda")

app = typer.Typer(
    name="lazylab",
    help="Reproduce five papers on wide two-layer networks in the lazy (NTK) regime and "
         "beyond: regenerate each figure with theory overlaid and a verdict per claim.\n\n"
         "Start with `lazylab list`, then `lazylab show ID` and `lazylab reproduce ID`.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _out() -> Console:
    c = Console(highlight=False)
    # Piped output (CI logs, files) would default to 80 columns and shred the tables.
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(highlight=False, width=160)
    return c


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def _error(msg: str, detail: str | None = None, console: Console | None = None) -> None:
    c = console or _err()
    c.print(f"[bold red]error:[/] {escape(msg)}", soft_wrap=True)
    if detail and os.environ.get("LAZYLAB_DEBUG"):
        c.print(escape(detail), soft_wrap=True)


@contextmanager
def _guard() -> Iterator[None]:
    """Turn every failure into one line on stderr and an exit code; never a traceback."""
    try:
        yield
    except typer.Exit:
        raise
    except LazylabError as e:
        _error(str(e), e.detail)
        raise typer.Exit(e.exit_code) from None
    except (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError) as e:
        _error(str(e), traceback.format_exc())
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        _error("interrupted; finished units are stored: rerun the same command with --resume")
        raise typer.Exit(130) from None
    except Exception as e:
        _error(f"unexpected {type(e).__name__}: {e} (set LAZYLAB_DEBUG=1 for the traceback)",
               traceback.format_exc())
        raise typer.Exit(1) from None


# ---- choosing experiments and parameters ----------------------------------------------------
def _unknown(what: str, name: str, known: Sequence[str]) -> InputError:
    close = difflib.get_close_matches(name, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return InputError(f"unknown {what} {name!r}{hint} (run `lazylab list` for the ids; papers: "
                      f"{', '.join(PAPERS)})")


def _get(exp_id: str) -> Experiment:
    exps = {e.id: e for e in all_experiments()}
    if exp_id not in exps:
        raise _unknown("experiment id", exp_id, list(exps))
    return exps[exp_id]


def select_experiments(targets: Sequence[str]) -> list[Experiment]:
    """Experiments named by ids, paper keys or ``all`` (registry order, no duplicates)."""
    exps = all_experiments()
    by_id = {e.id: e for e in exps}
    papers: dict[str, list[Experiment]] = {}
    for e in exps:
        papers.setdefault(e.paper, []).append(e)
    chosen: dict[str, Experiment] = {}
    for t in targets:
        if t == "all":
            picked = exps
        elif t in by_id:
            picked = [by_id[t]]
        elif t in papers:
            picked = papers[t]
        elif t in PAPERS:
            raise InputError(f"paper {t!r} has no registered experiments")
        else:
            raise _unknown("experiment or paper", t, [*by_id, *papers, "all"])
        for e in picked:
            chosen.setdefault(e.id, e)
    if not chosen:
        raise InputError("no experiments are registered")
    return list(chosen.values())


def parse_assignments(items: Sequence[str]) -> dict[str, str]:
    """``["d=20", "ns=10,20"]`` -> ``{"d": "20", "ns": "10,20"}`` (the last of a key wins)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InputError(f"--set {item!r}: expected KEY=VALUE, e.g. --set d=20 or "
                             "--set widths=10,100,1000")
        out[key] = value.strip()
    return out


def _check_keys(exps: Sequence[Experiment], assignments: dict[str, str]) -> None:
    known = sorted({k for e in exps for k in e.Params.model_fields})
    for key in assignments:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            ids = ", ".join(e.id for e in exps)
            raise InputError(f"unknown --set key {key!r}: no parameter of that name in {ids}; "
                             f"{hint}`lazylab show ID` lists the keys")


# ---- commands -------------------------------------------------------------------------------
def _duration(sec: float | None) -> str:
    if sec is None:
        return "?"
    if sec < 90:
        return f"{sec:.0f} s"
    if sec < 5400:
        return f"{sec / 60:.0f} min"
    return f"{sec / 3600:.1f} h"


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"lazylab {version('lazylab')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Reproduce five papers on wide two-layer networks in the lazy (NTK) regime and beyond."""


@app.command("list")
def list_cmd() -> None:
    """List every experiment: id, paper, figure, what it shows, estimated time per scale."""
    with _guard():
        t = Table(title="lazylab experiments", show_lines=False)
        t.add_column("id", style="cyan", no_wrap=True)
        t.add_column("paper", no_wrap=True)
        t.add_column("figure")
        t.add_column("what it shows")
        t.add_column("quick", justify="right", no_wrap=True)
        t.add_column("paper scale", justify="right", no_wrap=True)
        exps = all_experiments()
        if not exps:
            raise LazylabError("no experiments are registered")
        for e in exps:
            t.add_row(e.id, escape(e.paper), escape(e.figure), escape(e.summary),
                      _duration(e.est_seconds.get("quick")), _duration(e.est_seconds.get("paper")))
        _out().print(t)
        _out().print("quick: 2-core CPU; paper scale: one GPU. `lazylab show ID` for details.")


@app.command()
def show(exp_id: Annotated[str, typer.Argument(metavar="ID", help="An experiment id.")]) -> None:
    """Show an experiment's parameters (the keys --set accepts), claims and sizes per scale."""
    with _guard():
        exp = _get(exp_id)
        out = _out()
        out.print(f"[bold cyan]{exp.id}[/]: {escape(exp.figure)} of "
                  f"{escape(PAPERS.get(exp.paper, exp.paper))} [dim]({exp.paper})[/]")
        out.print(escape(exp.summary))
        t = Table(title="parameters (--set KEY=VALUE)")
        for col in ("key", "type", "quick", "paper", "allowed", "description"):
            t.add_column(col, no_wrap=col == "key", style="cyan" if col == "key" else None)
        for r in exp.param_table():
            quick, paper = r["scales"].get("quick", r["default"]), r["scales"].get("paper")
            paper_s = format_value(paper)
            if paper != quick:
                paper_s = f"[bold]{escape(paper_s)}[/]"
            t.add_row(r["name"], escape(r["type"]), escape(format_value(quick)), paper_s,
                      escape(r["allowed"]), escape(r["description"]))
        out.print(t)
        c = Table(title="claims")
        c.add_column("id", style="cyan", no_wrap=True)
        c.add_column("statement")
        for cid, text in exp.claim_statements.items():
            c.add_row(cid, escape(text))
        out.print(c if exp.claim_statements else "claims: listed in claims.json after a run")
        s = Table(title="sizes")
        for col in ("scale", "seeds", "grid units", "work units", "est. time"):
            s.add_column(col, justify="right" if col != "scale" else "left")
        for scale in exp.scales:
            seeds = exp.default_seeds.get(scale, 1)
            try:
                n = len(exp.units(exp.resolve(scale)))
                sizes = (str(n), str(n * seeds))
            except ValueError as e:
                sizes = (f"invalid: {e}", "-")
            s.add_row(scale, str(seeds), *sizes, _duration(exp.est_seconds.get(scale)))
        out.print(s)
        out.print(f"run: lazylab reproduce {exp.id} [--scale paper] [--set KEY=VALUE]")


class _RichProgress:
    """A transient Rich progress bar on stderr, one task per experiment."""

    def __init__(self, progress: rp.Progress):
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def started(self, spec: RunSpec, pending: int, total: int) -> None:
        reused = f" ({total - pending} stored)" if total > pending else ""
        self.tasks[spec.exp.id] = self.progress.add_task(f"{spec.exp.id}{reused}",
                                                         total=max(pending, 1),
                                                         completed=0 if pending else 1)

    def unit_done(self, spec: RunSpec, unit: WorkUnit) -> None:
        self.progress.advance(self.tasks[spec.exp.id])


def _verdict_table(outcomes: Sequence[tuple[str, Sequence[Any]]]) -> Table:
    t = Table(title="verdicts")
    for col in ("experiment", "claim", "held", "measured", "expected", "tolerance"):
        t.add_column(col, no_wrap=col in ("experiment", "claim", "held"),
                     justify="center" if col == "held" else "left")
    for exp_id, claims in outcomes:
        for c in claims:
            mark = {"held": "[green]✓[/]", "failed": "[red]✗[/]"}.get(c.status, "[dim]n/a[/]")
            if c.is_consistency:
                mark += " [dim](check)[/]"
            t.add_row(exp_id, c.id, mark,
                      escape(format_value(c.measured)), escape(format_value(c.expected)),
                      escape(format_value(c.tolerance)))
    return t


def _choice(option: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise InputError(f"{option} must be one of {', '.join(allowed)}; got {value!r}")


@app.command()
def reproduce(
    targets: Annotated[list[str], typer.Argument(
        metavar="TARGET", help="Experiment ids, paper keys (all of a paper's experiments) or "
                                  "'all'.", show_default=False)],
    scale: Annotated[str, typer.Option(help="quick (minutes on a CPU) or paper (the paper's "
                                            "sizes; meant for a GPU).")] = "quick",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="Override a parameter of every selected experiment "
        "that has it (repeatable; lists comma-separated). `lazylab show ID` lists the keys.",
        show_default=False)] = None,
    seeds: Annotated[int | None, typer.Option(
        help="Seeds per work unit (default: the experiment's, per scale).",
        show_default=False)] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    out: Annotated[Path, typer.Option(help="Output directory (one store and report for all "
                                           "experiments run into it).")] = Path("runs"),
    resume: Annotated[bool, typer.Option(help="Keep stored units and compute only the "
                                              "missing ones (same configuration only).")] = False,
    strict: Annotated[bool, typer.Option(help="Exit with code 1 if any claim did not "
                                              "hold.")] = False,
    workers: Annotated[int, typer.Option(help="Local worker processes (local backend).")] = 1,
    backend: Annotated[str, typer.Option(help="local (this machine) or ray (a Ray cluster; "
                                              "pip install 'lazylab\\[ray]').")] = "local",
) -> None:
    """Run experiments, store every finished unit, write results, figures, claims, report."""
    sets = list(set_ or [])
    with _guard():
        _choice("--scale", scale, SCALES)
        _choice("--device", device, DEVICES)
        if seeds is not None and seeds < 1:
            raise InputError(f"--seeds must be >= 1; got {seeds}")
        check_backend(backend, workers)
        try:
            dev = resolve_device(device)
        except ValueError as e:
            raise InputError(str(e)) from None
        exps = select_experiments(targets)
        assignments = parse_assignments(sets)
        _check_keys(exps, assignments)
        specs = [resolve_spec(e, scale, assignments, seeds, dev) for e in exps]
        command = _command(targets, scale, sets, seeds, device, out, resume, strict, workers,
                           backend)
        _run_all(specs, out, resume=resume, strict=strict, workers=workers, backend=backend,
                 command=command)


def _command(targets: Sequence[str], scale: str, sets: Sequence[str], seeds: int | None,
             device: str, out: Path, resume: bool, strict: bool, workers: int,
             backend: str) -> str:
    parts = ["lazylab", "reproduce", *targets, "--scale", scale]
    for s in sets:
        parts += ["--set", s]
    if seeds is not None:
        parts += ["--seeds", str(seeds)]
    parts += ["--device", device, "--out", str(out)]
    parts += ["--resume"] * resume + ["--strict"] * strict
    if workers != 1:
        parts += ["--workers", str(workers)]
    if backend != "local":
        parts += ["--backend", backend]
    return shlex.join(parts)


def _open_store(out: Path) -> Store:
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        return Store(out / STORE_NAME)
    except (OSError, sqlite3.Error) as e:
        raise InputError(f"--out {out}: cannot create the output directory or store ({e})") \
            from None


def _run_all(specs: Sequence[RunSpec], out: Path, *, resume: bool, strict: bool, workers: int,
             backend: str, command: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    outcomes: list[RunOutcome] = []
    failures: list[LazylabError] = []
    with _open_store(out) as store:
        if resume:
            for spec in specs:
                check_resume(store, spec, out)
        columns = (rp.SpinnerColumn(), rp.TextColumn("{task.description}"), rp.BarColumn(),
                   rp.MofNCompleteColumn(), rp.TimeElapsedColumn(), rp.TimeRemainingColumn())
        with rp.Progress(*columns, console=_err(), transient=True) as progress:
            sink = _RichProgress(progress)
            for spec in specs:
                try:
                    o = run_experiment(spec, out, store, resume=resume, workers=workers,
                                       backend=backend, command=command, progress=sink)
                except (UnitFailed, DataNotFound) as e:
                    failures.append(e)
                    _error(str(e), e.detail, console=progress.console)
                    continue
                outcomes.append(o)
                paper_claims = [c for c in o.claims
                                if not c.is_consistency and c.status != "not_applicable"]
                held = sum(c.held for c in paper_claims)
                progress.console.print(
                    f"[green]done[/] {o.spec.exp.id}: {o.computed} unit(s) computed, "
                    f"{o.reused} reused, {o.wall_seconds:.1f} s; {held}/{len(paper_claims)} "
                    "claims held", highlight=False)
    md, page = write_report(out)
    console = _out()
    if outcomes:
        console.print(_verdict_table([(o.spec.exp.id, o.claims) for o in outcomes]))
    console.print(f"results in {out}/ID/, report: {page} and {md}")
    code = max((e.exit_code for e in failures), default=0)
    if strict and any(c.failed for o in outcomes for c in o.claims):
        _error("--strict: at least one claim did not hold")
        code = max(code, 1)
    if code:
        raise typer.Exit(code)


@app.command()
def report(out_dir: Annotated[Path, typer.Argument(
        metavar="DIR", help="An output directory of `lazylab reproduce`.")]) -> None:
    """Rebuild results, claims, figures and the report from stored units (no recomputation)."""
    with _guard():
        if not out_dir.is_dir():
            raise InputError(f"report DIR {out_dir} does not exist or is not a directory")
        try:
            has = any((p / "config.json").is_file() for p in out_dir.iterdir())
        except OSError as e:
            raise InputError(f"report DIR {out_dir} is not readable ({e})") from None
        if not has:
            raise InputError(f"report DIR {out_dir} holds no lazylab results (no ID/config.json);"
                             f" run `lazylab reproduce ID --out {out_dir}` first")
        import matplotlib

        matplotlib.use("Agg")
        err = _err()
        rebuilt = rebuild(out_dir, warn=lambda m: err.print(f"[yellow]warning:[/] {escape(m)}",
                                                            soft_wrap=True))
        console = _out()
        if rebuilt:
            console.print(_verdict_table(list(rebuilt.items())))
        console.print(f"report: {out_dir / 'report.html'} and {out_dir / 'report.md'}")


def main() -> None:
    """Entry point of the ``lazylab`` script and ``python -m lazylab``."""
    app(prog_name="lazylab")
