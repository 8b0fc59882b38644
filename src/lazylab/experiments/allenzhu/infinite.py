"""Infinite-width NTKs of the Allen-Zhu & Li (2019) learners: a stated extra beside the
finite-width "(NTK)" rows (the network linearized at its initialization).

The learners (Sec. 8.1, :mod:`lazylab.models`) draw every entry, biases included, from
N(0, 1/m). Writing each parameter as theta = theta~ / sqrt(m) with theta~ ~ N(0, 1), ReLU's
positive homogeneity gives f(x; theta) = m^-1/2 g(x; theta~), where g is the same network in
the NTK parametrization (Jacot et al. 2018): its first layer is W~ x + b~_1 on the raw input
(in :mod:`lazylab.kernels.deep`'s convention, whose input kernel is <x, z> / d, that is
``Dense(W_std=sqrt(d), b_std=1)``), its hidden layer U~ r_1 / sqrt(m) + b~_2
(``Dense(1, 1)``) and its readout A~ r / sqrt(m) (``Dense(1)``). Since
d f / d theta = d g / d theta~, the empirical NTK of the learner at its initialization equals
g's, which tends to the closed form as m grows (its initial output m^-1/2 g vanishes):

* 3layer, out = A sigma(U sigma(W x + b1) + b2): the :class:`~lazylab.kernels.deep.DeepKernel`
  NTK of ``Serial(Dense(sqrt(d), 1), Relu(), Dense(1, 1), Relu(), Dense(1))``;
* 3resnet, the ResNet of Eq. (2.1), out = A (r_1 + r_2) with r_1 = sigma(W x + b1) and
  r_2 = sigma(U r_1 + b2), U in R^{m x m}. The two branches are ReLU outputs, not centred, so
  FanInSum (:class:`~lazylab.kernels.deep.Residual`, which needs all but one branch to end in
  an affine layer) does not apply: a channel's r_1,i(x) and r_2,i(z) are independent in the
  limit (r_1,i enters r_2,i's pre-activation with weight O(m^-1/2)) but have means
  mu_j(x) = E r_j(x) = sqrt(K_j(x, x) / pi) (for a ReLU of a centred Gaussian of variance v,
  E relu = sqrt(v / (2 pi)) and E relu^2 = v / 2). So the readout's input kernel is

      K(x, z) = K_1(x, z) + K_2(x, z) + mu_1(x) mu_2(z) + mu_2(x) mu_1(z),

  and the NTK Theta = K + Theta_1 + Theta_2, with (K_j, Theta_j) the per-channel NNGP and NTK
  of r_j from :class:`~lazylab.kernels.deep.DeepKernel` (the cross terms of the gradients,
  <grad r_1,i(x), grad r_2,i(z)>, carry the weight U_ii / sqrt(m) and vanish).

The experiment's 3resnet is the bottleneck form of Sec. 6 (U = V A, V in R^{m x k}): its inner
layer has k = d / 2 channels that do not grow with m, so it has no Gaussian-process limit (at
the N(0, 1/m) init its residual branch's input V A r_1 is O(m^-1/2) against the bias), and the
closed form above is that of Eq. (2.1), the ResNet the bottleneck stands for. The k outputs
share the kernel (Theta (x) I_k), so kernel ridge regresses all k at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lazylab.kernels.deep import DeepKernel, Dense, Relu, Serial

#: The mode of the infinite-width rows (their method: "3resnet(NTK, infinite width)").
INFINITE = "NTK, infinite width"


def mlp3_layers(d: int) -> Serial:
    """The 3layer learner in the NTK parametrization (module docstring)."""
    return Serial(Dense(math.sqrt(d), 1.0), Relu(), Dense(1.0, 1.0), Relu(), Dense(1.0))


def mlp3_ntk(X: torch.Tensor, Z: torch.Tensor | None = None) -> torch.Tensor:
    """Infinite-width NTK of the 3layer learner, (n, n'), in X's dtype."""
    return DeepKernel(mlp3_layers(X.shape[1]))(X, Z)


def _means(net: Serial, A: torch.Tensor) -> torch.Tensor:
    """E relu(u) = sqrt(K(x, x) / pi) per input, for ``net`` ending in a ReLU."""
    return (DeepKernel(net, kind="nngp").diag(A) / math.pi).sqrt()


def resnet3_kernels(X: torch.Tensor, Z: torch.Tensor | None = None, *, means: bool = True
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(NNGP, NTK) of the Eq. (2.1) ResNet's readout, (n, n') each (module docstring);
    ``means=False`` drops the mean terms (the sum rule of centred branches, for tests)."""
    d = X.shape[1]
    r1 = Serial(Dense(math.sqrt(d), 1.0), Relu())
    r2 = Serial(r1, Dense(1.0, 1.0), Relu())
    K1, T1 = DeepKernel(r1).both(X, Z)
    K2, T2 = DeepKernel(r2).both(X, Z)
    K = K1 + K2
    if means:
        W = X if Z is None else Z
        m1x, m2x, m1z, m2z = _means(r1, X), _means(r2, X), _means(r1, W), _means(r2, W)
        K = K + torch.outer(m1x, m2z) + torch.outer(m2x, m1z)
    return K, K + T1 + T2


def resnet3_ntk(X: torch.Tensor, Z: torch.Tensor | None = None) -> torch.Tensor:
    """Infinite-width NTK of the Eq. (2.1) 3-layer ResNet, (n, n'), in X's dtype."""
    return resnet3_kernels(X, Z)[1]


def infinite_ntk(arch: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The Gram function (A, B) -> Theta(A, B) of ``arch`` ("3layer" or "3resnet")."""
    fns = {"3layer": mlp3_ntk, "3resnet": resnet3_ntk}
    if arch not in fns:
        raise ValueError(f"arch must be one of {', '.join(fns)}; got {arch!r}")
    fn = fns[arch]

    def gram(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        # the Gram matrix of a set with itself: the exactly symmetric path
        same = B is A or (B.shape == A.shape and bool(torch.equal(A, B)))
        return fn(A, None if same else B)

    return gram
