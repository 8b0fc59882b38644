"""The empirical NTK of a module as a kernel object (the :class:`~lazylab.kernels.protocol.Kernel`
protocol), so that kernel regression and the estimators take it like a closed form.

``EmpiricalKernel(net)(X, Z)`` is ``empirical_ntk(net, X, Z, ...)`` at the network's current
parameters: Theta(x, z) = sum_p df(x)/dtheta_p df(z)/dtheta_p (Jacot et al. 2018), computed by
the cheapest exact method (:func:`lazylab.kernels.empirical_ntk`, ``method="auto"``). A network
with several outputs gives one scalar kernel per pair of inputs: the trace over outputs
(``output="trace"``, the default then) or one output's kernel (``output=o``).

Example
-------
>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
>>> net = net.double()
>>> K = EmpiricalKernel(net)
>>> X = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
>>> bool(torch.allclose(K.diag(X), K(X).diagonal(), rtol=1e-12, atol=0))
True
"""

from __future__ import annotations

import torch
from torch import nn

from lazylab.kernels.empirical import TrainedSpec, empirical_ntk


class EmpiricalKernel:
    """The empirical NTK of ``net`` as a kernel object.

    Parameters
    ----------
    net : torch.nn.Module
        The network, in eval mode where it has dropout or batch normalization (refused in
        training mode by :func:`~lazylab.kernels.empirical_ntk`).
    trained : str, sequence of names, modules or tensors, or None
        The parameters differentiated (``empirical_ntk``'s ``trained``; None: all).
    method : str
        ``"auto"`` (the cheapest exact method), ``"jacobian"``, ``"ntvp"`` or ``"structured"``.
    output : int, "trace" or None
        For a network with several outputs: one output's kernel or the trace over outputs
        (None: the network must have one output, else the trace).
    block : int
        Rows per diagonal block of :meth:`diag` (O(n block) work instead of O(n^2)).
    """

    def __init__(self, net: nn.Module, *, trained: TrainedSpec = None,
                 method: str = "auto", output: int | str | None = None, block: int = 64):
        if not isinstance(net, nn.Module):
            raise ValueError(f"net must be a torch.nn.Module; got {type(net).__name__}")
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise ValueError(f"block must be a positive integer; got {block!r}")
        self.net, self.trained, self.method, self.output = net, trained, method, output
        self.block = block
        first = next(net.parameters(), None)
        self.device = first.device if first is not None else None
        self.dtype = first.dtype if first is not None else None

    def __repr__(self) -> str:
        return f"EmpiricalKernel({type(self.net).__name__}, method={self.method!r})"

    def __call__(self, X: torch.Tensor, Z: torch.Tensor | None = None) -> torch.Tensor:
        K = empirical_ntk(self.net, X, Z, trained=self.trained, method=self.method,
                          output=self.output)
        if K.dim() == 4:  # several outputs and no selection: their trace
            K = K.diagonal(dim1=2, dim2=3).sum(-1)
        return K

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        out = [self(X[i:i + self.block]).diagonal() for i in range(0, X.shape[0], self.block)]
        return torch.cat(out) if out else torch.zeros(0, dtype=self.dtype, device=self.device)
