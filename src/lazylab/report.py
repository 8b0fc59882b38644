"""Outputs of a run: results.csv, claims.json, figures, and the report over an output directory.

Layout of an output directory ``DIR`` (the output contract every command keeps)::

    DIR/lazylab.sqlite            finished work units (lazylab.store)
    DIR/report.md, report.html    every experiment in DIR: figure, claims table, parameters
    DIR/ID/config.json            resolved parameters, scale, seeds, device, versions, timing
    DIR/ID/results.csv            method,kind,x_name,x,seed,metric,value
    DIR/ID/claims.json            [{id, statement, held, measured, expected, tolerance}]
    DIR/ID/ID.png, DIR/ID/ID.svg  the figure

``results.csv`` lists the simulation rows in grid order (the order of ``Experiment.units``),
then by seed index, then the theory rows. Numbers are written with ``repr`` so that reading
them back with ``float`` gives the same bits; the ``seed`` column holds the seed index
(empty for theory rows). Everything here is assembled from stored units: nothing is recomputed
except the experiment's closed-form ``theory`` rows.
"""

from __future__ import annotations

import csv
import glob
import html
import json
import math
import os
import platform
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from lazylab.errors import StoreFault
from lazylab.experiments import all_experiments, get_experiment
from lazylab.experiments.base import COLUMNS, Claim, Experiment, ExperimentParams, Results
from lazylab.seeding import canonical_key
from lazylab.store import STORE_NAME, Store

__all__ = [
    "OUTPUT_FILES",
    "collect_rows",
    "theory_rows",
    "environment",
    "finish_experiment",
    "git_revision",
    "format_value",
    "read_results",
    "rebuild",
    "tidy_rows",
    "write_report",
    "write_results_csv",
]

#: Per-experiment outputs that a fresh run replaces (config.json is rewritten separately).
OUTPUT_FILES = ("results.csv", "claims.json", "{id}.png", "{id}.svg")

_REQUIRED = ("method", "x_name", "x", "metric", "value")


# ---- rows -----------------------------------------------------------------------------------
def tidy_rows(rows: Any, *, kind: str, where: str) -> list[dict[str, Any]]:
    """Check and normalise rows returned by ``run_unit`` or ``theory``.

    Numbers become Python floats (so JSON and CSV write them exactly), ``kind`` is checked, and
    extra keys are kept if they are JSON scalars. ``where`` names the source in error messages.
    """
    if not isinstance(rows, list | tuple):
        raise TypeError(f"{where} must return a list of rows, got {type(rows).__name__}")
    out = []
    for r in rows:
        if not isinstance(r, Mapping):
            raise TypeError(f"{where} returned a row that is not a dict: {r!r}")
        missing = [k for k in _REQUIRED if k not in r]
        if missing:
            raise ValueError(f"{where} returned a row without {', '.join(missing)}: {dict(r)}")
        rk = r.get("kind", kind)
        if rk != kind:
            raise ValueError(f"{where} returned a row of kind {rk!r}; expected {kind!r}")
        t = {k: _scalar(v) for k, v in r.items() if k != "seed"}
        t.update(method=str(r["method"]), kind=kind, x_name=str(r["x_name"]),
                 x=float(r["x"]), metric=str(r["metric"]), value=float(r["value"]))
        out.append(t)
    return out


def _scalar(v: Any) -> Any:
    if hasattr(v, "item") and callable(v.item):  # numpy / torch scalars
        v = v.item()
    if v is None or isinstance(v, bool | int | float | str):
        return v
    raise TypeError(f"result rows may only hold numbers and strings, got {type(v).__name__}")


def theory_rows(exp: Experiment, p: ExperimentParams, prep: Any = None,
                with_prep: bool = False) -> list[dict[str, Any]]:
    """The experiment's checked theory rows (``theory(p, prep=prep)`` when ``with_prep``: the
    experiment overrides ``prepare``)."""
    kw = {"prep": prep} if with_prep else {}
    return tidy_rows(exp.theory(p, **kw), kind="theory", where=f"{exp.id}.theory")


def collect_rows(exp: Experiment, p: ExperimentParams, seeds: int,
                 stored: Mapping[tuple[str, int], list[dict[str, Any]]],
                 theory: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The results table from stored unit rows: ``(rows, number of units missing)``.

    Simulation rows come in grid order, then seed index (added as ``seed``); the ``theory``
    rows (:func:`theory_rows`, or the ones the run stored) follow with ``seed=None``. Missing
    units are skipped and counted.
    """
    rows: list[dict[str, Any]] = []
    missing = 0
    for key in exp.units(p):
        kj = canonical_key(key)
        for s in range(seeds):
            unit_rows = stored.get((kj, s))
            if unit_rows is None:
                missing += 1
                continue
            rows.extend({**r, "seed": s} for r in unit_rows)
    rows.extend({**r, "seed": None} for r in theory)
    return rows, missing


def _columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    extra: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k not in COLUMNS:
                extra.setdefault(k, None)
    return [*COLUMNS, *sorted(extra)]


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _tmp(path: Path) -> Path:
    """A temporary sibling of ``path`` (same folder, so the rename is atomic). Leftovers of
    writers that died mid-write (``kill -9``) are removed first: their pid is gone."""
    _remove_stale_tmp(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _remove_stale_tmp(path: Path) -> None:
    """Delete ``.NAME.PID.tmp`` siblings of ``path`` whose process no longer exists."""
    try:
        leftovers = list(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))
    except OSError:
        return
    for f in leftovers:
        pid = f.name[len(path.name) + 2:-4]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            f.unlink(missing_ok=True)
        except (PermissionError, OverflowError, OSError):
            continue


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file, fsync, then rename.

    A reader (or a run killed mid-write) sees the old file or the new one, never a torn one.
    """
    tmp = _tmp(path)
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_results_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write the tidy table (atomically); the standard columns first, facet columns after."""
    import io

    cols = _columns(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    atomic_write(path, buf.getvalue())


def read_results(path: str | Path) -> Results:
    """Read a ``results.csv`` back (x and value as floats, seed as int or None)."""
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            r = dict(r)
            r["x"] = float(r["x"])
            r["value"] = float(r["value"])
            r["seed"] = int(r["seed"]) if r["seed"] != "" else None
            rows.append(r)
    return Results(rows)


# ---- per-experiment outputs -----------------------------------------------------------------
def _json_safe(v: Any) -> Any:
    """Strict JSON: non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    return v


def write_json(path: Path, obj: Any) -> None:
    """Strict JSON (non-finite floats as strings), written atomically."""
    atomic_write(path, json.dumps(_json_safe(obj), indent=2, allow_nan=False) + "\n")


def finish_experiment(exp: Experiment, p: ExperimentParams, rows: list[dict[str, Any]],
                      exp_dir: Path, warn: Callable[[str], None] | None = None) -> list[Claim]:
    """Write results.csv, claims.json (verdicts from ``exp.claims``) and the figure.

    A figure that cannot be drawn does not undo the rest: results and claims are written
    first, and the failure is reported through ``warn`` (default: a RuntimeWarning)."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    write_results_csv(exp_dir / "results.csv", rows)
    results = Results(rows)
    claims = list(exp.claims(p, results))
    write_json(exp_dir / "claims.json", [c.to_dict() for c in claims])
    try:
        draw_figure(exp, p, results, exp_dir)
    except Exception as e:  # noqa: BLE001 - any plotting failure is reported, not fatal
        msg = (f"{exp.id}: the figure could not be drawn ({type(e).__name__}: {e}); "
               "results.csv and claims.json are written")
        if warn is not None:
            warn(msg)
        else:
            import warnings

            warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return claims


def draw_figure(exp: Experiment, p: ExperimentParams, results: Results, exp_dir: Path) -> None:
    """``exp.plot`` saved as ID.png and ID.svg (atomically, byte-stable SVG)."""
    fig = exp.plot(p, results)
    if fig is None or not hasattr(fig, "savefig"):
        raise TypeError(f"{exp.id}.plot must return a matplotlib Figure")
    import matplotlib.pyplot as plt

    try:
        save_figure(fig, exp_dir, exp.id, dpi=150)
    finally:
        plt.close(fig)


def save_figure(fig, folder: Path, stem: str, *, dpi: int = 150) -> None:
    """Save ``fig`` as ``folder/stem.png`` and ``.svg``, each atomically (a temporary file,
    then a rename); a fixed hash salt and no date keep the SVG identical across identical
    runs."""
    import matplotlib.pyplot as plt

    with plt.rc_context({"svg.hashsalt": "lazylab"}):
        for fmt, kw in (("png", {"dpi": dpi}), ("svg", {"metadata": {"Date": None}})):
            final = folder / f"{stem}.{fmt}"
            tmp = _tmp(final)
            try:
                fig.savefig(tmp, format=fmt, bbox_inches="tight", **kw)
                os.replace(tmp, final)
            finally:
                tmp.unlink(missing_ok=True)


def rebuild(out_dir: Path, warn: Callable[[str], None] = lambda _msg: None, *,
            recompute_theory: bool = False) -> dict[str, list[Claim]]:
    """Re-assemble every experiment in ``out_dir`` from its stored units, then the report.

    Nothing is recomputed: the theory rows are the ones the run stored. They are computed
    again (with the ``prepare`` step they may need) only with ``recompute_theory`` (after a
    change to an experiment's theory) or when the store has none (written by an older
    lazylab). An experiment
    whose units are incomplete, or whose id is no longer registered, keeps its existing files
    and is reported by ``warn``. A ``config.json`` that does not parse, a store fault or a unit
    failing its checksum raises :class:`StoreFault` (exit 2) naming the file. Returns the
    claims of the rebuilt experiments.
    """
    from lazylab.experiments.base import Experiment as _Base

    seeds_max = 10_000  # lazylab.runner.params.SEEDS_MAX (a crafted count must not hang)
    store_path = out_dir / STORE_NAME
    if not store_path.is_file():
        warn(f"no store ({STORE_NAME}) in {out_dir}; keeping the existing results")
        write_report(out_dir)
        return {}
    rebuilt: dict[str, list[Claim]] = {}
    with Store.open_existing(store_path) as store:
        for exp_dir, config in _experiment_dirs(out_dir, strict=True):
            exp_id = config.get("experiment", exp_dir.name)
            try:
                exp = get_experiment(exp_id)
            except KeyError:
                warn(f"{exp_id}: not a registered experiment; keeping its existing results")
                continue
            try:
                p = exp.Params.model_validate(config["params"])
                seeds = int(config["seeds"])
                if not 1 <= seeds <= seeds_max:
                    raise ValueError(f"seeds must be between 1 and {seeds_max}; got {seeds}")
                stored = store.units(exp_id, str(config["config_hash"]))
            except (KeyError, TypeError, ValueError) as e:
                raise StoreFault(f"{exp_dir / 'config.json'} is not usable ({e}); rerun "
                                 f"`lazylab reproduce {exp_id} --out {out_dir} --resume`") from None
            rows, missing = collect_rows(exp, p, seeds, stored, theory=[])
            if missing:
                warn(f"{exp_id}: {missing} work unit(s) not stored; finish them with "
                     f"`lazylab reproduce {exp_id} --out {out_dir} --resume`")
                continue
            h = str(config["config_hash"])
            theory = None if recompute_theory else store.theory(exp_id, h)
            if theory is None:
                with_prep = type(exp).prepare is not _Base.prepare
                prep = None
                if with_prep:
                    import torch

                    prep = exp.prepare(p, torch.device("cpu"))
                theory = theory_rows(exp, p, prep, with_prep)
                try:
                    store.put_theory(exp_id, h, theory)
                except StoreFault as e:  # a read-only copy: the rebuild itself still stands
                    warn(f"{exp_id}: theory rows not stored ({e})")
            rows.extend({**r, "seed": None} for r in theory)
            rebuilt[exp_id] = finish_experiment(exp, p, rows, exp_dir, warn=warn)
    write_report(out_dir)
    return rebuilt


def environment() -> dict[str, Any]:
    """Package versions and the git revision of the lazylab source tree."""
    versions = {"python": platform.python_version()}
    for pkg in ("torch", "numpy", "scipy", "lazylab"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    return {"versions": versions, "git_revision": git_revision()}


def git_revision() -> str:
    """``git rev-parse HEAD`` of the repository holding lazylab's source, else "unknown".

    The package directory must be tracked by that repository, so an installed copy that merely
    sits inside some other repository (a virtualenv in a project) is not misattributed. A
    ``+dirty`` suffix marks uncommitted changes to the package.
    """
    pkg = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            # --no-optional-locks: never take the index lock (read-only, safe beside other git).
            r = subprocess.run(["git", "--no-optional-locks", "-C", str(pkg), *args],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    if git("ls-files", "--error-unmatch", "__init__.py") is None:
        return "unknown"
    rev = git("rev-parse", "HEAD")
    if not rev:
        return "unknown"
    dirty = git("status", "--porcelain", "--", ".")
    return rev + ("+dirty" if dirty else "")


# ---- report over a directory ----------------------------------------------------------------
def _experiment_dirs(out_dir: Path, strict: bool = False) -> list[tuple[Path, dict[str, Any]]]:
    """Subdirectories holding a readable config.json, in registry order then by name.

    ``strict``: a config.json that cannot be read or parsed raises :class:`StoreFault` naming
    it (``lazylab report``); otherwise it is skipped (the report written after a run).
    """
    found = []
    for sub in sorted(out_dir.iterdir()):
        cfg = sub / "config.json"
        if sub.is_dir() and cfg.is_file():
            try:
                config = json.loads(cfg.read_text(encoding="utf-8"))
                if not isinstance(config, dict):
                    raise ValueError("not a JSON object")
                found.append((sub, config))
            except (OSError, ValueError) as e:
                if strict:
                    raise StoreFault(f"{cfg} cannot be read ({type(e).__name__}: "
                                     f"{str(e)[:120]}); torn or edited: rerun the experiment "
                                     f"with --resume --out {out_dir}") from None
                continue
    order = {e.id: i for i, e in enumerate(all_experiments())}
    found.sort(key=lambda t: (order.get(t[0].name, len(order)), t[0].name))
    return found


def claim_test(cl: Mapping[str, Any]) -> str:
    """The comparison a claims.json record's verdict applied, as text (``0.967 >= 0.5 - 0.016``;
    :func:`lazylab.experiments.base.comparison`)."""
    from lazylab.experiments.base import comparison, comparison_text

    op = comparison(cl.get("measured"), cl.get("expected"), cl.get("tolerance"), _status(cl),
                    cl.get("comparison"))
    return comparison_text(cl.get("measured"), cl.get("expected"), cl.get("tolerance"), op)


def format_value(v: Any, digits: int = 4) -> str:
    """Compact text for a measured / expected / tolerance value or a parameter."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    if isinstance(v, list | tuple):
        shown = ", ".join(format_value(x, digits) for x in v[:8])
        return f"[{shown}{', ...' if len(v) > 8 else ''}]" + (
            f" ({len(v)} values)" if len(v) > 8 else "")
    if isinstance(v, dict):
        return ", ".join(f"{k}={format_value(x, digits)}" for k, x in v.items())
    return str(v)


def _sections(out_dir: Path) -> list[dict[str, Any]]:
    secs = []
    for exp_dir, config in _experiment_dirs(out_dir):
        exp_id = config.get("experiment", exp_dir.name)
        claims_path = exp_dir / "claims.json"
        claims = None
        if claims_path.is_file():
            try:
                claims = json.loads(claims_path.read_text(encoding="utf-8"))
            except ValueError:
                claims = None
            if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
                claims = None
        fig = exp_dir / f"{exp_id}.png"
        secs.append({
            "running": _running(out_dir, str(exp_id)),
            "id": exp_id, "config": config, "claims": claims, "dir": exp_dir.name,
            "command": reproduce_command(exp_id, config),
            "png": f"{exp_dir.name}/{exp_id}.png" if fig.is_file() else None,
            "svg": f"{exp_dir.name}/{exp_id}.svg" if (exp_dir / f"{exp_id}.svg").is_file()
            else None,
        })
    return secs


def _running(out_dir: Path, exp_id: str) -> bool:
    """Whether another process holds the experiment's run lock in ``out_dir`` now."""
    from lazylab.errors import InputError
    from lazylab.runner.lock import RunLock

    try:
        RunLock.probe(out_dir, exp_id)
    except (InputError, OSError):
        return True
    return False


def _unfinished(sec: dict[str, Any], esc: Callable[[Any], str], code: str) -> str:
    """What to do about an experiment that is not assembled; ``esc`` escapes the status for
    the output format, ``code`` wraps an option (Markdown or HTML)."""
    status = esc(sec["config"].get("status", "unknown"))
    if sec.get("running"):
        return (f"Not assembled: a run is in progress (status {status}); rebuild the report "
                "when it ends.")
    return f"Not assembled (run status: {status}). Finish it with {code.format('--resume')}:"


def _verdict(sec: dict[str, Any]) -> str:
    if sec["claims"] is None:
        return f"incomplete ({sec['config'].get('status', 'unknown')})"
    paper = [c for c in sec["claims"] if _status(c) != "not_applicable"
             and (c.get("details") or {}).get("kind") != "consistency"]
    held = sum(_status(c) == "held" for c in paper)
    return f"{held}/{len(paper)} held"


def _status(cl: dict[str, Any]) -> str:
    """held / failed / not_applicable (claims.json without ``status``: from ``held``)."""
    return str(cl.get("status") or ("held" if cl.get("held") else "failed"))


def _mark(cl: dict[str, Any]) -> str:
    m = {"held": "✓", "failed": "✗"}.get(_status(cl), "n/a")
    return m + (" (check)" if (cl.get("details") or {}).get("kind") == "consistency" else "")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")


def _md(v: Any) -> str:
    """User text for Markdown: special characters backslash-escaped, one line.

    >>> print(_md("<b> | *x*"))
    \\<b\\> \\| \\*x\\*
    """
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(v).split()))


def _md_code(text: str) -> list[str]:
    """A fenced code block whose fence is longer than any backtick run inside ``text``."""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, " ".join(text.split()), fence]


def reproduce_command(exp_id: str, config: dict[str, Any]) -> str:
    """The command that reproduces one experiment: its scale, seeds, device and every
    parameter that differs from the scale's defaults (``--set``)."""
    import shlex

    scale = str(config.get("scale", "quick"))
    params = config.get("params") or {}
    sets: list[str] = []
    try:
        defaults = get_experiment(exp_id).resolve(scale).model_dump(mode="json")
    except (KeyError, ValueError):
        defaults = {}
    for k, v in params.items():
        if k in defaults and defaults[k] == v:
            continue
        if isinstance(v, list):
            text = ",".join(str(x) for x in v)
        else:
            text = "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        sets += ["--set", f"{k}={text}"]
    dev = str(config.get("device", "auto")).split(":")[0]
    return shlex.join(["lazylab", "reproduce", exp_id, "--scale", scale, "--seeds",
                       str(config.get("seeds", 1)), "--device", dev, *sets,
                       *policy_flags(config.get("policy") or {})])


def policy_flags(policy: dict[str, Any]) -> list[str]:
    """The options that recreate an execution policy (``ExecutionPolicy.identity()``), which is
    part of the identity ``--resume`` checks: ``--threads``, ``--precision tf32``,
    ``--memory-budget`` (GiB).

    >>> policy_flags({"threads": 2, "allow_tf32": True, "memory_budget": 2**30})
    ['--threads', '2', '--precision', 'tf32', '--memory-budget', '1']
    """
    out: list[str] = []
    if policy.get("threads"):
        out += ["--threads", str(int(policy["threads"]))]
    if policy.get("allow_tf32"):
        out += ["--precision", "tf32"]
    if policy.get("memory_budget"):
        out += ["--memory-budget", f"{policy['memory_budget'] / 2**30:g}"]
    return out


_LINKS = ("results.csv", "claims.json", "config.json")


def _robustness_shape(data: Any) -> bool:
    """Whether a robustness.json has the shape ``lazylab robustness`` writes (a file written
    by something else is skipped, not rendered into a crash)."""
    return (isinstance(data, dict) and isinstance(data.get("summary"), dict)
            and all(isinstance(k, str) and isinstance(v, str)
                    for k, v in data["summary"].items())
            and isinstance(data.get("settings", []), list)
            and isinstance(data.get("seeds", 0), int | str))


def _robustness(out_dir: Path) -> list[dict[str, Any]]:
    """Experiments in ``out_dir`` with a robustness.json (lazylab robustness), by name."""
    found = []
    for sub in sorted(p for p in out_dir.iterdir() if p.is_dir()):
        try:
            data = json.loads((sub / "robustness.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if _robustness_shape(data):
            found.append({"dir": sub.name, "data": data,
                          "png": f"{sub.name}/robustness.png"
                          if (sub / "robustness.png").is_file() else None})
    return found


def _robustness_md(out_dir: Path) -> list[str]:
    rob = _robustness(out_dir)
    if not rob:
        return []
    lines = ["", "## Robustness", "",
             "Each claim re-checked across settings and seeds (`lazylab robustness`); a claim "
             "holds at a setting when it held for most seeds.", ""]
    for r in rob:
        d = r["data"]
        lines += [f"### {_md(d.get('experiment', r['dir']))}", "",
                  f"{len(d.get('settings', []))} settings x {_md(d.get('seeds'))} seeds; "
                  f"data: [robustness.csv]({_rel(r['dir'], 'robustness.csv')})", ""]
        if r["png"]:
            lines += [f"![robustness of {_md(r['dir'])}]({_rel(r['png'])})", ""]
        lines += [f"- {_md(cid)}: {_md(text)}" for cid, text in d["summary"].items()]
    return lines


def _robustness_html(out_dir: Path) -> list[str]:
    rob = _robustness(out_dir)
    if not rob:
        return []
    out = ["<h2 id='robustness'>Robustness</h2>",
           "<p>Each claim re-checked across settings and seeds (<code>lazylab robustness</code>);"
           " a claim holds at a setting when it held for most seeds.</p>"]
    for r in rob:
        d = r["data"]
        out.append(f"<section class='robustness' data-id='{_h(r['dir'])}'>"
                   f"<h3>{_h(d.get('experiment', r['dir']))}</h3><p>"
                   f"{len(d.get('settings', []))} settings x {_h(d.get('seeds'))} seeds; data: "
                   f"<a href='{_href(r['dir'], 'robustness.csv')}'>robustness.csv</a></p>")
        if r["png"]:
            out.append(f"<img class='figure' src='{_href(r['png'])}' alt='robustness of "
                       f"{_h(r['dir'])}'>")
        out.append("<ul>" + "".join(f"<li><b>{_h(cid)}</b>: {_h(text)}</li>"
                                    for cid, text in d["summary"].items()) + "</ul></section>")
    return out


def _render_md(out_dir: Path, secs: list[dict[str, Any]], stamp: str) -> str:
    lines = ["# lazylab report", "", f"Output directory {_md(out_dir)}, written {stamp}.", "",
             "| experiment | paper | figure | scale | seeds | device | claims |",
             "|---|---|---|---|---|---|---|"]
    for s in secs:
        c = s["config"]
        lines.append("| " + " | ".join(_md(v) for v in (
            s["id"], c.get("paper", ""), c.get("figure", ""), c.get("scale", ""),
            c.get("seeds", ""), c.get("device", ""), _verdict(s))) + " |")
    for s in secs:
        c = s["config"]
        d = s["dir"]
        lines += ["", f"## {_md(s['id'])}: {_md(c.get('figure', ''))}", "",
                  _md(c.get("summary", "")), ""]
        if s["png"]:
            lines += [f"[![{_md(s['id'])}]({_rel(s['png'])})]({_rel(s['png'])})", ""]
        lines += ["Data: " + " · ".join(f"[{n}]({_rel(d, n)})" for n in _LINKS), ""]
        if s["claims"] is None:
            lines += [_unfinished(s, _md, "`{}`"), ""]
        else:
            lines += ["| state | claim | statement | measured | expected | tolerance | test | "
                      "error model |", "|---|---|---|---|---|---|---|---|"]
            for cl in s["claims"]:
                lines.append("| " + " | ".join(_md(v) for v in (
                    _mark(cl), cl.get("id"), cl.get("statement"),
                    format_value(cl.get("measured")), format_value(cl.get("expected")),
                    format_value(cl.get("tolerance")), claim_test(cl),
                    cl.get("error_model") or "-")) + " |")
            lines += ["", "Reproduce:", ""]
        lines += _md_code(s["command"])
        lines += ["", f"Scale {_md(c.get('scale'))}, {_md(c.get('seeds'))} seed(s), device "
                  f"{_md(c.get('device'))}, lazylab revision "
                  f"{_md(c.get('git_revision', 'unknown'))}.",
                  "", "| parameter | value |", "|---|---|"]
        for k, v in (c.get("params") or {}).items():
            lines.append(f"| {_md(k)} | {_md(format_value(v))} |")
    lines += _robustness_md(out_dir)
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}
table{border-collapse:collapse;margin:.8em 0}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:left;vertical-align:top}th{background:#f3f3f3}.ok{color:#1a7f37;font-weight:bold}
.bad{color:#cf222e;font-weight:bold}.na{color:#6e7781}img{max-width:100%}img.figure{width:100%;height:auto}code{background:#f6f8fa}
pre{background:#f6f8fa;padding:.5em;overflow-x:auto}"""


def _h(v: Any) -> str:
    return html.escape(str(v))


def _rel(*parts: Any) -> str:
    """A relative, URL-encoded path inside the report's folder (for Markdown links)."""
    from urllib.parse import quote

    return "./" + quote("/".join(str(p).strip("/") for p in parts if str(p)), safe="/")


def _href(*parts: Any) -> str:
    """A link to a path inside the report's folder: relative (``./``), each segment
    URL-encoded, then HTML-escaped, so a folder named ``javascript:...`` stays a file name."""
    return _h(_rel(*parts))


def _render_html(out_dir: Path, secs: list[dict[str, Any]], stamp: str) -> str:
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>lazylab report</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>lazylab report</h1>",
           f"<p>Output directory <code>{_h(out_dir)}</code>, written {_h(stamp)}.</p>",
           "<table id='summary'><tr><th>experiment</th><th>paper</th><th>figure</th>"
           "<th>scale</th><th>seeds</th><th>device</th><th>claims</th></tr>"]
    for s in secs:
        c = s["config"]
        out.append("<tr>" + "".join(f"<td>{_h(v)}</td>" for v in (
            s["id"], c.get("paper", ""), c.get("figure", ""), c.get("scale", ""),
            c.get("seeds", ""), c.get("device", ""), _verdict(s))) + "</tr>")
    out.append("</table>")
    for s in secs:
        c = s["config"]
        d = s["dir"]
        out += [f"<section class='experiment' data-id='{_h(s['id'])}'>",
                f"<h2 id='{_h(s['id'])}'>{_h(s['id'])}: {_h(c.get('figure', ''))}</h2>",
                f"<p>{_h(c.get('summary', ''))}</p>"]
        img = s["svg"] or s["png"]
        if img:
            out.append(f"<a href='{_href(s['png'] or img)}'><img class='figure' "
                       f"src='{_href(img)}' "
                       f"alt='{_h(s['id'])}'></a>")
        out.append("<p class='links'>Data: " + " · ".join(
            f"<a href='{_href(d, n)}'>{n}</a>" for n in _LINKS) + "</p>")
        if s["claims"] is None:
            out.append(f"<p>{_unfinished(s, _h, '<code>{}</code>')}</p>")
        else:
            out.append("<table class='verdicts'><tr><th>state</th><th>claim</th>"
                       "<th>statement</th><th>measured</th><th>expected</th><th>tolerance</th>"
                       "<th>test</th><th>error model</th></tr>")
            for cl in s["claims"]:
                st = _status(cl)
                cls = {"held": "ok", "failed": "bad"}.get(st, "na")
                out.append(f"<tr class='claim' data-claim='{_h(cl.get('id'))}' "
                           f"data-state='{_h(st)}'><td class='{cls}'>{_h(_mark(cl))}</td>"
                           + "".join(f"<td>{_h(v)}</td>" for v in (
                               cl.get("id"), cl.get("statement"),
                               format_value(cl.get("measured")),
                               format_value(cl.get("expected")),
                               format_value(cl.get("tolerance")), claim_test(cl),
                               cl.get("error_model") or "-")) + "</tr>")
            out.append("</table><p>Reproduce:</p>")
        out.append(f"<pre><code class='command'>{_h(s['command'])}</code></pre>")
        out.append(f"<p>Scale <code>{_h(c.get('scale'))}</code>, {_h(c.get('seeds'))} seed(s), "
                   f"device <code>{_h(c.get('device'))}</code>, lazylab revision "
                   f"<code>{_h(c.get('git_revision', 'unknown'))}</code>.</p>")
        out.append("<details><summary>parameters</summary><table>"
                   "<tr><th>parameter</th><th>value</th></tr>")
        for k, v in (c.get("params") or {}).items():
            out.append(f"<tr><td>{_h(k)}</td><td>{_h(format_value(v))}</td></tr>")
        out.append("</table></details></section>")
    out += _robustness_html(out_dir)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(out_dir: Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` covering every experiment present in ``out_dir``."""
    secs = _sections(out_dir)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    md, page = out_dir / "report.md", out_dir / "report.html"
    atomic_write(md, _render_md(out_dir, secs, stamp))
    atomic_write(page, _render_html(out_dir, secs, stamp))
    return md, page
