"""What an experiment is: a grid of independent work units, their theory, claims and figure.

An :class:`Experiment` declares

* ``Params``: a pydantic model whose defaults are the *quick* scale; ``scales["paper"]`` holds
  the overrides for the paper's sizes. ``lazylab show ID`` lists its fields, ``--set KEY=VALUE``
  overrides them, and pydantic validates them (bounds, choices).
* ``units(p)``: the grid, a list of JSON-able dicts (e.g. ``{"method": "NN", "N": 45}``). Each
  unit is run once per seed index; the runner derives the unit's seed from the experiment id,
  the unit key and the seed index (:func:`lazylab.seeding.derive_seed`), so results do not
  depend on scheduling, worker count or resumption. Inside a unit, every further random stream
  comes from :func:`lazylab.experiments.toolkit.sub_generator` (seed, purpose).
* ``run_unit(p, key, seed, device)``: computes one unit and returns rows made by :func:`row`:
  ``{method, kind="simulation", x_name, x, metric, value, **facets}``; the runner adds ``seed``.
  Facets (``d``, ``p``, ``k``, ``lam``, ``arch``, ``mode``, ...) are extra axes of the table:
  they become columns of ``results.csv`` after the seven standard ones, in sorted order, and
  :meth:`Results.select` / :meth:`Results.series` filter on them. Never encode an axis in a
  metric name.
* ``theory(p)``: rows with ``kind="theory"`` (cheap closed forms, recomputed on assembly).
* ``claims(p, results)``: :class:`Claim` verdicts computed from the results table, never
  written by hand; three states: ``held``, ``failed``, ``not_applicable``.
* ``plot(p, results)``: a matplotlib figure styled like the paper's.
* ``robustness_axes``: 1-3 parameters with 3 values each (the default among them) at which the
  quick scale keeps its time contract and the claims should still hold.

Principles every claim follows (the registry contract test checks the
mechanical ones)
-----------------------------------------------------------------------------------------------
1. **Error model first.** A claim states where its measured number can deviate from the paper's
   prediction (seed noise, finite width O(m^-1/2), finite dimension O(rho/d), Monte Carlo error,
   ...) in ``error_model``, and derives its tolerance from it: about ``K_SE = 3`` standard errors
   plus the stated bias. The tolerance is a function of the parameters and of the standard
   errors only; it is fixed before the data are seen, never tuned on them.
   ``claims.json`` reports measured, expected, tolerance and their ratio
   ``|measured - expected| / tolerance``.
2. **Consistency checks are not claims.** A statement that holds by construction or by a
   mathematical identity, or a bound with huge slack, is a unit test, or a claim marked
   ``details={"kind": "consistency"}``: it is shown but does not count in "N claims held".
3. **Slopes are two-sided.** A log-log slope is compared with the predicted value within its
   standard error (``toolkit.slope_claim``), never "decays at least like".
4. **Every claim can fail.** Each has a falsification test: tilting the stored simulation rows
   away from the prediction by a stated amount makes it ``failed`` (the registry contract test
   does this for every claim of every experiment).
5. **Quick scale is faithful.** It shrinks sizes, never the phenomenon; where it must change
   something else (init, data) the figure title and the claim statement say so. Every accepted
   parameter value gives a valid result: protocol sizes scale with d, m, n by a stated rule, or
   :meth:`Experiment.validate` refuses the value (exit 2) and ``show`` states the range.
6. **Honest cost.** Quick scale finishes in at most 2 minutes on a 2-core CPU and
   ``est_seconds`` is within 2x of the measured time.
7. **Claims that fail, fail.** A claim that does not hold is reported as failed, never loosened
   after the fact.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict

from lazylab.experiments.cost import scaled_cost

#: Columns of ``results.csv``, in order; facet columns follow, sorted by name.
COLUMNS = ("method", "kind", "x_name", "x", "seed", "metric", "value")

#: The three states of a claim.
STATUSES = ("held", "failed", "not_applicable")

#: What a claim constructor takes as its statement: the text, or the experiment's statements
#: by claim id (:meth:`Experiment.statements`), of which ``statement[id]`` is taken.
Statement = str | Mapping[str, str]


class ExperimentParams(BaseModel):
    """Base class of every experiment's parameters: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              allow_inf_nan=False)


def row(method: str, x_name: str, x: float, metric: str, value: float,
        kind: str = "simulation", **facets: Any) -> dict[str, Any]:
    """One tidy result row (the runner fills ``seed`` for simulation rows).

    Parameters
    ----------
    method, x_name, x, metric, value
        The standard columns of results.csv (see lazylab.report): which model/curve, the x
        axis name and value, the measured quantity and its value.
    kind
        ``"simulation"`` (measured, one row per seed) or ``"theory"`` (a closed form).
    **facets
        Extra axes of the table (``d=40``, ``p=3``, ``k=2``, ``arch="resnet"``): scalars
        (int, float, str, bool) that become columns of ``results.csv`` after the standard ones.

    Examples
    --------
    >>> r = row("NT(I)", "N", 45, "risk", 0.5, d=40)
    >>> r["x"], r["d"]
    (45.0, 40)
    """
    if kind not in ("simulation", "theory"):
        raise ValueError(f"kind must be 'simulation' or 'theory', got {kind!r}")
    out: dict[str, Any] = {"method": method, "kind": kind, "x_name": x_name, "x": float(x),
                           "metric": metric, "value": float(value)}
    for k, v in facets.items():
        if k in COLUMNS:
            raise ValueError(f"facet {k!r} clashes with a standard column")
        if isinstance(v, np.generic):
            v = v.item()
        if not isinstance(v, (int, float, str, bool)):
            raise TypeError(f"facet {k!r} must be a scalar (int, float, str, bool), got "
                            f"{type(v).__name__}")
        out[k] = v
    return out


def _num(v: Any) -> float:
    """A claim number: float, NaN for None or anything non-numeric."""
    if v is None or isinstance(v, bool):
        return float("nan") if v is None else float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


@dataclass(frozen=True)
class Claim:
    """A checked statement of a paper, with a verdict computed from the results.

    Attributes
    ----------
    id, statement
        Stable id and the human statement (generated from the parameters).
    status
        ``"held"``, ``"failed"`` or ``"not_applicable"`` (nothing to test at these parameters,
        e.g. an activation whose k-th Hermite coefficient is 0).
    measured, expected, tolerance
        Numbers: the claim held iff ``passes(measured, expected, tolerance, op)``
        (:func:`passes`). NaN when not applicable or missing.
    error_model
        Where the measured number may deviate from the prediction, and how the tolerance is
        derived from that (see the module docstring).
    details
        Anything else (per-point values, fitted intercepts, ...). ``{"kind": "consistency"}``
        marks a consistency check, which does not count in "N claims held"; ``reason`` says
        why a claim is not applicable or missing; ``worst_at`` (:func:`worst_at`) names the
        setting whose numbers a claim that must hold at each of several settings reports,
        the one closest to failing (``"N = 45"``), which the report prints after the test.
        A ``details["comparison"]`` that names one of :data:`COMPARISONS` must equal ``op``
        (other text there describes the reference, e.g. "paired with NTK ridgeless").
    op
        The comparison the verdict applies, one of :data:`COMPARISONS`: ``within``
        (``|m - e| <= t``), ``>=`` (``m >= e - t``), ``<=`` (``m <= e + t``), ``above``
        (``m >= e + t``) or ``below`` (``m <= e - t``). It is what claims.json and the report
        print as the test (:func:`comparison_text`).

    Build claims with :meth:`test` (a measured value compared with an expected one:
    ``held`` is computed by :func:`passes`, the same function whose test is printed),
    :meth:`missing` (nothing was measured: failed, with the reason) or
    :meth:`not_applicable`. For old call sites a boolean ``status`` is read as held/failed
    and a non-numeric ``measured``/``expected``/``tolerance`` moves into ``details`` (the
    number becomes NaN).

    No claim holds on non-finite numbers: a ``held`` verdict whose measured value, expected
    value or tolerance is NaN or infinite becomes ``failed`` (a NaN tolerance would otherwise
    pass any comparison that treats "not greater" as "within", and an all-zero or overflowed
    computation is no evidence), with ``details["non_finite"]`` naming the numbers. In
    ``claims.json`` (:meth:`to_dict`) non-finite numbers are written as null, never as text.
    """

    id: str
    statement: str
    status: Literal["held", "failed", "not_applicable"]
    measured: float = float("nan")
    expected: float = float("nan")
    tolerance: float = float("nan")
    error_model: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    op: str = "within"

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"claim op must be one of {COMPARISONS}, got {self.op!r}")
        named = (self.details or {}).get("comparison")
        if named in COMPARISONS and named != self.op:
            raise ValueError(f"claim {self.id!r}: details['comparison'] {named!r} differs "
                             f"from op {self.op!r}")
        status = self.status
        if isinstance(status, (bool, np.bool_)):
            status = "held" if bool(status) else "failed"
        if status not in STATUSES:
            raise ValueError(f"claim status must be one of {STATUSES}, got {status!r}")
        object.__setattr__(self, "status", status)
        details = dict(self.details or {})
        for name in ("measured", "expected", "tolerance"):
            v = getattr(self, name)
            if isinstance(v, (np.generic,)):
                v = v.item()
            if v is not None and not isinstance(v, (int, float)):
                details.setdefault(name, _jsonable(v))
            object.__setattr__(self, name, _num(v))
        bad = _non_finite(self.measured, self.expected, self.tolerance)
        if status == "held" and bad:
            object.__setattr__(self, "status", "failed")
            details["non_finite"] = (f"{', '.join(bad)}: a claim cannot hold on non-finite "
                                     "numbers")
        object.__setattr__(self, "details", details)

    # ---- constructors ------------------------------------------------------------------
    @classmethod
    def test(cls, id: str, statement: Statement, measured: float, op: str,
             expected: float, tolerance: float, error_model: str,
             details: dict[str, Any] | None = None) -> Claim:
        """A tested claim: ``measured op expected, tolerance`` (e.g. ``m >= e - t``).

        Held iff ``passes(measured, expected, tolerance, op)`` (:func:`passes`, the test
        claims.json and the report print), failed otherwise; a non-finite number never holds.
        ``statement`` is the text, or the experiment's statements by id
        (:meth:`Experiment.statements`), of which ``statement[id]`` is taken.

        >>> c = Claim.test("gap", "NN beats NT", 0.21, "below", 1.35, 0.018, "seed noise")
        >>> c.status, c.comparison
        ('held', 'below')
        >>> Claim.test("m", {"m": "E f = 1"}, 1.2, "within", 1.0, 0.1, "MC").status
        'failed'
        """
        m, e, t = _num(measured), _num(expected), _num(tolerance)
        finite = all(math.isfinite(v) for v in (m, e, t))
        held = finite and passes(m, e, t, op)
        return cls(id, _statement(id, statement), "held" if held else "failed", measured,
                   expected, tolerance, error_model, dict(details or {}), op)

    @classmethod
    def missing(cls, id: str, statement: Statement, reason: str, *,
                expected: float = math.nan, tolerance: float = math.nan,
                error_model: str = "", op: str = "within",
                details: dict[str, Any] | None = None) -> Claim:
        """A claim that could be tested here but had nothing to measure (no rows, no finite
        value): failed, measured NaN, ``details["reason"]`` says what is missing (after any
        other ``details``). ``expected``, ``tolerance`` and ``op`` state the test it would
        have applied; ``statement`` as in :meth:`test`.

        >>> c = Claim.missing("fit", "slope = 1", "no simulation rows", error_model="seeds")
        >>> c.status, c.details["reason"]
        ('failed', 'no simulation rows')
        """
        info = dict(details or {})
        info["reason"] = reason
        return cls(id, _statement(id, statement), "failed", math.nan, expected, tolerance,
                   error_model, info, op)

    @classmethod
    def not_applicable(cls, id: str, statement: Statement, reason: str,
                       ) -> Claim:
        """A claim with nothing to test at these parameters; ``reason`` says why
        (``statement`` as in :meth:`test`)."""
        return cls(id, _statement(id, statement), "not_applicable",
                   details={"reason": reason})

    # ---- views ---------------------------------------------------------------------------
    @property
    def held(self) -> bool:
        """True iff the status is ``"held"``."""
        return self.status == "held"

    @property
    def failed(self) -> bool:
        """True iff the status is ``"failed"`` (what ``--strict`` rejects)."""
        return self.status == "failed"

    @property
    def is_consistency(self) -> bool:
        """A consistency check (identity / loose bound), not one of the paper's claims."""
        return self.details.get("kind") == "consistency"

    @property
    def ratio(self) -> float:
        """``|measured - expected| / tolerance`` (NaN when undefined)."""
        m, e, t = self.measured, self.expected, self.tolerance
        if not (math.isfinite(m) and math.isfinite(e) and math.isfinite(t)) or t <= 0:
            return float("nan")
        return abs(m - e) / t

    def to_dict(self) -> dict[str, Any]:
        """The claims.json record: id, statement, held (boolean), measured, expected, tolerance
        (see lazylab.report), plus the rest.

        Strict JSON without text for numbers: a non-finite measured / expected / tolerance /
        ratio is null, and a non-finite number inside ``details`` too. The reason is in
        ``details``: ``reason`` (not applicable, nothing measured) or ``non_finite`` (which
        number was NaN or infinite, set by the constructor for a held verdict, and here for a
        failed one).
        """
        details = dict(self.details)
        bad = _non_finite(self.measured, self.expected, self.tolerance)
        if bad and "reason" not in details and "non_finite" not in details:
            details["non_finite"] = ", ".join(bad)
        return {
            "id": self.id, "statement": self.statement, "held": self.held,
            "status": self.status, "measured": _finite_or_none(self.measured),
            "expected": _finite_or_none(self.expected),
            "tolerance": _finite_or_none(self.tolerance), "comparison": self.comparison,
            "ratio": _finite_or_none(self.ratio), "error_model": self.error_model,
            "details": _jsonable(details, finite=True),
        }

    @property
    def comparison(self) -> str:
        """The test the verdict applied (:attr:`op`), as claims.json names it."""
        return self.op


def worst_at(**setting: Any) -> str:
    """The text of ``details["worst_at"]``: a claim that must hold at every one of several
    settings reports the numbers of the one closest to failing (largest ``|m - e| / t`` for a
    two-sided test, the smallest margin for a one-sided one), and names it here.

    >>> worst_at(N=45), worst_at(d=40, k=2.0), worst_at(method="NT(I)")
    ('N = 45', 'd = 40, k = 2', 'method = NT(I)')
    """
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in setting.items())


def _statement(id: str, statement: Statement) -> str:
    """The claim's statement: ``statement`` itself, or ``statement[id]`` from a mapping."""
    return statement if isinstance(statement, str) else statement[id]


#: The comparisons a verdict can apply: |m - e| <= t ("within"), m >= e - t (">="),
#: m <= e + t ("<="), and the one-sided tests beyond a margin, m >= e + t ("above") and
#: m <= e - t ("below"), e.g. "a gap above 0 by 3 SE". A claim states its own (``Claim.op``).
COMPARISONS = ("within", ">=", "<=", "above", "below")


def passes(measured: float, expected: float, tolerance: float, op: str) -> bool:
    """Whether finite numbers pass the comparison ``op`` (:data:`COMPARISONS`), up to rounding
    (1e-12 relative).

    >>> passes(0.21, 1.35, 0.018, "below"), passes(1.34, 1.35, 0.018, "below")
    (True, False)
    """
    m, e, t = float(measured), float(expected), float(tolerance)
    slack = 1e-12 * max(1.0, abs(m), abs(e), abs(t))
    return {"within": abs(m - e) <= t + slack, ">=": m >= e - t - slack,
            "<=": m <= e + t + slack, "above": m >= e + t - slack,
            "below": m <= e - t + slack}[op]


def comparison_text(measured: float, expected: float, tolerance: float, op: str,
                    fmt=lambda v: f"{v:.4g}") -> str:
    """The test as printed: ``0.967 >= 0.5 - 0.0158``, ``0.52 within 0.5 +- 0.1``,
    ``0.21 <= 1.35 - 0.018`` (below a margin); "-" when there is nothing to compare (not
    applicable)."""
    vals = []
    for v in (measured, expected, tolerance):
        try:
            vals.append(float(v))
        except (TypeError, ValueError):
            return "-"
    if not all(math.isfinite(v) for v in vals):
        return "-"
    m, e, t = (fmt(v) for v in vals)
    if op == ">=":
        return f"{m} >= {e} - {t}"
    if op == "<=":
        return f"{m} <= {e} + {t}"
    if op == "above":
        return f"{m} >= {e} + {t}"
    if op == "below":
        return f"{m} <= {e} - {t}"
    return f"{m} within {e} +- {t}"


def _jsonable(v: Any, finite: bool = False) -> Any:
    """``v`` as JSON-able Python (numpy scalars and arrays to numbers and lists); with
    ``finite`` a non-finite float becomes None."""
    if isinstance(v, np.generic):
        v = v.item()
    elif isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x, finite) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x, finite) for k, x in v.items()}
    if finite and isinstance(v, float):
        return _finite_or_none(v)
    return v


def _finite_or_none(v: float) -> float | None:
    """``v``, or None when it is NaN or infinite (claims.json writes null)."""
    return v if math.isfinite(v) else None


def _non_finite(measured: float, expected: float, tolerance: float) -> list[str]:
    """``"measured is not a number"``, ``"tolerance is +infinity"``, ... for each non-finite
    number of a claim (words, so claims.json never holds "nan" as text)."""
    out = []
    for name, v in (("measured", measured), ("expected", expected), ("tolerance", tolerance)):
        if not math.isfinite(v):
            out.append(f"{name} is " + ("not a number" if math.isnan(v) else
                                        "+infinity" if v > 0 else "-infinity"))
    return out


class Series(NamedTuple):
    """One curve aggregated over seeds, sorted by x (see :meth:`Results.series`)."""

    x: np.ndarray
    mean: np.ndarray
    sem: np.ndarray
    n: np.ndarray


def _same(a: Any, b: Any) -> bool:
    """Cell equality that survives a CSV round trip ("40" == 40, "" == None)."""
    if a == b:
        return True
    if a == "" and b is None or a is None and b == "":
        return True
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return False
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _cell_key(v: Any) -> tuple:
    """A bucket for a cell such that a non-empty string filter ``f`` matches (:func:`_same`)
    exactly the cells in the bucket ``_cell_key(f)``: numbers and numeric strings by value,
    other strings by text, empty, missing and boolean cells apart."""
    if v is None or v == "" or isinstance(v, bool):
        return ("other", v if isinstance(v, bool) else None)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return ("text", str(v))
    return ("text", str(v)) if math.isnan(x) else ("number", x)


class Results:
    """The tidy results table of one experiment, with small query helpers.

    Rows are dicts with the keys of :data:`COLUMNS` plus any facets; ``seed`` is ``None`` for
    theory rows.
    """

    #: Columns indexed for :meth:`select` (figures and claims query by them thousands of times).
    INDEXED = ("method", "metric")

    def __init__(self, rows: Iterable[dict[str, Any]]):
        self.rows: list[dict[str, Any]] = list(rows)
        self._index: dict[str, dict[tuple, list[dict[str, Any]]]] = {}
        self._indexed_rows = -1

    def __len__(self) -> int:
        return len(self.rows)

    def _candidates(self, filters: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows that can match: the smallest bucket of an indexed column filtered by a
        non-empty string (bucketed by :func:`_cell_key`, which groups cells exactly as
        :func:`_same` matches them), else every row."""
        keys = [k for k in self.INDEXED if isinstance(filters.get(k), str) and filters[k]]
        if not keys:
            return self.rows
        if self._indexed_rows != len(self.rows):  # rows appended since: index again
            self._index = {k: {} for k in self.INDEXED}
            for r in self.rows:
                for k in self.INDEXED:
                    self._index[k].setdefault(_cell_key(r.get(k)), []).append(r)
            self._indexed_rows = len(self.rows)
        return min((self._index[k].get(_cell_key(filters[k]), []) for k in keys), key=len)

    def select(self, **filters: Any) -> list[dict[str, Any]]:
        """Rows whose columns (standard or facet) equal every given filter.

        A list/tuple/set value means 'one of'. Facets compare by value, so ``d=40`` matches a
        row read back from CSV with ``"40"``.
        """
        out = []
        for r in self._candidates(filters):
            ok = True
            for k, v in filters.items():
                cell = r.get(k)
                if isinstance(v, (list, tuple, set)):
                    if not any(_same(cell, w) for w in v):
                        ok = False
                        break
                elif not _same(cell, v):
                    ok = False
                    break
            if ok:
                out.append(r)
        return out

    def methods(self, **filters: Any) -> list[str]:
        """Methods present (first-seen order) among rows matching ``filters``."""
        seen: dict[str, None] = {}
        for r in self.select(**filters):
            seen.setdefault(r["method"], None)
        return list(seen)

    def facet_values(self, name: str, **filters: Any) -> list[Any]:
        """Distinct values of facet column ``name`` (sorted) among rows matching ``filters``."""
        vals = {r[name] for r in self.select(**filters) if r.get(name) not in (None, "")}
        try:
            return sorted(vals, key=float)
        except (TypeError, ValueError):
            return sorted(vals, key=str)

    def series(self, method: str, metric: str, kind: str = "simulation",
               **filters: Any) -> Series:
        """Aggregate over seeds: ``Series(x, mean, sem, n)`` sorted by x.

        ``sem`` is the standard error of the mean over seeds (0 with one seed); ``n`` the count
        of rows at each x. ``filters`` may name facets (``d=40``).
        """
        groups: dict[float, list[float]] = {}
        for r in self.select(method=method, metric=metric, kind=kind, **filters):
            groups.setdefault(float(r["x"]), []).append(float(r["value"]))
        xs = np.array(sorted(groups), dtype=float)
        mean = np.array([np.mean(groups[x]) for x in xs], dtype=float)
        cnt = np.array([len(groups[x]) for x in xs], dtype=int)
        sem = np.array([
            np.std(groups[x], ddof=1) / math.sqrt(len(groups[x])) if len(groups[x]) > 1 else 0.0
            for x in xs
        ], dtype=float)
        return Series(xs, mean, sem, cnt)

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
    #: Scales whose GEMM-bound parts run in TF32 on a GPU (``--precision auto``, the
    #: default): ``{"paper": "tf32"}``. Unlisted scales, and every CPU run, compute in float32
    #: as written; ``--precision fp32`` overrides the declaration, and the run records which
    #: applied (``allow_tf32`` in config.json).
    precision: ClassVar[dict[str, str]] = {}
    #: Claim id -> statement, shown by ``lazylab show`` before any result exists; the
    #: verdicts themselves come from :meth:`claims`.
    claim_statements: ClassVar[dict[str, str]] = {}
    #: 1-3 parameters with 3 values each (the default among them) at which the quick scale
    #: keeps its time contract and the claims should still hold; every experiment declares it.
    robustness_axes: ClassVar[dict[str, list[Any]]] = {}
    #: Overrides of the quick scale with the tiniest sizes at which every unit runs and every
    #: claim is evaluated (it need not hold there): the registry contract test
    #: (tests/test_registry_contract.py) runs each experiment with them in a few seconds.
    smoke: ClassVar[dict[str, Any]] = {}

    # ---- parameters -------------------------------------------------------------------
    def resolve(self, scale: str, overrides: dict[str, Any] | None = None) -> ExperimentParams:
        """Defaults, then the scale's overrides, then the user's ``--set`` values."""
        if scale not in self.scales:
            raise ValueError(f"scale must be one of {', '.join(self.scales)}; got {scale!r}")
        values = dict(self.scales[scale])
        values.update(overrides or {})
        return self.Params(**values)

    def statements(self, p: ExperimentParams) -> dict[str, str]:
        """Claim id -> statement at parameters ``p`` (the ids and texts :meth:`claims` uses).

        Default: :attr:`claim_statements`. Experiments whose claims depend on the parameters
        (e.g. one claim per k in ``ks``) override this; ``claims`` must return exactly these ids
        with these statements (the registry contract test checks it).
        """
        return dict(self.claim_statements)

    # ---- computation ------------------------------------------------------------------
    @abstractmethod
    def units(self, p: ExperimentParams) -> list[dict[str, Any]]:
        """The grid of independent work units (JSON-able dicts)."""

    @abstractmethod
    def run_unit(self, p: ExperimentParams, key: dict[str, Any], seed: int,
                 device: torch.device, prep: Any = None) -> list[dict[str, Any]]:
        """Compute one unit with all randomness drawn from ``seed``; ``prep`` is the run's
        :meth:`prepare` output (None unless the experiment overrides it)."""

    def theory(self, p: ExperimentParams, prep: Any = None) -> list[dict[str, Any]]:
        """Theory rows (kind="theory"), given the run's :meth:`prepare` output; default none."""
        return []

    # ---- batched groups -----------------------------------------------------------------
    def group(self, p: ExperimentParams, key: dict[str, Any]) -> str | None:
        """Label of the batched computation this unit fuses into; None (default): it runs
        alone through :meth:`run_unit`.

        Units with the same label and the same seed index form one group, computed by one call
        of :meth:`run_group` (e.g. every width of a width grid as one block-diagonal network
        trained on one sample stream). The label must be a function of ``p`` and ``key`` only,
        so a group's members never depend on which units remain to be computed: a resumed run
        recomputes a whole group and stores the members it lacks, and its numbers are those of
        an uninterrupted run.
        """
        return None

    def run_group(self, p: ExperimentParams, members: Sequence[tuple[dict[str, Any], int]],
                  group_seed: int, device: torch.device,
                  prep: Any = None) -> list[list[dict[str, Any]]]:
        """Compute a group's members together; one list of rows per member, in order.

        ``members`` are ``(key, seed)`` pairs (each unit's own seed, as :meth:`run_unit`
        receives it); ``group_seed`` seeds what the members share (e.g. the sample stream).
        Computing a group of one member must give that member's rows of the full group up to
        the float tolerance the experiment states (tests check it for each batched path).
        Default: :meth:`run_unit` for each member.
        """
        return [self.run_unit(p, key, seed, device, prep=prep) for key, seed in members]

    # ---- runner hooks (validation, preparation, cost, code identity) ---------------------
    def validate(self, p: ExperimentParams) -> None:
        """Refuse a bad parameter combination before anything is computed.

        Raise :class:`lazylab.errors.InputError` (``"--set KEY: ..."``): the CLI exits 2. The
        runner calls this when the parameters resolve, before touching the store. Default: no-op.
        """
        return None

    def prepare(self, p: ExperimentParams, device: torch.device) -> Any:
        """Work shared by every unit of a run (e.g. H-infinity and its eigendecomposition).

        Computed once per run by the runner and shipped once to each worker (pool initializer,
        one ``ray.put``); every unit receives it as ``prep`` in
        ``run_unit(p, key, seed, device, prep)`` (and ``run_group``), and the theory as
        ``theory(p, prep)``. Default: None.
        """
        return None

    def data_sources(self, p: ExperimentParams) -> list[tuple[str, str | None]]:
        """``(data set name, root)`` of every real data set a run at ``p`` reads: a
        fingerprint of their files is part of the run's identity, so ``--resume`` from other
        data (another folder, other bytes) is refused instead of mixing the two.

        Default: the parameter ``dataset`` (with ``data_root``) when it names a real data set,
        and CIFAR-10 too when ``cifar_panel`` is ``"yes"``.
        """
        from lazylab.data.real import DATASETS

        name, root = getattr(p, "dataset", None), getattr(p, "data_root", None)
        out = [(name, root)] if name in DATASETS else []
        if getattr(p, "cifar_panel", "no") == "yes" and name != "cifar10":
            out.append(("cifar10", root))
        return out

    #: Unit key -> the fewest distinct values of it the claims need (e.g. ``{"m": 3}`` for a
    #: slope in m); a grid with fewer is refused before anything runs (exit 2).
    min_distinct: ClassVar[dict[str, int]] = {}

    #: Parameter name -> exponent of the work in that size, for the default cost guard
    #: (empty: the unit count alone); see :func:`lazylab.experiments.cost.scaled_cost`.
    cost_sizes: ClassVar[dict[str, float]] = {}

    def cost(self, p: ExperimentParams, scale: str = "quick") -> tuple[float, float | None]:
        """Estimated ``(seconds, peak bytes or None)`` of one seed of the grid at ``p``.

        Default rule (:func:`lazylab.experiments.cost.scaled_cost`): the unit-count estimate
        times the growth of each size named in :attr:`cost_sizes` (``seconds x prod_k
        (size_k(p) / size_k(scale))^e_k``, a lower bound where the work grows faster), and the
        peak from :meth:`peak_bytes`. Experiments with a measured per-unit model override this.
        """
        return scaled_cost(self, p, scale, self.cost_sizes, peak=self.peak_bytes)

    def peak_bytes(self, p: ExperimentParams) -> float | None:
        """Peak memory of one unit at ``p`` in bytes, where a model is known (default: None)."""
        return None

    @classmethod
    def code_identity(cls) -> dict[str, dict[str, str]]:
        """Per-file hashes of all the code a unit of this experiment runs: every ``.py`` file
        of the lazylab package and, for a plugin, of the top-level package of its module
        (:func:`lazylab.experiments.code_identity.code_identity`).

        Part of the identity of stored units: ``--resume`` after an edit to any of these
        files is refused, naming them, instead of mixing units of the old and the new code.
        """
        from lazylab.experiments.code_identity import code_identity

        return code_identity(cls)

    @classmethod
    def code_version(cls) -> str:
        """16 hex digits summarising :meth:`code_identity` (recorded in config.json)."""
        from lazylab.experiments.code_identity import code_version

        return code_version(cls.code_identity())

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
