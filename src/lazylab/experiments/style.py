"""Matplotlib helpers for figures styled like the papers' (shared by every experiment).

Conventions (Ghorbani et al. 2019, Figs. 1-2, and the other papers' risk-vs-width plots):

* theory as solid lines, simulations as dots (mean over seeds) with SEM error bars, in the same
  colour per method;
* a log-scale width axis with a vertical dash-dot line at N = d;
* dashed horizontal lines for large-n limits and a dotted black line for the Bayes error;
* one colour and one marker per method name, the same in every figure (:func:`method_color`,
  :func:`method_marker`); a method's legend entry shows both, the line and the marker, so a
  dot can be matched to its key by shape as well as by colour;
* the key names what the lines are: :data:`ASYMPTOTIC` (the papers' d -> infinity formulas) or
  :data:`FINITE_D` (exact at the run's d), passed to :func:`finish` as ``theory``.

Figures are plain :class:`matplotlib.figure.Figure` objects (no pyplot state), so they can be
built in worker processes and saved by the report.

Example
-------
>>> import numpy as np
>>> fig, ax = new_figure()
>>> x = np.geomspace(10, 1000, 20)
>>> theory_line(ax, x, 1 / (1 + x / 100), "RF(I)")
>>> sim_points(ax, [30, 300], [0.77, 0.25], [0.01, 0.02], "RF(I)")
>>> width_axis(ax, d=100)
>>> finish(ax, ylabel="R/R0", ylim=(0, 1))
>>> len(ax.lines) > 0
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

# A colour-blind-safe cycle (Okabe-Ito); named methods get fixed entries so a method has the
# same colour in every figure.
_PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442",
            "#000000")
_FIXED = {"NN": 0, "NT(I)": 1, "NT": 1, "RF(I)": 2, "RF": 2, "RF(Gamma*)": 3}
_MARKERS = {"NN": "o", "NT(I)": "s", "NT": "s", "RF(I)": "^", "RF": "^", "RF(Gamma*)": "D"}
#: Markers of other method names, picked by a hash independent of the colour's, so two names
#: that share a colour (8 entries) rarely share a marker as well (8 x 8 pairs).
_MARKER_CYCLE = ("o", "s", "^", "D", "v", "P", "X", "*")

#: Key text of theory lines that are the papers' asymptotic (d -> infinity) formulas.
ASYMPTOTIC = r"asymptotic theory ($d\to\infty$)"
#: Key text of theory lines that are exact at the run's finite d.
FINITE_D = "finite-d theory (exact at this d)"

#: Display names (mathtext) for method names that are ASCII in results.csv.
_DISPLAY = {
    "RF(Gamma*)": r"RF($\Gamma^*$)",
    "lim NN": r"$\lim_{n\to\infty}$ NN",
    "lim NT(I)": r"$\lim_{n\to\infty}$ NT(I)",
}


def new_figure(width: float = 5.2, height: float = 3.8) -> tuple[Figure, Axes]:
    """A single-panel figure with the papers' plain look (no top/right spines)."""
    fig = Figure(figsize=(width, height))
    ax = fig.add_subplot(1, 1, 1)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)
    return fig, ax


def method_color(method: str) -> str:
    """The colour of a method (fixed for known names, else hashed into the palette)."""
    base = method.removeprefix("lim ").strip()
    if base in _FIXED:
        return _PALETTE[_FIXED[base]]
    return _PALETTE[sum(map(ord, base)) % len(_PALETTE)]


def method_marker(method: str) -> str:
    """The marker of a method's simulation points (fixed for known names, else hashed)."""
    base = method.removeprefix("lim ").strip()
    if base in _MARKERS:
        return _MARKERS[base]
    return _MARKER_CYCLE[sum((i + 1) * ord(c) for i, c in enumerate(base)) % len(_MARKER_CYCLE)]


def display_label(method: str) -> str:
    """The legend text of a method name (e.g. ``RF(Gamma*)`` -> RF(Gamma^*) in mathtext)."""
    return _DISPLAY.get(method, method)


def theory_line(ax: Axes, x: Sequence[float], y: Sequence[float], method: str, *,
                label: str | None = None, linestyle: str = "-", linewidth: float = 1.6,
                alpha: float = 1.0) -> None:
    """A theory curve: solid line in the method's colour (``label=""`` hides it)."""
    lab = display_label(method) if label is None else label
    ax.plot(np.asarray(x, float), np.asarray(y, float), linestyle=linestyle,
            color=method_color(method), linewidth=linewidth, alpha=alpha,
            label=lab if lab else None)


def sim_points(ax: Axes, x: Sequence[float], mean: Sequence[float],
               sem: Sequence[float] | None, method: str, *, label: str | None = "",
               markersize: float = 5.0) -> None:
    """Simulation dots (mean over seeds) with SEM error bars (no legend entry by default, the
    theory line of the same colour carries the label)."""
    lab = display_label(method) if label is None else label
    yerr = None if sem is None or not np.any(np.asarray(sem) > 0) else np.asarray(sem, float)
    ax.errorbar(np.asarray(x, float), np.asarray(mean, float), yerr=yerr, fmt=method_marker(method),
                color=method_color(method), markersize=markersize, capsize=2, linewidth=1.0,
                linestyle="none", label=lab if lab else None)


def limit_line(ax: Axes, y: float, method: str, *, label: str | None = None) -> None:
    """A dashed horizontal line (a large-n limit) in the method's colour."""
    lab = display_label(method) if label is None else label
    ax.axhline(float(y), linestyle="--", color=method_color(method), linewidth=1.4,
               label=lab if lab else None)


def bayes_line(ax: Axes, y: float, *, label: str = "MMSE") -> None:
    """The dotted black Bayes-error line."""
    ax.axhline(float(y), linestyle=":", color="black", linewidth=1.6, label=label)


def width_axis(ax: Axes, d: int, *, xlabel: str = "Number of Hidden Units, N") -> None:
    """Log-scale width axis with the vertical N = d line."""
    ax.set_xscale("log")
    ax.axvline(float(d), linestyle="-.", color="0.45", linewidth=1.2, label="N = d")
    ax.set_xlabel(xlabel)


def finish(ax: Axes, *, xlabel: str | None = None, ylabel: str = r"$R/R_0$",
           ylim: tuple[float, float] | None = None, title: str | None = None,
           legend_loc: str = "best", theory: str = "theory") -> None:
    """Axis labels, limits, title and a legend (:func:`legend_handles`: each method's entry
    with its line and its marker, then a key telling markers, simulations, from lines,
    ``theory``, e.g. :data:`ASYMPTOTIC`); a single-panel figure gets it beside the axes, never
    over a curve.

    A single-panel figure is laid out here. A figure of several panels is laid out once, by
    its ``plot`` after the last panel (``fig.tight_layout()``): a layout per panel would
    measure every panel's text again each time, and only the last one counts."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=11)
    handles = legend_handles(ax, theory=theory)
    if handles and legend_loc == "best" and len(ax.figure.axes) == 1:
        # Beside the axes, so a legend never hides a curve: laid out first, then the legend
        # is added outside (the saved figure's tight bounding box takes it in).
        ax.figure.tight_layout()
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  fontsize=9, frameon=False, borderaxespad=0.0)
        return
    if handles:
        ax.legend(handles=handles, loc=legend_loc, fontsize=9, frameon=False)
    if len(ax.figure.axes) == 1:
        ax.figure.tight_layout()


def _has_marker(line: Line2D) -> bool:
    return line.get_marker() not in (None, "None", "", " ")


def _drawn(line: Line2D) -> bool:
    return line.get_linestyle() not in ("None", "", " ")


def _unlabelled_markers(ax: Axes) -> dict[str, set[str]]:
    """colour (hex) -> markers of the axes' simulation points that have no legend entry of
    their own (error-bar data lines and marker-only lines)."""
    from matplotlib.colors import to_hex
    from matplotlib.container import ErrorbarContainer

    found: dict[str, set[str]] = {}
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    # An error bar's data line and caps are in ax.lines too, labelled apart from their
    # container: they count through the container, whose label is the one in the legend.
    parts = {id(a) for c in bars for a in (c[0], *c[1])}
    points = [(c[0], c.get_label()) for c in bars if c[0] is not None]
    points += [(ln, ln.get_label()) for ln in ax.lines
               if _has_marker(ln) and not _drawn(ln) and id(ln) not in parts]
    for line, label in points:
        if label and not label.startswith("_"):
            continue
        found.setdefault(to_hex(line.get_color()), set()).add(str(line.get_marker()))
    return found


def legend_handles(ax: Axes, *, theory: str = "theory") -> list[Artist]:
    """The axes' legend entries, each method keyed by colour and marker, then the key.

    A labelled line without markers (a method's theory curve) whose colour is that of exactly
    one marker among the unlabelled simulation points is shown as a line with that marker, so
    the legend keys the marker's shape as well as its colour. The key (:func:`_key`) follows
    when the axes show both simulations and theory lines."""
    from matplotlib.colors import to_hex

    handles, labels = ax.get_legend_handles_labels()
    markers = _unlabelled_markers(ax)
    out: list[Artist] = []
    for h, lab in zip(handles, labels, strict=True):
        shapes = markers.get(to_hex(h.get_color()), set()) if isinstance(h, Line2D) else set()
        if isinstance(h, Line2D) and _drawn(h) and not _has_marker(h) and len(shapes) == 1:
            h = Line2D([], [], color=h.get_color(), linestyle=h.get_linestyle(),
                       linewidth=h.get_linewidth(), alpha=h.get_alpha(), marker=next(iter(shapes)),
                       markersize=5.0, label=lab)
        out.append(h)
    return out + _key(ax, theory) if out else []


def _key(ax: Axes, theory: str = "theory") -> list[Line2D]:
    """Grey legend entries telling markers (simulations) from lines (``theory``), when an axes
    shows both."""
    from matplotlib.container import ErrorbarContainer

    sims = (any(isinstance(c, ErrorbarContainer) for c in ax.containers)
            or any(_has_marker(ln) and not _drawn(ln) for ln in ax.lines))
    lines = any(_drawn(ln) and not _has_marker(ln) and not ln.get_label().startswith("_")
                for ln in ax.lines)
    if not (sims and lines):
        return []
    return [Line2D([], [], color="0.45", marker="o", linestyle="None",
                   label="markers: simulations (mean ± SEM)"),
            Line2D([], [], color="0.45", linestyle="-", label=f"lines: {theory}")]


def series_points(ax: Axes, results, method: str, metric: str = "risk", *,
                  label: str | None = "", **filters) -> bool:
    """Dots of ``results.series(method, metric)`` (simulation rows); False if there are none."""
    x, mean, sem, _ = results.series(method, metric, **filters)
    if len(x) == 0:
        return False
    sim_points(ax, x, mean, sem, method, label=label)
    return True


def series_line(ax: Axes, results, method: str, metric: str = "risk", *,
                label: str | None = None, linestyle: str = "-", **filters) -> bool:
    """Line of the theory rows ``(method, metric)``; False if there are none."""
    x, mean, _, _ = results.series(method, metric, kind="theory", **filters)
    if len(x) == 0:
        return False
    theory_line(ax, x, mean, method, label=label, linestyle=linestyle)
    return True
