"""TwoLayerNet and random-features models: identities, distributions, gradients, estimators."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.base import clone

from lazylab.estimators import RandomFeaturesRegressor
from lazylab.models import RandomFeatures, TwoLayerNet, gaussian_weights

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _directional_fd_check(loss, params: list[torch.Tensor], seed: int, h: float = 1e-5) -> None:
    """Autograd directional derivative vs central differences, relative error < 1e-6.

    Central differences have truncation error h^2 |L'''| / 6 ~ 1e-10 and rounding error
    ~ eps |L| / h ~ 1e-11 for O(1) losses, far below the 1e-6 tolerance.
    """
    grads = torch.autograd.grad(loss(), params)
    g = _gen(seed)
    for _ in range(3):
        dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in params]
        exact = sum(float((gr * v).sum()) for gr, v in zip(grads, dirs, strict=True))
        with torch.no_grad():
            for p, v in zip(params, dirs, strict=True):
                p.add_(h * v)
            up = float(loss())
            for p, v in zip(params, dirs, strict=True):
                p.sub_(2 * h * v)
            down = float(loss())
            for p, v in zip(params, dirs, strict=True):
                p.add_(h * v)
        fd = (up - down) / (2 * h)
        assert abs(fd - exact) <= 1e-6 * max(abs(exact), 1e-3), (fd, exact)


# ------------------------------------------------------------------------- TwoLayerNet


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("activation", ["relu", "tanh", "relu3_6"])
def test_symmetric_init_output_is_exactly_zero(dtype, activation):
    # Pairs share bitwise-identical preactivations and are summed first, so every pair
    # contributes exactly 0 (Bai & Lee 2020, Eq. (3)); not merely ~eps.
    for m, d, n in [(2, 1, 3), (6, 5, 7), (64, 17, 50), (1000, 100, 20)]:
        g = _gen(m + d)
        net = TwoLayerNet(d, m, activation=activation, init="symmetric", dtype=dtype,
                          generator=g)
        X = torch.randn(n, d, generator=g, dtype=dtype)
        assert torch.equal(net(X), torch.zeros(n, dtype=dtype))
    # and it is not zero once the pairs differ
    with torch.no_grad():
        net.W[0] += 0.5
    assert net(X).abs().max() > 0


@pytest.mark.parametrize("scaling,factor", [("ntk", lambda m: m**-0.5), ("mf", lambda m: 1 / m),
                                            ("none", lambda m: 1.0)])
def test_forward_matches_explicit_neuron_sum(scaling, factor):
    g = _gen(1)
    m, d = 7, 3
    net = TwoLayerNet(d, m, activation="softplus", scaling=scaling, a_init="gaussian",
                      bias=True, dtype=F64, generator=g).requires_grad_(False)
    net.c.fill_(0.3)
    X = torch.randn(4, d, generator=g, dtype=F64)
    explicit = torch.tensor([
        0.3 + factor(m) * sum(float(net.a[r]) * math.log1p(math.exp(float(net.W[r] @ x)))
                              for r in range(m))
        for x in X], dtype=F64)
    assert net.scale == pytest.approx(factor(m))
    torch.testing.assert_close(net(X).detach(), explicit, rtol=1e-12, atol=1e-12)


def test_symmetric_init_structure_and_evaluate():
    g = _gen(2)
    net = TwoLayerNet(4, 10, init="symmetric", a_init="ones", dtype=F64, generator=g)
    assert torch.equal(net.W[:5], net.W[5:])
    assert torch.equal(net.a, torch.cat([torch.ones(5), -torch.ones(5)]).to(F64))
    X = torch.randn(6, 4, generator=g, dtype=F64)
    U = torch.randn(10, 4, generator=g, dtype=F64)
    other = TwoLayerNet.from_weights(net.W.detach() + U, net.a, activation="relu",
                                     paired=True)
    torch.testing.assert_close(net.evaluate(X, net.W + U), other(X), rtol=1e-14, atol=1e-14)


def test_tangent_features_are_the_gradient():
    g = _gen(3)
    net = TwoLayerNet(3, 5, activation="tanh", dtype=F64, generator=g)
    X = torch.randn(4, 3, generator=g, dtype=F64)
    phi = net.tangent_features(X)
    for i in range(4):
        (grad,) = torch.autograd.grad(net(X[i : i + 1]).sum(), net.W)
        torch.testing.assert_close(phi[i], grad, rtol=1e-13, atol=1e-14)


def test_two_layer_gradients_match_finite_differences():
    g = _gen(4)
    net = TwoLayerNet(5, 12, activation="tanh", a_init="gaussian", train_second=True,
                      bias=True, dtype=F64, generator=g)
    X = torch.randn(8, 5, generator=g, dtype=F64)
    y = torch.randn(8, generator=g, dtype=F64)

    def loss():
        return ((net(X) - y) ** 2).mean()

    _directional_fd_check(loss, [net.W, net.a, net.c], seed=5)


def test_two_layer_rejects_bad_input():
    with pytest.raises(ValueError, match="width"):
        TwoLayerNet(3, 5, init="symmetric")
    with pytest.raises(ValueError, match="scaling"):
        TwoLayerNet(3, 4, scaling="bad")
    with pytest.raises(ValueError, match="weight_std"):
        TwoLayerNet(3, 4, weight_std=0.0)
    with pytest.raises(ValueError, match="order"):
        TwoLayerNet(3, 4).taylor_terms(torch.randn(2, 3), None, -1)


# ------------------------------------------------------------------------- RandomFeatures


def test_random_features_weights_have_the_requested_covariance():
    # Entry (i, j) of the sample covariance of m rows has standard error
    # sqrt((G_ii G_jj + G_ij^2) / m); allow 4 standard errors.
    d, m = 3, 40000
    A = torch.tensor([[1.0, 0.5, 0.0], [0.2, 1.0, 0.3], [0.0, 0.1, 0.7]], dtype=F64)
    Gamma = A @ A.T
    W = gaussian_weights(d, m, covariance=Gamma, generator=_gen(6), dtype=F64)
    S = W.T @ W / m
    se = ((torch.diag(Gamma)[:, None] * torch.diag(Gamma)[None] + Gamma**2) / m).sqrt()
    assert ((S - Gamma).abs() <= 4 * se).all()
    iso = gaussian_weights(d, m, weight_std=0.5, generator=_gen(7), dtype=F64)
    assert abs(float(iso.var()) - 0.25) <= 4 * 0.25 * math.sqrt(2 / (m * d))


def test_random_features_singular_covariance_stays_in_its_range():
    v = torch.tensor([1.0, -2.0, 0.5], dtype=F64)
    W = gaussian_weights(3, 50, covariance=torch.outer(v, v), generator=_gen(8), dtype=F64)
    null = torch.tensor([2.0, 1.0, 0.0], dtype=F64)  # orthogonal to v
    assert float((W @ null).abs().max()) < 1e-12
    with pytest.raises(ValueError, match="positive semi-definite"):
        gaussian_weights(3, 5, covariance=-torch.eye(3))
    with pytest.raises(ValueError, match="shape"):
        gaussian_weights(3, 5, covariance=torch.eye(2))


def test_random_features_module_trains_only_the_second_layer():
    rf = RandomFeatures(4, 9, activation="relu", bias=True, generator=_gen(9), dtype=F64)
    names = {k for k, p in rf.named_parameters() if p.requires_grad}
    assert names == {"a", "c"}
    X = torch.randn(5, 4, generator=_gen(10), dtype=F64)
    F = rf.features(X)
    assert F.shape == (5, 9)
    torch.testing.assert_close(F, torch.relu(X @ rf.W.T))
    with torch.no_grad():
        rf.a.normal_(generator=_gen(11))
    torch.testing.assert_close(rf(X), F @ rf.a + rf.c)


def test_regressor_interpolates_a_quadratic_in_its_span():
    # sigma(u) = u^2 - 1 features span {x^T M x - sum_i a_i}: with m >= d(d+1)/2 + 1 generic
    # features the centred quadratic target x^T B x - Tr B lies in the span exactly, so fresh
    # test points are predicted to rounding error.
    d = 4
    g = _gen(12)
    B = torch.randn(d, d, generator=g, dtype=F64)
    B = (B + B.T) / 2

    def target(X):
        return ((X @ B) * X).sum(1) - torch.trace(B)

    X, Xt = torch.randn(300, d, generator=g, dtype=F64), torch.randn(100, d, generator=g, dtype=F64)
    est = RandomFeaturesRegressor(30, activation="quad_centered", weight_std=d**-0.5, seed=3,
                                  ridge=0.0, fit_intercept=False)
    pred = est.fit(X, target(X)).predict(Xt)
    assert float((pred - target(Xt)).abs().max()) < 1e-8 * float(target(Xt).abs().max())


def test_regressor_ridge_solution_and_intercept():
    g = _gen(13)
    X = torch.randn(40, 3, generator=g, dtype=F64)
    y = torch.sin(X[:, 0]) + 0.1 * torch.randn(40, generator=g, dtype=F64)
    est = RandomFeaturesRegressor(25, activation="tanh", ridge=0.7, seed=1,
                                  fit_intercept=False).fit(X, y)
    F = est.model_.features(X)
    # the ridge is in kernel units: the penalty on ||a||^2 is m s_m^2 ridge = 25 * 0.7
    direct = torch.linalg.solve(F.T @ F + 25 * 0.7 * torch.eye(25, dtype=F64), F.T @ y)
    np.testing.assert_allclose(est.coef_, direct.numpy(), rtol=1e-10, atol=1e-12)
    # With an unpenalised intercept, shifting y by a constant shifts predictions by it.
    e1 = RandomFeaturesRegressor(25, activation="tanh", ridge=0.7, fit_intercept=True).fit(X, y)
    e2 = RandomFeaturesRegressor(25, activation="tanh", ridge=0.7, fit_intercept=True).fit(
        X, y + 5.0)
    torch.testing.assert_close(e2.predict(X), e1.predict(X) + 5.0, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(e1.coef_, e2.coef_, rtol=1e-9, atol=1e-12)


def test_regressor_numpy_io_seeds_and_errors():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    est = RandomFeaturesRegressor(10, activation="relu", ridge=1e-3, seed=4)
    with pytest.raises(ValueError, match="not fitted"):
        est.predict(X)
    pred = est.fit(X, y).predict(X)
    assert isinstance(pred, np.ndarray) and pred.shape == (30,)
    same = clone(est).fit(X, y)
    np.testing.assert_array_equal(same.coef_, est.coef_)
    other = RandomFeaturesRegressor(10, activation="relu", ridge=1e-3, seed=5).fit(X, y)
    assert not np.allclose(other.coef_, est.coef_)
    # For least squares with an intercept (ridge 0, n > m) the training R^2 equals the squared
    # correlation between y and the fitted values.
    ols = RandomFeaturesRegressor(10, activation="relu", ridge=0.0, fit_intercept=True).fit(X, y)
    r = np.corrcoef(y, ols.predict(X))[0, 1]
    assert ols.score(X, y) == pytest.approx(r**2, rel=1e-10)
    assert "width=10" in repr(clone(ols).set_params(seed=9))
    with pytest.raises(ValueError, match="Invalid parameter .depth."):
        est.set_params(depth=3)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.fit(X, y[:5])
    with pytest.raises(ValueError, match="ridge"):
        RandomFeaturesRegressor(10, ridge=-1.0).fit(X, y)


def test_kernel_regressor_matches_sklearn_kernel_ridge() -> None:
    """KernelRegressor (CG over kernel tiles, float32 tiles) vs sklearn KernelRidge on the dense
    float64 NTK: predictions agree to the float32 accuracy of the tiles plus the CG residual
    bound (relative 1e-4 here, lambda_min(K + ridge I) >= ridge = 0.1)."""
    from sklearn.kernel_ridge import KernelRidge

    from lazylab.estimators import KernelRegressor
    from lazylab.kernels import ntk

    g = _gen(30)
    X = torch.randn(150, 4, generator=g, dtype=F64)
    y = torch.tanh(X[:, 0] * X[:, 1])
    Xt = torch.randn(40, 4, generator=g, dtype=F64)
    est = KernelRegressor(ridge=0.1, tol=1e-8, rank=30).fit(X.numpy(), y.numpy())
    ref = KernelRidge(alpha=0.1, kernel="precomputed").fit(ntk(X).numpy(), y.numpy())
    want = ref.predict(ntk(Xt, X).numpy())
    got = est.predict(Xt.numpy())
    assert isinstance(got, np.ndarray) and got.shape == (40,)
    assert float(np.abs(got - want).max() / np.abs(want).max()) < 1e-4
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(ValueError, match="not fitted"):
        KernelRegressor().predict(Xt)
