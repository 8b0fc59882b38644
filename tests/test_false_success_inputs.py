"""Library inputs that used to give NaN, a raw exception or a silent wrong answer (issue 46,
section 5): each is now refused with one ValueError naming the parameter, or handled."""

from __future__ import annotations

import math
import warnings
from typing import Any, cast

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.device import available_devices, check_device
from lazylab.estimators import KernelRegressor, RandomFeaturesRegressor
from lazylab.kernels import NTKOperator
from lazylab.kernels._module_checks import (
    check_chunk,
    check_deterministic,
    check_tensor_output,
    train_mode_randomness,
)
from lazylab.models import LinearizedModel, TwoLayerNet
from lazylab.solve import kernel_regression
from lazylab.solve import kernel_solver as ks
from lazylab.solve.kernel_solver import BlockedKernel, check_kernel_finite, make_kernel
from lazylab.solve.progress import CGCostEstimate, ProgressLog, estimate_cg_cost


def _data(n: int = 40, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.tanh(X[:, 0]) + X[:, 1]


# --- KernelRegressor: overflowing X ----------------------------------------------------------

@pytest.mark.parametrize("est", [KernelRegressor(), KernelRegressor(kernel="nngp"),
                                 KernelRegressor(kernel="gaussian", bandwidth=1.0)],
                         ids=["ntk", "nngp", "gaussian"])
def test_kernel_regressor_refuses_x_whose_kernel_overflows_float64(est):
    X, y = _data()
    with pytest.raises(ValueError, match=r"^X is too large for this kernel: k\(x, x\) overflows "
                                         r"torch\.float64 .*StandardScaler"):
        est.fit(X * 1e300, y)


def test_kernel_regressor_cg_refuses_x_that_overflows_its_float32_tiles():
    X, y = _data()
    with pytest.raises(ValueError, match=r"^X must be finite in torch\.float32"):
        KernelRegressor(solver="cg").fit(X * 1e39, y)
    with pytest.raises(ValueError, match=r"^X is too large .* overflows torch\.float32"):
        KernelRegressor(solver="cg").fit(X * 1e30, y)


def test_a_prediction_that_overflows_is_refused_not_nan():
    X, y = _data()
    fit = KernelRegressor(solver="cg", ridge=1e-2, rank=10).fit(X, y)
    with pytest.raises(ValueError, match=r"^X is too large for this model: the kernel between X "
                                         r"and the training inputs is not finite"):
        fit.predict(X[:3] * 1e39)  # finite in float64, inf in the float32 tiles
    assert np.all(np.isfinite(fit.predict(X[:3] * 1e10)))


def test_large_but_representable_x_fits_with_finite_predictions():
    X, y = _data()
    c = 2.0 ** 300  # a power of two: scaling by it is exact in floating point
    pred = KernelRegressor(ridge=1e-3 * c ** 2).fit(X * c, y).predict(X * c)
    assert np.all(np.isfinite(pred))
    # the relu NTK is 1-homogeneous in each argument, K(cX, cX) = c^2 K(X, X), so the fit at
    # scale c with ridge c^2 lambda is the fit at scale 1 with ridge lambda
    np.testing.assert_allclose(pred, KernelRegressor(ridge=1e-3).fit(X, y).predict(X),
                               rtol=1e-10, atol=1e-12)


def test_check_kernel_finite_probes_the_extreme_rows():
    X = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]], dtype=torch.float64)
    seen: list[int] = []

    def kernel(A, B):
        seen.append(len(A))
        return A @ A.T * torch.where(A.abs().amax(1, keepdim=True) > 2.5, math.nan, 1.0)

    with pytest.raises(ValueError, match=r"^X is too large .* largest norm \(3\.16\)"):
        check_kernel_finite(kernel, X, dtype=torch.float64, probe=1)
    assert seen == [2]  # the rows of largest (3) and smallest (0) norm, once each
    check_kernel_finite(make_kernel("ntk"), X, dtype=torch.float32)


def test_random_features_regressor_refuses_a_non_finite_solution(monkeypatch):
    X, y = _data()
    monkeypatch.setattr("lazylab.estimators.lstsq",
                        lambda F, Y, ridge: torch.full(F.shape[1:] + Y.shape[1:], math.inf,
                                                       dtype=F.dtype))
    with pytest.raises(ValueError, match=r"^X is too large for this model: the least-squares "):
        RandomFeaturesRegressor(width=8).fit(X, y)


# --- string y --------------------------------------------------------------------------------

@pytest.mark.parametrize("est", [KernelRegressor(), RandomFeaturesRegressor(width=8)],
                         ids=["kernel", "random-features"])
def test_string_y_is_refused_naming_y(est):
    X, _ = _data()
    for bad in (["a"] * 40, np.array(["1.0"] * 39 + ["x"], dtype=object)):
        with pytest.raises(ValueError, match=r"^y must hold numbers \(these are regression "
                                             r"targets\); got dtype .* with the entry '(a|x)'$"):
            est.fit(X, bad)


def test_numeric_strings_fit_as_their_numbers():
    X, y = _data()
    as_text = [repr(float(v)) for v in y]
    a = KernelRegressor().fit(X, as_text).predict(X[:5])
    b = KernelRegressor().fit(X, y).predict(X[:5])
    np.testing.assert_array_equal(a, b)


# --- device ----------------------------------------------------------------------------------

def test_device_without_cuda_is_a_value_error_naming_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert available_devices()[0] == "cpu" and not any("cuda" in d for d in available_devices())
    X, y = _data()
    for est in (KernelRegressor(device="cuda"), RandomFeaturesRegressor(device="cuda")):
        with pytest.raises(ValueError, match=r"^device must be 'auto' or an available device "
                                             r"\(cpu[^)]*\); got 'cuda'; torch sees no CUDA GPU "
                                             r"here$"):
            est.fit(X, y)


def test_check_device_accepts_what_exists_and_names_the_parameter():
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")) == torch.device("cpu")
    assert check_device("auto").type in ("cpu", "cuda")
    for bad in ("bogus", "cuda:99", "gpu"):
        with pytest.raises(ValueError, match=rf"^out_device must be 'auto' or an available "
                                             rf"device .*got '{bad}'"):
            check_device(bad, name="out_device")
    with pytest.raises(ValueError, match=r"^device must be 'auto' or an available device .*"
                                         r"got 'cuda:99'"):
        kernel_regression(torch.zeros(4, 2), torch.zeros(4), rank=0, device="cuda:99")


# --- cost estimate and progress of the CG solve ----------------------------------------------

def test_cost_estimate_arithmetic():
    est = CGCostEstimate(n=1000, tile=100, max_iter=9, rank=50, seconds_per_tile=0.01)
    assert est.tiles_per_product == 55  # T = 10 tiles a side, 10 * 11 / 2 on and above
    assert est.seconds_per_iteration == pytest.approx(0.55, rel=1e-12)
    assert est.setup_seconds == pytest.approx(1000 * 50 / 100 ** 2 * 0.01, rel=1e-12)
    assert est.total_seconds == pytest.approx(0.55 * 10 + 0.05, rel=1e-12)
    assert "per CG iteration on cpu" in est.describe("cpu")
    # an uneven last tile: ceil(1001 / 100) = 11 a side
    assert CGCostEstimate(1001, 100, 1, 0, 1.0).tiles_per_product == 66


def test_estimated_tiles_are_the_tiles_one_product_evaluates():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(50, 3, generator=g, dtype=torch.float64)
    op = BlockedKernel(make_kernel("ntk"), X, tile=16)
    est = estimate_cg_cost(op, max_iter=7, rank=0)
    assert op.tiles_evaluated == 0  # the timed tile is not counted as the solve's
    op.matmul(torch.ones(50, dtype=torch.float64))
    assert op.tiles_evaluated == est.tiles_per_product == 10  # ceil(50 / 16) = 4 a side
    assert est.seconds_per_tile > 0 and est.max_iter == 7
    fixed = estimate_cg_cost(op, max_iter=7, rank=0, seconds_per_tile=2.0)
    assert fixed.seconds_per_tile == 2.0 and op.tiles_evaluated == 10


def _small_problem() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    X = torch.randn(60, 3, generator=g, dtype=torch.float64)
    return X, torch.sin(X[:, 0])


def test_a_solve_past_the_threshold_warns_with_its_estimate_and_prints_progress(capsys):
    X, y = _small_problem()
    with pytest.warns(RuntimeWarning) as rec:
        fit = kernel_regression(X, y, rank=0, tol=1e-14, max_iter=3, tile=16, warn_seconds=0.0)
    msgs = [str(w.message) for w in rec]
    assert fit.info.iterations == 3
    est = [m for m in msgs if "estimated at about" in m]
    assert len(est) == 1 and "n = 60" in est[0] and "10 kernel tiles of side 16" in est[0]
    assert "x max_iter = 3" in est[0] and "progress is printed to stderr" in est[0]
    lines = capsys.readouterr().err.splitlines()
    # the first iteration and the last (max_iter) always; more only every ~30 s of estimate
    assert [ln.split(",")[0] for ln in lines] == ["kernel_regression: CG iteration 1/3",
                                                  "kernel_regression: CG iteration 3/3"]


def test_a_short_solve_neither_warns_nor_prints(capsys):
    X, y = _small_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = kernel_regression(X, y, rank=0, ridge=1e-1, tol=1e-4, max_iter=500, tile=16,
                                warn_seconds=1e9)
    assert fit.info.converged and capsys.readouterr().err == ""
    with pytest.warns(RuntimeWarning, match="estimated at about"):
        kernel_regression(X, y, rank=0, ridge=1e-1, tol=1e-4, tile=16, warn_seconds=0.0,
                          progress=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(ValueError, match=r"^warn_seconds must be a number >= 0"):
        kernel_regression(X, y, rank=0, warn_seconds=-1.0)


def test_kernel_regressor_passes_the_estimate_warning_on(monkeypatch, capsys):
    monkeypatch.setattr(ks, "WARN_SECONDS", 0.0)
    X, y = _data(60)
    with pytest.warns(RuntimeWarning, match=r"^kernel_regression: this solve is estimated at "
                                            r"about .*n = 60"):
        KernelRegressor(solver="cg", ridge=1e-2, rank=10).fit(X, y)
    assert capsys.readouterr().err.startswith("kernel_regression: CG iteration 1/500, ")


def test_progress_log_every_k_iterations(capsys):
    log = ProgressLog(max_iter=7, every=3, label="t")
    for it in range(1, 8):
        log(it, 0.5)
    its = [ln.split(",")[0] for ln in capsys.readouterr().err.splitlines()]
    assert its == ["t: CG iteration 1/7", "t: CG iteration 3/7", "t: CG iteration 6/7",
                   "t: CG iteration 7/7"] and log.lines == 4
    est = CGCostEstimate(n=10, tile=10, max_iter=100, rank=0, seconds_per_tile=4.0)
    assert ProgressLog.for_estimate(est).every == 8  # ceil(30 s / 4 s)


# --- NTKOperator and LinearizedModel on arbitrary modules ------------------------------------

def _net(*extra: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 6), *extra, nn.Tanh(), nn.Linear(6, 1)).double()


def _jacobian_kernel(net: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """K = J J^T over all parameters, from torch.autograd (independent of lazylab)."""
    params = list(net.parameters())
    rows = []
    for x in X:
        grads = torch.autograd.grad(net(x[None]).sum(), params)
        rows.append(torch.cat([g.reshape(-1) for g in grads]))
    J = torch.stack(rows)
    return J @ J.T


X5 = torch.linspace(-1, 1, 15, dtype=torch.float64).reshape(5, 3)


@pytest.mark.parametrize("layer", [nn.Dropout(0.5), nn.BatchNorm1d(6), nn.RReLU()],
                         ids=["dropout", "batchnorm", "rrelu"])
def test_ntk_operator_refuses_train_mode_randomness_and_accepts_eval(layer):
    net = _net(layer)
    with pytest.raises(ValueError, match=rf"^NTKOperator needs a deterministic network, but net "
                                         rf"is in training mode with 1 -> {type(layer).__name__}; "
                                         r"call net\.eval\(\) first"):
        NTKOperator(net, X5)
    net.eval()
    op = NTKOperator(net, X5)
    v = torch.arange(1.0, 6.0, dtype=torch.float64)
    first = op.matmul(v)
    assert torch.equal(first, op.matmul(v))
    torch.testing.assert_close(first, _jacobian_kernel(net, X5) @ v, rtol=1e-12, atol=1e-12)


def test_train_mode_randomness_lists_every_offending_module():
    net = nn.Sequential(nn.Linear(2, 2), nn.Dropout(), nn.Sequential(nn.BatchNorm1d(2),
                                                                     nn.AlphaDropout()))
    assert train_mode_randomness(net) == ["1 -> Dropout", "2.0 -> BatchNorm1d",
                                          "2.1 -> AlphaDropout"]
    net[2].eval()
    assert train_mode_randomness(net) == ["1 -> Dropout"]
    check_deterministic(net.eval(), "x")
    stats_free = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2, track_running_stats=False))
    with pytest.raises(ValueError, match=r"^x needs a function of each example alone, but net "
                                         r"has 1 -> BatchNorm1d with track_running_stats=False"):
        check_deterministic(stats_free.eval(), "x")
    assert train_mode_randomness(nn.Linear(2, 2).train()) == []


def test_ntk_operator_and_linearized_model_cast_x_to_the_model_dtype():
    net = _net()
    X32 = X5.float()
    Xc = X32.double()  # what the cast must give
    v = torch.arange(1.0, 6.0, dtype=torch.float64)
    op32, op64 = NTKOperator(net, X32), NTKOperator(net, Xc)
    assert op32.X.dtype == torch.float64
    assert torch.equal(op32.matmul(v), op64.matmul(v))
    assert torch.equal(op32.cross(X32[:2], v), op64.cross(Xc[:2], v))
    for model in (LinearizedModel(net), LinearizedModel(
            TwoLayerNet(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))):
        out = model(X32)
        assert out.dtype == torch.float64 and torch.equal(out, model(Xc))
        assert torch.equal(model.network(X32), model.network(Xc))


class _TupleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 1).double()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin(x), x


def test_ntk_operator_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match=r"^NTKOperator needs net to return one tensor; it "
                                         r"returned a tuple"):
        NTKOperator(_TupleNet(), X5)
    with pytest.raises(ValueError, match=r"^X must have at least one row; got shape \(0, 3\)$"):
        NTKOperator(_net(), X5[:0])
    with pytest.raises(ValueError, match=r"^X must be a floating-point torch tensor"):
        NTKOperator(_net(), X5.long())
    bads: tuple[Any, ...] = (0, -3, 2.5, True, "4")
    for bad in bads:
        with pytest.raises(ValueError, match=r"^chunk must be a positive integer \(rows per "
                                             rf"pass\) or None \(all rows\); got {bad!r}$"):
            NTKOperator(_net(), X5, chunk=bad)
    op = NTKOperator(_net(), X5)
    with pytest.raises(ValueError, match=r"^Z must have the per-example shape of X \(3,\)"):
        op.cross(torch.zeros(2, 4, dtype=torch.float64), torch.ones(5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^Z must have at least one row"):
        op.cross(X5[:0], torch.ones(5, dtype=torch.float64))
    v = torch.arange(1.0, 6.0, dtype=torch.float64)
    torch.testing.assert_close(NTKOperator(_net(), X5, chunk=2).matmul(v), op.matmul(v),
                               rtol=1e-13, atol=1e-13)
    assert NTKOperator(_net(), X5, chunk=cast(Any, np.int64(2))).chunk == 2


def test_linearized_model_of_a_tuple_returning_model_names_the_model():
    lin = LinearizedModel(_TupleNet())
    with pytest.raises(ValueError, match=r"^LinearizedModel needs model to return one tensor; "
                                         r"it returned a tuple"):
        lin(X5)
    with pytest.raises(ValueError, match=r"^taylor_terms needs model to return one tensor"):
        lin.terms(X5.clone().requires_grad_(True))  # differentiated in X: the torch.func path


def test_module_check_helpers_directly():
    assert check_chunk(None) is None and check_chunk(3) == 3
    with pytest.raises(ValueError, match=r"^rows must be a positive integer"):
        check_chunk(0, name="rows")
    t = torch.zeros(2)
    assert check_tensor_output(t, "f") is t
    with pytest.raises(ValueError, match=r"^f needs net to return one tensor; it returned a dict"):
        check_tensor_output({"y": t}, "f")
    with pytest.raises(ValueError, match=r"^f needs net to return a floating-point tensor"):
        check_tensor_output(torch.zeros(2, dtype=torch.long), "f")
