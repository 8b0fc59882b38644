"""Random-features models: a fixed random first layer, only the second layer learned.

    f(x; a) = s_m sum_{i=1}^m a_i sigma(<w_i, x>) (+ c),   w_i ~iid N(0, Gamma) fixed,

the class F_RF,N(W) of Ghorbani et al. 2019, Eq. (2) (there s_m = 1 and no offset c; the
"(I)" legend is Gamma = I_d / d, i.e. ``weight_std=d**-0.5``, and "RF(Gamma*)" is
Gamma* = B / Tr(B), passed as ``covariance``). Fitting a is linear least squares in the
features phi(x) = s_m sigma(W x); Ghorbani et al. solve it directly ("KKT conditions", Sec. 4).

Example
-------
>>> import torch
>>> from lazylab.estimators import RandomFeaturesRegressor
>>> g = torch.Generator().manual_seed(1)
>>> X = torch.randn(200, 3, generator=g, dtype=torch.float64)
>>> y = X[:, 0] ** 2 - 1
>>> est = RandomFeaturesRegressor(400, activation="quad_centered", ridge=1e-8).fit(X, y)
>>> float(((est.predict(X) - y) ** 2).mean()) < 1e-6
True
"""

from __future__ import annotations

import torch
from torch import nn

from lazylab.activations import Activation, get_activation
from lazylab.models.two_layer import scale_factor


def gaussian_weights(d: int, width: int, *, weight_std: float = 1.0,
                     covariance: torch.Tensor | None = None,
                     generator: torch.Generator | None = None,
                     device: torch.device | str | None = None,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(width, d) matrix with i.i.d. rows w_i ~ N(0, Gamma).

    Gamma = weight_std^2 I by default; with ``covariance`` (a (d, d) symmetric PSD matrix,
    possibly singular) rows are w_i = Gamma^{1/2} g_i, g_i ~ N(0, I), with the symmetric square
    root from an eigendecomposition (Cholesky would fail for singular Gamma).
    """
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")
    if int(width) != width or width < 1:
        raise ValueError(f"width must be a positive integer; got {width!r}")
    dev = torch.device(device) if device is not None else (
        generator.device if generator is not None else torch.device("cpu"))
    G = torch.randn(width, d, generator=generator, device=dev, dtype=dtype)
    if covariance is None:
        if not weight_std > 0:
            raise ValueError(f"weight_std must be > 0; got {weight_std!r}")
        return weight_std * G
    C = torch.as_tensor(covariance, device=dev, dtype=torch.float64)
    if C.shape != (d, d):
        raise ValueError(f"covariance must have shape ({d}, {d}); got {tuple(C.shape)}")
    if not torch.allclose(C, C.T, rtol=1e-10, atol=1e-12 * float(C.abs().max())):
        raise ValueError("covariance must be symmetric")
    evals, evecs = torch.linalg.eigh(C)
    if float(evals.min()) < -1e-10 * max(float(evals.max()), 0.0):
        raise ValueError(f"covariance must be positive semi-definite; smallest eigenvalue "
                         f"{float(evals.min()):.3g}")
    # Eigenvalues at rounding level (|lambda| <= d eps lambda_max) are exact zeros of a singular
    # Gamma; their square roots (~1e-8) would leak weight into its null space.
    tol = d * torch.finfo(torch.float64).eps * max(float(evals.max()), 0.0)
    root = (evecs * torch.where(evals > tol, evals, 0.0).sqrt()) @ evecs.T
    return G @ root.to(dtype)


class RandomFeatures(nn.Module):
    """f(x) = s_m sum_i a_i sigma(w_i . x) (+ c) with W fixed (a buffer) and a trained.

    Parameters
    ----------
    d : input dimension.
    width : number of features m.
    activation : activation name or :class:`Activation`.
    weight_std : rows w_i ~ N(0, weight_std^2 I) (ignored when ``covariance`` is given).
    covariance : (d, d) PSD Gamma; rows w_i ~ N(0, Gamma) (Ghorbani et al. 2019, Sec. 2).
    scaling : s_m: ``"none"`` (1, Ghorbani et al.), ``"ntk"`` (m^-1/2) or ``"mf"`` (1/m).
    bias : add a trainable offset c (Ghorbani et al.'s RF has none, Eq. (2)).
    generator, device, dtype : how W is drawn; ``a`` starts at 0.

    Attributes
    ----------
    W : (m, d) fixed first layer (buffer).
    a : (m,) trained second layer (parameter).
    """

    W: torch.Tensor  # registered as a buffer in __init__

    def __init__(self, d: int, width: int, *, activation: str | Activation = "relu",
                 weight_std: float = 1.0, covariance: torch.Tensor | None = None,
                 scaling: str = "none", bias: bool = False,
                 generator: torch.Generator | None = None,
                 device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        self.scale = scale_factor(scaling, width)
        W = gaussian_weights(d, width, weight_std=weight_std, covariance=covariance,
                             generator=generator, device=device, dtype=dtype)
        self.d, self.width = int(d), int(width)
        self.act = get_activation(activation)
        self.scaling = scaling
        self.register_buffer("W", W)
        self.a = nn.Parameter(torch.zeros(width, device=W.device, dtype=dtype))
        self.c = nn.Parameter(torch.zeros((), device=W.device, dtype=dtype)) if bias else None

    def features(self, X: torch.Tensor) -> torch.Tensor:
        """(n, m) feature matrix phi(X) = s_m sigma(X W^T), so f = phi(X) a (+ c)."""
        if X.dim() != 2 or X.shape[1] != self.d:
            raise ValueError(f"X must have shape (n, {self.d}); got {tuple(X.shape)}")
        return self.scale * self.act(X @ self.W.T)

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by role (:mod:`lazylab.models.groups`): the first layer W is fixed, so
        only ``"last"`` ([a], plus c with ``bias``) and ``"all"``."""
        last = [self.a] + ([self.c] if self.c is not None else [])
        return {"last": last, "all": list(last)}

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        out = self.features(X) @ self.a
        return out + self.c if self.c is not None else out

    def extra_repr(self) -> str:
        return (f"d={self.d}, width={self.width}, activation={self.act.name}, "
                f"scaling={self.scaling}")
