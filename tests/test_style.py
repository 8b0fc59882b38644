"""The shared figure helpers: who lays a figure out."""

from __future__ import annotations

from matplotlib.figure import Figure

from lazylab.experiments.style import finish


def _pars(fig: Figure) -> tuple[float, ...]:
    p = fig.subplotpars
    return (p.left, p.right, p.bottom, p.top, p.wspace, p.hspace)


def test_finish_lays_out_a_single_panel():
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2], label="a line")
    before = _pars(fig)
    finish(ax, xlabel="x", ylabel="a long label of the y axis")
    assert _pars(fig) != before


def test_finish_leaves_a_figure_of_several_panels_to_its_plot():
    """Each panel's finish would lay the whole figure out again; the plot does it once."""
    fig = Figure(figsize=(8, 3))
    axes = fig.subplots(1, 2)
    before = _pars(fig)
    for ax in axes:
        ax.plot([1, 2], [1, 2], label="a line")
        finish(ax, xlabel="x", ylabel="a long label of the y axis", title="a panel")
    assert _pars(fig) == before
    fig.tight_layout()
    assert _pars(fig) != before
