"""Least squares on more samples than fit in memory: accumulate the normal equations in chunks.

For a design matrix F (n x p) seen in row chunks F_1, ..., F_B with targets y_1, ..., y_B,

    A = F^T F = sum_b F_b^T F_b,    b = F^T y = sum_b F_b^T y_b,    s = ||y||^2 = sum_b ||y_b||^2,

so memory is O(p^2) whatever n is. Ghorbani et al. (2019, Sec. 4) fit random-features models
"by solving KKT conditions with 5 x 10^5 observations"; with N = 4500 features the design matrix
alone is 18 GB in float64, while A is 162 MB. The solution of (A + ridge I) c = b is the ridge
least-squares estimate, and the training error follows without F:

    ||y - F c||^2 = s - 2 c^T b + c^T A c.

Example
-------
>>> import torch
>>> g = torch.Generator().manual_seed(0)
>>> F = torch.randn(1000, 4, generator=g, dtype=torch.float64)
>>> y = F @ torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)
>>> ne = NormalEquations(4)
>>> for i in range(0, 1000, 300):
...     _ = ne.add(F[i:i + 300], y[i:i + 300])
>>> [round(v, 6) for v in ne.solve().tolist()]
[1.0, -2.0, 0.5, 3.0]
"""

from __future__ import annotations

import torch

from lazylab.solve._linalg import check_ridge, cholesky_solve_checked, eigh_solve


class NormalEquations:
    """Running sums F^T F, F^T y, ||y||^2 and n of a least-squares problem.

    Parameters
    ----------
    p : number of features (columns of F).
    device : where the (p, p) accumulator lives (default CPU); chunks are moved there.
    dtype : accumulation dtype (float64 by default: chunks in float32 are upcast, since the
        sum over many samples is where precision is lost).

    Attributes
    ----------
    FtF : (p, p) accumulated F^T F.
    Fty : (p, k) accumulated F^T y (None before the first ``add``).
    yty : (k,) accumulated squared norms of the target columns.
    n : number of rows added so far.
    """

    def __init__(self, p: int, *, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float64):
        if int(p) != p or p < 1:
            raise ValueError(f"p must be a positive integer; got {p!r}")
        if not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating-point dtype; got {dtype}")
        self.p = int(p)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.dtype = dtype
        self.FtF = torch.zeros(self.p, self.p, device=self.device, dtype=dtype)
        self.Fty: torch.Tensor | None = None
        self.yty: torch.Tensor | None = None
        self._vec: bool | None = None
        self.n = 0

    def add(self, F: torch.Tensor, y: torch.Tensor) -> NormalEquations:
        """Add a chunk of rows: F (b, p) and y (b,) or (b, k) (k fixed by the first chunk)."""
        if not isinstance(F, torch.Tensor) or F.dim() != 2 or F.shape[1] != self.p:
            shape = tuple(F.shape) if isinstance(F, torch.Tensor) else type(F).__name__
            raise ValueError(f"F must be a (b, {self.p}) tensor; got {shape}")
        if not isinstance(y, torch.Tensor) or y.dim() not in (1, 2) or y.shape[0] != F.shape[0]:
            shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
            raise ValueError(f"y must have shape ({F.shape[0]},) or ({F.shape[0]}, k); "
                             f"got {shape}")
        vec = y.dim() == 1
        Y = y.unsqueeze(1) if vec else y
        if self._vec is None or self.Fty is None or self.yty is None:  # the first chunk
            self._vec = vec
            self.Fty = torch.zeros(self.p, Y.shape[1], device=self.device, dtype=self.dtype)
            self.yty = torch.zeros(Y.shape[1], device=self.device, dtype=self.dtype)
        elif vec != self._vec or Y.shape[1] != self.Fty.shape[1]:
            raise ValueError(f"y must have the same shape per row as in the first chunk "
                             f"({'(b,)' if self._vec else f'(b, {self.Fty.shape[1]})'}); "
                             f"got {tuple(y.shape)}")
        F = F.to(device=self.device, dtype=self.dtype)
        Y = Y.to(device=self.device, dtype=self.dtype)
        self.FtF.addmm_(F.T, F)
        self.Fty.addmm_(F.T, Y)
        self.yty.add_((Y * Y).sum(0))
        self.n += int(F.shape[0])
        return self

    def merge(self, other: NormalEquations) -> NormalEquations:
        """Add the sums of another accumulator (e.g. one filled by another worker)."""
        if not isinstance(other, NormalEquations) or other.p != self.p:
            raise ValueError("other must be a NormalEquations with the same p")
        if other.n == 0:
            return self
        # other.n > 0: other has added a chunk, which set its target sums.
        assert other.Fty is not None and other.yty is not None
        if self._vec is None or self.Fty is None or self.yty is None:
            self._vec = other._vec
            self.Fty = torch.zeros_like(other.Fty, device=self.device, dtype=self.dtype)
            self.yty = torch.zeros_like(other.yty, device=self.device, dtype=self.dtype)
        elif other._vec != self._vec or other.Fty.shape != self.Fty.shape:
            raise ValueError("other must have targets of the same shape")
        self.FtF.add_(other.FtF.to(self.FtF))
        self.Fty.add_(other.Fty.to(self.Fty))
        self.yty.add_(other.yty.to(self.yty))
        self.n += other.n
        return self

    def solve(self, ridge: float = 0.0, *, rtol: float | None = None) -> torch.Tensor:
        """Ridge least-squares coefficients c = (F^T F + ridge I)^{-1} F^T y.

        Cholesky first (jitter escalation when ridge > 0 and rounding breaks it); a numerically
        singular F^T F with ridge = 0 falls back to an eigendecomposition, which returns the
        minimum-norm solution (F^T F)^+ F^T y = F^+ y, eigenvalues below rtol * lambda_max
        (default 10 p eps) counting as zero.

        Returns
        -------
        coef : (p,) or (p, k), shaped like the targets given to ``add``.
        """
        if self.n == 0 or self.Fty is None:
            raise ValueError("NormalEquations.solve needs at least one add(F, y) first")
        ridge = check_ridge(ridge)
        max_cond = 1.0 / (10.0 * self.p * torch.finfo(self.dtype).eps)
        coef = cholesky_solve_checked(self.FtF, self.Fty, ridge=ridge, max_cond=max_cond,
                                      jitter=ridge > 0)
        if coef is None:
            coef = eigh_solve(self.FtF, self.Fty, ridge=ridge, rtol=rtol)
        return coef.squeeze(1) if self._vec else coef

    def residual(self, coef: torch.Tensor) -> torch.Tensor:
        """Mean squared training error ||y - F c||^2 / n, per target column, without F."""
        if self.n == 0 or self.Fty is None or self.yty is None:
            raise ValueError("NormalEquations.residual needs at least one add(F, y) first")
        C = coef.to(self.FtF).reshape(self.p, -1)
        sse = self.yty - 2 * (C * self.Fty).sum(0) + (C * (self.FtF @ C)).sum(0)
        sse = sse.clamp_min(0.0) / self.n
        return sse.squeeze(0) if self._vec else sse
