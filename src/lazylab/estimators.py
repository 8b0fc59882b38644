"""sklearn-style estimators on top of lazylab's models and solvers.

:class:`RandomFeaturesRegressor` fits the second layer of a random-features model
(Ghorbani et al. 2019, Eq. (2)) by ridge least squares; :class:`KernelRegressor` is kernel
ridge(less) regression with the closed-form NTK / NNGP or the Gaussian kernel at any n
(:func:`lazylab.solve.kernel_regression`, never forming the n x n matrix). Both have
``fit`` / ``predict`` / ``score`` as in scikit-learn. They live above ``models`` and ``solve``
in the layer order.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch

from lazylab.models.random_features import RandomFeatures
from lazylab.solve import kernel_regression, lstsq

__all__ = ["RandomFeaturesRegressor", "KernelRegressor"]


class _Estimator:
    """The scikit-learn estimator protocol: get_params / set_params / repr / score (R^2)."""

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments (scikit-learn estimator protocol)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {k: getattr(self, k) for k in names}

    def set_params(self, **params: Any):
        """Set constructor arguments by name (scikit-learn estimator protocol)."""
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"unknown parameter {k!r}; allowed: {sorted(valid)}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    def predict(self, X):  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def score(self, X, y) -> float:
        """Coefficient of determination R^2 = 1 - sum (y - f)^2 / sum (y - mean y)^2."""
        pred = torch.as_tensor(self.predict(X)).to(torch.float64).cpu()
        yt = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
        yt = yt.to(torch.float64).cpu()
        ss_res = float(((yt - pred) ** 2).sum())
        ss_tot = float(((yt - yt.mean()) ** 2).sum())
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")


class RandomFeaturesRegressor(_Estimator):
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
    It follows the estimator protocol (``get_params`` / ``set_params`` / ``score``, so
    ``sklearn.base.clone`` and grid searches work) without importing scikit-learn, whose import
    would slow down every ``import lazylab.models`` by seconds.
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


class KernelRegressor(_Estimator):
    """scikit-learn style kernel ridge(less) regression at any n.

    fit solves (K + ridge I) alpha = y by Nystrom-preconditioned CG over kernel tiles
    (:func:`lazylab.solve.kernel_regression`: memory O(n (d + rank))); predict returns
    k(X, X_train) alpha. ``ridge`` has sklearn ``KernelRidge``'s ``alpha`` convention.

    Parameters
    ----------
    kernel : "ntk", "nngp", "gaussian" (see :func:`lazylab.solve.kernel_solver.make_kernel`).
    activation, trained : of the NTK / NNGP (default relu, first layer: Arora et al.'s H-inf).
    bandwidth : of the Gaussian kernel.
    ridge : >= 0 (0: ridgeless interpolation).
    tol : relative residual of the CG solve; rank : Nystrom preconditioner rank.
    max_iter : CG iteration cap; seed : seed of the Nystrom landmarks.
    device : where kernel tiles are computed.

    Attributes (after fit)
    ----------------------
    fit_ : the :class:`lazylab.solve.KernelRegression` (alpha, CG info, residuals).
    """

    def __init__(self, kernel: str = "ntk", activation: str = "relu", trained: str = "first",
                 bandwidth: float | None = None, ridge: float = 0.0, tol: float = 1e-6,
                 rank: int = 200, max_iter: int = 500, seed: int = 0, device: str = "cpu"):
        self.kernel = kernel
        self.activation = activation
        self.trained = trained
        self.bandwidth = bandwidth
        self.ridge = ridge
        self.tol = tol
        self.rank = rank
        self.max_iter = max_iter
        self.seed = seed
        self.device = device

    @staticmethod
    def _tensor(A, name: str) -> torch.Tensor:
        T = torch.as_tensor(np.asarray(A) if not isinstance(A, torch.Tensor) else A)
        if not (T.is_floating_point() or T.dtype in (torch.int32, torch.int64)):
            raise ValueError(f"{name} must be numeric; got dtype {T.dtype}")
        return T.to(torch.float64)

    def fit(self, X, y) -> KernelRegressor:
        """Solve for the coefficients alpha (y may be (n,) or (n, k))."""
        Xt, yt = self._tensor(X, "X"), self._tensor(y, "y")
        if Xt.dim() != 2:
            raise ValueError(f"X must be 2-D (n, d); got shape {tuple(Xt.shape)}")
        if yt.shape[0] != Xt.shape[0] or yt.dim() > 2:
            raise ValueError(f"y must have shape ({Xt.shape[0]},) or ({Xt.shape[0]}, k); "
                             f"got {tuple(yt.shape)}")
        dev = torch.device(self.device)
        gen = torch.Generator().manual_seed(int(self.seed))
        self.fit_ = kernel_regression(
            Xt.to(dev), yt.to(dev), kernel=self.kernel, ridge=float(self.ridge),
            tol=float(self.tol), rank=min(int(self.rank), Xt.shape[0]),
            max_iter=int(self.max_iter), activation=self.activation, trained=self.trained,
            bandwidth=self.bandwidth, generator=gen, device=dev)
        self.n_features_in_ = Xt.shape[1]
        return self

    def predict(self, X):
        """k(X, X_train) alpha; numpy in, numpy out; tensor in, tensor out."""
        if not hasattr(self, "fit_"):
            raise ValueError("this KernelRegressor is not fitted yet; call fit(X, y)")
        out = self.fit_.predict(self._tensor(X, "X"))
        return out if isinstance(X, torch.Tensor) else out.cpu().numpy()
