"""report.html in a real browser: headless Chromium loads every figure, shows a verdict row per
claim with its state (held / failed / not applicable), links the data, and is screenshotted.

Skipped without Chromium (``.ci/run`` installs Debian's ``chromium``).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lazylab.cli import app
from toy_experiment import registered

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
         "--allow-file-access-from-files", "--virtual-time-budget=10000"]

#: Appended to a copy of report.html: writes what the page shows into the DOM once loaded.
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => ({src: i.getAttribute('src'),
                                               w: i.naturalWidth, ok: i.complete}));
  const rows = [...document.querySelectorAll('tr.claim')].map(r => ({
    exp: r.closest('section').dataset.id, claim: r.dataset.claim, state: r.dataset.state,
    cells: [...r.cells].map(c => c.textContent)}));
  const links = [...document.querySelectorAll('a')].map(a => a.getAttribute('href'));
  const cmds = [...document.querySelectorAll('code.command')].map(c => c.textContent);
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({imgs, rows, links, cmds});
  document.body.appendChild(pre);
});
</script>"""


def chromium(profile: Path, *args: str) -> str:
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def add_claim_states_and_rewrite(out: Path) -> tuple[Path, Path]:
    """Give the report all three claim states (a failed and a not-applicable claim added)."""
    from lazylab.report import write_report

    claims_path = out / "toy-mean" / "claims.json"
    claims = json.loads(claims_path.read_text())
    claims.append({**claims[0], "id": "tilted", "held": False, "status": "failed"})
    claims.append({"id": "k2-limit", "statement": "not testable here", "held": False,
                   "status": "not_applicable", "measured": "nan", "expected": "nan",
                   "tolerance": "nan", "error_model": "", "details": {"reason": "test"}})
    claims_path.write_text(json.dumps(claims))
    return write_report(out)


def test_report_renders_in_chromium(tmp_path):
    out = tmp_path / "runs"
    with registered():
        res = CliRunner().invoke(app, ["reproduce", "toy-mean", "--out", str(out)],
                                 env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        _, page = add_claim_states_and_rewrite(out)
    claims = json.loads((out / "toy-mean" / "claims.json").read_text())
    probe = out / "report-probe.html"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))

    dom = chromium(tmp_path / "profile", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    seen = json.loads(html.unescape(m.group(1)))

    assert seen["imgs"], "the report shows the figure"
    for img in seen["imgs"]:
        assert img["ok"] and img["w"] > 0, img  # every figure loaded
    states = {(r["exp"], r["claim"]): r["state"] for r in seen["rows"]}
    assert states == {("toy-mean", "second-moment"): claims[0]["status"],
                      ("toy-mean", "tilted"): "failed",
                      ("toy-mean", "k2-limit"): "not_applicable"}
    first = next(r for r in seen["rows"] if r["claim"] == "second-moment")
    assert first["cells"][0] in ("✓", "✗")
    assert f"{claims[0]['tolerance']:.4g}" in first["cells"]  # measured/tolerance shown
    for name in ("results.csv", "claims.json", "config.json"):
        assert f"./toy-mean/{name}" in seen["links"]
        assert (out / "toy-mean" / name).is_file()
    assert all(link.startswith("./") for link in seen["links"]), seen["links"]  # relative only
    (cmd,) = seen["cmds"]
    assert cmd.startswith("lazylab reproduce toy-mean --scale quick --seeds 2 --device cpu "
                          "--threads "), cmd

    shot = out / "report.png"
    chromium(tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,1600",
             page.as_uri())
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
