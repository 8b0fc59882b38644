"""The Gaussian (RBF) kernel k(x, z) = exp(-|x - z|^2 / (2 h^2)), a baseline for kernel
regression next to the NTK and NNGP kernels.

|x - z|^2 = |x|^2 + |z|^2 - 2 x.z is formed from one Gram matrix (clamped at 0 against
rounding), so a block costs one GEMM plus elementwise passes.

Example
-------
>>> import torch
>>> X = torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
>>> round(gaussian_kernel(X, bandwidth=1.0)[0, 1].item(), 12)   # exp(-1/2)
0.606530659713
"""

from __future__ import annotations

import math

import torch

from lazylab.duals._inputs import check_pair


def gaussian_kernel(X: torch.Tensor, Z: torch.Tensor | None = None, *,
                    bandwidth: float = 1.0) -> torch.Tensor:
    """exp(-|x_i - z_j|^2 / (2 bandwidth^2)) for rows of X (n, d) and Z (n', d) (Z None: X).

    Returns an (n, n') tensor on X's device and dtype; the diagonal is exactly 1 when Z is None.
    """
    h = float(bandwidth)
    if not (math.isfinite(h) and h > 0):
        raise ValueError(f"bandwidth must be a finite number > 0; got {bandwidth!r}")
    X, Z = check_pair(X, Z)
    Zm = X if Z is None else Z
    nx = X.square().sum(1)
    nz = nx if Z is None else Zm.square().sum(1)
    D = torch.addmm(nx[:, None] + nz[None, :], X, Zm.T, alpha=-2.0).clamp_min_(0.0)
    K = D.mul_(-0.5 / (h * h)).exp_()
    if Z is None:
        K.diagonal().fill_(1.0)
    return K
