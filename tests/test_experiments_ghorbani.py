"""The four Ghorbani et al. (2019) experiments: end-to-end at reduced sizes, theory rows,
reproducibility, the NT least-squares basis, parameter validation and figures.

End-to-end runs use small d (12) so the whole file stays well under a minute on 2 cores; the
claims' tolerances are the experiments' own (Monte Carlo SE, least-squares excess, SGD
allowance), so these tests fail if a simulation stops landing on its finite-d theory.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from pydantic import ValidationError

import lazylab.experiments.ghorbani  # noqa: F401  (registers the four experiments)
from harness import run_in_memory, tilted
from lazylab.experiments import REGISTRY, style
from lazylab.experiments.base import Results
from lazylab.experiments.ghorbani import common as C
from lazylab.seeding import torch_generator
from lazylab.theory.ghorbani import (
    nn_mg,
    nn_qf,
    nt_mg,
    nt_qf,
    nt_qf_finite,
    rf_mg,
    rf_qf_quadratic,
    tau,
)
from lazylab.theory.ghorbani_population import nt_qf_population, rf_qf_population

CPU = torch.device("cpu")

SMALL = {
    "ghorbani-qf-width": {"d": 12, "rho_min": 0.25, "rho_max": 3.0, "n_widths": 4,
                          "rf_samples": 6000, "rf_reps": 2, "nt_reps": 2, "nt_samples": 4000,
                          "test_samples": 2000, "sgd_steps": 2000, "theory_draws": 10,
                          "gap_targets": 3, "gap_draws": 5},
    "ghorbani-mg-width": {"d": 12, "rho_min": 0.25, "rho_max": 3.0, "n_widths": 4,
                          "rf_samples": 6000, "rf_reps": 2, "nt_reps": 2, "nt_samples": 6000,
                          "test_samples": 2000, "sgd_steps": 2000, "theory_draws": 10,
                          "mmse_samples": 20_000, "gap_targets": 3, "gap_draws": 5},
    "ghorbani-qf-samples": {"d": 12, "sgd_steps": 3000, "eval_points": 8},
    "ghorbani-mg-samples": {"d": 12, "sgd_steps": 6000, "eval_points": 8, "theory_draws": 5},
}


def run_all(exp_id: str, overrides: dict, seeds: int = 1) -> tuple[object, object, Results]:
    """Every unit, then theory, as the runner assembles them (the shared harness)."""
    run = run_in_memory(exp_id, overrides, seeds=seeds)
    return run.exp, run.p, run.results


@pytest.fixture(scope="module")
def runs() -> dict:
    return {k: run_all(k, v, seeds=2 if "samples" in k else 1) for k, v in SMALL.items()}


@pytest.mark.parametrize("exp_id", list(SMALL))
def test_end_to_end_claims_hold(runs, exp_id):
    exp, p, res = runs[exp_id]
    claims = exp.claims(p, res)
    assert claims and {c.id for c in claims} == set(exp.statements(p))
    failed = [(c.id, c.measured, c.tolerance) for c in claims if c.failed]
    assert not failed, failed
    for c in claims:
        assert c.to_dict()["held"] is (c.status == "held")
    assert not [c.id for c in claims if c.status == "not_applicable"]
    fig = exp.plot(p, res)
    assert isinstance(fig, Figure) and fig.axes


@pytest.mark.parametrize("offset_scale", ["2N", "1"])
def test_nt_offset_step_keeps_sgd_learning(offset_scale):
    """||x||^2 ~ d makes NT's trace direction (curvature ~ 8N) nearly collinear with its offset
    (curvature 2): stepped at U's step size the offset lags, and the risk climbs above R0
    before it falls (the paper-scale mixture run: 1.17 R0, still 1.05 after 1.1e5 steps). At
    2N times U's step it does not. d = 100, N = 40, 3000 steps at the default step and 4x it:
    with the offset step every logged risk stays at or below R0 (+0.01) and the default member
    covers at least half of the drop to its exact limit (the learns-before-cut criterion);
    with the offset at U's step (the tilt) the 4x member rises above 1.05 R0 and the default
    one covers less than half."""
    from lazylab.train.packed import train_packed_nt

    d = 100
    N = round(0.4 * d)
    prob, exp = C.mg_problem(d, 100), REGISTRY["ghorbani-mg-samples"]
    base = C.nt_lr_learning(d, N, 100, None)
    gen = torch_generator(3)
    W = C.nt_init(d, N, gen, torch.device("cpu")).W.detach()
    scale = C.nt_offset_lr_scale(N) if offset_scale == "2N" else 1.0
    res = train_packed_nt([W] * 2, [base, 4 * base], sampler=prob.sampler(), steps=3000,
                          batch_size=100, generator=gen, log_steps=range(0, 3001, 250),
                          eval_fn=lambda _j, prm: prob.risk(C.nt_quad_form(*prm)),
                          offset_lr_scale=scale)
    assert res.log_eval is not None
    limit = exp.nt_limit(W, prob)
    covered = (1.0 - float(res.log_eval[0, -1])) / (1.0 - limit)
    if offset_scale == "2N":
        assert float(res.log_eval.max()) <= 1.01
        assert covered >= 0.5, (covered, limit)
    else:
        assert float(res.log_eval[1].max()) > 1.05
        assert covered < 0.5, (covered, limit)


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-width", "ghorbani-mg-width"])
def test_width_figure_has_log_axis_and_N_equals_d_line(runs, exp_id):
    exp, p, res = runs[exp_id]
    ax = exp.plot(p, res).axes[0]
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "N = d" in labels
    if exp_id == "ghorbani-mg-width":
        assert "MMSE" in labels


def test_claims_can_fail(runs):
    """A shifted simulation breaks the matching claim (the verdicts are not vacuous)."""
    exp, p, res = runs["ghorbani-qf-width"]
    rows = [dict(r) for r in res.rows]
    for r in rows:
        if r["method"] == "NN" and r["kind"] == "simulation" and r["metric"] == "risk":
            r["value"] += 0.1
    verdicts = {c.id: c.held for c in exp.claims(p, Results(rows))}
    assert verdicts["NN-matches-finite-d"] is False
    assert verdicts["zero-for-N>=d"] is False


@pytest.mark.parametrize("method", ["RF(I)", "RF(Gamma*)", "NT(I)"])
def test_asymptotic_claims_fail_when_tilted(runs, method):
    """Raising one method's simulated risks by 30% of R0 breaks its asymptotic claim (the
    O(rho/d) allowance at d = 12 is below that everywhere on the grid)."""
    exp, p, res = runs["ghorbani-qf-width"]
    assert {c.id: c for c in exp.claims(p, res)}[f"{method}-matches-asymptotic"].held
    bad = tilted(res, lambda r: None if r["method"] != method or r["metric"] != "risk"
                 else 1.0 + 0.3 / max(float(r["value"]), 1e-3))
    verdicts = {c.id: c for c in exp.claims(p, bad)}
    assert verdicts[f"{method}-matches-asymptotic"].status == "failed"
    assert verdicts[f"{method}-matches-finite-d"].status == "failed"


def test_large_d_with_least_squares_is_refused_before_computing():
    from lazylab.errors import InputError

    for exp_id, d in (("ghorbani-qf-width", 110), ("ghorbani-mg-width", 90)):
        exp = REGISTRY[exp_id]
        p = exp.resolve("quick", {"d": d, "nt_protocol": "lstsq"})
        with pytest.raises(InputError, match="--set d"):
            exp.validate(p)
        exp.validate(exp.resolve("quick", {"d": d}))  # the default protocol (cg) is accepted
        exp.validate(exp.resolve("quick", {"d": d, "nt_protocol": "sgd"}))


def test_quick_d_range_is_refused_by_validate():
    """Above its quick range (qf: d <= 60, mg: d <= 90) ``validate`` refuses at --scale quick
    (InputError, exit 2) and names the range; the paper scale accepts the same d, and the
    cost model prices any d (it refuses nothing)."""
    from lazylab.errors import InputError

    for exp_id, ok, bad in (("ghorbani-qf-width", 60, 61), ("ghorbani-mg-width", 90, 91)):
        exp = REGISTRY[exp_id]
        exp.validate(exp.resolve("quick", {"d": ok}), scale="quick")
        secs, _ = exp.cost(exp.resolve("quick", {"d": ok}), "quick")
        assert math.isfinite(secs) and secs > exp.est_seconds["quick"]  # grows with d
        with pytest.raises(InputError, match=f"d <= {ok}"):
            exp.validate(exp.resolve("quick", {"d": bad}), scale="quick")
        assert exp.cost(exp.resolve("quick", {"d": bad}), "quick")[0] > secs
        exp.validate(exp.resolve("paper", {"d": bad}), scale="paper")
        exp.cost(exp.resolve("paper", {"d": bad}), "paper")
        default = exp.cost(exp.resolve("quick"), "quick")[0]
        assert default == pytest.approx(exp.est_seconds["quick"] / exp.default_seeds["quick"])


def test_samples_quick_d_range():
    """The samples figures (fixed SGD steps) accept 12 <= d <= 40 at quick scale and
    ``validate`` refuses d outside it with exit 2 (InputError naming --set d); the paper scale
    accepts d = 41, and the cost estimate refuses nothing."""
    from lazylab.errors import InputError

    for exp_id in ("ghorbani-qf-samples", "ghorbani-mg-samples"):
        exp = REGISTRY[exp_id]
        for d in (12, 40):
            exp.validate(exp.resolve("quick", {"d": d}), scale="quick")
            assert math.isfinite(exp.cost(exp.resolve("quick", {"d": d}), "quick")[0])
        for d in (11, 41):
            with pytest.raises(InputError, match="12 <= d <= 40"):
                exp.validate(exp.resolve("quick", {"d": d}), scale="quick")
            assert math.isfinite(exp.cost(exp.resolve("quick", {"d": d}), "quick")[0])
        exp.validate(exp.resolve("paper", {"d": 41}), scale="paper")


def test_samples_quick_d_range_refused_by_the_cli_before_compute(tmp_path):
    from toy_experiment import cli

    res = cli("reproduce", "ghorbani-qf-samples", "--set", "d=41", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "12 <= d <= 40" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "o" / "ghorbani-qf-samples" / "results.csv").exists()


def test_quick_d_range_refused_by_the_cli_with_exit_2(tmp_path):
    from toy_experiment import cli

    res = cli("reproduce", "ghorbani-qf-width", "--set", "d=110", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "d <= 60" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o" / "ghorbani-qf-width" / "results.csv").exists()


def test_asymptotic_gap_claim_counts_each_target_once(runs):
    """A second seed redraws W but not the targets: its gap rows are averaged with the first
    seed's per (d, target), so copies of the same rows leave the fit (and tolerance) as is."""
    exp, p, res = runs["ghorbani-qf-width"]
    one = {c.id: c for c in exp.claims(p, res)}["asymptotic-gap-shrinks"]
    extra = [{**r, "seed": 1} for r in res.rows if r["metric"] == "asymptotic_gap"]
    two = {c.id: c for c in exp.claims(p, Results(res.rows + extra))}["asymptotic-gap-shrinks"]
    assert two.measured == pytest.approx(one.measured, abs=1e-12)
    assert two.tolerance == pytest.approx(one.tolerance, abs=1e-12)


def test_protocol_sizes_scale_with_d():
    exp = REGISTRY["ghorbani-qf-width"]
    for d in (40, 60):
        p = exp.resolve("quick", {"d": d})
        n_max = max(exp.widths(p))
        assert p.rf_samples >= 50 * n_max
        assert p.nt_samples >= 20 * (d * (d + 1) // 2 + 1)
        assert p.sgd_steps == round(54 * d * (1 + d / p.batch_size))
        assert p.nt_protocol == "cg"


def test_asymptotic_gap_claim_fails_when_the_gap_stops_shrinking(runs):
    """The asymptotic-gap claim holds at the test sizes and fails when the simulated gaps are
    tilted by (d/20)^0.8 (slope -0.2 instead of -1) or made d-independent; its units hold one
    asymptotic_gap row per (method, d, target)."""
    for exp_id in ("ghorbani-qf-width", "ghorbani-mg-width"):
        exp, p, res = runs[exp_id]
        c = {c.id: c for c in exp.claims(p, res)}["asymptotic-gap-shrinks"]
        assert c.held, (c.measured, c.tolerance)
        for m in exp.asymptotic_methods:
            rows = res.select(method=m, metric="asymptotic_gap")
            assert sorted({float(r["x"]) for r in rows}) == [20.0, 40.0, 80.0]
            assert len(rows) == 3 * p.gap_targets
        for fn in (lambda r: (float(r["x"]) / 20) ** 0.8, lambda r: float(r["x"]) / 20):
            bad = tilted(res, lambda r, fn=fn: fn(r) if r["metric"] == "asymptotic_gap"
                         else None)
            c = {c.id: c for c in exp.claims(p, bad)}["asymptotic-gap-shrinks"]
            assert c.status == "failed", (exp_id, c.measured, c.tolerance)
        none = Results([r for r in res.rows if r["metric"] != "asymptotic_gap"])
        assert {c.id: c for c in exp.claims(p, none)}[
            "asymptotic-gap-shrinks"].status == "not_applicable"


def test_qf_width_theory_rows_match_theory_module(runs):
    exp, p, res = runs["ghorbani-qf-width"]
    B = C.qf_problem(p.d, p.target_seed).model.B
    tB = tau(B)
    for N in exp.widths(p):
        rho = N / p.d
        assert res.value("RF(I)", "risk", N, kind="theory") == pytest.approx(
            rf_qf_quadratic(rho, B), abs=1e-12)
        assert res.value("RF(Gamma*)", "risk", N, kind="theory") == pytest.approx(
            tB / (rho + tB), abs=1e-12)  # Eq. (12) with Gamma* = B/Tr B
        assert res.value("NT(I)", "risk", N, kind="theory") == pytest.approx(
            nt_qf(rho, tB), abs=1e-12)
        assert res.value("NT(I)", "risk_finite_d", N, kind="theory") == pytest.approx(
            nt_qf_finite(p.d, N, B), abs=1e-12)
        assert res.value("NN", "risk", N, kind="theory") == pytest.approx(nn_qf(N, B), abs=1e-12)


def test_mg_theory_rows_match_theory_module(runs):
    exp, p, res = runs["ghorbani-mg-width"]
    D = C.mg_problem(p.d, p.target_seed).model.Delta
    for N in exp.widths(p):
        assert res.value("RF(I)", "risk", N, kind="theory") == pytest.approx(
            rf_mg(N / p.d, D), abs=1e-12)
        assert res.value("NT(I)", "risk", N, kind="theory") == pytest.approx(
            nt_mg(N / p.d, D), abs=1e-12)
        assert res.value("NN", "risk", N, kind="theory") == pytest.approx(nn_mg(N, D), abs=1e-12)
    exp_s, p_s, res_s = runs["ghorbani-mg-samples"]
    N = exp_s.width(p_s)
    D = C.mg_problem(p_s.d, p_s.target_seed).model.Delta
    x_end = p_s.sgd_steps * p_s.batch_size / p_s.d
    assert res_s.value("lim NN", "risk", x_end, kind="theory") == pytest.approx(
        nn_mg(N, D), abs=1e-12)
    assert res_s.value("lim NT(I)", "risk", x_end, kind="theory") == pytest.approx(
        nt_mg(N / p_s.d, D), abs=1e-12)


def test_rf_monte_carlo_reference_is_within_its_standard_error_of_the_exact_mean(runs):
    """The finite-d RF reference (MC over theory_draws W) agrees with an independent MC."""
    exp, p, res = runs["ghorbani-qf-width"]
    B = C.qf_problem(p.d, p.target_seed).model.B
    N = exp.widths(p)[1]
    ref = res.value("RF(I)", "risk_finite_d", N, kind="theory")
    sd = res.value("RF(I)", "risk_finite_d_sd", N, kind="theory")
    vals = [rf_qf_population(C.draw_weights(p.d, N, torch_generator(10_000 + k)).T, B)
            for k in range(200)]
    se = math.hypot(sd / math.sqrt(p.theory_draws), np.std(vals) / math.sqrt(len(vals)))
    assert abs(ref - np.mean(vals)) <= 4 * se


def test_width_ordering_on_theory_lines(runs):
    """NN <= NT(I) < RF(I) for rho < 1 on the paper's formulas (Eq. (13))."""
    exp, p, res = runs["ghorbani-qf-width"]
    for N in exp.widths(p):
        if N < p.d:
            nn, nt, rf = (res.value(m, "risk", N, kind="theory") for m in ("NN", "NT(I)", "RF(I)"))
            assert nn <= nt < rf


@pytest.mark.parametrize("exp_id,key", [
    ("ghorbani-qf-width", {"method": "RF(Gamma*)", "N": 6, "rep": 0}),
    ("ghorbani-qf-width", {"method": "NT(I)", "N": 6, "rep": 1}),
    ("ghorbani-mg-width", {"method": "NN", "N": 12}),
    ("ghorbani-mg-samples", {"method": "NT(I)"}),
])
def test_same_seed_same_rows(exp_id, key):
    exp = REGISTRY[exp_id]
    over = dict(SMALL[exp_id], sgd_steps=300)
    p = exp.resolve("quick", over)
    a = exp.run_unit(p, key, 1234, CPU)
    b = exp.run_unit(p, key, 1234, CPU)
    c = exp.run_unit(p, key, 1235, CPU)
    assert a == b
    assert [r["value"] for r in a] != [r["value"] for r in c]


@pytest.mark.parametrize("exp_id,key", [
    ("ghorbani-qf-width", {"method": "NN", "N": 6}),
    ("ghorbani-qf-samples", {"method": "NT(I)"}),
])
def test_units_and_theory_leave_threads_to_the_runner(exp_id, key, monkeypatch):
    """The runner's execution policy owns the thread count (issue 7): no Ghorbani unit or
    theory sets torch threads itself."""
    exp = REGISTRY[exp_id]
    p = exp.resolve("quick", dict(SMALL[exp_id], sgd_steps=50, theory_draws=0))

    def refuse(n):
        raise AssertionError(f"torch.set_num_threads({n}) inside a Ghorbani unit")

    monkeypatch.setattr(torch, "set_num_threads", refuse)
    assert exp.run_unit(p, key, 1, CPU)
    exp.theory(p)


def test_nt_lstsq_basis_gives_the_raw_nt_feature_fit():
    """Least squares on a basis of S_W = the fit on the N d NT features (w_i.x) x_j plus 1."""
    d, N, n = 7, 3, 600
    prob = C.qf_problem(d, 5)
    gen = torch_generator(3)
    W = C.draw_weights(d, N, gen)
    X, y = prob.sampler(torch.float64)(n, gen)
    raw = torch.cat([(2 * (X @ W.T).unsqueeze(2) * X.unsqueeze(1)).reshape(n, -1),
                     torch.ones(n, 1, dtype=torch.float64)], 1)
    coef = torch.linalg.lstsq(raw, y.unsqueeze(1), driver="gelsd").solution.squeeze(1)
    q, _ = C.fit_nt_lstsq(W, lambda k, g: (X, y), n, n, gen)
    Xt, _ = prob.sampler(torch.float64)(200, torch_generator(9))
    raw_t = torch.cat([(2 * (Xt @ W.T).unsqueeze(2) * Xt.unsqueeze(1)).reshape(200, -1),
                       torch.ones(200, 1, dtype=torch.float64)], 1)
    M = torch.as_tensor(q.M)
    assert torch.allclose(raw_t @ coef, q.c + ((Xt @ M) * Xt).sum(1), atol=1e-9, rtol=0)
    # and the fitted form lies in S_W: P_perp M P_perp = 0
    U = torch.linalg.svd(W.T, full_matrices=True)[0][:, N:]
    assert float((U.T @ M @ U).abs().max()) < 1e-10
    assert C.nt_basis_size(d, N) == N * (N + 1) // 2 + N * (d - N) + 1


def test_rf_lstsq_lands_on_the_population_optimum():
    """n >> N: the least-squares RF risk is never below the exact optimum for the same W and
    exceeds it by kappa R N/(n - N - 1) on average, kappa ~ 1-2 for these heavy-tailed
    features (measured), with relative fluctuation ~ sqrt(2/N); 8x covers kappa = 2 plus 3 of
    those fluctuations at N = 6 (the bound is 1.4e-3 here)."""
    d, N, n = 10, 6, 30_000
    prob = C.qf_problem(d, 1)
    gen = torch_generator(4)
    W = C.draw_weights(d, N, gen)
    q, train = C.fit_rf(W, prob.sampler(torch.float64), n, 8192, gen)
    opt = rf_qf_population(W.T, prob.model.B)
    assert opt - 1e-12 <= prob.risk(q) <= opt + 8 * opt * N / (n - N - 1)
    assert nt_qf_population(W.T, prob.model.B) < opt  # the NT class contains the RF class


def test_bad_parameters_are_rejected_with_the_name():
    exp = REGISTRY["ghorbani-qf-width"]
    with pytest.raises(ValidationError, match="d"):
        exp.resolve("quick", {"d": 2})
    with pytest.raises(ValidationError, match="nt_protocol"):
        exp.resolve("quick", {"nt_protocol": "exact"})
    with pytest.raises(ValidationError, match="rf_samples"):
        exp.resolve("quick", {"rf_samples": 500})
    with pytest.raises(ValidationError, match="rho"):
        REGISTRY["ghorbani-mg-samples"].resolve("quick", {"rho": -1})


def test_paper_scale_is_the_papers_configuration():
    qf = REGISTRY["ghorbani-qf-width"].resolve("paper")
    assert (qf.d, qf.rf_samples, qf.rf_reps, qf.test_samples, qf.sgd_steps, qf.batch_size) == (
        450, 500_000, 10, 10_000, 200_000, 100)
    widths = REGISTRY["ghorbani-qf-width"].widths(qf)
    assert min(widths) == 45 and max(widths) == 4500 and 450 in widths
    mg = REGISTRY["ghorbani-mg-samples"].resolve("paper")
    assert (mg.d, mg.sgd_steps, mg.batch_size) == (450, 140_000, 100)


def test_style_labels_and_colours():
    assert style.display_label("RF(Gamma*)") == r"RF($\Gamma^*$)"
    assert style.method_color("lim NN") == style.method_color("NN")
    assert style.method_color("NN") != style.method_color("NT(I)")


def test_lr_grid_is_the_toolkit_grid_search():
    """The best-of-grid step size (lr_factors) is toolkit.grid_search: every run replays the
    same draws, diverged runs are skipped, ties keep the first factor (issue 7, item 1)."""
    from lazylab.experiments.ghorbani import widths
    from lazylab.experiments.toolkit import grid_search
    from lazylab.train import History, TrainingDiverged

    assert not hasattr(C, "best_lr_run")
    assert widths.grid_search is grid_search
    gen = torch_generator(7)
    seen = []

    def train(lr: float):
        draw = float(torch.randn(1, generator=gen))
        seen.append(draw)
        if lr > 3:
            raise TrainingDiverged("diverged", step=1, lr=lr, loss=math.inf,
                                   history=History([], [], [], lr))
        return ((lr - 1.5) ** 2, draw)

    r = grid_search(train, 1.0, [0.5, 1.0, 2.0, 4.0], score=lambda o: o[0], generator=gen)
    assert r.value == 1.0 and r.factor == 1.0  # 1.0 and 2.0 tie at 0.25: the first is kept
    assert r.best[0] == min((f - 1.5) ** 2 for f in (0.5, 1.0, 2.0))
    assert r.diverged == [4.0]
    assert len(set(seen)) == 1 and len(seen) == 4
    with pytest.raises(TrainingDiverged):
        grid_search(train, 10.0, [1.0], score=lambda o: o[0], generator=gen)


def test_paper_scale_units_start():
    """The paper-scale configuration (d = 450) runs; SGD steps cut to 20 and the NT (streamed
    CG least squares, nt_protocol=cg) samples to 250 000 to keep this fast."""
    exp = REGISTRY["ghorbani-qf-width"]
    p = exp.resolve("paper", {"sgd_steps": 20, "nt_samples": 250_000})
    assert p.nt_protocol == "cg"
    for key, extra in (({"method": "NN", "N": 45}, {"lr"}),
                       ({"method": "NT(I)", "N": 45, "rep": 0}, set())):
        rows = exp.run_unit(p, key, 1, CPU)
        metrics = {r["metric"]: r["value"] for r in rows}
        assert {"risk", "test_risk", "train_loss"} | extra <= set(metrics)
        assert all(math.isfinite(v) for v in metrics.values())
    exp = REGISTRY["ghorbani-mg-samples"]
    p = exp.resolve("paper", {"sgd_steps": 20, "eval_points": 2})
    rows = exp.run_unit(p, {"method": "NN"}, 1, CPU)
    assert rows[0]["x"] == 0.0 and rows[-1]["metric"] == "lr"


def test_sgd_steps_default_scales_with_d():
    exp = REGISTRY["ghorbani-qf-width"]
    assert exp.resolve("quick", {"d": 60}).sgd_steps == round(54 * 60 * 1.6)
    assert exp.resolve("quick", {"d": 60, "batch_size": 200}).sgd_steps == round(54 * 60 * 1.3)
    assert exp.resolve("quick", {"d": 60, "sgd_steps": 123}).sgd_steps == 123
    assert REGISTRY["ghorbani-mg-width"].resolve("quick", {"d": 20}).sgd_steps == 2000


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-samples", "ghorbani-mg-samples"])
@pytest.mark.parametrize("method", ["NN", "NT(I)"])
def test_samples_packed_lr_search_equals_separate_runs(exp_id, method):
    """A samples unit trains its step sizes as one packed network; the same search run
    factor by factor with fit (toolkit.grid_search restarting the generator, train_nn /
    train_nt_sgd) keeps the same step size and logs the same risks, to float32 rounding
    amplified by 600 SGD steps (rel 1e-4 against risks of order 0.1-1)."""
    from lazylab.experiments.ghorbani.samples import eval_steps
    from lazylab.experiments.toolkit import grid_search

    exp = REGISTRY[exp_id]
    p = exp.resolve("quick", {"d": 12, "sgd_steps": 600, "eval_points": 6,
                              "lr_factors": [0.5, 1.0, 2.0, 60.0]})  # 60x diverges
    rows = exp.run_unit(p, {"method": method}, 31, torch.device("cpu"))
    got = {(r["metric"], r["x"]): r["value"] for r in rows}
    prob, N = exp.problem(p), exp.width(p)
    gen = torch_generator(31)
    steps = eval_steps(p.sgd_steps, p.eval_points)

    def run(lr: float):
        risks: list[float] = []
        cfg = C.SGDConfig(p.sgd_steps, p.batch_size, lr, p.tail_fraction)
        def on_eval(q: C.QuadForm) -> dict[str, float]:
            # a run overflowing between fit's checks: fit then stops at this logged loss
            risks.append(prob.risk(q) if np.isfinite(q.M).all() else math.nan)
            return {"risk": risks[-1]}

        if method == "NN":
            _, hist = C.train_nn(prob, N, cfg, p.init_scale, gen, torch.device("cpu"),
                                 log_steps=steps, on_eval=on_eval)
        else:
            _, hist, _ = C.train_nt_sgd(prob, N, cfg, gen, torch.device("cpu"),
                                        log_steps=steps, on_eval=on_eval)
        return hist, risks

    base = (C.nn_lr(p.d, p.batch_size, p.nn_lr, exp.nn_lr_coef) if method == "NN"
            else C.nt_lr_learning(p.d, N, p.batch_size, p.nt_lr))
    best = grid_search(run, base, p.lr_factors, score=lambda o: o[1][-1], generator=gen)
    assert 60.0 in best.diverged  # else the divergence path is not exercised
    hist, risks = best.best
    x_end = steps[-1] * p.batch_size / p.d
    assert got[("lr", x_end)] == best.value
    for s, r, tl in zip(hist.steps, risks, hist.train_loss, strict=True):
        x = s * p.batch_size / p.d
        assert got[("risk", x)] == pytest.approx(r, rel=1e-4), (method, s)
        assert got[("train_loss", x)] == pytest.approx(tl / prob.r0, rel=1e-4), (method, s)


@pytest.mark.parametrize("exp_id", ["ghorbani-qf-width", "ghorbani-mg-width"])
def test_a_huge_grid_size_is_refused_before_anything_is_allocated(exp_id):
    """n_widths = 6.6e9 (found by the manifest property test) is refused by validation; the
    size defaults computed before validation used to build that grid (49 GiB)."""
    from lazylab.errors import InputError
    from lazylab.runner.params import resolve_spec

    with pytest.raises(InputError, match="n_widths"):
        resolve_spec(REGISTRY[exp_id], "quick", {"n_widths": "6589876355"}, 1,
                     torch.device("cpu"))


def test_gap_allowance_scales_with_the_weights_effective_dimension():
    """RF(Gamma*)'s weights (Gamma* = B / tr B) span about d/2 effective dimensions on the
    quadratic target: its gap's slope allowance is GAP_SLOPE_BIAS x max d/d_eff (1.9-2.2 over
    the gap's dimensions and targets); the isotropic methods keep GAP_SLOPE_BIAS."""
    from lazylab.experiments.ghorbani.widths import GAP_SLOPE_BIAS

    exp = REGISTRY["ghorbani-qf-width"]
    p = exp.resolve("quick")
    assert exp.gap_bias(p, "RF(I)") == exp.gap_bias(p, "NT(I)") == GAP_SLOPE_BIAS
    assert 1.8 * GAP_SLOPE_BIAS < exp.gap_bias(p, "RF(Gamma*)") < 2.5 * GAP_SLOPE_BIAS
    mg = REGISTRY["ghorbani-mg-width"]
    assert all(mg.gap_bias(mg.resolve("quick"), m) == GAP_SLOPE_BIAS
               for m in mg.asymptotic_methods)
