"""Allen-Zhu & Li (2019) library pieces: Walsh tools, tasks, models, batched grid training."""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch

from lazylab.data import HardInstance, HierarchicalParity
from lazylab.data.hierarchical import (
    all_cube_points,
    exact_risk,
    t1_reference_levels,
    t2_reference_levels,
)
from lazylab.kernels import walsh
from lazylab.kernels.walsh import (
    FourierSystem,
    _chi,
    best_risk,
    cube_points,
    dot_product_spectrum,
    fraction_good,
    fwht,
    leverage_scores,
    parseval_risk,
    subset_mask,
    subsets,
)
from lazylab.models.mlp import MLP2, MLP3, SignOutputNet
from lazylab.models.resnet import ResNet3
from lazylab.theory.allenzhu import leverage_fraction_bound, thm2_fraction_bound
from lazylab.train.ensemble import best_index, decade_grid, train_grid

F64 = torch.float64


def gen(s: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(s)


# ---------------------------------------------------------------------------- Walsh tools
def test_fwht_matches_enumerated_fourier_coefficients():
    d = 6
    X = cube_points(d)
    f = torch.randn(2 ** d, generator=gen(), dtype=F64)
    coef = fwht(f)
    for S in [(), (0,), (2, 5), (0, 1, 3), tuple(range(d))]:
        chi = X[:, list(S)].prod(dim=1) if S else torch.ones(2 ** d, dtype=F64)
        assert abs(float(coef[subset_mask(S)]) - float((f * chi).mean())) < 1e-12


def test_parseval_matches_enumeration_at_d8():
    d, alpha = 8, 0.3
    X = cube_points(d)
    f = torch.randn(2 ** d, generator=gen(1), dtype=F64)
    S, i = (1, 4, 6), 4
    direct = float((f - X[:, i] - alpha * X[:, list(S)].prod(dim=1)).square().mean())
    assert abs(parseval_risk(fwht(f), i, S, alpha) - direct) < 1e-10


@pytest.mark.parametrize("kind", ["dot", "features"])
def test_best_risk_matches_bruteforce_least_squares_at_d8(kind):
    """C1 formula R* = ||t||^2 - v^T G^+ v vs min_w E (sum_n w_n K(x, x_n) - t(x))^2 by lstsq
    over the 256 cube points."""
    d, alpha, N = 8, 0.3, 40
    X = cube_points(d)
    idx = torch.randperm(2 ** d, generator=gen(2))[:N]
    if kind == "dot":
        kap = lambda t: torch.exp(-(2 * d - 2 * t) / d)  # noqa: E731
        system = FourierSystem.dot_product(dot_product_spectrum(kap, d), X[idx])
        design = kap(X @ X[idx].T)                        # K(x, x_n), (256, N)
    else:
        U = torch.randn(d, 30, generator=gen(3), dtype=F64)
        design = torch.relu(X @ U / math.sqrt(d) + 0.3)   # features phi(x), (256, D)
        system = FourierSystem.features(fwht(design, dim=0).T)
    sets = subsets(d, 3)[:25]
    r = best_risk(system, sets, [s[0] for s in sets], alpha)
    for s, rs in zip(sets, r.tolist(), strict=True):
        t = X[:, s[0]] + alpha * X[:, list(s)].prod(dim=1)
        w = torch.linalg.lstsq(design, t.unsqueeze(1), driver="gelsd").solution
        brute = float((design @ w - t.unsqueeze(1)).square().mean())
        assert abs(brute - rs) < 1e-8


def test_leverage_counts_bound_the_good_sets():
    """Lemma D.2 sharp form: #(R* <= alpha^2/16) <= #(leverage >= 0.9) <= N / 0.9, and the
    leverages sum to the rank."""
    d, alpha = 8, 0.3
    X = cube_points(d)
    spec = dot_product_spectrum(lambda t: torch.exp(-(2 * d - 2 * t) / d), d)
    for N in (10, 60, 150):
        idx = torch.randperm(2 ** d, generator=gen(N))[:N]
        system = FourierSystem.dot_product(spec, X[idx])
        sets = subsets(d, 2)
        lev = leverage_scores(system, sets)
        assert float(lev.sum()) <= N + 1e-8
        r = best_risk(system, sets, [s[0] for s in sets], alpha)
        good = r <= alpha ** 2 / 16
        assert bool((lev[good] >= 0.9 - 1e-9).all())
        assert fraction_good(r, alpha) <= leverage_fraction_bound(N, d, 2) + 1e-12
        assert fraction_good(r, alpha) <= thm2_fraction_bound(N, d, 2)


def test_dot_product_gram_equals_fourier_gram():
    d = 7
    X = cube_points(d)
    kap = lambda t: torch.arcsin(t / d)  # noqa: E731
    idx = torch.randperm(2 ** d, generator=gen(4))[:20]
    system = FourierSystem.dot_product(dot_product_spectrum(kap, d), X[idx])
    M = fwht(kap(X @ X[idx].T), dim=0).T
    assert torch.allclose(system.gram, M @ M.T, atol=1e-12)
    assert torch.allclose(system.column_fn([(0, 3), (1,)]), M[:, [subset_mask((0, 3)), 2]],
                          atol=1e-12)


# ---------------------------------------------------------------------------- tasks
def test_t1_reference_levels_by_enumeration():
    for beta in (1.0, 0.5, 0.0):
        t = HierarchicalParity(alpha=0.3, beta=beta, d=10)
        lv = t1_reference_levels(5, 0.3, beta)
        f_only = exact_risk(lambda X, b=beta: b * X[:, 0::2] * X[:, 1::2], t, 10)
        zero = exact_risk(lambda X: torch.zeros(len(X), 5, dtype=X.dtype), t, 10)
        assert abs(f_only - lv["F_only"]) < 1e-12 and abs(zero - lv["zero"]) < 1e-12
    assert t1_reference_levels(15, 0.3, 1.0) == {"F_only": 1.35, "zero": 16.35}


def test_t2_and_t3_reference_levels_by_enumeration():
    d, alpha = 8, 0.2
    for norm in (False, True):
        t = HardInstance([1, 3, 6], alpha, d, normalize=norm)
        s = 1 / math.sqrt(3) if norm else 1.0
        f_only = exact_risk(lambda X, s=s: s * math.sqrt(d) * X[:, [1, 3, 6]], t, d,
                            scale=1 / math.sqrt(d))
        assert abs(f_only - t2_reference_levels(3, alpha, norm)["F_only"]) < 1e-12
    X = all_cube_points(6, scale=1 / math.sqrt(6))
    y = 6 ** 3 * X.prod(dim=1)
    assert bool((y.abs() - 1).abs().max() < 1e-12) and abs(float(y.square().mean()) - 1) < 1e-12


# ---------------------------------------------------------------------------- models
@pytest.mark.parametrize("tied", [True, False])
def test_resnet_hand_backward_matches_autograd(tied):
    net = ResNet3(9, 4, 23, tied=tied, generator=gen(5), dtype=F64)
    X = torch.randn(17, 9, generator=gen(6), dtype=F64)
    Y = torch.randn(17, 4, generator=gen(7), dtype=F64)
    (0.5 * (net(X) - Y).square().sum()).backward()
    for name, g in net.manual_grads(X, Y).items():
        assert torch.allclose(getattr(net, name).grad, g, atol=1e-12, rtol=0), name


def test_resnet_forward_is_eq_2_1_and_bottleneck():
    """Full form = A(h1 + sigma(U h1 + b2)); bottleneck = out1 + A sigma(V out1 + b2)."""
    net = ResNet3(6, 3, 11, generator=gen(8), dtype=F64)
    X = torch.randn(5, 6, generator=gen(9), dtype=F64)
    h1 = torch.relu(X @ net.W.T + net.b1)
    out1 = h1 @ net.A.T
    assert torch.allclose(net.out1(X), out1)
    expect = out1 + torch.relu(out1 @ net.V.T + net.b2) @ net.A.T
    assert torch.allclose(net(X), expect, atol=1e-13)
    full = ResNet3(6, 3, 11, form="full", generator=gen(8), dtype=F64)
    with torch.no_grad():
        full.U.copy_(net.V @ net.A)
        for n in ("W", "b1", "b2", "A"):
            getattr(full, n).copy_(getattr(net, n))
    assert torch.allclose(full(X), net(X), atol=1e-12)


def test_param_groups_partition_the_parameters():
    for net in (ResNet3(5, 2, 8, generator=gen()), MLP3(5, 2, 8, generator=gen()),
                MLP2(5, 2, 8, generator=gen()), SignOutputNet(5, 8, generator=gen())):
        groups = net.param_groups()
        parts = [p for k, v in groups.items() if k != "all" for p in v]
        assert sorted(map(id, parts)) == sorted(map(id, net.parameters()))
        assert {id(p) for p in groups["all"]} == {id(p) for p in net.parameters()}


def test_init_variance_is_one_over_m():
    m = 4000
    net = ResNet3(30, 15, m, generator=gen(10))
    for name in ("W", "V", "A", "b1"):
        var = float(getattr(net, name).detach().double().var())
        n = getattr(net, name).numel()
        assert abs(var * m - 1) < 4 * math.sqrt(2 / n) + 1e-3, name


# ---------------------------------------------------------------------------- batched grid
@pytest.mark.parametrize("trainable,linearize", [("all", False), ("first", False),
                                                 ("all", True)])
def test_batched_grid_equals_configs_run_one_by_one(trainable, linearize):
    """Each configuration of the ensemble = its own run (torch.optim.SGD, momentum 0.9,
    MultiStepLR at half the epochs) in float64, to 1e-10."""
    net = ResNet3(7, 3, 12, generator=gen(11), dtype=F64)
    X = torch.randn(45, 7, generator=gen(12), dtype=F64)
    Y = torch.randn(45, 3, generator=gen(13), dtype=F64)
    epochs, bs = 4, 20
    res = train_grid(net, X, Y, lrs=[0.01, 0.05], wds=[0.0, 1e-2], trainable=trainable,
                     epochs=epochs, batch_size=bs, linearize=linearize, generator=gen(14))
    names = [n for n, p in net.named_parameters()
             if any(p is q for q in net.param_groups()[trainable])]
    for gi, (lr, wd) in enumerate(res.configs):
        one = train_grid(net, X, Y, lrs=[lr], wds=[wd], trainable=trainable, epochs=epochs,
                         batch_size=bs, linearize=linearize, generator=gen(14))
        for n in names:
            assert torch.allclose(res.params[n][gi], one.params[n][0], atol=1e-10, rtol=0)
        if linearize:
            continue
        m = copy.deepcopy(net)
        opt = torch.optim.SGD([getattr(m, n) for n in names], lr=lr, momentum=0.9,
                              weight_decay=wd)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, [epochs // 2], 0.1)
        g = gen(14)
        perms = [torch.randperm(45, generator=g) for _ in range(epochs)]
        for e in range(epochs):
            for s in range(0, 45, bs):
                idx = perms[e][s:s + bs]
                opt.zero_grad()
                (m(X[idx]) - Y[idx]).square().sum(dim=1).mean().backward()
                opt.step()
            sched.step()
        for n in names:
            assert torch.allclose(res.params[n][gi], getattr(m, n).detach(), atol=1e-10,
                                  rtol=0), n


def _learners():
    return {"3resnet": lambda: ResNet3(7, 3, 12, generator=gen(31), dtype=F64),
            "3resnet-untied": lambda: ResNet3(7, 3, 12, tied=False, generator=gen(31),
                                              dtype=F64),
            "3resnet-full": lambda: ResNet3(7, 3, 12, form="full", generator=gen(31),
                                            dtype=F64),
            "3layer": lambda: MLP3(7, 3, 12, generator=gen(31), dtype=F64),
            "2layer": lambda: MLP2(7, 3, 12, generator=gen(31), dtype=F64)}


@pytest.mark.parametrize("arch", list(_learners()))
def test_stacked_grads_equal_autograd_per_configuration(arch):
    """The hand-written gradients of G stacked configurations (lazylab.models.stacked) are
    autograd's gradient of each configuration's batch loss mean ||out - y||^2, to 1e-12."""
    net = _learners()[arch]()
    G = 3
    tensors = {**dict(net.named_parameters()), **dict(net.named_buffers())}
    params = {n: v.detach() + 0.3 * torch.randn(G, *v.shape, generator=gen(32), dtype=F64)
              for n, v in tensors.items()}
    X = torch.randn(9, 7, generator=gen(33), dtype=F64)
    Y = torch.randn(9, 3, generator=gen(34), dtype=F64)
    grads, loss = net.stacked_grads(params, X, Y)
    for g in range(G):
        ps = {n: v[g].clone().requires_grad_(n in dict(net.named_parameters()))
              for n, v in params.items()}
        out = torch.func.functional_call(net, ps, (X,))
        lg = (out - Y).square().sum(1).mean()
        assert abs(float(loss[g]) - float(lg.detach())) < 1e-12
        auto = torch.autograd.grad(lg, [ps[n] for n, _ in net.named_parameters()])
        for (n, _), a in zip(net.named_parameters(), auto, strict=True):
            assert torch.allclose(grads[n][g], a, atol=1e-12, rtol=0), (arch, n)


@pytest.mark.parametrize("arch", list(_learners()))
def test_stacked_ntk_grads_equal_autograd_of_the_taylor_model(arch):
    """The hand-written gradients of the first-order Taylor model at theta0 (the "(NTK)"
    mode) equal autograd through torch.func.jvp of f_lin(theta) = f(theta0) + J (theta -
    theta0), per configuration, to 1e-12 (only the trained names move from theta0)."""
    net = _learners()[arch]()
    G = 3
    trained = dict(net.named_parameters())
    base = {**trained, **dict(net.named_buffers())}
    base = {n: v.detach() for n, v in base.items()}
    params = {n: v + (0.3 * torch.randn(G, *v.shape, generator=gen(38), dtype=F64)
                      if n in trained else 0.0 * v.expand(G, *v.shape))
              for n, v in base.items()}
    X = torch.randn(9, 7, generator=gen(39), dtype=F64)
    Y = torch.randn(9, 3, generator=gen(40), dtype=F64)
    grads, loss = net.stacked_ntk_grads(params, base, X, Y)

    def f(ps):
        return torch.func.functional_call(net, {**base, **ps}, (X,))

    for g in range(G):
        ps = {n: params[n][g].clone().requires_grad_(True) for n in trained}
        delta = {n: ps[n] - base[n] for n in trained}
        out0, tangent = torch.func.jvp(f, ({n: base[n] for n in trained},), (delta,))
        lg = (out0 + tangent - Y).square().sum(1).mean()
        assert abs(float(loss[g]) - float(lg.detach())) < 1e-12
        auto = torch.autograd.grad(lg, list(ps.values()))
        for n, a in zip(ps, auto, strict=True):
            assert torch.allclose(grads[n][g], a, atol=1e-12, rtol=0), (arch, n)


@pytest.mark.parametrize("arch", list(_learners()))
@pytest.mark.parametrize("ntk", [False, True])
@pytest.mark.parametrize("beta", [0.0, 0.9])
def test_gradients_deposited_into_a_buffer(arch, ntk, beta):
    """With Into(tensors, beta), each named tensor T becomes beta T + its gradient (to 1e-12
    against the gradients returned fresh), is the tensor returned for that name, and with
    beta = 0 its old contents (NaN here) are ignored; views of one flat buffer, as the grid
    trainer passes them."""
    from lazylab.models.stacked import Into

    net = _learners()[arch]()
    G = 3
    base = {n: v.detach() for n, v in {**dict(net.named_parameters()),
                                       **dict(net.named_buffers())}.items()}
    params = {n: v + 0.3 * torch.randn(G, *v.shape, generator=gen(41), dtype=F64)
              for n, v in base.items()}
    X = torch.randn(9, 7, generator=gen(42), dtype=F64)
    Y = torch.randn(9, 3, generator=gen(43), dtype=F64)

    def grads(into=None):
        kw = {} if into is None else {"into": into}
        if ntk:
            return net.stacked_ntk_grads(params, base, X, Y, **kw)
        return net.stacked_grads(params, X, Y, **kw)

    fresh, loss = grads()
    names = [n for n, _ in net.named_parameters()]
    sizes = [fresh[n][0].numel() for n in names]
    flat = (torch.full((G, sum(sizes)), math.nan, dtype=F64) if beta == 0.0
            else torch.randn(G, sum(sizes), generator=gen(44), dtype=F64))
    old = flat.clone()
    views = dict(zip(names, (t.view(G, *fresh[n].shape[1:]) for n, t in
                             zip(names, flat.split(sizes, dim=1), strict=True)), strict=True))
    out, loss2 = grads(Into(views, beta))
    assert torch.equal(loss, loss2)
    off = 0
    for n, k in zip(names, sizes, strict=True):
        assert out[n] is views[n]
        want = fresh[n].reshape(G, -1) + (beta * old[:, off:off + k] if beta else 0.0)
        assert torch.allclose(flat[:, off:off + k], want, atol=1e-12, rtol=0), (arch, n)
        off += k


@pytest.mark.parametrize("arch,trainable,linearize", [
    ("3resnet", "all", False), ("3resnet", "hidden", False), ("3resnet-untied", "last", False),
    ("3layer", "all", False), ("3layer", "first", False), ("2layer", "all", False),
    ("3resnet", "all", True), ("3resnet-untied", "all", True), ("3resnet-full", "all", True),
    ("3layer", "all", True), ("2layer", "first", True)])
def test_stacked_grid_equals_the_vmap_grid(arch, trainable, linearize, monkeypatch):
    """train_grid through the hand-written stacked gradients = through vmap(grad) (and
    vmap(grad(jvp)) for the "(NTK)" mode), float64, to 1e-10, a diverging step size included
    (the same configurations drop out)."""
    from lazylab.train.ensemble import STACKED_ENV

    net = _learners()[arch]()
    X = torch.randn(30, 7, generator=gen(35), dtype=F64)
    Y = torch.randn(30, 3, generator=gen(36), dtype=F64)
    names = [n for n, p in net.named_parameters()
             if any(p is q for q in net.param_groups()[trainable])]
    runs = []
    for flag in ("1", "0"):
        monkeypatch.setenv(STACKED_ENV, flag)
        runs.append(train_grid(net, X, Y, lrs=[0.02, 0.1, 1e4], wds=[0.0, 1e-2],
                               trainable=names, epochs=4, batch_size=10, linearize=linearize,
                               generator=gen(37)))
    fast, ref = runs
    for n in names:
        a, b = fast.params[n].flatten(1), ref.params[n].flatten(1)
        assert torch.equal(a.isnan(), b.isnan()), n
        # A run that grows without overflowing (to 1e31 within 4 epochs, "hidden") agrees
        # relative to its own scale.
        scale = b.nan_to_num().abs().amax(1, keepdim=True)
        assert bool(((a - b).nan_to_num().abs() <= 1e-10 + 1e-13 * scale).all()), n
    assert torch.equal(fast.train_loss.isnan(), ref.train_loss.isnan())
    assert bool(fast.train_loss[:, 0].isfinite().all())
    sane = torch.tensor([lr < 1 for lr, _ in ref.configs])
    assert torch.allclose(fast.train_loss[sane], ref.train_loss[sane], atol=1e-10, rtol=0)


@pytest.mark.parametrize("arch,linearize", [("3resnet", False), ("3resnet", True),
                                           ("3resnet-untied", True), ("3resnet-full", True),
                                           ("3layer", True), ("2layer", False)])
def test_stacked_predictions_equal_the_vmap_predictions(arch, linearize, monkeypatch):
    """GridRun.predict through the hand-written stacked forward (the Taylor model's for the
    "(NTK)" mode) = vmap of the module's forward (of its jvp), float64, to 1e-12, a diverged
    configuration's NaN rows included."""
    from lazylab.train.ensemble import STACKED_ENV

    net = _learners()[arch]()
    X = torch.randn(30, 7, generator=gen(41), dtype=F64)
    Y = torch.randn(30, 3, generator=gen(42), dtype=F64)
    run = train_grid(net, X, Y, lrs=[0.05, 1e4], wds=[0.0, 1e-2], epochs=3, batch_size=10,
                     linearize=linearize, generator=gen(43))
    Xt = torch.randn(17, 7, generator=gen(44), dtype=F64)
    fast = run.predict(Xt)
    monkeypatch.setenv(STACKED_ENV, "0")
    ref = run.predict(Xt)
    assert fast.shape == ref.shape == (4, 17, 3)
    assert torch.equal(fast.isnan(), ref.isnan())
    assert torch.allclose(fast.nan_to_num(), ref.nan_to_num(), atol=1e-12, rtol=1e-12)


def test_diverged_configurations_drop_out_and_the_rest_are_unchanged():
    """A step size that overflows in the first epochs is left out from then on (NaN
    parameters, NaN losses, infinite error); the others equal their runs alone to 1e-10."""
    net = MLP2(6, 2, 16, generator=gen(21), dtype=F64)
    X = torch.randn(40, 6, generator=gen(22), dtype=F64)
    Y = torch.randn(40, 2, generator=gen(23), dtype=F64)
    res = train_grid(net, X, Y, lrs=[0.01, 1e4], wds=[0.0, 1e-2], epochs=6, batch_size=10,
                     generator=gen(24))
    errs = res.errors(X, Y)
    diverged = [gi for gi, (lr, _) in enumerate(res.configs) if lr == 1e4]
    for gi, (lr, wd) in enumerate(res.configs):
        if gi in diverged:
            assert math.isinf(float(errs[gi]))
            assert all(bool(t[gi].isnan().all()) for t in res.params.values())
            assert bool(res.train_loss[gi, -1].isnan())
            continue
        one = train_grid(net, X, Y, lrs=[lr], wds=[wd], epochs=6, batch_size=10,
                         generator=gen(24))
        for n in res.params:
            assert torch.allclose(res.params[n][gi], one.params[n][0], atol=1e-10, rtol=0)
    assert len(diverged) == 2


def test_linearized_training_matches_its_taylor_model():
    """NTK mode: the trained function is f(theta0) + J(theta0)(theta - theta0) exactly."""
    net = MLP2(4, 2, 10, generator=gen(15), dtype=F64)
    X = torch.randn(30, 4, generator=gen(16), dtype=F64)
    Y = torch.randn(30, 2, generator=gen(17), dtype=F64)
    res = train_grid(net, X, Y, lrs=[0.05], wds=[0.0], epochs=3, batch_size=10,
                     linearize=True, generator=gen(18))
    theta = {n: res.params[n][0] for n in res.params}
    theta0 = dict(net.named_parameters())
    J = torch.func.jacrev(lambda p: torch.func.functional_call(net, p, (X,)))(
        {n: t.detach() for n, t in theta0.items()})
    lin = net(X).detach() + sum((J[n].reshape(30, 2, -1) @ (theta[n] - theta0[n].detach())
                                 .reshape(-1)) for n in theta)
    assert torch.allclose(res.predict(X)[0], lin, atol=1e-10)


def test_grid_helpers():
    assert decade_grid(-1, 0) == [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
    assert best_index(torch.tensor([float("nan"), 3.0, float("inf"), 1.0])) == 3
    assert best_index(torch.tensor([float("nan")])) == -1
    assert list(itertools.chain(decade_grid(-3, -3, (1,)))) == [0.001]


def test_grid_predict_chunks_rows_by_memory(monkeypatch):
    """GridRun.predict splits X so that one activation of every configuration stays within
    ACTIVATION_ELEMENTS (the paper's m = 10^4 grid needed 15 GB a tensor at once); the
    outputs equal the unchunked ones row for row."""
    from lazylab.train import ensemble

    g = torch.Generator().manual_seed(0)
    net = MLP2(5, 2, 16, generator=g, dtype=torch.float64)
    X = torch.randn(40, 5, generator=g, dtype=torch.float64)
    run = train_grid(net, X, X[:, :2] ** 2, lrs=[0.01, 0.1], wds=[0.0, 0.1], epochs=2,
                     batch_size=10, generator=torch.Generator().manual_seed(1))
    whole = run.predict(X)
    calls = []
    real = torch.cat
    monkeypatch.setattr(ensemble, "ACTIVATION_ELEMENTS", 4 * 16 * 7)  # 7 rows of 4 configs
    monkeypatch.setattr(torch, "cat", lambda xs, **kw: calls.append(len(xs)) or real(xs, **kw))
    chunked = run.predict(X)
    assert calls == [6]  # ceil(40 / 7)
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-12)


def test_characters_of_mixed_set_sizes_equal_their_products(monkeypatch):
    """_chi gathers the sets of one size together: the same numbers as set by set, on
    non-+-1 inputs too (so the order of each product matters), with the empty set as 1."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(40, 7, generator=g, dtype=torch.float64)
    sets = [(2,), (0, 5), (), (1, 3, 6), (4,), (6, 0), (0, 1, 2, 3)]
    want = torch.stack([X[:, list(s)].prod(dim=1) for s in sets], dim=1)
    assert torch.equal(_chi(X, sets), want)
    monkeypatch.setattr(walsh, "_CHI_SETS", 1)      # one set a gather: the chunked path
    assert torch.equal(_chi(X, sets), want)
