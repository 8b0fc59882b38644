"""The paper's second data set as a second panel: CIFAR-10 next to MNIST (Fig. 1(c)(d), Fig. 2).

Arora et al. (2019) show every real-data figure twice, on the first two classes of MNIST and of
CIFAR-10 (airplane, automobile; App. A). An experiment that mixes in :class:`Panels` keeps its
one-data-set logic and gains the parameter ``cifar_panel`` (:class:`PanelParams`):

* ``"no"`` (quick default): one panel; units, rows, claims and figure are exactly the
  single-data-set experiment's.
* ``"yes"``: a second panel on ``cifar10`` with every other parameter equal. Every unit key gets
  ``panel`` (the panel's data set) and every row the facet ``panel``; each panel's claims are
  computed from its own rows, and the CIFAR-10 panel's claim ids end in ``-cifar10``. The files
  must be present (``validate`` exits 2 naming ``cifar_panel`` and the folders searched).
* ``"auto"`` (paper scale): resolved when the parameters resolve to ``"yes"`` when
  :func:`lazylab.data.find_dataset` finds CIFAR-10 under ``data_root`` / ``$LAZYLAB_DATA`` /
  the system folders, else ``"no"``; the resolved value is what ``config.json`` records.

With ``dataset="cifar10"`` the main panel already is CIFAR-10 and no second panel is added.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

import torch
from matplotlib.figure import Figure
from pydantic import Field

from lazylab.data import DatasetNotFound, find_dataset
from lazylab.errors import DataNotFound
from lazylab.experiments.base import ExperimentParams, Results

#: The second panel's data set.
CIFAR = "cifar10"


class PanelParams(ExperimentParams):
    """Adds the CIFAR-10 panel switch to an Arora experiment's parameters."""

    cifar_panel: Literal["auto", "yes", "no"] = Field(
        "no", description="also run the paper's CIFAR-10 panel (classes as for the main data "
        "set; files from data_root): yes, no, or auto (yes when CIFAR-10 is found)")


def panel_params(p: Any) -> list[tuple[str | None, Any]]:
    """[(panel name or None, its parameters)]: one entry (name None) unless ``cifar_panel`` is
    ``"yes"`` and the main data set is not CIFAR-10 already."""
    if getattr(p, "cifar_panel", "no") != "yes" or p.dataset == CIFAR:
        return [(None, p)]
    second = p.model_copy(update={"dataset": CIFAR, "cifar_panel": "no"})
    return [(p.dataset, p), (CIFAR, second)]


def resolve_panel(p: Any) -> Any:
    """``cifar_panel="auto"`` made concrete ("yes" when CIFAR-10 is found, else "no")."""
    if getattr(p, "cifar_panel", "no") != "auto":
        return p
    try:
        find_dataset(CIFAR, p.data_root)
        value = "yes"
    except DatasetNotFound:
        value = "no"
    return p.model_copy(update={"cifar_panel": value})


class Panels:
    """Mixin (listed before the single-panel experiment class) that runs every panel of
    :func:`panel_params`; see the module docstring. ``panel_layout`` places the panels'
    figures in ``"rows"`` (Fig. 1: MNIST (a)(b) above CIFAR (c)(d)) or ``"columns"`` (Fig. 2);
    the single-panel ``plot`` must accept ``figure=`` (a Figure or SubFigure to draw into) and
    the class must give ``figsize(p)``, the size of one panel."""

    panel_layout: ClassVar[str] = "rows"

    def resolve(self, scale: str, overrides: dict[str, Any] | None = None) -> Any:
        return resolve_panel(super().resolve(scale, overrides))  # type: ignore[misc]

    def validate(self, p: Any) -> None:
        for name, q in panel_params(p):
            if name == CIFAR:
                try:
                    find_dataset(CIFAR, q.data_root)
                except DatasetNotFound as e:
                    raise DataNotFound(f"--set cifar_panel=yes: {e}") from e
            super().validate(q)  # type: ignore[misc]

    def prepare(self, p: Any, device: torch.device) -> Any:
        panels = panel_params(p)
        if len(panels) == 1:
            return super().prepare(p, device)  # type: ignore[misc]
        return {name: super(Panels, self).prepare(q, device)  # type: ignore[misc]
                for name, q in panels}

    def units(self, p: Any) -> list[dict[str, Any]]:
        panels = panel_params(p)
        if len(panels) == 1:
            return super().units(p)  # type: ignore[misc]
        return [{**key, "panel": name} for name, q in panels
                for key in super(Panels, self).units(q)]  # type: ignore[misc]

    def _panel(self, p: Any, name: str) -> Any:
        for n, q in panel_params(p):
            if n == name:
                return q
        raise KeyError(f"no panel {name!r} at these parameters")

    def run_unit(self, p: Any, key: dict[str, Any], seed: int, device: torch.device,
                 prep: Any = None) -> list[dict[str, Any]]:
        if "panel" not in key:
            return super().run_unit(p, key, seed, device, prep=prep)  # type: ignore[misc]
        name = key["panel"]
        inner = {k: v for k, v in key.items() if k != "panel"}
        rows = super().run_unit(self._panel(p, name), inner, seed, device,  # type: ignore[misc]
                                prep=None if prep is None else prep[name])
        return [{**r, "panel": name} for r in rows]

    def theory(self, p: Any, prep: Any = None) -> list[dict[str, Any]]:
        panels = panel_params(p)
        if len(panels) == 1:
            return super().theory(p, prep=prep)  # type: ignore[misc]
        return [{**r, "panel": name} for name, q in panels
                for r in super(Panels, self).theory(  # type: ignore[misc]
                    q, prep=None if prep is None else prep[name])]

    # ---- verdicts and figure ----------------------------------------------------------------
    @staticmethod
    def _suffix(name: str | None) -> str:
        return f"-{name}" if name == CIFAR else ""

    @staticmethod
    def _prefix(name: str | None) -> str:
        return "CIFAR-10 panel: " if name == CIFAR else ""

    def statements(self, p: Any) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, q in panel_params(p):
            for cid, text in super().statements(q).items():  # type: ignore[misc]
                out[cid + self._suffix(name)] = self._prefix(name) + text
        return out

    def claims(self, p: Any, results: Results) -> list[Any]:
        panels = panel_params(p)
        if len(panels) == 1:
            return super().claims(p, results)  # type: ignore[misc]
        out = []
        for name, q in panels:
            sub = Results(results.select(panel=name))
            for c in super().claims(q, sub):  # type: ignore[misc]
                out.append(dataclasses.replace(c, id=c.id + self._suffix(name),
                                               statement=self._prefix(name) + c.statement))
        return out

    def plot(self, p: Any, results: Results) -> Figure:
        panels = panel_params(p)
        if len(panels) == 1:
            return super().plot(p, results)  # type: ignore[misc]
        w, h = self.figsize(p)  # type: ignore[attr-defined]
        rows = self.panel_layout == "rows"
        n = len(panels)
        fig = Figure(figsize=(w, h * n) if rows else (w * n, h), layout="constrained")
        subs = fig.subfigures(n, 1) if rows else fig.subfigures(1, n)
        for sub, (name, q) in zip(subs, panels, strict=True):
            super().plot(q, Results(results.select(panel=name)),  # type: ignore[misc]
                         figure=sub)
        return fig
