"""Width grid and figure shared by the two risk-vs-N experiments (Figs. 1 and 2, left).

The paper's grid is "N in {45, ..., 4500}" at d = 450 (rho from 0.1 to 10) on a log axis; the
exact grid is not given, so we take a geometric grid plus N = d (spec Sec. 8 item 8).
"""

from __future__ import annotations

from collections.abc import Sequence

from lazylab.experiments import style
from lazylab.experiments.base import Results, geomspace_int

__all__ = ["width_grid", "width_plot"]


def width_grid(d: int, rho_min: float, rho_max: float, n: int) -> list[int]:
    """Integers on geomspace(rho_min d, rho_max d, n), plus N = d; all >= 1."""
    lo = max(1, round(rho_min * d))
    hi = max(lo + 1, round(rho_max * d))
    return geomspace_int(lo, hi, n, extra=[d])


def width_plot(results: Results, methods: Sequence[str], d: int, *, title: str,
               ylim: tuple[float, float], bayes: float | None = None):
    """R/R0 vs N: theory lines (the paper's formulas), thin dashed finite-d references,
    simulation dots with SEM bars, the N = d line and (mixture) the dotted Bayes error."""
    fig, ax = style.new_figure()
    shown_fd = False
    for m in methods:
        style.series_line(ax, results, m, "risk")
        x, y, _, _ = results.series(m, "risk_finite_d", kind="theory")
        if len(x) and m != "NN":  # NN's finite-d value is its theory line
            style.theory_line(ax, x, y, m, label="", linestyle="--", linewidth=0.9, alpha=0.6)
            shown_fd = True
        style.series_points(ax, results, m, "risk")
    if shown_fd:  # one grey legend entry for all the thin dashed references
        ax.plot([], [], linestyle="--", linewidth=0.9, color="0.5", label="finite-d theory")
    if bayes is not None:
        style.bayes_line(ax, bayes)
    style.width_axis(ax, d)
    style.finish(ax, ylim=ylim, title=title)
    return fig
