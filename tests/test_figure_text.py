"""Figures' log-axis tick labels are written as plain text (no mathtext parse when saving)."""

from __future__ import annotations

import pytest
from matplotlib import _mathtext
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, ScalarFormatter

from lazylab.runner.outputs import plain_power, save_figure


@pytest.mark.parametrize(("label", "plain"), [
    (r"$\mathdefault{10^{-2}}$", "10⁻²"),
    (r"$\mathdefault{10^{0}}$", "10⁰"),
    (r"$\mathdefault{10^{13}}$", "10¹³"),
    (r"$\mathdefault{2\times10^{1}}$", "2×10¹"),
    (r"$\mathdefault{-10^{3}}$", "-10³"),
    (r"$\mathdefault{2^{5}}$", "2⁵"),
    (r"$\mathdefault{10^{0.50}}$", r"$\mathdefault{10^{0.50}}$"),  # not an integer power
    (r"$\mathdefault{0}$", r"$\mathdefault{0}$"),
    ("0.5", "0.5"),
    ("", ""),
])
def test_plain_power(label, plain):
    assert plain_power(label) == plain


def _parses(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = _mathtext.Parser.parse

    def counted(self, s, *a, **k):
        seen.append(s)
        return real(self, s, *a, **k)

    monkeypatch.setattr(_mathtext.Parser, "parse", counted)
    return seen


def test_saved_figure_has_plain_log_ticks(tmp_path, monkeypatch):
    """A figure with a log x axis over five decades, a log y axis within one decade (minor
    labels) and a linear third axis saves without a single mathtext parse; its log tick labels
    are the plain forms, the linear axis keeps its formatter, and a log axis with its own
    formatter keeps that one."""
    fig = Figure(figsize=(6, 3))
    a, b, c = fig.subplots(1, 3)
    a.plot([1e-3, 1e2], [1, 2])
    a.set_xscale("log")
    b.plot([1, 2], [2.0, 8.0])
    b.set_yscale("log")
    c.plot([1, 2], [3, 4])
    c.set_xscale("log")
    own = FuncFormatter(lambda x, pos: f"x={x:g}")
    c.xaxis.set_major_formatter(own)
    seen = _parses(monkeypatch)
    save_figure(fig, tmp_path, "f", dpi=50)
    assert seen == []
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.svg").stat().st_size > 0
    labels = [t.get_text() for t in a.get_xticklabels() if t.get_text()]
    assert "10⁻²" in labels and "10⁰" in labels and not any("$" in t for t in labels)
    minor = [t.get_text() for t in b.get_yticklabels(minor=True) if t.get_text()]
    assert minor and not any("$" in t for t in minor) and any("×" in t for t in minor)
    assert isinstance(a.yaxis.get_major_formatter(), ScalarFormatter)
    assert c.xaxis.get_major_formatter() is own


def test_mathtext_labels_are_still_parsed(tmp_path, monkeypatch):
    """The counter above sees a parse when there is one: an axis label in mathtext."""
    fig = Figure(figsize=(3, 3))
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2])
    ax.set_xlabel(r"$\lambda_3$")
    seen = _parses(monkeypatch)
    save_figure(fig, tmp_path, "g", dpi=50)
    assert r"$\lambda_3$" in seen
