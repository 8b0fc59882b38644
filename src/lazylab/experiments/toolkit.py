"""Protocols and verdicts shared by the experiments of every paper.

What lives here (import from ``lazylab.experiments.toolkit``):

* :data:`K_SE`: standard errors allowed in every statistical claim (3).
* :func:`sub_generator`: the one way to derive a purpose-specific random stream inside a unit.
* :func:`grid_search`: train at each value of a hyper-parameter grid from the same random
  state, keep the best score; returns a :class:`GridSearchResult`.
* :func:`smallest_n`: the smallest sample size reaching a target error (sample-complexity
  curves), with :func:`crossing` (log-linear interpolation between grid points).
* :func:`loglog_fit` and :func:`slope_claim`: a two-sided claim on a log-log slope,
  inconclusive when its tolerance is wider than the distance to the nearest competing law
  (by default the flat law, slope 0: :func:`default_resolution`).
* :func:`match_claim`: a two-sided Monte Carlo match, pointwise within
  ``K_SE * SE + bias``.
* :func:`series_slope_claim` and :func:`series_match_claim`: the same two claims read from a
  :class:`~lazylab.experiments.base.Results` table (means and SEMs over seeds per x).

The claim helpers follow the principles of :mod:`lazylab.experiments.base`: the tolerance is
computed from the stated bias and the standard errors only (never from the deviation itself).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import torch

from lazylab.experiments.base import Claim, Results, Series, Statement, passes, worst_at
from lazylab.seeding import derive_seed, torch_generator
from lazylab.train import TrainingDiverged

#: Standard errors allowed in every statistical comparison (about 0.3% two-sided false alarms
#: per Gaussian comparison).
K_SE = 3.0

#: ``slope_claim(..., resolution=NO_COMPETING_LAW)``: the caller names no competing law, so
#: no tolerance makes the claim inconclusive (the default flat-law rule of
#: :func:`slope_claim` off). The built-in claims whose bands were chosen before that default
#: pass it; at quick scale five of their parts have a tolerance wider than ``|expected|``
#: (docs/claims.md lists them).
NO_COMPETING_LAW = math.inf

T = TypeVar("T")


# ------------------------------------------------------------------------------ random streams
def sub_generator(seed: int, purpose: str, device: torch.device | str = "cpu",
                  ) -> torch.Generator:
    """A torch Generator for one purpose inside a work unit.

    The stream is seeded with ``derive_seed(seed, purpose)`` (a SHA-256 hash), so streams for
    different purposes ("init", "test", f"train-n{n}", ...) are independent, and a unit's
    numbers do not depend on the order in which the streams are used.

    Parameters
    ----------
    seed
        The unit's seed (as passed to ``run_unit``).
    purpose
        A short name of what the stream draws; put any index in it (``f"draw-{i}"``).
    device
        Device of the generator (draws must be made on the same device).

    Examples
    --------
    >>> a = torch.rand(2, generator=sub_generator(7, "test"))
    >>> b = torch.rand(2, generator=sub_generator(7, "test"))
    >>> bool((a == b).all()), bool((a == torch.rand(2, generator=sub_generator(7, "init"))).any())
    (True, False)
    """
    return torch_generator(derive_seed(int(seed), str(purpose)), device)


# ------------------------------------------------------------------------------ grid search
@dataclass(frozen=True)
class GridSearchResult(Generic[T]):
    """Outcome of :func:`grid_search`.

    Attributes
    ----------
    best
        What ``train`` returned at the best value.
    value
        The best hyper-parameter value (``base * factor``).
    factor
        The best factor.
    score
        Its score (lower is better).
    scores
        factor -> score for every factor tried (``inf`` where training diverged).
    """

    best: T
    value: float
    factor: float
    score: float
    scores: dict[float, float] = field(default_factory=dict)

    @property
    def diverged(self) -> list[float]:
        """Factors whose training diverged."""
        return [f for f, s in self.scores.items() if s == math.inf]


def grid_search(train: Callable[[float], T], base: float, factors: Sequence[float],
                score: Callable[[T], float], *, generator: torch.Generator | None = None,
                ) -> GridSearchResult[T]:
    """Train at ``base * f`` for each ``f`` in ``factors`` and keep the lowest score.

    Every run starts from the same ``generator`` state (same initialization, same samples), so
    the hyper-parameter is the only difference (the paper's "best step size from a grid").
    Runs raising :class:`lazylab.train.TrainingDiverged` score ``inf``; if all diverge, the
    last error is raised. Ties keep the first factor.

    Parameters
    ----------
    train
        value -> trained output (anything).
    base, factors
        The grid is ``base * f`` for ``f`` in ``factors``.
    score
        output -> float, lower is better (e.g. final risk).
    generator
        Restored to its entry state before every run (None: nothing restored).

    Examples
    --------
    >>> r = grid_search(lambda lr: (lr - 0.35) ** 2, 0.1, [1, 2, 4], score=lambda v: v)
    >>> r.factor, round(r.value, 2)
    (4.0, 0.4)
    """
    state = generator.get_state() if generator is not None else None
    best: tuple[float, float, Any] | None = None
    scores: dict[float, float] = {}
    last: TrainingDiverged | None = None
    for f in factors:
        f = float(f)
        if generator is not None:
            generator.set_state(state)
        try:
            out = train(base * f)
        except TrainingDiverged as err:
            last = err
            scores[f] = math.inf
            continue
        sc = float(score(out))
        scores[f] = sc
        if best is None or sc < best[0]:
            best = (sc, f, out)
    if best is None:
        assert last is not None
        raise last
    return GridSearchResult(best=best[2], value=base * best[1], factor=best[1], score=best[0],
                            scores=scores)


# ------------------------------------------------------------------------------ smallest n
def crossing(ns: Sequence[float], errs: Sequence[float], target: float) -> float:
    """First n at which ``err <= target``, log-linear between the grid points around it.

    Returns ``nan`` if the target is never reached, and the first grid point if it is reached
    there already (then n* is only bounded above by it).

    Examples
    --------
    >>> round(crossing([10, 100], [1.0, 0.01], 0.1), 6)
    31.622777
    """
    for i, (n, e) in enumerate(zip(ns, errs, strict=True)):
        if e <= target:
            if i == 0:
                return float(n)
            n0, e0 = ns[i - 1], errs[i - 1]
            frac = (math.log(e0) - math.log(target)) / (math.log(e0) - math.log(max(e, 1e-300)))
            return float(math.exp(math.log(n0) + frac * (math.log(n) - math.log(n0))))
    return math.nan


@dataclass(frozen=True)
class SmallestN:
    """Outcome of :func:`smallest_n`: n* and the (n, error) points evaluated."""

    n_star: float
    ns: list[int]
    errors: list[float]

    @property
    def censored(self) -> bool:
        """True if the target was never reached on the grid (n* is nan)."""
        return not math.isfinite(self.n_star)


def smallest_n(evaluate: Callable[[int], float], grid: Sequence[int], target: float, *,
               stop_after: int = 2) -> SmallestN:
    """Sweep n over ``grid`` (increasing) and locate the smallest n with error <= ``target``.

    The sweep stops once ``stop_after`` consecutive grid points are at or below the target (a
    single lucky draw does not end it). n* is :func:`crossing` of the evaluated curve, so it
    interpolates log-linearly between the last point above and the first point below.

    Parameters
    ----------
    evaluate
        n -> test error of a model trained on n samples (draw the samples from a stream named
        after n, e.g. ``sub_generator(seed, f"train-n{n}")``, so curves are reproducible).
    grid
        Increasing sample sizes.
    target
        Error level defining n*.
    stop_after
        Consecutive hits that end the sweep.

    Examples
    --------
    >>> r = smallest_n(lambda n: 100.0 / n, [10, 100, 1000, 10000], target=0.5)
    >>> r.ns, round(r.n_star, 1)
    ([10, 100, 1000, 10000], 200.0)
    """
    return smallest_n_chunked(lambda chunk: [evaluate(n) for n in chunk], grid, target,
                              stop_after=stop_after, chunk=1)


def smallest_n_chunked(evaluate: Callable[[list[int]], Sequence[float]], grid: Sequence[int],
                       target: float, *, stop_after: int = 2, chunk: int = 1) -> SmallestN:
    """:func:`smallest_n` with the grid evaluated ``chunk`` consecutive sizes at a time
    (``evaluate`` maps a list of n to their errors, e.g. models trained as one batch).

    The sweep reads the errors in grid order and stops where :func:`smallest_n` stops; the
    result holds only the points up to there, so it is :func:`smallest_n`'s for the same
    errors whatever the chunk (the sizes past the stop in the last chunk are computed and
    dropped). The chunks are fixed by the grid and ``chunk`` alone.

    >>> r = smallest_n_chunked(lambda ns: [100.0 / n for n in ns], [10, 100, 1000, 10000, 1e5],
    ...                        target=0.5, stop_after=1, chunk=2)
    >>> r.ns, round(r.n_star, 1)
    ([10, 100, 1000], 200.0)
    """
    if stop_after < 1:
        raise ValueError("stop_after must be >= 1")
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    ns: list[int] = []
    errs: list[float] = []
    hits = 0
    sizes = [int(n) for n in grid]
    for lo in range(0, len(sizes), chunk):
        part = sizes[lo:lo + chunk]
        out = [float(e) for e in evaluate(part)]
        if len(out) != len(part):
            raise ValueError(f"evaluate returned {len(out)} errors for {len(part)} sizes")
        for n, e in zip(part, out, strict=True):
            ns.append(n)
            errs.append(e)
            hits = hits + 1 if e <= target else 0
            if hits >= stop_after:
                return SmallestN(crossing(ns, errs, target), ns, errs)
    return SmallestN(crossing(ns, errs, target), ns, errs)


# ------------------------------------------------------------------------------ slopes
class SlopeFit(NamedTuple):
    """Least-squares fit ``log y = slope log x + intercept`` with the slope's standard error.

    ``from_residuals`` says whether ``se`` is the residual estimate (with ``points - 2``
    degrees of freedom) rather than propagated seed noise.
    """

    slope: float
    se: float
    intercept: float
    points: int
    from_residuals: bool = False


def k_eff(k_se: float, dof: int | None) -> float:
    """The multiple of an *estimated* standard error with the coverage of ``k_se`` normal SEs.

    With ``dof`` degrees of freedom the standardized error is Student-t, not normal: the
    multiplier is the t quantile at the two-sided coverage of ``k_se`` (99.73% for 3), e.g.
    19.2 for 2 dof, 9.2 for 3, 5.5 for 5, 4.1 for 10. ``dof=None``: ``k_se`` (known SE).

    Examples
    --------
    >>> round(k_eff(3.0, 3), 1), k_eff(3.0, None)
    (9.2, 3.0)
    """
    if dof is None:
        return float(k_se)
    from scipy.stats import norm, t

    return float(t.ppf(norm.cdf(k_se), max(int(dof), 1)))


def loglog_fit(x: Sequence[float], y: Sequence[float],
               sem: Sequence[float] | None = None) -> SlopeFit:
    """Ordinary least squares of log y on log x.

    The slope's standard error is the larger of (a) the residual estimate
    ``sqrt(s^2 / sum (lx - mean lx)^2)`` with ``s^2 = RSS / (k - 2)`` (k >= 3 points) and (b) the
    propagated seed noise ``sqrt(sum_i c_i^2 (sem_i / y_i)^2)`` with
    ``c_i = (lx_i - mean lx) / sum (lx - mean lx)^2`` (when ``sem`` is given), compared after
    the residual one is widened by its t factor (:func:`k_eff`); ``from_residuals`` says which
    was kept. With two points only (b) is available (0 without ``sem``). Non-positive or
    non-finite y give a NaN slope.

    Examples
    --------
    >>> f = loglog_fit([1, 10, 100], [1.0, 0.1, 0.01])
    >>> round(f.slope, 12), round(f.se, 12)
    (-1.0, 0.0)
    """
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    if len(xa) < 2 or not np.all(np.isfinite(ya)) or np.any(ya <= 0) or np.any(xa <= 0):
        return SlopeFit(math.nan, math.nan, math.nan, len(xa))
    lx, ly = np.log(xa), np.log(ya)
    cx = lx - lx.mean()
    sxx = float(cx @ cx)
    if sxx == 0:
        return SlopeFit(math.nan, math.nan, math.nan, len(xa))
    b = float(cx @ (ly - ly.mean())) / sxx
    c = float(ly.mean() - b * lx.mean())
    se_res = 0.0
    if len(lx) >= 3:
        resid = ly - (b * lx + c)
        se_res = math.sqrt(float(resid @ resid) / (len(lx) - 2) / sxx)
    se_seed = 0.0
    if sem is not None:
        rel = np.asarray(sem, float) / ya
        se_seed = math.sqrt(float(((cx / sxx) ** 2 * rel**2).sum()))
    if se_res * k_eff(K_SE, len(lx) - 2) / K_SE >= se_seed and len(lx) >= 3:
        return SlopeFit(b, se_res, c, len(xa), True)
    return SlopeFit(b, se_seed, c, len(xa), False)


def unresolved(cid: str, statement: Statement, measured: float, tolerance: float,
               resolution: float, *, what: str, how: str, laws: str) -> Claim | None:
    """The claim as inconclusive (``Claim.not_applicable``) when its ``tolerance`` is wider than
    ``resolution``, the distance between the predicted law and the nearest competing one: such
    a test could not tell the two apart (the prediction itself might fail it, or the
    competitor pass it); None otherwise, and then the caller decides the verdict.

    ``what`` names the measured number, ``how`` says where the tolerance comes from, ``laws``
    names the two laws.

    >>> unresolved("s", "", 1.4, 1.7, 1.0, what="slope", how="4 points",
    ...            laws="d^2 and d^3").details["reason"][:44]
    'inconclusive: slope 1.4 with tolerance 1.7 ('
    >>> unresolved("s", "", 1.9, 0.4, 1.0, what="slope", how="", laws="") is None
    True
    """
    if not (math.isfinite(measured) and tolerance > resolution):
        return None
    return Claim.not_applicable(
        cid, statement, f"inconclusive: {what} {measured:.3g} with tolerance {tolerance:.3g} "
        f"({how}) is wider than the distance {resolution:g} between {laws}; more points needed")


class SlopeRecord(NamedTuple):
    """One :func:`slope_claim` as built: its id, fitted points, prediction, tolerance, the
    resolution it was held to, whether the caller stated it (else :func:`default_resolution`),
    its status and, when inconclusive, the reason."""

    cid: str
    points: int
    expected: float
    tolerance: float
    resolution: float
    stated: bool
    status: str
    reason: str


_SLOPES: ContextVar[list[SlopeRecord] | None] = ContextVar("lazylab_slopes", default=None)


@contextmanager
def recorded_slopes() -> Iterator[list[SlopeRecord]]:
    """Collect a :class:`SlopeRecord` of every :func:`slope_claim` (and
    :func:`series_slope_claim`) built inside the block, parts later folded by :func:`all_of`
    included: how :mod:`lazylab.testing` inspects the fits behind an experiment's claims."""
    log: list[SlopeRecord] = []
    token = _SLOPES.set(log)
    try:
        yield log
    finally:
        _SLOPES.reset(token)


def _recorded(c: Claim, fit: SlopeFit, expected: float, tol: float,
              resolution: float | None) -> Claim:
    log = _SLOPES.get()
    if log is not None:
        res = default_resolution(expected) if resolution is None else float(resolution)
        log.append(SlopeRecord(c.id, fit.points, float(expected), tol, res,
                               resolution is not None, c.status,
                               str(c.details.get("reason", ""))))
    return c


def default_resolution(expected: float) -> float:
    """The distance from a predicted slope ``expected`` to the flat law (slope 0: y does not
    depend on x), ``|expected|``, the competing law :func:`slope_claim` uses when none is
    given; ``inf`` (no competitor, the rule off) for ``expected == 0`` or a non-finite one.

    >>> default_resolution(-0.5), default_resolution(0.0)
    (0.5, inf)
    """
    e = abs(float(expected))
    return e if 0 < e < math.inf else math.inf


def slope_claim(cid: str, statement: Statement, x: Sequence[float], y: Sequence[float],
                expected: float, *, bias: float, error_model: str,
                sem: Sequence[float] | None = None, k_se: float = K_SE,
                details: dict[str, Any] | None = None,
                resolution: float | None = None) -> Claim:
    """Two-sided claim: the log-log slope of y against x equals ``expected``.

    Held iff ``|slope - expected| <= bias + k * se`` (:func:`loglog_fit`), where ``k = k_se``
    for a propagated seed SE and the Student-t equivalent :func:`k_eff` (``points - 2`` dof)
    for a residual SE (one from 4 points is itself uncertain). ``bias`` is the stated
    allowance for the deterministic corrections to the leading-order law over the fitted
    range (a relative O(m^-1/2) correction tilts a fit over m in [100, 1e5] by a few
    hundredths), chosen from the math before seeing the data. A NaN slope fails.

    ``resolution`` is the distance from ``expected`` to the nearest competing law (e.g. 1
    between n* ~ d and n* ~ d^2). None (the default) names the flat law, slope 0 (y not
    depending on x), at ``|expected|`` (:func:`default_resolution`; none for ``expected ==
    0``); ``NO_COMPETING_LAW`` turns the rule off. A tolerance wider than it could not tell
    the two laws apart (a band containing slope 0 would pass had y not varied with x at all):
    the claim is ``not_applicable`` (inconclusive, :func:`unresolved`). With a stated
    ``resolution``, a tolerance between half of it and it accepts slopes nearer the
    competing law than ``expected``: the verdict is kept as a consistency check
    (``details["kind"]``), not counted as a claim.

    Returns
    -------
    Claim
        measured = fitted slope, expected, tolerance = bias + k_se se; ``details`` gets
        ``se``, ``bias``, ``intercept``, ``points`` and the per-point (x, y).

    Examples
    --------
    >>> c = slope_claim("s", "y ~ x^-1/2", [1e2, 1e3, 1e4], [0.1, 0.0316, 0.01], -0.5,
    ...                 bias=0.02, error_model="finite width")
    >>> c.status, round(c.measured, 3)
    ('held', -0.5)
    >>> slope_claim("s", "y ~ x", [1, 2, 4], [1, 2.6, 3.5], 1.0, bias=0.1,
    ...             error_model="seeds", resolution=1.0).status
    'not_applicable'
    >>> slope_claim("s", "y ~ x^-1/2", [1, 2, 4, 8], [1, 0.5, 0.9, 0.35], -0.5, bias=0.05,
    ...             error_model="seeds").details["reason"][:51]
    'inconclusive: slope -0.37 with tolerance 5.67 (bias'
    """
    fit = loglog_fit(x, y, sem)
    se = fit.se if math.isfinite(fit.se) else 0.0
    k = k_eff(k_se, fit.points - 2) if fit.from_residuals else k_se
    tol = float(bias) + k * se
    undecided = unresolved(
        cid, statement, fit.slope, tol,
        default_resolution(expected) if resolution is None else float(resolution),
        what="slope", how=f"bias {bias:g} + {k:.3g} x SE {se:.3g} from {fit.points} points",
        laws="the predicted law and the nearest competing one" if resolution is not None
        else f"slope {float(expected):g} and slope 0 (y not depending on x)")
    info = {"se": se, "bias": float(bias), "k_se": k, "se_from_residuals": fit.from_residuals,
            "intercept": fit.intercept, "points": fit.points, "x": [float(v) for v in x],
            "y": [float(v) for v in y],
            **_weak(tol, resolution), **(details or {})}
    return _recorded(undecided or Claim.test(cid, statement, fit.slope, "within",
                                             float(expected), tol, error_model, info),
                     fit, expected, tol, resolution)


def _weak(tol: float, resolution: float | None) -> dict[str, str]:
    """``details`` marking a slope claim a consistency check when its band ``expected +- tol``
    reaches slopes nearer the stated competing law than the expected one (``tol >
    resolution / 2``): it could hold for either law, so it is shown but not counted."""
    if resolution is None or tol <= resolution / 2:
        return {}
    return {"kind": "consistency", "weak": f"tolerance {tol:.3g} is more than half the "
            f"distance {resolution:g} to the competing law"}


# ------------------------------------------------------------------------------ Monte Carlo match
def match_claim(cid: str, statement: Statement, measured: float | Sequence[float],
                expected: float | Sequence[float], se: float | Sequence[float], *,
                error_model: str, bias: float | Sequence[float] = 0.0, k_se: float = K_SE,
                x: Sequence[float] | None = None, x_name: str | None = None,
                details: dict[str, Any] | None = None) -> Claim:
    """Two-sided Monte Carlo match, pointwise: ``|m_i - e_i| <= k_se * se_i + bias_i`` for all i.

    ``se`` is the standard error of the difference (combine a simulated mean's SEM and a
    Monte Carlo reference's SE in quadrature before calling); ``bias`` the stated deterministic
    allowance (finite width, finite d, training error). Scalars or equal-length sequences
    (scalars broadcast). The reported measured/expected/tolerance are those of the tightest
    point (largest ``|m - e| / tol``), so ``ratio > 1`` iff the claim failed; every point is in
    ``details["points"]``; with ``x_name`` and several points the tightest is named in
    ``details["worst_at"]`` (``"N = 45"``, :func:`~lazylab.experiments.base.worst_at`). Any
    non-finite measured value, expected value or tolerance fails
    the claim (a NaN standard error gives a NaN tolerance, which no comparison passes).

    Examples
    --------
    >>> c = match_claim("m", "E f = 1", [1.02, 0.97], 1.0, [0.01, 0.02], error_model="MC")
    >>> c.status, c.measured, round(c.tolerance, 3)
    ('held', 1.02, 0.03)
    """
    m, e, s, b = np.broadcast_arrays(np.atleast_1d(np.asarray(measured, float)),
                                     np.atleast_1d(np.asarray(expected, float)),
                                     np.atleast_1d(np.asarray(se, float)),
                                     np.atleast_1d(np.asarray(bias, float)))
    if m.size == 0:
        return Claim.missing(cid, statement, "no points", error_model=error_model)
    tol = k_se * np.abs(s) + b
    dev = np.abs(m - e)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(tol > 0, dev / tol, np.where(dev > 0, np.inf, 0.0))
    r = np.where(np.isfinite(m) & np.isfinite(e) & np.isfinite(tol), r, np.inf)
    i = int(np.argmax(r))
    xs = list(x) if x is not None else list(range(m.size))
    info: dict[str, Any] = {
        "k_se": k_se,
        "points": [{"x": float(xs[j]), "measured": float(m[j]), "expected": float(e[j]),
                    "se": float(s[j]), "bias": float(b[j]), "tolerance": float(tol[j])}
                   for j in range(m.size)],
        "tightest_x": float(xs[i]),
    }
    if x_name is not None and m.size > 1:
        info["worst_at"] = worst_at(**{x_name: float(xs[i])})
    info.update(details or {})
    return Claim.test(cid, statement, float(m[i]), "within", float(e[i]), float(tol[i]),
                      error_model, info)


# ------------------------------------------------------------------------------ from Results
def series_slope_claim(cid: str, statement: Statement, results: Results, method: str, metric: str,
                       expected: float, *, bias: float, error_model: str,
                       resolution: float | None = None, k_se: float = K_SE,
                       details: dict[str, Any] | None = None, **filters: Any) -> Claim:
    """:func:`slope_claim` on the curve ``results.series(method, metric, **filters)``.

    The fitted points are the means over seeds ``y_x`` at each x. When some x has more than one
    seed, their standard errors ``sem_x`` are propagated to the slope (:func:`loglog_fit`:
    ``se = max(se_res, sqrt(sum_x c_x^2 (sem_x / y_x)^2))``, ``c_x = (log x - mean log x) /
    sum (log x - mean log x)^2``); with one seed everywhere only the residual SE is used. Held
    iff ``|slope - expected| <= bias + k se``, as in :func:`slope_claim` (``resolution`` too).

    Parameters
    ----------
    results, method, metric
        The table and the curve (simulation rows unless ``kind="theory"`` is among ``filters``).
    expected, bias, error_model, resolution, k_se, details
        As in :func:`slope_claim`.
    **filters
        Facets selecting the curve (``d=40``, ``k=2``).

    Examples
    --------
    >>> from lazylab.experiments.base import row
    >>> res = Results([dict(row("net", "m", m, "gap", m ** -0.5 * (1 + 0.01 * s), p=2), seed=s)
    ...                for m in (100, 1000, 10000) for s in range(3)])
    >>> c = series_slope_claim("s", "gap ~ m^-1/2", res, "net", "gap", -0.5, bias=0.02,
    ...                        error_model="finite width", p=2)
    >>> c.status, round(c.measured, 3), c.details["points"]
    ('held', -0.5, 3)
    """
    s = results.series(method, metric, **filters)
    return slope_claim(cid, statement, s.x, s.mean, expected, bias=bias,
                       error_model=error_model, sem=s.sem if np.any(s.n > 1) else None,
                       k_se=k_se, details=details, resolution=resolution)


def series_match_claim(cid: str, statement: Statement, results: Results, method: str, metric: str,
                       ref_metric: str, *, error_model: str,
                       allowance: Callable[[float, float], float] | None = None,
                       se_floor: Callable[[float, int], float] | None = None,
                       ref_se: Callable[[float], float] | None = None,
                       ref_kind: str = "theory", ref_label: str = "reference value",
                       k_se: float = K_SE, details: dict[str, Any] | None = None,
                       **filters: Any) -> Claim:
    """:func:`match_claim` of a simulated curve against reference rows at the same x.

    For every x of ``results.series(method, metric, **filters)`` (mean ``m_x`` over seeds, its
    SEM ``s_x``, ``n_x`` seeds) the reference ``r_x`` is the ``ref_metric`` row of ``method``
    at x: the theory row (``ref_kind="theory"``), or the mean over seeds of a simulated
    per-run value (``ref_kind="simulation"``, e.g. an exact limit evaluated on each run's own
    weights; its SEM ``s'_x`` then enters the reference's SE). Held iff for every x

    ``|m_x - r_x| <= k_se * sqrt(se_x^2 + se'_x^2) + allowance(x, r_x)``

    with ``se_x = max(s_x, se_floor(x, n_x))`` (a floor keeps a single seed, whose SEM is 0,
    from claiming no noise) and ``se'_x = sqrt(s'_x^2 + ref_se(x)^2)`` (``ref_se``: the SE
    of a Monte Carlo reference; ``s'_x = 0`` for theory rows). Missing callables count as 0.

    Returns
    -------
    Claim
        As :func:`match_claim` (the tightest point reported, every point in
        ``details["points"]``); failed with ``details["reason"]`` when there is no simulated
        row, or no reference at some simulated x (``ref_label`` names it).

    Examples
    --------
    >>> from lazylab.experiments.base import row
    >>> rows = [dict(row("NN", "N", N, "risk", v), seed=s)
    ...         for N, vs in ((10, (0.52, 0.50)), (20, (0.31, 0.29))) for s, v in enumerate(vs)]
    >>> rows += [row("NN", "N", N, "risk_limit", r, kind="theory") for N, r in ((10, 0.5),
    ...                                                                      (20, 0.3))]
    >>> c = series_match_claim("m", "NN = limit", Results(rows), "NN", "risk", "risk_limit",
    ...                        error_model="seeds", allowance=lambda N, ref: 0.01)
    >>> q = c.details["points"][0]
    >>> c.status, round(q["se"], 6), q["bias"], round(q["tolerance"], 6)
    ('held', 0.01, 0.01, 0.04)
    """
    s = results.series(method, metric, **filters)
    if len(s.x) == 0:
        return Claim.missing(cid, statement, "no simulation rows", error_model=error_model)
    refs = _references(results, s, method, ref_metric, ref_kind, ref_se, filters)
    if isinstance(refs, float):
        return Claim.missing(cid, statement, f"no {ref_label} at x={refs:g}",
                             error_model=error_model)
    xs = [float(x) for x in s.x]
    ses = [math.hypot(float(sem) if se_floor is None else max(float(sem), se_floor(x, int(n))),
                      se_ref) for x, sem, n, (_, se_ref) in zip(xs, s.sem, s.n, refs,
                                                                 strict=True)]
    exps = [ref for ref, _ in refs]
    biases = [allowance(x, ref) if allowance is not None else 0.0
              for x, ref in zip(xs, exps, strict=True)]
    return match_claim(cid, statement, [float(m) for m in s.mean], exps, ses, bias=biases,
                       x=xs, x_name=_x_name(results, method, metric, filters),
                       error_model=error_model, k_se=k_se, details=details)


def _x_name(results: Results, method: str, metric: str, filters: dict[str, Any]) -> str:
    """The ``x_name`` of the simulated curve (``"x"`` when it has no row)."""
    return next((str(r["x_name"]) for r in results.select(kind="simulation", method=method,
                                                         metric=metric, **filters)), "x")


def _references(results: Results, s: Series, method: str, ref_metric: str, ref_kind: str,
                ref_se: Callable[[float], float] | None,
                filters: dict[str, Any]) -> list[tuple[float, float]] | float:
    """:func:`series_match_claim`'s reference ``(r_x, se'_x)`` at each x of the curve ``s``,
    or the first x without a reference."""
    if ref_kind not in ("theory", "simulation"):
        raise ValueError(f"ref_kind must be 'theory' or 'simulation'; got {ref_kind!r}")
    sim_ref: dict[float, tuple[float, float]] = {}
    if ref_kind == "simulation":
        r = results.series(method, ref_metric, **filters)
        sim_ref = {float(x): (float(m), float(e)) for x, m, e in zip(r.x, r.mean, r.sem,
                                                                    strict=True)}
    out = []
    for x_ in s.x:
        x = float(x_)
        ref: float | None
        if ref_kind == "simulation":
            ref, se_ref = sim_ref.get(x, (None, 0.0))
            if ref_se is not None:
                se_ref = math.hypot(se_ref, ref_se(x))
        else:
            try:
                ref = results.value(method, ref_metric, x, kind="theory", **filters)
            except KeyError:
                ref = None
            se_ref = ref_se(x) if ref_se is not None else 0.0
        if ref is None:
            return x
        out.append((float(ref), se_ref))
    return out


# ------------------------------------------------------------------------------ combining
def all_of(cid: str, statement: Statement, parts: Sequence[Claim], *, error_model: str = "",
           details: dict[str, Any] | None = None) -> Claim:
    """One claim that holds iff every part holds (parts that are not applicable are skipped).

    The reported numbers are those of the tightest part (largest ``ratio``; a failed part
    first), named in ``details["tightest"]`` and, with its own setting if it has one, in
    ``details["worst_at"]`` (``"p=3: m = 1000"``); every part is listed in
    ``details["parts"]``. With no applicable part the
    claim is not applicable. The error model defaults to the parts' (distinct ones joined).

    Examples
    --------
    >>> a = Claim.test("a", "", 1.0, "within", 1.0, 0.1, "MC")
    >>> b = Claim.test("b", "", 1.05, "within", 1.0, 0.1, "MC")
    >>> c = all_of("ab", "both", [a, b])
    >>> c.status, c.measured, c.error_model
    ('held', 1.05, 'MC')
    """
    live = [c for c in parts if c.status != "not_applicable"]
    if not live:
        return Claim.not_applicable(cid, statement, "no applicable part")

    def key(c: Claim) -> tuple[bool, float]:
        r = c.ratio
        return (not c.held, r if math.isfinite(r) else math.inf)

    worst = max(live, key=key)
    models = error_model or "; ".join(dict.fromkeys(c.error_model for c in live if c.error_model))
    info: dict[str, Any] = {"parts": [{"id": c.id, "status": c.status, "measured": c.measured,
                                       "expected": c.expected, "tolerance": c.tolerance}
                                      for c in live], "tightest": worst.id}
    if len(live) > 1:
        at = worst.details.get("worst_at")
        info["worst_at"] = f"{worst.id}: {at}" if at else worst.id
    info.update(details or {})
    return Claim.test(cid, statement, worst.measured, worst.op, worst.expected,
                      worst.tolerance, models, info)


class Check(NamedTuple):
    """One comparison of a claim made of several (:func:`joint_claim`): ``measured op
    expected, tolerance`` as in :meth:`Claim.test <lazylab.experiments.base.Claim.test>`."""

    name: str
    measured: float
    op: str
    expected: float
    tolerance: float


def joint_claim(cid: str, statement: Statement, tests: Sequence[Check],
                error_model: str, details: dict[str, Any] | None = None) -> Claim:
    """One claim that holds iff every test passes (:func:`~lazylab.experiments.base.passes`).

    It reports the first test that fails, named in ``details["failed_test"]``, or, when all
    pass, the first test (the headline; the others are in ``details``). A
    ``details["comparison"]`` is set to the reported test's.

    >>> t = [Check("ratio", 0.5, "<=", 0.9, 0.0), Check("gap", 0.1, "above", 0.0, 0.3)]
    >>> c = joint_claim("c", "lower, markedly", t, "seeds")
    >>> c.status, c.measured, c.details["failed_test"]
    ('failed', 0.1, 'gap')
    """
    info = dict(details or {})
    failed = [t for t in tests if not (all(math.isfinite(v) for v in
                                           (t.measured, t.expected, t.tolerance))
                                       and passes(t.measured, t.expected, t.tolerance, t.op))]
    shown = failed[0] if failed else tests[0]
    if failed:
        info["failed_test"] = shown.name
    if "comparison" in info:
        info["comparison"] = shown.op
    return Claim.test(cid, statement, shown.measured, shown.op, shown.expected,
                      shown.tolerance, error_model, info)


def level_claim(cid: str, statement: Statement, measured: Sequence[float],
                expected: Sequence[float], *, bias: float, error_model: str,
                k_se: float = K_SE, x: Sequence[float] | None = None,
                details: dict[str, Any] | None = None) -> Claim:
    """Two-sided claim that measured values sit on the predicted curve, from independent units.

    With ``r_i = log(measured_i / expected_i)`` from independent work units (e.g. one per width,
    each with its own seed), the claim holds iff ``|mean r| <= bias + k * sd(r) / sqrt(n)``,
    a one-sample t test with ``k = k_eff(k_se, n - 1)`` (:func:`k_eff`). The scatter of the
    units estimates the Monte Carlo error, so no model of it is needed; ``bias`` is the
    stated relative (log) allowance for the deterministic corrections. Needs n >= 2 finite
    positive pairs (else failed).

    Returns
    -------
    Claim
        measured = exp(mean r) (the geometric-mean ratio), expected 1, tolerance
        ``exp(bias + k se) - 1`` applied as ``|measured - 1|`` in log space (``details`` has
        ``mean_log_ratio``, ``se``, ``k``).

    Examples
    --------
    >>> c = level_claim("l", "", [1.02, 0.97, 1.01, 0.99], [1.0] * 4, bias=0.0, error_model="")
    >>> c.status
    'held'
    """
    m = np.asarray(measured, float)
    e = np.asarray(expected, float)
    ok = np.isfinite(m) & np.isfinite(e) & (m > 0) & (e > 0)
    n = int(ok.sum())
    info: dict[str, Any] = {"x": [float(v) for v in (x if x is not None else range(len(m)))],
                            "ratios": [float(a / b) if b else math.nan for a, b in zip(m, e,
                                                                                     strict=True)]}
    info.update(details or {})
    if n < 2 or n < len(m):
        return Claim.missing(cid, statement, "fewer than 2 finite positive pairs" if n < 2
                             else "non-finite values", expected=1.0, error_model=error_model,
                             details=info)
    r = np.log(m / e)
    mean, se = float(r.mean()), float(r.std(ddof=1) / math.sqrt(n))
    k = k_eff(k_se, n - 1)
    tol_log = float(bias) + k * se
    info.update({"mean_log_ratio": mean, "se": se, "k": k, "bias": float(bias)})
    # Report on the ratio scale: measured exp(mean), tolerance the log tolerance mapped to the
    # side the mean lies on, so ratio > 1 iff failed.
    meas = math.exp(mean)
    tol = (math.exp(tol_log) - 1) if mean >= 0 else (1 - math.exp(-tol_log))
    return Claim.test(cid, statement, meas, "within", 1.0, tol, error_model, info)
