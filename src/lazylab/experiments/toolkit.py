"""Protocols and verdicts shared by the experiments of every paper.

What lives here (import from ``lazylab.experiments.toolkit``):

* :data:`K_SE`: standard errors allowed in every statistical claim (3).
* :func:`sub_generator`: the one way to derive a purpose-specific random stream inside a unit.
* :func:`grid_search`: train at each value of a hyper-parameter grid from the same random
  state, keep the best score; returns a :class:`GridSearchResult`.
* :func:`smallest_n`: the smallest sample size reaching a target error (sample-complexity
  curves), with :func:`crossing` (log-linear interpolation between grid points).
* :func:`loglog_fit` and :func:`slope_claim`: a two-sided claim on a log-log slope.
* :func:`match_claim`: a two-sided Monte Carlo match, pointwise within
  ``K_SE * SE + bias``.

The claim helpers follow the principles of :mod:`lazylab.experiments.base`: the tolerance is
computed from the stated bias and the standard errors only (never from the deviation itself).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
import torch

from lazylab.experiments.base import Claim
from lazylab.seeding import derive_seed, torch_generator
from lazylab.train import TrainingDiverged

__all__ = [
    "K_SE",
    "GridSearchResult",
    "SlopeFit",
    "SmallestN",
    "crossing",
    "grid_search",
    "loglog_fit",
    "match_claim",
    "slope_claim",
    "smallest_n",
    "sub_generator",
]

#: Standard errors allowed in every statistical comparison (about 0.3% two-sided false alarms
#: per Gaussian comparison).
K_SE = 3.0

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
    if stop_after < 1:
        raise ValueError("stop_after must be >= 1")
    ns: list[int] = []
    errs: list[float] = []
    hits = 0
    for n in grid:
        e = float(evaluate(int(n)))
        ns.append(int(n))
        errs.append(e)
        hits = hits + 1 if e <= target else 0
        if hits >= stop_after:
            break
    return SmallestN(crossing(ns, errs, target), ns, errs)


# ------------------------------------------------------------------------------ slopes
class SlopeFit(NamedTuple):
    """Least-squares fit ``log y = slope log x + intercept`` with the slope's standard error."""

    slope: float
    se: float
    intercept: float
    points: int


def loglog_fit(x: Sequence[float], y: Sequence[float],
               sem: Sequence[float] | None = None) -> SlopeFit:
    """Ordinary least squares of log y on log x.

    The slope's standard error is the larger of (a) the residual estimate
    ``sqrt(s^2 / sum (lx - mean lx)^2)`` with ``s^2 = RSS / (k - 2)`` (k >= 3 points) and (b) the
    propagated seed noise ``sqrt(sum_i c_i^2 (sem_i / y_i)^2)`` with
    ``c_i = (lx_i - mean lx) / sum (lx - mean lx)^2`` (when ``sem`` is given). With two points
    only (b) is available (0 without ``sem``). Non-positive or non-finite y give a NaN slope.

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
    return SlopeFit(b, max(se_res, se_seed), c, len(xa))


def slope_claim(cid: str, statement: str, x: Sequence[float], y: Sequence[float],
                expected: float, *, bias: float, error_model: str,
                sem: Sequence[float] | None = None, k_se: float = K_SE,
                details: dict[str, Any] | None = None) -> Claim:
    """Two-sided claim: the log-log slope of y against x equals ``expected``.

    Held iff ``|slope - expected| <= bias + k_se * se`` (:func:`loglog_fit`). ``bias`` is the
    stated allowance for the deterministic corrections to the leading-order law over the
    fitted range (e.g. a relative O(m^-1/2) correction tilts a fit over m in [100, 1e5] by a
    few hundredths); it must be chosen from the math, before seeing the data. A NaN slope (a
    non-positive value, fewer than two points) fails.

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
    """
    fit = loglog_fit(x, y, sem)
    se = fit.se if math.isfinite(fit.se) else 0.0
    tol = float(bias) + k_se * se
    held = math.isfinite(fit.slope) and abs(fit.slope - expected) <= tol
    info = {"se": se, "bias": float(bias), "k_se": k_se, "intercept": fit.intercept,
            "points": fit.points, "x": [float(v) for v in x], "y": [float(v) for v in y]}
    info.update(details or {})
    return Claim.verdict(cid, statement, held, fit.slope, float(expected), tol,
                         error_model=error_model, details=info)


# ------------------------------------------------------------------------------ Monte Carlo match
def match_claim(cid: str, statement: str, measured: float | Sequence[float],
                expected: float | Sequence[float], se: float | Sequence[float], *,
                error_model: str, bias: float | Sequence[float] = 0.0, k_se: float = K_SE,
                x: Sequence[float] | None = None,
                details: dict[str, Any] | None = None) -> Claim:
    """Two-sided Monte Carlo match, pointwise: ``|m_i - e_i| <= k_se * se_i + bias_i`` for all i.

    ``se`` is the standard error of the difference (combine a simulated mean's SEM and a
    Monte Carlo reference's SE in quadrature before calling); ``bias`` the stated deterministic
    allowance (finite width, finite d, training error). Scalars or equal-length sequences
    (scalars broadcast). The reported measured/expected/tolerance are those of the tightest
    point (largest ``|m - e| / tol``), so ``ratio > 1`` iff the claim failed; every point is in
    ``details["points"]``. Any non-finite measured value fails the claim.

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
        return Claim.verdict(cid, statement, False, math.nan, math.nan, math.nan,
                             error_model=error_model, details={"reason": "no points"})
    tol = k_se * np.abs(s) + b
    dev = np.abs(m - e)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(tol > 0, dev / tol, np.where(dev > 0, np.inf, 0.0))
    r = np.where(np.isfinite(m) & np.isfinite(e), r, np.inf)
    i = int(np.argmax(r))
    held = bool(np.all(r <= 1.0))
    xs = list(x) if x is not None else list(range(m.size))
    info: dict[str, Any] = {
        "k_se": k_se,
        "points": [{"x": float(xs[j]), "measured": float(m[j]), "expected": float(e[j]),
                    "se": float(s[j]), "bias": float(b[j]), "tolerance": float(tol[j])}
                   for j in range(m.size)],
        "tightest_x": float(xs[i]),
    }
    info.update(details or {})
    return Claim.verdict(cid, statement, held, float(m[i]), float(e[i]), float(tol[i]),
                         error_model=error_model, details=info)
