"""The empirical NTK of any ``torch.nn.Module`` as an implicit matrix: products, never formed.

For a network with scalar output f(x; theta) and Jacobian J = d f(X) / d theta (n x P) at the
current parameters, the empirical NTK is K = J J^T (Jacot et al. 2018). Its product with a
vector needs neither K (n^2 entries) nor J (n P entries):

    K v = J (J^T v):   J^T v by one vector-Jacobian product (reverse mode, the gradient of
                       v . f(X)), then J u by one Jacobian-vector product (forward mode),

so memory is that of one forward and backward pass over a chunk of rows (O(chunk x width)
activations plus P for u), and time about three passes over X per product (the "NTK-vector
products" of the torch.func tutorial on neural tangent kernels, here chunked over rows and
for many columns). The cross products K(Z, X) a = J_Z (J_X^T a) give predictions, so kernel
regression on the implicit kernel is conjugate gradients on :meth:`NTKOperator.matmul`
(:func:`lazylab.solve.operator_regression`).

Example
-------
>>> import torch
>>> from lazylab.kernels import empirical_ntk
>>> g = torch.Generator().manual_seed(0)
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.Tanh(),
...                           torch.nn.Linear(32, 1)).double()
>>> X = torch.randn(6, 3, generator=g, dtype=torch.float64)
>>> v = torch.randn(6, generator=g, dtype=torch.float64)
>>> op = NTKOperator(net, X, trained="all")
>>> K = empirical_ntk(net, X, trained="all")
>>> bool(torch.allclose(op.matmul(v), K @ v, atol=1e-12))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call, jvp, vjp

from lazylab.kernels._module_checks import check_chunk, check_deterministic, check_tensor_output


class NTKOperator:
    """K = J J^T of ``net`` at inputs ``X`` (n rows), by products only (module docstring).

    Parameters
    ----------
    net : a module whose output on a batch of n inputs is one tensor of n entries ((n,) or
        (n, 1)), deterministic: dropout, batch normalization and RReLU must be in eval mode
        (:func:`lazylab.kernels._module_checks.check_deterministic`).
    X : (n, ...) inputs, n >= 1; cast to the dtype and device of the net's parameters, as
        :func:`lazylab.kernels.empirical_ntk` does.
    trained : the parameters differentiated: a group name (``"all"``, ``"first"``, ...,
        :mod:`lazylab.models.groups`) or a list of parameter names, as for
        :func:`lazylab.kernels.empirical_ntk`.
    chunk : rows per forward/backward pass, a positive integer (default None: all; lower it
        when the activations of n rows do not fit in memory).

    Attributes
    ----------
    n, device, dtype : the size of K and where products are computed.
    """

    def __init__(self, net: nn.Module, X: torch.Tensor, *, trained: str | Sequence[str] = "all",
                 chunk: int | None = None):
        from lazylab.kernels.empirical import trained_names

        if not isinstance(net, nn.Module):
            raise ValueError(f"net must be a torch.nn.Module; got {type(net).__name__}")
        check_deterministic(net, "NTKOperator")
        step = check_chunk(chunk)
        self.net = net
        self.names = trained_names(net, trained)
        tensors = dict(net.named_parameters()) | dict(net.named_buffers())
        self._all = {k: v.detach() for k, v in tensors.items()}
        self._theta = tuple(self._all[k] for k in self.names)
        self.device, self.dtype = self._theta[0].device, self._theta[0].dtype
        self.X = self._inputs(X, "X")
        self.n = int(self.X.shape[0])
        self.chunk = self.n if step is None else step
        out = check_tensor_output(
            functional_call(net, self._all, (self.X[:1],)), "NTKOperator").reshape(-1)
        if out.numel() != 1:
            raise ValueError(f"NTKOperator needs one output per input; net gives "
                             f"{tuple(out.shape)} for one input (flatten or pick an output)")

    def _inputs(self, T: Any, name: str) -> torch.Tensor:
        """``T`` checked (a floating-point tensor with at least one row, rows shaped like X's)
        and cast to the net's dtype and device."""
        if not isinstance(T, torch.Tensor) or T.ndim < 1 or not T.is_floating_point():
            raise ValueError(f"{name} must be a floating-point torch tensor with examples along "
                             f"dim 0; got {getattr(T, 'shape', type(T).__name__)}")
        if T.shape[0] == 0:
            raise ValueError(f"{name} must have at least one row; got shape {tuple(T.shape)}")
        if name != "X" and T.shape[1:] != self.X.shape[1:]:
            raise ValueError(f"{name} must have the per-example shape of X "
                             f"{tuple(self.X.shape[1:])}; got {tuple(T.shape[1:])}")
        return T.to(device=self.device, dtype=self.dtype)

    def _f(self, theta: tuple[torch.Tensor, ...], X: torch.Tensor) -> torch.Tensor:
        params = {**self._all, **dict(zip(self.names, theta, strict=True))}
        return functional_call(self.net, params, (X,)).reshape(-1)

    def _jt(self, X: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """J_X^T v, summed over row chunks (one tensor per trained parameter)."""
        acc: list[torch.Tensor] | None = None
        for i in range(0, len(X), self.chunk):
            # Without has_aux, vjp returns a pair (its annotation also admits the triple).
            _, pull = cast(tuple[Any, Callable[..., Any]],
                           vjp(lambda *t, i=i: self._f(t, X[i:i + self.chunk]), *self._theta))
            parts = pull(v[i:i + self.chunk].to(self.dtype))
            acc = list(parts) if acc is None else [a + p for a, p in zip(acc, parts, strict=True)]
        assert acc is not None
        return tuple(acc)

    def _j(self, X: torch.Tensor, u: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """J_X u, row chunk by row chunk."""
        return torch.cat([jvp(lambda *t, i=i: self._f(t, X[i:i + self.chunk]), self._theta,
                              u)[1] for i in range(0, len(X), self.chunk)])

    def _columns(self, V: torch.Tensor, fn) -> torch.Tensor:
        if V.dim() == 1:
            return fn(V)
        return torch.stack([fn(V[:, j]) for j in range(V.shape[1])], dim=1)

    @torch.no_grad()
    def matmul(self, V: torch.Tensor) -> torch.Tensor:
        """K V for V of shape (n,) or (n, k)."""
        if V.shape[0] != self.n:
            raise ValueError(f"V must have {self.n} rows; got shape {tuple(V.shape)}")
        return self._columns(V, lambda v: self._j(self.X, self._jt(self.X, v)))

    @torch.no_grad()
    def cross(self, Z: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """K(Z, X) alpha = J_Z (J_X^T alpha), for alpha of shape (n,) or (n, k); Z is cast
        like X."""
        Zc = self._inputs(Z, "Z")
        if alpha.shape[0] != self.n:
            raise ValueError(f"alpha must have {self.n} rows; got shape {tuple(alpha.shape)}")
        return self._columns(alpha, lambda a: self._j(Zc, self._jt(self.X, a)))

    def __matmul__(self, V: torch.Tensor) -> torch.Tensor:
        return self.matmul(V)
