"""Input checks and Gram statistics shared by the closed-form kernels.

Every kernel of a two-layer net with Gaussian first-layer weights w ~ N(0, I_d) depends on a
pair (x, z) only through the 2x2 covariance of (u, v) = (w.x, w.z):

    Sigma = [[|x|^2, x.z], [x.z, |z|^2]].

So a kernel call needs the Gram matrix G = X Z^T and the two norm vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is one of ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def check_pair(X: torch.Tensor, Z: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Validate (X, Z) and return them with Z on X's device and dtype (None stays None)."""
    if not isinstance(X, torch.Tensor) or X.ndim != 2:
        raise ValueError(f"X must be a 2-D torch tensor of shape (n, d); got "
                         f"{getattr(X, 'shape', type(X).__name__)}")
    if not X.is_floating_point():
        raise ValueError(f"X must be a floating-point tensor; got dtype {X.dtype}")
    if Z is None:
        return X, None
    if not isinstance(Z, torch.Tensor) or Z.ndim != 2:
        raise ValueError(f"Z must be a 2-D torch tensor of shape (n', d); got "
                         f"{getattr(Z, 'shape', type(Z).__name__)}")
    if Z.shape[1] != X.shape[1]:
        raise ValueError(f"Z must have the same number of columns d as X: X has d = "
                         f"{X.shape[1]}, Z has d = {Z.shape[1]}")
    if not Z.is_floating_point():
        raise ValueError(f"Z must be a floating-point tensor; got dtype {Z.dtype}")
    return X, Z.to(device=X.device, dtype=X.dtype)


@dataclass(frozen=True)
class GramStats:
    """G = X Z^T (n, n'), nx = |x_i| (n,), nz = |z_j| (n',), and whether Z is X.

    When ``symmetric`` the norms are read off diag(G), so the cosines G_ij / (nx_i nz_j)
    form a Cauchy-Schwarz-consistent matrix with an exact unit diagonal.
    """

    G: torch.Tensor
    nx: torch.Tensor
    nz: torch.Tensor
    symmetric: bool


def gram_stats(X: torch.Tensor, Z: torch.Tensor | None, dtype: torch.dtype | None = None
               ) -> GramStats:
    """Gram matrix and norms of checked inputs, optionally cast to ``dtype`` first."""
    if dtype is not None:
        X = X.to(dtype)
        Z = Z.to(dtype) if Z is not None else None
    if Z is None:
        G = X @ X.T
        nx = G.diagonal().clamp_min(0).sqrt()
        return GramStats(G, nx, nx, True)
    G = X @ Z.T
    return GramStats(G, torch.linalg.vector_norm(X, dim=1), torch.linalg.vector_norm(Z, dim=1),
                     False)


def safe_reciprocal(t: torch.Tensor) -> torch.Tensor:
    """1/t where t > 0 and 0 where t = 0: a zero input then has cosine 0 with everything,
    which is the limit the kernels take (their value at x = 0 carries a factor |x|^k)."""
    return torch.where(t > 0, 1 / torch.where(t > 0, t, 1), 0)
