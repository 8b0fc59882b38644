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

__all__ = ["NTKOperator"]


class NTKOperator:
    """K = J J^T of ``net`` at inputs ``X`` (n rows), by products only (module docstring).

    Parameters
    ----------
    net : a module whose output on a batch of n inputs has n entries ((n,) or (n, 1)).
    X : (n, ...) inputs.
    trained : the parameters differentiated: a group name (``"all"``, ``"first"``, ...,
        :mod:`lazylab.models.groups`) or a list of parameter names, as for
        :func:`lazylab.kernels.empirical_ntk`.
    chunk : rows per forward/backward pass (default: all; lower it when the activations of n
        rows do not fit in memory).

    Attributes
    ----------
    n, device, dtype : the size of K and where products are computed.
    """

    def __init__(self, net: nn.Module, X: torch.Tensor, *, trained: str | Sequence[str] = "all",
                 chunk: int | None = None):
        from lazylab.kernels.empirical import trained_names

        self.net, self.X = net, X
        self.names = trained_names(net, trained)
        tensors = dict(net.named_parameters()) | dict(net.named_buffers())
        self._all = {k: v.detach() for k, v in tensors.items()}
        self._theta = tuple(self._all[k] for k in self.names)
        self.n = int(X.shape[0])
        self.chunk = self.n if chunk is None else max(1, int(chunk))
        self.device, self.dtype = X.device, self._theta[0].dtype
        out = self._f(self._theta, X[:1])
        if out.numel() != 1:
            raise ValueError(f"NTKOperator needs one output per input; net gives "
                             f"{tuple(out.shape)} for one input (flatten or pick an output)")

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
        """K(Z, X) alpha = J_Z (J_X^T alpha), for alpha of shape (n,) or (n, k)."""
        return self._columns(alpha, lambda a: self._j(Z, self._jt(self.X, a)))

    def __matmul__(self, V: torch.Tensor) -> torch.Tensor:
        return self.matmul(V)
