"""One shape for every kernel: the :class:`Kernel` protocol and the registry of named kernels.

A kernel is any object with

* ``K(X, Z=None)`` -> the (n, n') matrix k(x_i, z_j) (Z = X when None, then symmetric),
* ``K.diag(X)`` -> its diagonal k(x_i, x_i), (n,),
* ``K.device`` and ``K.dtype``: where and in which precision it computes (None: the inputs').

:class:`lazylab.kernels.deep.DeepKernel` is one; the two-layer closed forms of
:mod:`lazylab.kernels` and the Gaussian kernel are :class:`ClosedFormKernel` instances, made by
name with :func:`kernel_object`. :func:`lazylab.solve.kernel_regression` and
:class:`lazylab.estimators.KernelRegressor` take a name or any such object.

Example
-------
>>> import torch
>>> K = kernel_object("ntk", trained="both")
>>> isinstance(K, Kernel)
True
>>> X = torch.eye(2, dtype=torch.float64)
>>> bool(torch.equal(K.diag(X), K(X).diagonal()))
True
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol, runtime_checkable

import torch

from lazylab.kernels.closed_form import nngp, ntk
from lazylab.kernels.gaussian import gaussian_kernel

#: The members a kernel object must have (named in the refusal of one that lacks any).
PROTOCOL_MEMBERS = ("__call__(X, Z=None)", "diag(X)", "device", "dtype")


@runtime_checkable
class Kernel(Protocol):
    """A kernel k: ``K(X, Z=None)`` (n, n'), ``K.diag(X)`` (n,), ``K.device``, ``K.dtype``.

    ``isinstance(obj, Kernel)`` checks that the four members exist (not their signatures).
    """

    device: torch.device | None
    dtype: torch.dtype | None

    def __call__(self, X: torch.Tensor, Z: torch.Tensor | None = None) -> torch.Tensor: ...

    def diag(self, X: torch.Tensor) -> torch.Tensor: ...


class ClosedFormKernel:
    """A kernel from a function (X, Z or None) -> K(X, Z) that follows its inputs' device and
    dtype (``device`` and ``dtype`` are None).

    ``K(X, Z)`` is the function's value, unchanged (so the named kernels give the same bits as
    the functions of :mod:`lazylab.kernels`); ``diag(X)`` is the diagonal of the function on
    row blocks of ``block`` rows (the same numbers as ``K(X).diagonal()`` wherever the function
    computes each entry from its own pair of rows alone, as the closed forms do).
    """

    device: torch.device | None = None
    dtype: torch.dtype | None = None

    def __init__(self, name: str, fn: Callable[..., torch.Tensor], *, block: int = 256):
        self.name = name
        self.fn = fn
        self.block = int(block)

    def __repr__(self) -> str:
        return f"ClosedFormKernel({self.name!r})"

    def __call__(self, X: torch.Tensor, Z: torch.Tensor | None = None) -> torch.Tensor:
        return self.fn(X, Z)

    def diag(self, X: torch.Tensor) -> torch.Tensor:
        # b x b blocks along the diagonal: O(n b) work and memory instead of the n x n matrix
        out = [self.fn(X[i:i + self.block], None).diagonal()
               for i in range(0, X.shape[0], self.block)]
        return torch.cat(out) if out else X.new_zeros(0)


def _ntk(*, activation: str = "relu", trained: str = "first", **_: object) -> ClosedFormKernel:
    return ClosedFormKernel("ntk", partial(ntk, activation=activation, trained=trained))


def _nngp(*, activation: str = "relu", **_: object) -> ClosedFormKernel:
    return ClosedFormKernel("nngp", partial(nngp, activation=activation))


def _gaussian(*, bandwidth: float | None = None, **_: object) -> ClosedFormKernel:
    if bandwidth is None:
        raise ValueError("kernel='gaussian' needs bandwidth= (a positive number)")
    return ClosedFormKernel("gaussian", partial(gaussian_kernel, bandwidth=bandwidth))


#: name -> factory(activation=, trained=, bandwidth=) of the named kernels: the two-layer
#: closed-form NTK (:func:`lazylab.kernels.ntk`) and NNGP (:func:`lazylab.kernels.nngp`) of
#: f(x) = m^-1/2 sum_r a_r sigma(w_r . x), and the Gaussian kernel
#: (:func:`lazylab.kernels.gaussian_kernel`). Each factory ignores the options that are not its.
KERNEL_REGISTRY: dict[str, Callable[..., ClosedFormKernel]] = {
    "ntk": _ntk, "nngp": _nngp, "gaussian": _gaussian}


def kernel_object(name: str, *, activation: str = "relu", trained: str = "first",
                  bandwidth: float | None = None) -> ClosedFormKernel:
    """The named kernel as a :class:`Kernel` object.

    ``"ntk"`` (with ``activation``, ``trained``), ``"nngp"`` (with ``activation``) or
    ``"gaussian"`` (``bandwidth`` required).
    """
    if not isinstance(name, str) or name not in KERNEL_REGISTRY:
        raise ValueError(f"kernel must be one of {', '.join(KERNEL_REGISTRY)} or a kernel "
                         f"object; got {name!r}")
    return KERNEL_REGISTRY[name](activation=activation, trained=trained, bandwidth=bandwidth)


def check_kernel(kernel: object, name: str = "kernel") -> Kernel:
    """``kernel`` when it is a :class:`Kernel` object, else a ValueError naming ``name``, the
    registered names and the protocol's members (and which of them are missing)."""
    if isinstance(kernel, Kernel):
        return kernel
    missing = [m for m, a in zip(PROTOCOL_MEMBERS, ("__call__", "diag", "device", "dtype"),
                                 strict=True) if not hasattr(kernel, a)]
    raise ValueError(f"{name} must be one of {', '.join(KERNEL_REGISTRY)} or an object with "
                     f"{', '.join(PROTOCOL_MEMBERS)} (lazylab.kernels.protocol.Kernel); got "
                     f"{type(kernel).__name__} {kernel!r}, which lacks {', '.join(missing)}")
