"""Figures a reader can check against the claims: every method's legend entry is keyed by its
colour and its marker, the key names which theory a line is, the samples figures draw and name
the line each claim compares against and mark the step-size cuts, and the report explains
"(check)".

The figures are built from synthetic results (the plots read only the results table and the
parameters), plus one real smoke run of a cheap experiment, so this file stays fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lazylab.experiments import get_experiment, style
from lazylab.experiments.bailee import coupling as cp
from lazylab.experiments.base import Results, row
from lazylab.experiments.ghorbani.widths import width_plot
from lazylab.report import CHECKS_DOC, write_report

SEEDS = (0, 1)


def _entries(ax: Axes) -> list[tuple[str, str, str, str]]:
    """(label, colour, marker, linestyle) of each legend entry of ``ax``."""
    legend = ax.get_legend()
    assert legend is not None
    bars = {c.get_label(): c[0] for c in ax.containers if isinstance(c, ErrorbarContainer)}
    out = []
    for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True):
        if not isinstance(h, Line2D):  # points with error bars: their data line is the key
            h = bars[t.get_text()]
        out.append((t.get_text(), to_hex(h.get_color()), str(h.get_marker()),
                    str(h.get_linestyle())))
    return out


def _sim_markers(ax: Axes) -> dict[str, str]:
    """colour -> marker of the simulation points drawn with error bars."""
    return {to_hex(c[0].get_color()): str(c[0].get_marker()) for c in ax.containers
            if isinstance(c, ErrorbarContainer)}


def assert_keyed(fig: Figure) -> list[tuple[str, str, str, str]]:
    """Distinct legend entries look distinct, and every simulation marker appears in the
    legend on an entry of its colour (the shape is keyed, not only the colour)."""
    ax = fig.axes[0]
    entries = _entries(ax)
    looks = [e[1:] for e in entries]
    assert len(set(looks)) == len(looks), entries
    for color, marker in _sim_markers(ax).items():
        assert any(e[1] == color and e[2] == marker for e in entries), (color, marker, entries)
    return entries


def _series(method: str, metric: str, xs: list[float], ys: list[float]) -> list[dict]:
    """Simulation rows of two seeds (+-1% apart) and the theory rows of one curve."""
    rows = [row(method, "x", x, metric, y, kind="theory") | {"seed": None}
            for x, y in zip(xs, ys, strict=True)]
    for s in SEEDS:
        rows += [row(method, "x", x, metric, y * (1 + 0.01 * (2 * s - 1))) | {"seed": s}
                 for x, y in zip(xs, ys, strict=True)]
    return rows


# ---------------------------------------------------------------------- the shared style
def test_a_method_entry_carries_its_line_and_its_marker():
    fig, ax = style.new_figure()
    for m in ("NN", "NT(I)", "RF(I)"):
        style.theory_line(ax, [1, 2, 3], [3, 2, 1], m)
        style.sim_points(ax, [1, 3], [3, 1], [0.1, 0.1], m)
    style.finish(ax, theory=style.ASYMPTOTIC)
    entries = assert_keyed(fig)
    by = {e[0]: e for e in entries}
    assert by["NN"][2:] == ("o", "-") and by["NT(I)"][2:] == ("s", "-")
    assert by["RF(I)"][2] == "^"
    assert f"lines: {style.ASYMPTOTIC}" in by


def test_a_labelled_simulation_keeps_its_own_entry_and_lines_stay_plain():
    """Points with a legend entry of their own are not merged into a line, and a line whose
    colour has no points keeps no marker."""
    fig, ax = style.new_figure()
    style.theory_line(ax, [1, 2], [1, 2], "NN", label="theory NN")
    style.sim_points(ax, [1, 2], [1, 2], [0.1, 0.1], "NN", label="NN runs")
    style.theory_line(ax, [1, 2], [2, 1], "RF(I)")
    style.finish(ax)
    by = {e[0]: e for e in _entries(ax)}
    assert by["theory NN"][2] == "None" and by["RF(I)"][2] == "None"


def test_markers_are_fixed_per_method_and_its_limit():
    """Known methods keep their paper markers; a limit ``lim M`` shares M's marker and colour;
    another name gets the same marker every time (a hash, not the drawing order)."""
    assert [style.method_marker(m) for m in ("NN", "NT(I)", "RF(I)", "RF(Gamma*)")] == [
        "o", "s", "^", "D"]
    assert style.method_marker("lim NT(I)") == "s"
    assert style.method_marker("fL_abs") == style.method_marker("lim fL_abs")
    assert style.method_marker("fL_abs") in ("o", "s", "^", "D", "v", "P", "X", "*")


# ---------------------------------------------------------------------- figures
def test_width_figure_names_both_theories():
    xs = [4.0, 8.0, 16.0]
    rows = []
    for m, y0 in (("NN", 0.3), ("NT(I)", 0.6), ("RF(I)", 0.8)):
        rows += _series(m, "risk", xs, [y0 / (1 + i) for i in range(3)])
        rows += [row(m, "x", x, "risk_finite_d", 0.9 * y0, kind="theory") | {"seed": None}
                 for x in xs]
    entries = assert_keyed(width_plot(Results(rows), ("NN", "NT(I)", "RF(I)"), 12,
                                      title="t", ylim=(0, 1)))
    labels = [e[0] for e in entries]
    assert f"lines: {style.ASYMPTOTIC}" in labels
    assert f"dashed: {style.FINITE_D}" in labels


def test_coupling_figure_is_keyed():
    xs = [100.0, 300.0, 1000.0]
    rows = []
    for i, m in enumerate((cp.FL, cp.FQ, cp.STD, cp.ONE_SIGMA, cp.GAP)):
        rows += _series(m, cp.METRIC, xs, [10.0 ** -i * x ** 0.1 for x in xs])
    exp = get_experiment("bailee-coupling")
    assert_keyed(exp.plot(exp.resolve("quick", {}), Results(rows)))


def test_coupling_smoke_figure_is_keyed():
    """The same on a real smoke run (cheap: a few widths)."""
    from lazylab.testing import run_in_memory

    exp = get_experiment("bailee-coupling")
    run = run_in_memory(exp, dict(exp.smoke), seeds=1)
    entries = assert_keyed(exp.plot(run.p, run.results))
    assert sum(e[2] not in ("None", "") for e in entries) >= 5  # five methods, each a marker


def _samples_results(exp, p) -> Results:
    """Risk curves of NN and NT(I) falling to 0.05 and 0.4, the NT runs' own-W limits 0.39
    and 0.41, and the theory limits (NN: asymptotic 0.05 = finite d; NT(I): 0.37, 0.395)."""
    x_end = p.sgd_steps * p.batch_size / p.d
    xs = [x_end * k / 4 for k in range(5)]
    rows = []
    for m, lim in (("NN", 0.05), ("NT(I)", 0.4)):
        for s in SEEDS:
            rows += [row(m, "n/d", x, "risk", lim + (1 - lim) / (1 + 10 * k)) | {"seed": s}
                     for k, x in enumerate(xs)]
    rows += [row("NT(I)", "n/d", x_end, "risk_population_limit", v) | {"seed": s}
             for s, v in zip(SEEDS, (0.39, 0.41), strict=True)]
    for name, vals in {"lim NN": (0.05, 0.05), "lim NT(I)": (0.37, 0.395)}.items():
        rows += [row(name, "n/d", x, metric, v, kind="theory") | {"seed": None}
                 for metric, v in zip(("risk", "risk_finite_d"), vals, strict=True)
                 for x in xs]
    return Results(rows)


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-samples", "ghorbani-mg-samples"])
def test_samples_figure_draws_the_line_each_claim_compares_against(exp_id):
    exp = get_experiment(exp_id)
    p = exp.resolve("quick", {})
    res = _samples_results(exp, p)
    fig = exp.plot(p, res)
    entries = assert_keyed(fig)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.lines}
    lim = r"$\lim_{n\to\infty}$ "
    # NN: the asymptotic and the finite-d limit agree, one line names both
    nn = lines[f"{lim}NN: asymptotic = finite d"]
    assert float(nn.get_ydata()[0]) == pytest.approx(0.05)
    # NT(I): its claims compare with the mean of the runs' own-W limits (0.40), dotted
    nt = lines[f"{lim}NT(I): finite d, own W"]
    assert float(nt.get_ydata()[0]) == pytest.approx(0.40, abs=1e-12)
    assert nt.get_linestyle() == ":"
    assert float(lines[rf"{lim}NT(I): asymptotic ($d\to\infty$)"].get_ydata()[0]) == 0.37
    claims = {c.id: c for c in exp.claims(p, res)}
    assert claims["NT(I)-converges"].expected == pytest.approx(0.40, abs=1e-12)
    assert claims["NN-converges"].expected == pytest.approx(0.05, abs=1e-12)
    assert any(e[0].startswith("step-size cuts") for e in entries)


def test_samples_figure_marks_and_explains_the_step_size_cut():
    """The step of the quick curves (n/d = 26,250 for the quadratic target: 15 000 steps of
    100 at d = 40, the last 2 x 15% at lr/10 and lr/15) is the first cut, drawn and named."""
    exp = get_experiment("ghorbani-qf-samples")
    p = exp.resolve("quick", {})
    assert exp.cuts(p) == [26_250.0, 31_875.0]
    fig = exp.plot(p, _samples_results(exp, p))
    ax = fig.axes[0]
    verticals = sorted(float(ln.get_xdata()[0]) for ln in ax.lines
                       if ln.get_color() == "0.55")
    assert verticals == [26_250.0, 31_875.0]
    assert "the drop at n/d = 26,250 is the step-size cut lr -> lr/10" in ax.get_title()
    p0 = exp.resolve("quick", {"tail_fraction": 0.0})
    assert exp.cuts(p0) == []
    assert "drop" not in exp.plot(p0, _samples_results(exp, p0)).axes[0].get_title()


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-samples", "ghorbani-mg-samples"])
def test_converges_statements_name_the_finite_d_limit_as_the_legend_does(exp_id):
    st = get_experiment(exp_id).claim_statements
    assert "finite-d limit" in st["NN-converges"]
    assert "legend: lim NN: finite d" in st["NN-converges"]
    assert "finite-d limit for its own W" in st["NT(I)-converges"]
    assert "legend: lim NT(I): finite d, own W" in st["NT(I)-converges"]
    assert "large-n limit" not in st["NN-converges"]


# ---------------------------------------------------------------------- the report
def _experiment_dir(out: Path, exp_id: str, claims: list[dict]) -> None:
    d = out / exp_id
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"experiment": exp_id, "scale": "quick",
                                               "seeds": 1, "params": {}}))
    (d / "claims.json").write_text(json.dumps(claims))


def _claim(cid: str, kind: str | None = None) -> dict:
    return {"id": cid, "statement": "s", "held": True, "status": "held", "measured": 1.0,
            "expected": 1.0, "tolerance": 0.1, "details": {"kind": kind} if kind else {}}


def test_report_explains_check_where_a_consistency_check_is_shown(tmp_path):
    _experiment_dir(tmp_path, "ghorbani-qf-samples",
                    [_claim("NN-converges"), _claim("NN-below-NT", "consistency")])
    _experiment_dir(tmp_path, "bailee-coupling", [_claim("slope")])
    md_path, html_path = write_report(tmp_path)
    md, page = md_path.read_text(), html_path.read_text()
    assert md.count("✓ \\(check\\)") == 1
    note = "a consistency check, not a test of the paper"
    assert md.count(note) == 1 and page.count(note) == 1
    assert md.count(f"`{CHECKS_DOC}`") == 1 and page.count(f"<code>{CHECKS_DOC}</code>") == 1
    qf = md.index("## ghorbani-qf-samples")
    end = md.find("\n## ", qf + 1)
    assert note in md[qf:end if end >= 0 else len(md)]  # under the table that has the check
    assert CHECKS_DOC.endswith("#consistency-checks-and-why")


def test_checks_doc_anchor_exists():
    """The anchor the report names is the heading of docs/claims.md (GitHub's slug)."""
    doc = Path(__file__).resolve().parents[1] / "docs" / "claims.md"
    if not doc.is_file():
        pytest.skip("docs/claims.md is not in this tree")
    heads = [ln.lstrip("#").strip() for ln in doc.read_text().splitlines()
             if ln.startswith("## ")]
    slugs = {"-".join("".join(c for c in h.lower() if c.isalnum() or c in " -").split())
             for h in heads}
    assert CHECKS_DOC.split("#")[1] in slugs
