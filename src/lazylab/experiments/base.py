"""What an experiment is: a grid of independent work units, their theory, claims and figure.

An :class:`Experiment` declares

* ``Params``: a pydantic model whose defaults are the *quick* scale; ``scales["paper"]`` holds
  the overrides for the paper's sizes. ``lazylab show ID`` lists its fields, ``--set KEY=VALUE``
  overrides them, and pydantic validates them (bounds, choices).
* ``units(p)``: the grid, a list of JSON-able dicts (e.g. ``{"method": "NN", "N": 45}``). Each
  unit is run once per seed index; the runner derives the unit's seed from the experiment id,
  the unit key and the seed index (:func:`lazylab.seeding.derive_seed`), so results do not
  depend on scheduling, worker count or resumption.
* ``run_unit(p, key, seed, device)``: computes one unit and returns rows
  ``{method, kind="simulation", x_name, x, metric, value}``; the runner adds ``seed``.
* ``theory(p)``: rows with ``kind="theory"`` (cheap closed forms, recomputed on assembly).
* ``claims(p, results)``: verdicts computed from the results table, never written by hand.
* ``plot(p, results)``: a matplotlib figure styled like the paper's.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict

__all__ = [
    "COLUMNS",
    "Claim",
    "Experiment",
    "ExperimentParams",
    "Results",
    "row",
]

#: Columns of ``results.csv``, in order.
COLUMNS = ("method", "kind", "x_name", "x", "seed", "metric", "value")


class ExperimentParams(BaseModel):
    """Base class of every experiment's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def row(method: str, x_name: str, x: float, metric: str, value: float,
        kind: str = "simulation") -> dict[str, Any]:
    """One tidy result row (the runner fills ``seed`` for simulation rows)."""
    if kind not in ("simulation", "theory"):
        raise ValueError(f"kind must be 'simulation' or 'theory', got {kind!r}")
    return {"method": method, "kind": kind, "x_name": x_name, "x": float(x),
            "metric": metric, "value": float(value)}


@dataclass(frozen=True)
class Claim:
    """A checked statement of the paper. ``held`` must be computed from results."""

    id: str
    statement: str
    held: bool
    measured: Any
    expected: Any
    tolerance: Any

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["held"] = bool(self.held)
        return {k: _jsonable(v) for k, v in d.items()}


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


class Results:
    """The tidy results table of one experiment, with small query helpers.

    Rows are dicts with the keys of :data:`COLUMNS`; ``seed`` is ``None`` for theory rows.
    """

    def __init__(self, rows: Iterable[dict[str, Any]]):
        self.rows: list[dict[str, Any]] = list(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def select(self, **filters: Any) -> list[dict[str, Any]]:
        """Rows whose columns equal every given filter (a list/tuple/set means 'one of')."""
        out = []
        for r in self.rows:
            ok = True
            for k, v in filters.items():
                if isinstance(v, (list, tuple, set)):
                    if r.get(k) not in v:
                        ok = False
                        break
                elif r.get(k) != v:
                    ok = False
                    break
            if ok:
                out.append(r)
        return out

    def methods(self, **filters: Any) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.select(**filters):
            seen.setdefault(r["method"], None)
        return list(seen)

    def series(self, method: str, metric: str, kind: str = "simulation",
               **filters: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Aggregate over seeds: returns ``(x, mean, sem, count)`` sorted by x.

        ``sem`` is the standard error of the mean over seeds (0 with one seed).
        """
        groups: dict[float, list[float]] = {}
        for r in self.select(method=method, metric=metric, kind=kind, **filters):
            groups.setdefault(float(r["x"]), []).append(float(r["value"]))
        xs = np.array(sorted(groups))
        mean = np.array([np.mean(groups[x]) for x in xs])
        cnt = np.array([len(groups[x]) for x in xs])
        sem = np.array([
            np.std(groups[x], ddof=1) / math.sqrt(len(groups[x])) if len(groups[x]) > 1 else 0.0
            for x in xs
        ])
        return xs, mean, sem, cnt

    def value(self, method: str, metric: str, x: float, kind: str = "simulation",
              **filters: Any) -> float:
        """Mean over seeds of one (method, metric, x) cell; KeyError if absent."""
        vals = [float(r["value"]) for r in self.select(method=method, metric=metric, kind=kind,
                                                      **filters)
                if math.isclose(float(r["x"]), float(x), rel_tol=1e-12, abs_tol=1e-12)]
        if not vals:
            raise KeyError(f"no {kind} value for method={method!r} metric={metric!r} x={x}")
        return float(np.mean(vals))


class Experiment(ABC):
    """One reproducible figure: see the module docstring for the contract."""

    id: ClassVar[str]
    paper: ClassVar[str]
    figure: ClassVar[str]
    summary: ClassVar[str]
    Params: ClassVar[type[ExperimentParams]]
    #: Parameter overrides per scale; "quick" is normally empty (the defaults).
    scales: ClassVar[dict[str, dict[str, Any]]] = {"quick": {}, "paper": {}}
    #: Default number of seeds per scale.
    default_seeds: ClassVar[dict[str, int]] = {"quick": 1, "paper": 1}
    #: Rough wall time in seconds per scale (2-core CPU for quick, one GPU for paper).
    est_seconds: ClassVar[dict[str, float]] = {"quick": 60.0, "paper": 3600.0}
    #: Claim id -> statement, shown by ``lazylab show`` before any result exists; the
    #: verdicts themselves come from :meth:`claims`.
    claim_statements: ClassVar[dict[str, str]] = {}

    # ---- parameters -------------------------------------------------------------------
    def resolve(self, scale: str, overrides: dict[str, Any] | None = None) -> ExperimentParams:
        """Defaults, then the scale's overrides, then the user's ``--set`` values."""
        if scale not in self.scales:
            raise ValueError(f"scale must be one of {', '.join(self.scales)}; got {scale!r}")
        values = dict(self.scales[scale])
        values.update(overrides or {})
        return self.Params(**values)

    # ---- computation ------------------------------------------------------------------
    @abstractmethod
    def units(self, p: ExperimentParams) -> list[dict[str, Any]]:
        """The grid of independent work units (JSON-able dicts)."""

    @abstractmethod
    def run_unit(self, p: ExperimentParams, key: dict[str, Any], seed: int,
                 device: torch.device) -> list[dict[str, Any]]:
        """Compute one unit with all randomness drawn from ``seed``."""

    def theory(self, p: ExperimentParams) -> list[dict[str, Any]]:
        """Theory rows (kind="theory"); default none."""
        return []

    @abstractmethod
    def claims(self, p: ExperimentParams, results: Results) -> list[Claim]:
        """The paper's claims, each with a verdict computed from ``results``."""

    @abstractmethod
    def plot(self, p: ExperimentParams, results: Results):
        """A matplotlib Figure styled like the paper's."""

    # ---- helpers ------------------------------------------------------------------------
    @classmethod
    def param_table(cls) -> list[dict[str, Any]]:
        """Rows (name, type, default, allowed, description, per-scale values) for ``show``."""
        out = []
        for name, f in cls.Params.model_fields.items():
            allowed = _allowed(f)
            out.append({
                "name": name,
                "type": _type_name(f.annotation),
                "default": f.default,
                "allowed": allowed,
                "description": f.description or "",
                "scales": {s: ov.get(name, f.default) for s, ov in cls.scales.items()},
            })
        return out


def _type_name(ann: Any) -> str:
    """A short readable type: ``list[float]``, ``float | None``, ``choice`` (Literal)."""
    import types
    import typing

    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return "choice"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if ann is type(None):
        return "None"
    return getattr(ann, "__name__", None) or str(ann).replace("typing.", "")


def _allowed(f: Any) -> str:
    """Human-readable constraints of a pydantic field (bounds and Literal choices)."""
    import typing

    parts: list[str] = []
    ann = f.annotation
    if typing.get_origin(ann) is typing.Literal:
        parts.append("one of " + ", ".join(map(str, typing.get_args(ann))))
    for m in f.metadata:
        for attr, sym in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sym} {v}")
        if getattr(m, "min_length", None) is not None:
            parts.append(f"length >= {m.min_length}")
    return ", ".join(parts) if parts else "any"


def geomspace_int(lo: int, hi: int, num: int, extra: Sequence[int] = ()) -> list[int]:
    """Sorted unique integers on a geometric grid from lo to hi, plus ``extra`` points."""
    pts = np.unique(np.round(np.geomspace(lo, hi, num)).astype(int)).tolist()
    return sorted(set(pts) | {int(e) for e in extra})
