"""The table of ``docs/paper-scale.md``, generated from the registry and the committed results.

One row per experiment: the hardware it needs, the registry's projections (one H100, one core
of this project's CPU; ``bench/bench_paper_scale.py --write-estimates`` stores them in
``src/lazylab/experiments/paper_estimates.json``), the cost model's peak memory at the paper's
parameters, and, where a complete paper-scale run is committed under ``docs/paper-scale/``
(``measured.json``), its device, wall time, the revision that recorded it and its claims
counted from its ``claims.json``.

Run: ``.venv/bin/python bench/paper_scale_page.py [--write | --check]``.
``--add-run DIR ID --wall S --command "..."`` copies a finished run's folder ``DIR/ID`` into
``docs/paper-scale/runs/ID`` and records it in ``measured.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "docs" / "paper-scale"
MANIFEST = FOLDER / "measured.json"
PAGE = ROOT / "docs" / "paper-scale.md"
#: The generated blocks of the page, each between ``<!-- paper-scale-NAME:begin ...-->`` and
#: ``<!-- paper-scale-NAME:end -->``.
BLOCKS = ("table", "ratios", "figures")

#: Hardware classes by the one-core CPU projection (seconds): below the first a CPU finishes
#: it in one sitting; below the second, in a few sittings of ``--max-time`` / ``--resume``.
CPU_SITTING_S = 3600.0
CPU_RESUMABLE_S = 30 * 3600.0
COPIED = ("config.json", "results.csv", "claims.json")


@dataclass(frozen=True)
class _Priced:
    """The minimal run description ``lazylab.experiments.cost.estimate`` reads."""

    exp: Any
    params: Any
    scale: str
    seeds: int


def _dur(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 600:
        return f"{s:.1f} s" if s < 100 else f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 3 * 3600 else f"{s / 3600:.1f} h"


def hardware(cpu_seconds: float | None) -> str:
    """Where the experiment runs at paper scale, by its one-core CPU projection."""
    if cpu_seconds is None:
        return "GPU"
    if cpu_seconds <= CPU_SITTING_S:
        return "CPU"
    return "CPU, resumed" if cpu_seconds <= CPU_RESUMABLE_S else "GPU"


def _consistency(claim: dict[str, Any]) -> bool:
    details = claim.get("details")
    return isinstance(details, dict) and details.get("kind") == "consistency"


def claim_counts(claims: list[dict[str, Any]]) -> str:
    """``held/claims`` over the claims that are not consistency checks, then failed and n/a."""
    real = [c for c in claims if not _consistency(c)]
    st = Counter(c.get("status") or ("held" if c.get("held") else "failed") for c in real)
    n_test = st["held"] + st["failed"]
    out = f"{st['held']}/{n_test} held"
    if st["failed"]:
        out += f", {st['failed']} failed"
    if st["not_applicable"]:
        out += f", {st['not_applicable']} n/a"
    return out


def _measured() -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads(MANIFEST.read_text())["runs"]}


def rows() -> list[dict[str, Any]]:
    """One dict per built-in experiment with every column of the table."""
    from lazylab.experiments import all_experiments
    from lazylab.experiments.cost import estimate

    est = json.loads((ROOT / "src/lazylab/experiments/paper_estimates.json").read_text())
    measured = _measured()
    out = []
    for exp in sorted(all_experiments(), key=lambda e: e.id):
        if not type(exp).__module__.startswith("lazylab."):
            continue
        e = est.get(exp.id, {})
        p = exp.resolve("paper")
        peak = estimate(_Priced(exp, p, "paper", exp.default_seeds.get("paper", 1))).peak_bytes
        row = {"id": exp.id, "h100": exp.est_seconds.get("paper"),
               "cpu": e.get("paper_cpu_seconds"), "peak": peak, "run": measured.get(exp.id)}
        out.append(row)
    return out


def _claims_cell(run: dict[str, Any] | None) -> str:
    if run is None:
        return "-"
    if not run.get("claims"):
        return "claims.json not kept"
    claims = json.loads((FOLDER / run["claims"]).read_text())
    return f"[{claim_counts(claims)}](paper-scale/{run['claims']})"


def table() -> str:
    """The Markdown table (with its header) that sits between the page's markers."""
    head = ("| experiment | needs | one H100 (model) | one CPU core (projection) | peak memory "
            "| measured: device | wall time | recorded at | claims |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows():
        run = r["run"]
        peak = "-" if r["peak"] is None else f"{r['peak'] / 2**30:.1f} GiB"
        fig = f" ([figure](paper-scale/{run['figure']}))" if run and run.get("figure") else ""
        lines.append(
            f"| `{r['id']}` | {hardware(r['cpu'])} | {_dur(r['h100'])} | {_dur(r['cpu'])} "
            f"| {peak} | {run['device'] + fig if run else 'not run'} "
            f"| {_dur(run['wall_seconds']) if run else '-'} "
            f"| {('`' + run['revision'] + '`') if run else '-'} | {_claims_cell(run)} |")
    return head + "\n".join(lines) + "\n"


def ratios() -> str:
    """Complete CPU runs against the one-core CPU projection. The GPU rows ran code older than
    the H100 model prices (float32 where it prices TF32, paths since batched), so they are
    not set against it."""
    head = ("| experiment | measured on | wall time | projection | wall / projection |\n"
            "|---|---|---|---|---|\n")
    lines = []
    for r in rows():
        run = r["run"]
        if run is None or not run["device"].startswith("CPU") or not r["cpu"]:
            continue
        lines.append(f"| `{r['id']}` | {run['device']} | {_dur(run['wall_seconds'])} "
                     f"| {_dur(r['cpu'])} | {run['wall_seconds'] / r['cpu']:.2f} |")
    return head + "\n".join(lines) + "\n"


def figures() -> str:
    """The figure of every complete run recorded under ``runs/``."""
    out = []
    for r in rows():
        run = r["run"]
        if run and (run.get("figure") or "").startswith("runs/"):
            out.append(f"![{r['id']} at paper scale, {run['device']}]"
                       f"(paper-scale/{run['figure']})\n")
    return "\n".join(out) if out else "None yet.\n"


def _markers(name: str) -> tuple[str, str]:
    return (f"<!-- paper-scale-{name}:begin (bench/paper_scale_page.py --write) -->",
            f"<!-- paper-scale-{name}:end -->")


def render(page: str) -> str:
    """``page`` with every generated block replaced by its current contents."""
    make = {"table": table, "ratios": ratios, "figures": figures}
    for name in BLOCKS:
        begin, end = _markers(name)
        pat = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pat.search(page):
            raise ValueError(f"{PAGE}: the markers {begin!r} ... {end!r} are missing")
        body = make[name]()
        page = pat.sub(lambda _m, b=begin, e=end, t=body: b + "\n" + t + e, page)
    return page


def write(check: bool) -> int:
    """Rewrite the page's generated blocks (``check``: only compare; 1 if they differ)."""
    page = PAGE.read_text()
    try:
        new = render(page)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if check:
        if new != page:
            print(f"{PAGE}'s generated blocks are stale: run bench/paper_scale_page.py --write")
            return 1
        return 0
    PAGE.write_text(new)
    return 0


def add_run(src: Path, exp_id: str, wall: float, command: str, device: str) -> None:
    """Copy ``src/exp_id``'s outputs into ``docs/paper-scale/runs/exp_id`` and record them."""
    dst = FOLDER / "runs" / exp_id
    dst.mkdir(parents=True, exist_ok=True)
    for name in (*COPIED, f"{exp_id}.png"):
        shutil.copy2(src / exp_id / name, dst / name)
    config = json.loads((dst / "config.json").read_text())
    rev = str(config.get("git_revision") or config.get("provenance", {}).get("git_revision", ""))
    data = json.loads(MANIFEST.read_text())
    runs = [r for r in data["runs"] if r["id"] != exp_id]
    runs.append({"id": exp_id, "device": device, "wall_seconds": round(wall, 1),
                 "revision": rev[:7] or "unknown", "command": command,
                 "claims": f"runs/{exp_id}/claims.json", "figure": f"runs/{exp_id}/{exp_id}.png",
                 "results": f"runs/{exp_id}/results.csv"})
    data["runs"] = sorted(runs, key=lambda r: r["id"])
    MANIFEST.write_text(json.dumps(data, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite the page's table")
    g.add_argument("--check", action="store_true", help="exit 1 if the page's table is stale")
    g.add_argument("--add-run", nargs=2, metavar=("DIR", "ID"),
                   help="record a complete run of DIR/ID (with --wall and --command)")
    ap.add_argument("--wall", type=float, help="wall seconds of the whole run (--add-run)")
    ap.add_argument("--command", default="", help="the exact command (--add-run)")
    ap.add_argument("--device", default="CPU, 1 core", help="where it ran (--add-run)")
    a = ap.parse_args()
    if a.add_run:
        if a.wall is None or a.wall <= 0:
            ap.error("--add-run needs --wall SECONDS > 0")
        add_run(Path(a.add_run[0]), a.add_run[1], a.wall, a.command, a.device)
        return write(check=False)
    if a.write or a.check:
        return write(check=a.check)
    print(table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
