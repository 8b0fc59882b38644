"""The three empirical-NTK methods (Jacobian contraction, NTK-vector products, structured
derivatives) and "auto": exact agreement on many architectures, outputs, blocks, refusals."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lazylab.kernels import empirical_ntk
from lazylab.models import TwoLayerNet

F64 = torch.float64
METHODS = ("jacobian", "ntvp", "structured", "auto")


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _init(net: nn.Module, seed: int) -> nn.Module:
    """Deterministic float64 parameters drawn from a local generator (not the global RNG)."""
    net = net.double()
    g = gen(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64) * 0.5)
    return net


class _Block(nn.Module):
    """x + conv(relu(LayerNorm-over-channels(x))): a residual block with a LayerNorm."""

    def __init__(self, c: int, hw: int):
        super().__init__()
        self.norm = nn.LayerNorm([c, hw, hw])
        self.conv = nn.Conv2d(c, c, 3, padding=1, groups=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(torch.relu(self.norm(x)))


def _resnet() -> nn.Module:
    return nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), _Block(4, 4), _Block(4, 4),
                         nn.Flatten(), nn.Linear(64, 3))


class _Tied(nn.Module):
    """The same Linear applied twice, and an output layer tied to the input layer's weight
    (transposed use outside the owning module: the whole-network Jacobian route)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 6)
        self.mid = nn.Linear(6, 6)
        self.scale = nn.Parameter(torch.ones(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.inp(x))
        h = torch.tanh(self.mid(h))
        h = torch.tanh(self.mid(h)) * self.scale
        return F.linear(h, self.inp.weight.T)  # (b, 4): tied to the input weight


class _TiedModules(nn.Module):
    """Two distinct Linear modules sharing one weight tensor (structured route with cross
    terms between the two uses)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(5, 5)
        self.b = nn.Linear(5, 5)
        self.b.weight = self.a.weight
        self.out = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.b(torch.sin(self.a(x)))))


def _frozen() -> nn.Module:
    net = _init(nn.Sequential(nn.Linear(3, 8), nn.Softplus(), nn.Linear(8, 8), nn.Tanh(),
                              nn.Linear(8, 2)), 7)
    net[2].weight.requires_grad_(False)
    net[0].bias.requires_grad_(False)
    return net


def _models() -> dict[str, tuple[nn.Module, torch.Tensor, torch.Tensor]]:
    g = gen(1)
    mlp = _init(nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 12), nn.GELU(),
                              nn.Linear(12, 3)), 2)
    cnn = _init(nn.Sequential(nn.Conv2d(3, 6, 3, stride=2, padding=1), nn.ReLU(),
                              nn.Conv2d(6, 6, (3, 2), stride=(1, 2), padding=(1, 0),
                                        groups=3), nn.Tanh(),
                              nn.Conv2d(6, 4, 3, padding="same", dilation=2), nn.Flatten(),
                              nn.Linear(4 * 5 * 2, 2)), 3)
    cnn1 = _init(nn.Sequential(nn.Conv1d(2, 4, 3, stride=2, dilation=2, padding=2), nn.ReLU(),
                               nn.Conv1d(4, 4, 3, groups=2), nn.Flatten(), nn.Linear(20, 1)), 4)
    return {
        "mlp": (mlp, torch.randn(7, 5, generator=g, dtype=F64),
                torch.randn(4, 5, generator=g, dtype=F64)),
        "cnn2d": (cnn, torch.randn(5, 3, 9, 9, generator=g, dtype=F64),
                  torch.randn(3, 3, 9, 9, generator=g, dtype=F64)),
        "cnn1d": (cnn1, torch.randn(5, 2, 13, generator=g, dtype=F64),
                  torch.randn(2, 2, 13, generator=g, dtype=F64)),
        "resnet_layernorm": (_init(_resnet(), 5), torch.randn(5, 2, 8, 8, generator=g,
                                                               dtype=F64),
                             torch.randn(3, 2, 8, 8, generator=g, dtype=F64)),
        "tied": (_init(_Tied(), 6), torch.randn(6, 4, generator=g, dtype=F64),
                 torch.randn(3, 4, generator=g, dtype=F64)),
        "tied_modules": (_init(_TiedModules(), 8), torch.randn(6, 5, generator=g, dtype=F64),
                         torch.randn(3, 5, generator=g, dtype=F64)),
        "frozen": (_frozen(), torch.randn(6, 3, generator=g, dtype=F64),
                   torch.randn(2, 3, generator=g, dtype=F64)),
    }


MODELS = _models()


def _per_example_grads(net: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """Reference Jacobian by plain autograd, one example and output at a time, over the
    trainable parameters (each tied tensor once: net.parameters() deduplicates)."""
    ps = [p for p in net.parameters() if p.requires_grad]
    rows = []
    for x in X:
        out = net(x.unsqueeze(0)).reshape(-1)
        rows.append(torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
            o, ps, retain_graph=True)]) for o in out]))
    return torch.stack(rows)  # (n, O, P)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_method_equals_plain_autograd(name: str) -> None:
    net, X, Z = MODELS[name]
    JX, JZ = _per_example_grads(net, X), _per_example_grads(net, Z)
    for B, JB in ((None, JX), (Z, JZ)):
        ref = torch.einsum("iaf,jbf->ijab", JX, JB)
        for method in METHODS:
            K = empirical_ntk(net, X, B, method=method, output="full")
            assert K.shape == ref.shape
            torch.testing.assert_close(K, ref, rtol=1e-10, atol=1e-10,
                                       msg=lambda m, method=method: f"{method}: {m}")


def test_routes_cover_structured_local_and_whole_network_jacobian() -> None:
    _, info = empirical_ntk(MODELS["tied"][0], MODELS["tied"][1], method="structured",
                            return_info=True)
    # inp.weight is also used outside inp's forward (the tied output layer); scale belongs
    # to the root module itself (its local VJP is the whole network's)
    assert info.routes == {"inp.weight": "jacobian", "inp.bias": "structured",
                           "mid.weight": "structured", "mid.bias": "structured",
                           "scale": "local"}
    _, info = empirical_ntk(MODELS["resnet_layernorm"][0], MODELS["resnet_layernorm"][1],
                            method="structured", return_info=True)
    assert info.routes["1.norm.weight"] == "local" and info.routes["1.conv.weight"] == \
        "structured"
    frozen = MODELS["frozen"][0]
    _, info = empirical_ntk(frozen, MODELS["frozen"][1], method="structured",
                            return_info=True)
    assert sorted(info.routes) == ["0.weight", "2.bias", "4.bias", "4.weight"]
    # buffers (BatchNorm running statistics) are not trained unless named
    bn = _init(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 1)), 18).eval()
    _, info = empirical_ntk(bn, MODELS["frozen"][1], method="structured", return_info=True)
    assert sorted(info.routes) == ["0.bias", "0.weight", "1.bias", "1.weight", "2.bias",
                                   "2.weight"]


@pytest.mark.parametrize("method", METHODS)
def test_outputs_trace_and_one_output(method: str) -> None:
    net, X, Z = MODELS["mlp"]
    full = empirical_ntk(net, X, Z, method="jacobian", output="full")
    tr = empirical_ntk(net, X, Z, method=method, output="trace")
    torch.testing.assert_close(tr, torch.diagonal(full, dim1=2, dim2=3).sum(-1), rtol=1e-10,
                               atol=1e-10)
    one = empirical_ntk(net, X, Z, method=method, output=2)
    torch.testing.assert_close(one, full[:, :, 2, 2], rtol=1e-10, atol=1e-10)
    sym = empirical_ntk(net, X, method="jacobian", output="full")
    torch.testing.assert_close(empirical_ntk(net, X, method=method, output="trace", chunk=3),
                               torch.diagonal(sym, dim1=2, dim2=3).sum(-1), rtol=1e-10,
                               atol=1e-10)  # blocks below the diagonal by transposition
    assert empirical_ntk(net, X, method=method).shape == (7, 7, 3, 3)  # default: full
    with pytest.raises(ValueError, match="output"):
        empirical_ntk(net, X, method=method, output=3)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_blocks_with_an_uneven_last_block_equal_one_block(method: str, chunk: int) -> None:
    net, X, Z = MODELS["resnet_layernorm"]
    for B in (None, Z):
        ref = empirical_ntk(net, X, B, method="jacobian", output="full")
        K, info = empirical_ntk(net, X, B, method=method, output="full", chunk=chunk,
                                return_info=True)
        assert info.rows == chunk  # 5 rows: blocks of 3 + 2 or 4 + 1
        torch.testing.assert_close(K, ref, rtol=1e-10, atol=1e-10)
    # the same through the element budget instead of an explicit chunk
    torch.testing.assert_close(empirical_ntk(net, X, Z, method=method, chunk_elems=1),
                               empirical_ntk(net, X, Z, method="jacobian"), rtol=1e-10,
                               atol=1e-10)


def test_tiny_memory_budget_is_refused_before_compute() -> None:
    net, X, _ = MODELS["mlp"]
    calls = []
    hook = net[0].register_forward_hook(lambda *a: calls.append(1))
    try:
        _, info = empirical_ntk(net, X, method="jacobian", return_info=True)
        calls.clear()
        need = info.min_bytes["jacobian"]
        with pytest.raises(ValueError, match=r"max_bytes=.* too small: method='jacobian' "
                                             r"needs at least \d+ bytes"):
            empirical_ntk(net, X, method="jacobian", max_bytes=need - 1)
        # only the two probe passes (output shape; parameter uses and flop), no block
        assert len(calls) == 2
        with pytest.raises(ValueError, match="every method"):
            empirical_ntk(net, X, max_bytes=16)
    finally:
        hook.remove()
    K, info = empirical_ntk(net, X, method="jacobian", max_bytes=need, return_info=True)
    assert info.rows == 1
    torch.testing.assert_close(K, empirical_ntk(net, X, method="ntvp"), rtol=1e-10,
                               atol=1e-10)


def test_auto_reports_its_choice_and_picks_structured_for_a_wide_mlp() -> None:
    net = _init(nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 4)), 9)
    X = torch.randn(8, 16, generator=gen(10), dtype=F64)
    K, info = empirical_ntk(net, X, return_info=True)
    assert info.method == "structured"
    assert info.estimates["structured"] < info.estimates["jacobian"]
    torch.testing.assert_close(K, empirical_ntk(net, X, method="jacobian"), rtol=1e-10,
                               atol=1e-10)


def test_two_layer_net_keeps_its_closed_form_and_takes_every_output_mode(caplog) -> None:
    net = TwoLayerNet(3, 32, train_second=True, bias=True, generator=gen(19), dtype=F64)
    X = torch.randn(5, 3, generator=gen(20), dtype=F64)
    K, info = empirical_ntk(net, X, trained="both", return_info=True)
    assert info.routes == {"W": "closed form", "a": "closed form", "c": "closed form"}
    assert torch.equal(empirical_ntk(net, X, trained="both", output="full"), K[:, :, None, None])
    assert torch.equal(empirical_ntk(net, X, trained="both", output="trace"), K)
    assert torch.equal(empirical_ntk(net, X, trained="both", output=0), K)
    for method in ("jacobian", "ntvp"):  # "structured" is the closed form itself
        torch.testing.assert_close(empirical_ntk(net, X, trained="both", method=method), K,
                                   rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="output"):
        empirical_ntk(net, X, output=1)
    seq = _init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), 21)
    with caplog.at_level("DEBUG", logger="lazylab.kernels.entk_methods"):
        _, info = empirical_ntk(seq, X, return_info=True)
    assert f"method='auto' chose {info.method!r}" in caplog.text


def test_default_trained_is_w_for_a_two_layer_net_and_all_for_any_module() -> None:
    net = TwoLayerNet(3, 16, train_second=True, generator=gen(11), dtype=F64)
    X = torch.randn(4, 3, generator=gen(12), dtype=F64)
    assert torch.equal(empirical_ntk(net, X), empirical_ntk(net, X, trained="first"))
    seq = _init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)), 13)
    torch.testing.assert_close(empirical_ntk(seq, X), empirical_ntk(seq, X, trained="all"),
                               rtol=0, atol=0)
    # a subset by name; an alias of a tied parameter counts once
    part = empirical_ntk(seq, X, trained=["2.weight"])
    ref = torch.tanh(seq[0](X)) @ torch.tanh(seq[0](X)).T
    torch.testing.assert_close(part, ref.detach(), rtol=1e-12, atol=1e-12)
    # by module and by tensor
    torch.testing.assert_close(empirical_ntk(seq, X, trained=[seq[2]]),
                               empirical_ntk(seq, X, trained=["2.weight", "2.bias"]),
                               rtol=0, atol=0)
    torch.testing.assert_close(empirical_ntk(seq, X, trained=[seq[2].weight]), part,
                               rtol=0, atol=0)
    with pytest.raises(ValueError, match="trained must name parameters"):
        empirical_ntk(seq, X, trained=[nn.Linear(2, 2)])
    tied = MODELS["tied_modules"][0]
    Xt = MODELS["tied_modules"][1]
    torch.testing.assert_close(empirical_ntk(tied, Xt, trained=["a.weight", "b.weight"]),
                               empirical_ntk(tied, Xt, trained=["a.weight"]), rtol=0, atol=0)


def test_train_mode_randomness_is_refused_and_eval_mode_accepted() -> None:
    X = torch.randn(4, 3, generator=gen(14), dtype=F64)
    for layer in (nn.Dropout(0.1), nn.BatchNorm1d(6)):
        net = _init(nn.Sequential(nn.Linear(3, 6), layer, nn.Linear(6, 1)), 15)
        with pytest.raises(ValueError, match=r"training mode .* call net\.eval\(\)"):
            empirical_ntk(net, X)
        net.eval()
        ref = empirical_ntk(net, X, method="jacobian")
        for method in ("ntvp", "structured", "auto"):
            torch.testing.assert_close(empirical_ntk(net, X, method=method), ref, rtol=1e-10,
                                       atol=1e-10)
    bn = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6, track_running_stats=False)).eval()
    with pytest.raises(ValueError, match="batch statistics"):
        empirical_ntk(bn.double(), X)


class _TupleNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.lin(x), x


def test_bad_inputs_name_the_parameter() -> None:
    X = torch.randn(4, 3, generator=gen(16), dtype=F64)
    with pytest.raises(ValueError, match="return one floating-point tensor; it returned a "
                                         "tuple"):
        empirical_ntk(_TupleNet().double(), X)
    net = _init(nn.Sequential(nn.Linear(3, 2)), 17)
    with pytest.raises(ValueError, match="X must have at least one example"):
        empirical_ntk(net, X[:0])
    with pytest.raises(ValueError, match="Z must have at least one example"):
        empirical_ntk(net, X, X[:0])
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="chunk must be a positive integer"):
            empirical_ntk(net, X, chunk=bad)
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        empirical_ntk(net, X, max_bytes=0)
    with pytest.raises(ValueError, match="method"):
        empirical_ntk(net, X, method="fastest")
    with pytest.raises(ValueError, match="net must be a torch.nn.Module"):
        empirical_ntk(lambda x: x, X)  # type: ignore[arg-type]
