"""Empirical NTK: structured TwoLayerNet path vs torch.func, and its infinite-width limit."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from lazylab.kernels import empirical_ntk, ntk
from lazylab.models import TwoLayerNet

F64 = torch.float64


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def points(n: int, d: int, seed: int) -> torch.Tensor:
    g = gen(seed)
    X = torch.randn(n, d, generator=g, dtype=F64)
    return X / X.norm(dim=1, keepdim=True) * (0.5 + torch.rand(n, 1, generator=g, dtype=F64))


# ------------------------------------------------- infinite-width limit (Monte Carlo)


@pytest.mark.parametrize("act", ["relu", "relu2", "tanh", "quad"])
@pytest.mark.parametrize("trained", ["first", "both"])
def test_wide_net_matches_closed_form_within_monte_carlo_error(act: str, trained: str):
    # With s = m^-1/2 and a_r = +-1 each entry of the empirical NTK is the mean over the m
    # iid neurons of t_r = sigma'(w_r.x) sigma'(w_r.z) x.z (+ sigma(w_r.x) sigma(w_r.z)),
    # whose expectation is the closed form. Its standard error is std(t_r) / sqrt(m), from
    # the per-neuron terms. 45 distinct entries: P(max |z| > 5) <= 45 * 5.7e-7 (Bonferroni).
    m, d = 100_000, 5
    X = points(9, d, 1)
    net = TwoLayerNet(d, m, activation=act, generator=gen(2), dtype=F64)
    emp = empirical_ntk(net, X, trained=trained)

    U = X @ net.W.detach().T                              # (n, m)
    D, S = net.act.deriv(U, 1), net.act(U)
    G = X @ X.T
    # per-neuron terms, contracted over r by matrix products: E_r[t] and E_r[t^2]
    mean = (D @ D.T) * G / m
    sq = (D**2 @ (D**2).T) * G**2 / m
    if trained == "both":
        mean = mean + S @ S.T / m
        sq = sq + 2 * ((D * S) @ (D * S).T) * G / m + (S**2 @ (S**2).T) / m
    # the structured kernel is exactly this mean (a_r^2 = 1)
    torch.testing.assert_close(emp, mean, rtol=1e-12, atol=1e-12)
    se = ((sq - mean**2).clamp_min(0) / m).sqrt()
    closed = ntk(X, activation=act, trained=trained)
    iu = torch.triu_indices(9, 9)
    z = ((emp - closed).abs() / se)[iu[0], iu[1]]
    assert float(z.max()) <= 5.0, f"max |z| = {float(z.max()):.2f}"
    assert float(se.max() / closed.abs().max()) < 0.05  # the check has teeth


# --------------------------------------------- structured vs torch.func general path


@pytest.mark.parametrize("act", ["relu", "tanh", "quad"])
@pytest.mark.parametrize("trained", ["first", "both", "all", ["a"], ["W", "c"]])
def test_structured_matches_autodiff(act: str, trained):
    net = TwoLayerNet(4, 64, activation=act, train_second=True, bias=True, generator=gen(3),
                      dtype=F64)
    X, Z = points(7, 4, 4), points(5, 4, 5)
    for B in (None, Z):
        s = empirical_ntk(net, X, B, trained=trained)
        a = empirical_ntk(net, X, B, trained=trained, method="autodiff")
        assert s.shape == a.shape == (7, 7 if B is None else 5)
        torch.testing.assert_close(s, a, rtol=1e-10, atol=1e-10)


def test_chunking_does_not_change_the_result():
    net = TwoLayerNet(3, 50, activation="relu2", scaling="mf", init="symmetric",
                      a_init="gaussian", generator=gen(6), dtype=F64)
    X, Z = points(6, 3, 7), points(4, 3, 8)
    for B in (None, Z):
        ref = empirical_ntk(net, X, B, trained="both")
        # 30 elements per chunk: 3 hidden units at a time (structured), 1 example (autodiff)
        small = empirical_ntk(net, X, B, trained="both", chunk_elems=30)
        auto = empirical_ntk(net, X, B, trained=["W", "a"], method="autodiff", chunk_elems=30)
        torch.testing.assert_close(small, ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(auto, ref, rtol=1e-10, atol=1e-10)


def test_structured_first_layer_formula_by_hand():
    # (S'_X diag(a^2) S'_Z^T) * (X Z^T) * s^2 with gaussian a (weights matter) and s = 1/m
    net = TwoLayerNet(3, 40, activation="tanh", scaling="mf", a_init="gaussian",
                      generator=gen(9), dtype=F64)
    X, Z = points(5, 3, 10), points(4, 3, 11)
    W, a = net.W.detach(), net.a
    DX, DZ = 1 - torch.tanh(X @ W.T) ** 2, 1 - torch.tanh(Z @ W.T) ** 2
    ref = sum(a[r] ** 2 * torch.outer(DX[:, r], DZ[:, r]) for r in range(40)) * (X @ Z.T) / 40**2
    torch.testing.assert_close(empirical_ntk(net, X, Z), ref, rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------- any nn.Module (autodiff)


def _per_example_grads(net: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """Reference Jacobian with plain autograd, one example and one output at a time."""
    rows = []
    for x in X:
        out = net(x.unsqueeze(0)).reshape(-1)
        rows.append(torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
            o, list(net.parameters()), retain_graph=True)]) for o in out]))
    return torch.stack(rows)  # (n, k, P)


@pytest.mark.parametrize("k", [1, 2])
def test_generic_module_matches_plain_autograd(k: int):
    torch.manual_seed(0)  # nn.Linear's init uses the global RNG; values are irrelevant here
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, k)).double()
    X, Z = points(5, 3, 12), points(4, 3, 13)
    JX, JZ = _per_example_grads(net, X), _per_example_grads(net, Z)
    ref = torch.einsum("iaf,jbf->ijab", JX, JZ)
    K = empirical_ntk(net, X, Z, trained="all", chunk_elems=200)
    if k == 1:
        ref = ref[:, :, 0, 0]
    assert K.shape == ref.shape
    torch.testing.assert_close(K, ref, rtol=1e-12, atol=1e-12)
    sym = empirical_ntk(net, X, trained="all", chunk_elems=200)
    ref_sym = torch.einsum("iaf,jbf->ijab", JX, JX)
    torch.testing.assert_close(sym, ref_sym[:, :, 0, 0] if k == 1 else ref_sym,
                               rtol=1e-12, atol=1e-12)


def test_width_1e5_float32_runs_and_dtype_follows_net():
    net = TwoLayerNet(10, 100_000, generator=gen(14))
    X = torch.randn(50, 10, generator=gen(15), dtype=F64)  # cast to the net's float32
    K = empirical_ntk(net, X, trained="both")
    assert K.shape == (50, 50) and K.dtype == torch.float32
    # m = 1e5: within a few percent of the limit (relative MC error ~ 1/sqrt(m) = 3e-3)
    closed = ntk(X, trained="both")
    assert float((K.double() - closed).abs().max() / closed.abs().max()) < 0.05
    assert math.isfinite(float(K.sum()))


# ---------------------------------------------------------------------- bad input


def test_bad_input_raises_value_error_naming_the_parameter():
    net = TwoLayerNet(3, 8, generator=gen(16))
    X = torch.randn(4, 3, generator=gen(17))
    with pytest.raises(ValueError, match="trained"):
        empirical_ntk(net, X, trained="second")
    with pytest.raises(ValueError, match="trained"):
        empirical_ntk(net, X, trained=["V"])
    with pytest.raises(ValueError, match="X"):
        empirical_ntk(net, torch.randn(4, 5))
    with pytest.raises(ValueError, match="Z"):
        empirical_ntk(net, X, torch.randn(2, 4))
    with pytest.raises(ValueError, match="method"):
        empirical_ntk(net, X, method="fast")
    with pytest.raises(ValueError, match="trained"):
        empirical_ntk(nn.Linear(3, 1), X, trained="first")
    # structured derivatives now cover any module (tests/test_empirical_ntk_methods.py)
    lin = nn.Linear(3, 1)
    torch.testing.assert_close(empirical_ntk(lin, X, trained="all", method="structured"),
                               empirical_ntk(lin, X, trained="all", method="autodiff"))


def test_coactivation_paths_give_identical_kernels() -> None:
    """int8 and float32 co-activation GEMMs count exactly: bitwise-equal kernels, and the
    probe picks one of the two."""
    from lazylab.kernels.empirical import coactivation_path, set_coactivation_path

    net = TwoLayerNet(6, 300, generator=gen(40))
    X = torch.randn(40, 6, generator=gen(41))
    Z = torch.randn(25, 6, generator=gen(42))
    assert coactivation_path("cpu") in ("int8", "float32")
    out = {}
    try:
        for path in ("int8", "float32"):
            set_coactivation_path(path)
            out[path] = (empirical_ntk(net, X), empirical_ntk(net, X, Z, chunk_elems=64 * 65))
    finally:
        set_coactivation_path(None)
    assert torch.equal(out["int8"][0], out["float32"][0])
    assert torch.equal(out["int8"][1], out["float32"][1])
    with pytest.raises(ValueError, match="path"):
        set_coactivation_path("int4")


def test_ntk_operator_products_and_regression_match_the_formed_kernel():
    """NTK-vector products of a generic module (chunked over rows) equal K v and K(Z, X) a
    with K formed from Jacobians; CG on them solves kernel ridge regression as the direct
    solve does."""
    from lazylab.kernels import NTKOperator
    from lazylab.solve import kernel_ridge, operator_regression

    g = torch.Generator().manual_seed(5)
    net = torch.nn.Sequential(torch.nn.Linear(4, 24), torch.nn.Tanh(), torch.nn.Linear(24, 24),
                              torch.nn.Tanh(), torch.nn.Linear(24, 1)).double()
    X = torch.randn(30, 4, generator=g, dtype=torch.float64)
    Z = torch.randn(7, 4, generator=g, dtype=torch.float64)
    V = torch.randn(30, 3, generator=g, dtype=torch.float64)
    K = empirical_ntk(net, X, trained="all")
    op = NTKOperator(net, X, trained="all", chunk=8)
    torch.testing.assert_close(op.matmul(V), K @ V, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(op.cross(Z, V[:, 0]), empirical_ntk(net, Z, X, trained="all")
                               @ V[:, 0], rtol=1e-10, atol=1e-10)
    y = torch.sin(X[:, 0])
    fit = operator_regression(op, y, ridge=1e-2, tol=1e-10, max_iter=300)
    assert fit.info.converged
    torch.testing.assert_close(fit.alpha, kernel_ridge(K, y, ridge=1e-2), rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="one output per input"):
        NTKOperator(torch.nn.Linear(4, 2).double(), X)


def test_ntk_parametrize_matches_the_closed_form_without_hand_scaling():
    """A standard nn.Sequential ReLU net, NTK-parametrized: its all-parameter empirical NTK
    approaches ntk(X, trained="both") at rate m^-1/2 (the error at 4x the width halves, within
    Monte Carlo spread), while the standard parametrization is off by orders of magnitude."""
    from lazylab.models import ntk_parametrize

    g = torch.Generator().manual_seed(8)
    X = torch.nn.functional.normalize(torch.randn(6, 5, generator=g, dtype=torch.float64), dim=1)
    H = ntk(X, trained="both")

    def net(m, **kw):
        return torch.nn.Sequential(torch.nn.Linear(5, m), torch.nn.ReLU(),
                                   torch.nn.Linear(m, 1)).double()

    errs = []
    for m in (2000, 8000, 32000):
        errs.append(np.mean([float((empirical_ntk(ntk_parametrize(
            net(m), scale_input_layer=False, generator=torch.Generator().manual_seed(s)), X,
            trained="all") - H).norm() / H.norm()) for s in range(4)]))
    assert errs[0] < 0.1
    for a, b in zip(errs, errs[1:], strict=False):
        assert 0.3 < b / a < 0.75, errs  # 1/2 expected
    plain = empirical_ntk(net(8000), X, trained="all")
    off = float(plain.norm() / H.norm())
    assert max(off, 1 / off) > 20  # the factor the helper removes
    # With the input layer scaled too, the limit is the kernel of x / sqrt(d).
    K = empirical_ntk(ntk_parametrize(net(32000), scale_input_layer=True,
                                      generator=torch.Generator().manual_seed(0)),
                      X, trained="all")
    H5 = ntk(X / 5 ** 0.5, trained="both")
    assert float((K - H5).norm() / H5.norm()) < 0.05
