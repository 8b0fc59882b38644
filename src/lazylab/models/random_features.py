"""Random-features models: a fixed random first layer, only the second layer learned.

    f(x; a) = s_m sum_{i=1}^m a_i sigma(<w_i, x>) (+ c),   w_i ~iid N(0, Gamma) fixed,

the class F_RF,N(W) of Ghorbani et al. 2019, Eq. (2) (there s_m = 1 and no offset c; the
"(I)" legend is Gamma = I_d / d, i.e. ``weight_std=d**-0.5``, and "RF(Gamma*)" is
Gamma* = B / Tr(B), passed as ``covariance``). Fitting a is linear least squares in the
features phi(x) = s_m sigma(W x); Ghorbani et al. solve it directly ("KKT conditions", Sec. 4).

Example
-------
>>> import torch
>>> from lazylab.models import RandomFeaturesRegressor
>>> g = torch.Generator().manual_seed(1)
>>> X = torch.randn(200, 3, generator=g, dtype=torch.float64)
>>> y = X[:, 0] ** 2 - 1
>>> est = RandomFeaturesRegressor(400, activation="quad_centered", ridge=1e-8).fit(X, y)
>>> float(((est.predict(X) - y) ** 2).mean()) < 1e-6
True
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin
from torch import nn

from lazylab.activations import Activation, get_activation
from lazylab.models.two_layer import scale_factor
from lazylab.solve import lstsq

__all__ = ["RandomFeatures", "RandomFeaturesRegressor", "gaussian_weights"]


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

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        out = self.features(X) @ self.a
        return out + self.c if self.c is not None else out

    def extra_repr(self) -> str:
        return (f"d={self.d}, width={self.width}, activation={self.act.name}, "
                f"scaling={self.scaling}")


class RandomFeaturesRegressor(BaseEstimator, RegressorMixin):
    """scikit-learn style random-features ridge regression.

    fit: draws W (seeded), then a_hat = argmin_a ||phi(X) a - y||^2 + ridge ||a||^2
    (with an unpenalised offset when ``fit_intercept``), solved by :func:`lazylab.solve.lstsq`
    (Cholesky on the normal / dual equations, SVD fallback; ridge = 0 gives the minimum-norm
    solution, the ridgeless limit).

    Parameters
    ----------
    width : number of random features m.
    activation : activation name.
    ridge : penalty >= 0 on the un-normalised sum of squares (as sklearn's ``Ridge``).
    seed : seed of the generator that draws W.
    device : where the features are computed ("cpu", "cuda", ...).
    weight_std, covariance, scaling : the feature distribution, as in :class:`RandomFeatures`.
    fit_intercept : fit an unpenalised offset c (by centring features and targets).
    dtype : compute dtype (float64 by default: least squares on near-singular features).

    Attributes (after fit)
    ----------------------
    model_ : the fitted :class:`RandomFeatures` module (a and c set).
    coef_ : (m,) numpy copy of a; intercept_ : float offset.

    Inputs may be numpy arrays or torch tensors; ``predict`` returns the same kind as its input.
    """

    def __init__(self, width: int = 100, activation: str = "relu", ridge: float = 0.0,
                 seed: int = 0, device: str = "cpu", weight_std: float = 1.0,
                 covariance: np.ndarray | None = None, scaling: str = "none",
                 fit_intercept: bool = False, dtype: torch.dtype = torch.float64):
        self.width = width
        self.activation = activation
        self.ridge = ridge
        self.seed = seed
        self.device = device
        self.weight_std = weight_std
        self.covariance = covariance
        self.scaling = scaling
        self.fit_intercept = fit_intercept
        self.dtype = dtype

    def _as_tensor(self, A, name: str) -> torch.Tensor:
        T = torch.as_tensor(np.asarray(A) if not isinstance(A, torch.Tensor) else A)
        if not (T.is_floating_point() or T.dtype in (torch.int32, torch.int64)):
            raise ValueError(f"{name} must be numeric; got dtype {T.dtype}")
        return T.to(device=torch.device(self.device), dtype=self.dtype)

    def fit(self, X, y) -> RandomFeaturesRegressor:
        """Draw the features and solve the ridge least-squares problem for a (and c)."""
        Xt, yt = self._as_tensor(X, "X"), self._as_tensor(y, "y")
        if Xt.dim() != 2:
            raise ValueError(f"X must be 2-D (n, d); got shape {tuple(Xt.shape)}")
        if yt.shape != (Xt.shape[0],):
            raise ValueError(f"y must have shape ({Xt.shape[0]},); got {tuple(yt.shape)}")
        if float(self.ridge) < 0:
            raise ValueError(f"ridge must be >= 0; got {self.ridge!r}")
        dev = torch.device(self.device)
        gen = torch.Generator(device=dev).manual_seed(int(self.seed))
        cov = None if self.covariance is None else torch.as_tensor(self.covariance)
        model = RandomFeatures(Xt.shape[1], self.width, activation=self.activation,
                               weight_std=self.weight_std, covariance=cov,
                               scaling=self.scaling, bias=self.fit_intercept, generator=gen,
                               device=dev, dtype=self.dtype)
        F = model.features(Xt)
        if self.fit_intercept:
            # The unpenalised offset is eliminated by centring: c = mean(y) - mean(F) a.
            Fm, ym = F.mean(0), yt.mean()
            coef = lstsq(F - Fm, yt - ym, ridge=float(self.ridge))
            intercept = ym - Fm @ coef
        else:
            coef = lstsq(F, yt, ridge=float(self.ridge))
            intercept = None
        with torch.no_grad():
            model.a.copy_(coef)
            if intercept is not None:
                model.c.copy_(intercept)
        self.model_ = model
        self.coef_ = coef.detach().cpu().numpy()
        self.intercept_ = float(intercept) if intercept is not None else 0.0
        self.n_features_in_ = Xt.shape[1]
        return self

    def predict(self, X):
        """f(X) = phi(X) a_hat (+ c); numpy in, numpy out; tensor in, tensor out."""
        if not hasattr(self, "model_"):
            raise ValueError("this RandomFeaturesRegressor is not fitted yet; call fit(X, y)")
        Xt = self._as_tensor(X, "X")
        with torch.no_grad():
            out = self.model_(Xt)
        return out if isinstance(X, torch.Tensor) else out.cpu().numpy()
