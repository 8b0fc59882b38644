"""The shared experiment toolkit: sub-generators, grid search, smallest n, slope and match
claims (including that they fail when the data are tilted)."""

import math

import numpy as np
import pytest
import torch

from lazylab.experiments.base import Results, row
from lazylab.experiments.toolkit import (
    K_SE,
    GridSearchResult,
    crossing,
    grid_search,
    k_eff,
    loglog_fit,
    match_claim,
    series_match_claim,
    series_slope_claim,
    slope_claim,
    smallest_n,
    sub_generator,
)
from lazylab.seeding import derive_seed, torch_generator
from lazylab.train import TrainingDiverged


def test_sub_generator_is_the_hashed_seed_and_purposes_are_independent():
    a = torch.randn(5, generator=sub_generator(11, "test"), dtype=torch.float64)
    ref = torch.randn(5, generator=torch_generator(derive_seed(11, "test")), dtype=torch.float64)
    assert torch.equal(a, ref)
    b = torch.randn(5, generator=sub_generator(11, "train"), dtype=torch.float64)
    c = torch.randn(5, generator=sub_generator(12, "test"), dtype=torch.float64)
    assert not torch.equal(a, b) and not torch.equal(a, c)


def test_grid_search_restores_the_generator_and_skips_diverged_runs():
    g = torch.Generator().manual_seed(0)
    draws = []

    def train(lr):
        z = float(torch.rand(1, generator=g))
        draws.append(z)
        if lr > 1.0:
            raise TrainingDiverged("boom", step=1, lr=lr, loss=math.inf, history=None)
        return (lr - 0.5) ** 2 + z

    r = grid_search(train, 0.25, [1, 2, 4, 8], score=lambda v: v, generator=g)
    assert isinstance(r, GridSearchResult)
    assert len(set(draws)) == 1  # the same random state for every run
    assert r.factor == 2.0 and r.value == 0.5 and r.diverged == [8.0]
    assert r.scores[8.0] == math.inf and math.isclose(r.score, draws[0])
    with pytest.raises(TrainingDiverged):
        grid_search(train, 4.0, [1, 2], score=lambda v: v)


def test_smallest_n_stops_after_consecutive_hits_and_interpolates():
    calls = []

    def ev(n):
        calls.append(n)
        return 0.05 if n == 20 else 64.0 / n  # one lucky draw at n = 20

    r = smallest_n(ev, [10, 20, 40, 80, 160, 320, 640, 1280], target=0.5, stop_after=2)
    assert calls == [10, 20, 40, 80, 160, 320] and r.ns == calls
    # after the lucky hit the crossing is the first one: between 10 (6.4) and 20 (0.05)
    assert 10 < r.n_star < 20
    assert math.isnan(smallest_n(lambda n: 1.0, [1, 2], 0.5).n_star)
    assert crossing([4, 8], [0.1, 0.01], 0.5) == 4.0


def test_loglog_fit_standard_error_matches_monte_carlo():
    # y = x^-0.5 exp(eps), eps ~ N(0, 0.05^2): the SE of the OLS slope is 0.05/sqrt(Sxx).
    rng = np.random.default_rng(0)
    x = np.geomspace(1e2, 1e5, 7)
    lx = np.log(x)
    se_true = 0.05 / math.sqrt(((lx - lx.mean()) ** 2).sum())
    fits = [loglog_fit(x, x**-0.5 * np.exp(0.05 * rng.standard_normal(7))) for _ in range(2000)]
    slopes = np.array([f.slope for f in fits])
    assert abs(slopes.mean() + 0.5) < 4 * se_true / math.sqrt(2000)
    assert abs(slopes.std() / se_true - 1) < 0.05
    # the t-widened tolerance covers the true slope at about the nominal 99.73%
    cover = np.mean([abs(f.slope + 0.5) <= k_eff(K_SE, 5) * f.se for f in fits])
    assert cover > 0.99
    mean_se = np.mean([f.se for f in fits])  # E s < sigma (chi with 5 dof): within 10%
    assert 0.85 < mean_se / se_true < 1.0


def test_slope_claim_is_two_sided_and_fails_when_tilted():
    x = np.geomspace(100, 1e5, 5)
    y = 3 * x**-0.5 * (1 + 0.01 * np.sin(np.arange(5)))
    ok = slope_claim("s", "slope -1/2", x, y, -0.5, bias=0.02, error_model="finite width")
    assert ok.held and ok.tolerance >= 0.02
    # a residual SE with 3 dof is widened by the t factor
    assert ok.details["se_from_residuals"] and math.isclose(
        ok.tolerance, 0.02 + k_eff(K_SE, 3) * ok.details["se"])
    for tilt in (+0.1, -0.1):  # too steep and too shallow both fail
        bad = slope_claim("s", "slope -1/2", x, y * x**tilt, -0.5, bias=0.02,
                          error_model="finite width")
        assert bad.status == "failed", tilt
    assert slope_claim("s", "", [1, 2], [1.0, -1.0], -0.5, bias=1,
                       error_model="").status == "failed"


def test_slope_claim_uses_seed_sem_with_two_points():
    c = slope_claim("s", "", [10, 1000], [1.0, 0.1], -0.5, bias=0.0, error_model="",
                    sem=[0.1, 0.01])
    # se = sqrt(2) * 0.1 / log(100)
    assert math.isclose(c.details["se"], math.sqrt(2) * 0.1 / math.log(100))
    assert math.isclose(c.tolerance, K_SE * c.details["se"])


def test_match_claim_pointwise_and_reports_the_tightest_point():
    c = match_claim("m", "", [1.0, 2.05, 3.0], [1.0, 2.0, 3.0], 0.01, bias=0.02, x=[10, 20, 30],
                    error_model="MC")
    assert c.held and c.details["tightest_x"] == 20 and math.isclose(c.tolerance, 0.05)
    assert math.isclose(c.ratio, 1.0)
    bad = match_claim("m", "", [1.0, 2.06, 3.0], [1.0, 2.0, 3.0], 0.01, bias=0.02,
                      error_model="MC")
    assert bad.status == "failed" and bad.ratio > 1
    low = match_claim("m", "", [0.9], [1.0], 0.01, error_model="MC")
    assert low.status == "failed"  # two-sided
    assert match_claim("m", "", [math.nan], [1.0], 1.0, error_model="").status == "failed"
    assert match_claim("m", "", [], [], [], error_model="").status == "failed"


def test_slope_claim_inconclusive_when_tolerance_exceeds_resolution() -> None:
    """Three scattered points give a t-widened tolerance far above 1: with a resolution of 1
    (the distance between the competing laws) the claim is not applicable, not held; the same
    fit with a tight series holds, and a wrong tight series fails."""
    from lazylab.experiments.toolkit import slope_claim

    x = [8.0, 16.0, 32.0]
    loose = slope_claim("s", "n* ~ d", x, [10.0, 40.0, 50.0], 1.0, bias=0.1,
                        error_model="seeds", resolution=1.0)
    assert loose.status == "not_applicable"
    assert loose.details["reason"].startswith("inconclusive")
    tight = slope_claim("s", "n* ~ d", x, [10.0, 20.0, 40.0], 1.0, bias=0.1,
                        error_model="seeds", resolution=1.0)
    assert tight.status == "held"
    wrong = slope_claim("s", "n* ~ d", x, [10.0, 40.0, 160.0], 1.0, bias=0.1,
                        error_model="seeds", resolution=1.0)
    assert wrong.status == "failed"


def _table(values: dict[float, list[float]], method: str = "net", metric: str = "y",
           **facets) -> list[dict]:
    """Simulation rows: one per (x, seed) with the given values (seeds 0, 1, ...)."""
    return [dict(row(method, "x", x, metric, v, **facets), seed=s)
            for x, vs in values.items() for s, v in enumerate(vs)]


def test_series_slope_claim_is_slope_claim_on_the_series() -> None:
    """Reading Results gives exactly toolkit.slope_claim on the means over seeds, with the SEM
    propagated only when some x has several seeds; facets select the curve."""
    xs = [100.0, 1000.0, 10000.0, 100000.0]
    one = _table({x: [x ** -0.5 * (1 + 0.03 * (-1) ** i)] for i, x in enumerate(xs)}, p=2)
    one += _table({x: [1.0] for x in xs}, p=3)  # another facet value: ignored
    c = series_slope_claim("s", "st", Results(one), "net", "y", -0.5, bias=0.01,
                           error_model="em", p=2)
    ref = slope_claim("s", "st", xs, [r["value"] for r in one[:4]], -0.5, bias=0.01,
                      error_model="em")
    assert c == ref and c.details["se_from_residuals"]
    many = _table({x: [x ** -0.5 * (1 + 0.05 * s) for s in range(3)] for x in xs})
    s = Results(many).series("net", "y")
    c = series_slope_claim("s", "st", Results(many), "net", "y", -0.5, bias=0.01,
                           error_model="em", resolution=1.0, details={"note": 1})
    assert c == slope_claim("s", "st", s.x, s.mean, -0.5, bias=0.01, error_model="em",
                            sem=s.sem, resolution=1.0, details={"note": 1})
    assert c.held and c.details["note"] == 1
    tilted = _table({x: [x ** -0.3] for x in xs})
    assert series_slope_claim("s", "", Results(tilted), "net", "y", -0.5, bias=0.01,
                              error_model="").failed
    assert series_slope_claim("s", "", Results([]), "net", "y", -0.5, bias=0.01,
                              error_model="").failed


def test_series_match_claim_against_theory_and_simulated_references() -> None:
    """Pointwise |mean - ref| <= k sqrt(se^2 + se_ref^2) + allowance, with the SE floor, the
    reference SE and both kinds of reference; fails without rows or a reference."""
    sim = _table({10: [0.52, 0.50], 20: [0.30, 0.30]}, metric="risk")
    theory = [row("net", "x", 10, "ref", 0.5, kind="theory"),
              row("net", "x", 20, "ref", 0.3, kind="theory")]
    res = Results(sim + theory)
    c = series_match_claim("m", "", res, "net", "risk", "ref", error_model="em")
    assert c.held  # x = 10: |0.51 - 0.5| <= 3 x SEM 0.01; x = 20: exact, SE 0
    pts = {q["x"]: q for q in c.details["points"]}
    assert pts[10.0]["se"] == pytest.approx(0.01) and pts[20.0]["se"] == 0.0
    assert pts[20.0]["tolerance"] == 0.0 and c.measured == pytest.approx(0.51)
    # the floor lifts the zero SEM at x = 20; the reference SE adds in quadrature
    c = series_match_claim("m", "", res, "net", "risk", "ref", error_model="em",
                           se_floor=lambda x, n: 0.02 / math.sqrt(n),
                           ref_se=lambda x: 0.01, allowance=lambda x, ref: 0.1 * ref)
    pts = {q["x"]: q for q in c.details["points"]}
    assert c.held
    assert pts[20.0]["se"] == pytest.approx(math.hypot(0.02 / math.sqrt(2), 0.01))
    assert pts[10.0]["bias"] == pytest.approx(0.05)
    # a shifted simulation fails at the same allowance
    shifted = Results(_table({10: [0.62, 0.60], 20: [0.30, 0.30]}, metric="risk") + theory)
    assert series_match_claim("m", "", shifted, "net", "risk", "ref", error_model="em",
                              allowance=lambda x, ref: 0.1 * ref).failed
    # a simulated reference: its mean and SEM over seeds
    sref = _table({10: [0.50, 0.50], 20: [0.29, 0.31]}, metric="limit")
    c = series_match_claim("m", "", Results(sim + sref), "net", "risk", "limit",
                           ref_kind="simulation", error_model="em")
    pts = {q["x"]: q for q in c.details["points"]}
    assert pts[20.0]["expected"] == pytest.approx(0.3)
    assert pts[20.0]["se"] == pytest.approx(0.01)
    missing = series_match_claim("m", "", Results(sim + theory[:1]), "net", "risk", "ref",
                                 error_model="em", ref_label="asymptotic value")
    assert missing.failed and missing.details["reason"] == "no asymptotic value at x=20"
    empty = series_match_claim("m", "", Results(theory), "net", "risk", "ref", error_model="")
    assert empty.failed and empty.details["reason"] == "no simulation rows"
    with pytest.raises(ValueError, match="ref_kind"):
        series_match_claim("m", "", res, "net", "risk", "ref", error_model="", ref_kind="x")
