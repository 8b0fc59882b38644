"""The report over an output directory: report.md and report.html (every experiment's figure,
claims table, reproduce command and parameters), and the value formatting the terminal tables
share.

Layout of an output directory ``DIR`` (the output contract every command keeps)::

    DIR/lazylab.sqlite            finished work units (lazylab.store)
    DIR/report.md, report.html    every experiment in DIR: figure, claims table, parameters
    DIR/ID/config.json            resolved parameters, scale, seeds, device, versions, timing
    DIR/ID/results.csv            method,kind,x_name,x,seed,metric,value
    DIR/ID/claims.json            [{id, statement, held, measured, expected, tolerance}]
    DIR/ID/ID.png, DIR/ID/ID.svg  the figure

The per-experiment files are assembled by :mod:`lazylab.runner.assemble` and written by
:mod:`lazylab.runner.outputs`; config.json's provenance and the reproduce command come from
:mod:`lazylab.runner.provenance`; import their names from there.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lazylab.runner import assemble as _assemble
from lazylab.runner.outputs import atomic_write, experiment_dirs
from lazylab.runner.provenance import reproduce_command


def rebuild(out_dir: Path, warn: Callable[[str], None] = lambda _msg: None, *,
            recompute_theory: bool = False) -> dict[str, Any]:
    """Re-assemble every experiment in ``out_dir`` from its store
    (:func:`lazylab.runner.assemble.rebuild`), then write the report; returns the rebuilt
    experiments' claims."""
    return _assemble.rebuild(out_dir, warn, recompute_theory=recompute_theory,
                             render=lambda out: write_report(out, warn))


def claim_test(cl: Mapping[str, Any]) -> str:
    """The comparison a claims.json record's verdict applied, as text (``0.967 >= 0.5 - 0.016``):
    its ``comparison`` (:attr:`lazylab.experiments.base.Claim.op`; ``within`` when absent),
    followed by the setting it was read at when the claim must hold at several
    (``details.worst_at``: ``0.52 within 0.5 +- 0.1 at N = 45``)."""
    from lazylab.experiments.base import COMPARISONS, comparison_text

    op = cl.get("comparison")
    text = comparison_text(cl.get("measured"), cl.get("expected"), cl.get("tolerance"),
                           op if op in COMPARISONS else "within")
    at = (cl.get("details") or {}).get("worst_at")
    return f"{text} at {at}" if at and text != "-" else text


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


def _sections(out_dir: Path, warn: Callable[[str], None]) -> list[dict[str, Any]]:
    secs = []
    for exp_dir, config in experiment_dirs(out_dir, warn=warn):
        exp_id = config.get("experiment") or exp_dir.name
        fig = exp_dir / f"{exp_id}.png"
        secs.append({
            "running": _running(out_dir, str(exp_id)),
            "id": exp_id, "config": config, "claims": _claims(exp_dir, warn),
            "dir": exp_dir.name,
            "command": reproduce_command(exp_id, config),
            "png": f"{exp_dir.name}/{exp_id}.png" if fig.is_file() else None,
            "svg": f"{exp_dir.name}/{exp_id}.svg" if (exp_dir / f"{exp_id}.svg").is_file()
            else None,
        })
    return secs


def _claims(exp_dir: Path, warn: Callable[[str], None]) -> list[dict[str, Any]] | None:
    """The records of ``exp_dir/claims.json`` once they pass their schema
    (:data:`lazylab.runner.schemas.CLAIMS`); None, with one line to ``warn`` for a file that
    does not, or silently when there is none (the experiment is not assembled)."""
    from lazylab.runner.schemas import CLAIMS, JsonFileError, read_checked

    path = exp_dir / "claims.json"
    if not path.is_file():
        return None
    try:
        return read_checked(path, CLAIMS)
    except JsonFileError as e:
        warn(f"{e}; its claims are left out of the report")
        return None


def _running(out_dir: Path, exp_id: str) -> bool:
    """Whether another process holds the experiment's run lock in ``out_dir`` now (checked
    read-only: :func:`lazylab.runner.lock.is_held`)."""
    from lazylab.runner.lock import is_held

    return is_held(out_dir, exp_id)


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
    paper = [c for c in sec["claims"] if _status(c) != "not_applicable" and not _is_check(c)]
    held = sum(_status(c) == "held" for c in paper)
    return f"{held}/{len(paper)} held"


def _status(cl: dict[str, Any]) -> str:
    """held / failed / not_applicable (claims.json without ``status``: from ``held``)."""
    return str(cl.get("status") or ("held" if cl.get("held") else "failed"))


def _is_check(cl: dict[str, Any]) -> bool:
    """Whether a claims.json record is a consistency check (``details.kind``)."""
    return (cl.get("details") or {}).get("kind") == "consistency"


def _mark(cl: dict[str, Any]) -> str:
    m = {"held": "✓", "failed": "✗"}.get(_status(cl), "n/a")
    return m + (" (check)" if _is_check(cl) else "")


#: Where the consistency checks are explained (docs/claims.md, its section heading's anchor).
CHECKS_DOC = "docs/claims.md#consistency-checks-and-why"
#: The line under a claims table that has a consistency check, saying what "(check)" means.
CHECK_NOTE = ("(check): a consistency check, not a test of the paper: implied by other claims "
              "at these parameters (claims.json's details.implied_by names them), true by "
              "construction or by an identity, a bound with large slack, or too loose to tell "
              "its law from a competing one; it is computed and shown but not counted in the "
              "claims tally; see")


def _check_note_md(claims: list[dict[str, Any]]) -> list[str]:
    """The "(check)" legend under a Markdown claims table, when a row needs it."""
    if not any(_is_check(cl) for cl in claims):
        return []
    return ["", f"{_md(CHECK_NOTE)} `{CHECKS_DOC}`."]


def _check_note_html(claims: list[dict[str, Any]]) -> list[str]:
    """The "(check)" legend under an HTML claims table, when a row needs it."""
    if not any(_is_check(cl) for cl in claims):
        return []
    return [f"<p class='check-note'>{_h(CHECK_NOTE)} <code>{_h(CHECKS_DOC)}</code>.</p>"]


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


_LINKS = ("results.csv", "claims.json", "config.json")


def _robustness(out_dir: Path, warn: Callable[[str], None] = lambda _msg: None,
                ) -> list[dict[str, Any]]:
    """Experiments in ``out_dir`` with a robustness.json (lazylab robustness) that passes its
    schema (:class:`lazylab.runner.schemas.RobustnessFile`), by name; a file that does not is
    skipped with one line to ``warn``."""
    from lazylab.runner.schemas import JsonFileError, RobustnessFile, read_checked

    found = []
    for sub in sorted(p for p in out_dir.iterdir() if p.is_dir()):
        path = sub / "robustness.json"
        if not path.is_file():
            continue
        try:
            data = read_checked(path, RobustnessFile)
        except JsonFileError as e:
            warn(f"{e}; left out of the report")
            continue
        found.append({"dir": sub.name, "data": data,
                      "png": f"{sub.name}/robustness.png"
                      if (sub / "robustness.png").is_file() else None})
    return found


def _robustness_md(rob: list[dict[str, Any]]) -> list[str]:
    if not rob:
        return []
    lines = ["", "## Robustness", "",
             "Each claim re-checked across settings and seeds (`lazylab robustness`); a claim "
             "holds at a setting when it held for most seeds.", ""]
    for r in rob:
        d = r["data"]
        lines += [f"### {_md(d.get('experiment') or r['dir'])}", "",
                  f"{len(d.get('settings', []))} settings x {_md(d.get('seeds'))} seeds; "
                  f"data: [robustness.csv]({_rel(r['dir'], 'robustness.csv')})", ""]
        if r["png"]:
            lines += [f"![robustness of {_md(r['dir'])}]({_rel(r['png'])})", ""]
        lines += [f"- {_md(cid)}: {_md(text)}" for cid, text in d["summary"].items()]
    return lines


def _robustness_html(rob: list[dict[str, Any]]) -> list[str]:
    if not rob:
        return []
    out = ["<h2 id='robustness'>Robustness</h2>",
           "<p>Each claim re-checked across settings and seeds (<code>lazylab robustness</code>);"
           " a claim holds at a setting when it held for most seeds.</p>"]
    for r in rob:
        d = r["data"]
        out.append(f"<section class='robustness' data-id='{_h(r['dir'])}'>"
                   f"<h3>{_h(d.get('experiment') or r['dir'])}</h3><p>"
                   f"{len(d.get('settings', []))} settings x {_h(d.get('seeds'))} seeds; data: "
                   f"<a href='{_href(r['dir'], 'robustness.csv')}'>robustness.csv</a></p>")
        if r["png"]:
            out.append(f"<img class='figure' src='{_href(r['png'])}' alt='robustness of "
                       f"{_h(r['dir'])}'>")
        out.append("<ul>" + "".join(f"<li><b>{_h(cid)}</b>: {_h(text)}</li>"
                                    for cid, text in d["summary"].items()) + "</ul></section>")
    return out


def _render_md(out_dir: Path, secs: list[dict[str, Any]], stamp: str,
               rob: list[dict[str, Any]]) -> str:
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
            lines += _check_note_md(s["claims"])
            lines += ["", "Reproduce:", ""]
        lines += _md_code(s["command"])
        lines += ["", f"Scale {_md(c.get('scale'))}, {_md(c.get('seeds'))} seed(s), device "
                  f"{_md(c.get('device'))}, lazylab revision "
                  f"{_md(c.get('git_revision', 'unknown'))}.",
                  "", "| parameter | value |", "|---|---|"]
        for k, v in (c.get("params") or {}).items():
            lines.append(f"| {_md(k)} | {_md(format_value(v))} |")
    lines += _robustness_md(rob)
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


def _render_html(out_dir: Path, secs: list[dict[str, Any]], stamp: str,
                 rob: list[dict[str, Any]]) -> str:
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
            out.append("</table>")
            out += _check_note_html(s["claims"])
            out.append("<p>Reproduce:</p>")
        out.append(f"<pre><code class='command'>{_h(s['command'])}</code></pre>")
        out.append(f"<p>Scale <code>{_h(c.get('scale'))}</code>, {_h(c.get('seeds'))} seed(s), "
                   f"device <code>{_h(c.get('device'))}</code>, lazylab revision "
                   f"<code>{_h(c.get('git_revision', 'unknown'))}</code>.</p>")
        out.append("<details><summary>parameters</summary><table>"
                   "<tr><th>parameter</th><th>value</th></tr>")
        for k, v in (c.get("params") or {}).items():
            out.append(f"<tr><td>{_h(k)}</td><td>{_h(format_value(v))}</td></tr>")
        out.append("</table></details></section>")
    out += _robustness_html(rob)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_report(out_dir: Path, warn: Callable[[str], None] = lambda _msg: None,
                 ) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` covering every experiment present in ``out_dir``.

    Every config.json, claims.json and robustness.json is validated against its schema first
    (:mod:`lazylab.runner.schemas`); a file that fails is left out, with one line naming it to
    ``warn``, and the rest of the report is written.
    """
    secs = _sections(out_dir, warn)
    rob = _robustness(out_dir, warn)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    md, page = out_dir / "report.md", out_dir / "report.html"
    atomic_write(md, _render_md(out_dir, secs, stamp, rob))
    atomic_write(page, _render_html(out_dir, secs, stamp, rob))
    return md, page
