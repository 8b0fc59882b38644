"""scikit-learn's own estimator checks on every lazylab estimator, and the uses a researcher
expects: pipelines, grid searches, cross-validation, several targets, and the solver choice."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from lazylab.estimators import KernelRegressor, RandomFeaturesRegressor

# Every estimator at its defaults (the Gaussian kernel's default bandwidth included), and
# with explicit settings.
ESTIMATORS = [KernelRegressor(), KernelRegressor(kernel="gaussian", bandwidth=2.0, ridge=1e-3),
              KernelRegressor(kernel="gaussian"), KernelRegressor(bias=1.0, trained="both"),
              RandomFeaturesRegressor(),
              RandomFeaturesRegressor(width=50, ridge=1e-6, fit_intercept=True)]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _data(n=90, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.tanh(X[:, 0] * X[:, 1]) + 0.5 * X[:, 2]


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_pipeline_grid_search_and_cross_validation(est):
    X, y = _data()
    pipe = make_pipeline(StandardScaler(), est)
    name = type(est).__name__.lower()
    search = GridSearchCV(pipe, {f"{name}__ridge": [1e-4, 1e-1]}, cv=3).fit(X, y)
    assert search.best_score_ > 0.3  # R^2 well above the mean's 0
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores))


@pytest.mark.parametrize("est", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_two_targets_equal_two_fits(est):
    X, y = _data()
    Y = np.stack([y, np.sin(X[:, 3])], axis=1)
    both = est.fit(X, Y).predict(X[:7])
    assert both.shape == (7, 2)
    for j in range(2):
        one = est.fit(X, Y[:, j]).predict(X[:7])
        assert one.shape == (7,)
        np.testing.assert_allclose(both[:, j], one, rtol=1e-8, atol=1e-10)


def test_kernel_regressor_solvers_agree_and_auto_is_direct_on_digits():
    """On digits (n = 1257, the CG fit took 26.6 s there) the automatic choice is the direct
    solve; CG with the Nystrom preconditioner reaches the same predictions to its tolerance."""
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    Xtr, ytr, Xte = X[:1257], (y[:1257] == 3).astype(float), X[1257:1300]
    direct = KernelRegressor(ridge=1e-3).fit(Xtr, ytr)
    assert direct.solver_ == "direct"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a CG fit that reaches its tolerance does not warn
        # ... except for the up-front estimate: max_iter = 2000 products could take minutes
        warnings.filterwarnings("ignore", message="kernel_regression: this solve is estimated")
        cg = KernelRegressor(ridge=1e-3, solver="cg", rank=400, max_iter=2000).fit(Xtr, ytr)
    assert cg.fit_.info.converged
    a, b = direct.predict(Xte), cg.predict(Xte)
    assert float(np.abs(a - b).max()) <= 1e-3 * float(np.abs(a).max())


def test_kernel_regressor_cg_that_stops_early_says_why_without_bad_advice():
    X, y = _data(300)
    with pytest.warns(RuntimeWarning) as rec:
        KernelRegressor(solver="cg", tol=1e-14, max_iter=3, rank=10).fit(X, y)
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 1 and "residual" in msgs[0] and "max_iter" in msgs[0]
    assert "use a preconditioner" not in msgs[0]


def test_budget_decides_the_solver():
    X, y = _data(60)
    assert KernelRegressor(memory_budget=8 * 60 * 60).fit(X, y).solver_ == "direct"
    assert KernelRegressor(memory_budget=8 * 60 * 60 - 1).fit(X, y).solver_ == "cg"
    with pytest.raises(ValueError, match=r"^The 'solver' parameter of KernelRegressor must be "
                                         r"a str among \{'auto', 'direct', 'cg'\}\. Got 'lu'"):
        KernelRegressor(solver="lu").fit(X, y)


@pytest.mark.parametrize(("est", "name", "says"), [
    (KernelRegressor(ridge=-1.0), "ridge", "a float in the range [0.0, inf)"),
    (KernelRegressor(bias=float("inf")), "bias", "a float in the range [0.0, inf)"),
    (KernelRegressor(ridge=float("nan")), "ridge", "a float in the range [0.0, inf)"),
    (KernelRegressor(rank=0), "rank", "an int in the range [1, inf)"),
    (KernelRegressor(tol=0.0), "tol", "a float in the range (0.0, inf)"),
    (KernelRegressor(trained="last"), "trained", "a str among {'first', 'both'}"),
    (KernelRegressor(kernel="rbf"), "kernel", "a str among {'ntk', 'nngp', 'gaussian'} or an "
                                              "object implementing '__call__' and 'diag'"),
    (RandomFeaturesRegressor(width=0), "width", "an int in the range [1, inf)"),
    (RandomFeaturesRegressor(scaling="sqrt"), "scaling", "a str among {'none', 'ntk', 'mf'}"),
    (RandomFeaturesRegressor(dtype="float16"), "dtype",
     "a str among {'float64', 'float32'} or an instance of 'torch.dtype'"),
    (RandomFeaturesRegressor(fit_intercept="yes"), "fit_intercept", "an instance of 'bool'"),
], ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_parameters_are_refused_by_their_declared_constraints(est, name, says):
    """sklearn's parameter validation (``_parameter_constraints``) refuses a bad value at fit
    in one line naming the parameter, the estimator and what it must be, before any data is
    read (X here is not even an array)."""
    with pytest.raises(InvalidParameterError) as info:
        est.fit("not read", None)
    msg = str(info.value)
    assert msg.startswith(f"The {name!r} parameter of {type(est).__name__} must be {says}")
    assert "\n" not in msg and isinstance(info.value, ValueError)


@pytest.mark.parametrize("est", [KernelRegressor(), RandomFeaturesRegressor()],
                         ids=lambda e: type(e).__name__)
def test_sklearns_parameter_validation_check(est):
    """The check scikit-learn runs on its own estimators (not part of
    ``parametrize_with_checks``): every parameter set to a value of no declared type is refused
    by fit, and every declared constraint is one sklearn knows."""
    check_param_validation(type(est).__name__, est)


def test_every_parameter_has_a_constraint():
    for est in (KernelRegressor(), RandomFeaturesRegressor()):
        assert set(type(est)._parameter_constraints) == set(est.get_params())
