"""scikit-learn estimators on top of lazylab's models and solvers.

:class:`RandomFeaturesRegressor` fits the second layer of a random-features model
(Ghorbani et al. 2019, Eq. (2)) by ridge least squares; :class:`KernelRegressor` is kernel
ridge(less) regression with the closed-form NTK / NNGP, the Gaussian kernel or any kernel
object (:class:`lazylab.kernels.protocol.Kernel`, e.g. a deep network's
:class:`lazylab.kernels.deep.DeepKernel`) at any n: a
direct (Cholesky) solve while the n x n kernel fits the memory budget, Nystrom-preconditioned
conjugate gradients over kernel tiles above it (:func:`lazylab.solve.kernel_regression`, never
forming the n x n matrix). Both are scikit-learn estimators (``BaseEstimator`` and
``RegressorMixin``, checked by ``sklearn.utils.estimator_checks``), so pipelines, grid searches
and cross-validation take them; they accept one or several targets (y of shape (n,) or
(n, k)). numpy in gives numpy out; torch tensors in give tensors out.

Examples
--------
>>> import numpy as np
>>> from sklearn.model_selection import GridSearchCV
>>> from sklearn.pipeline import make_pipeline
>>> from sklearn.preprocessing import StandardScaler
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((120, 3)); y = np.tanh(X[:, 0] * X[:, 1])
>>> pipe = make_pipeline(StandardScaler(), KernelRegressor())
>>> search = GridSearchCV(pipe, {"kernelregressor__ridge": [1e-3, 1e-1]}, cv=3).fit(X, y)
>>> search.best_params_["kernelregressor__ridge"] in (1e-3, 1e-1)
True
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from lazylab.activations import Activation
from lazylab.device import check_device, memory_budget
from lazylab.kernels.protocol import KERNEL_REGISTRY, Kernel, check_kernel
from lazylab.models.random_features import RandomFeatures
from lazylab.solve import kernel_regression, lstsq
from lazylab.solve.direct import kernel_ridge
from lazylab.solve.kernel_solver import check_kernel_finite, default_bandwidth, make_kernel

_DTYPES = {"float64": torch.float64, "float32": torch.float32}

# Constraints shared by the regressors (sklearn's ``_parameter_constraints``).
_NONNEGATIVE = Interval(Real, 0, None, closed="left")  # [0, inf): NaN and inf refused
_POSITIVE = Interval(Real, 0, None, closed="neither")
_DEVICE = [str, torch.device]  # "cpu", "cuda:0", "auto", ...: check_device at fit


def _one_of(*names: str) -> StrOptions:
    """sklearn's StrOptions over ``names`` in their order (a set would print them in hash
    order, different from run to run)."""
    return StrOptions(dict.fromkeys(names).keys())


def _numpy(A: Any) -> Any:
    """A torch tensor as a numpy array (anything else unchanged, for validate_data)."""
    return A.detach().cpu().numpy() if isinstance(A, torch.Tensor) else A


def _numeric_targets(y: Any) -> Any:
    """y as float64 when it holds text or objects, else unchanged; ValueError naming y when
    an entry is not a number.

    ``validate_data(y_numeric=True)`` converts only object arrays; an array of strings would
    reach torch and fail there with a TypeError about numpy dtypes.
    """
    if y is None:  # validate_data says that y is required
        return y
    arr = np.asarray(y) if not hasattr(y, "dtype") else y
    if getattr(getattr(arr, "dtype", None), "kind", "f") not in "USO":  # text or objects
        return y
    try:
        return np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        flat = np.asarray(arr).ravel()
        bad = next((v for v in flat if not _is_number(v)), flat[0] if flat.size else None)
        bad = bad.item() if isinstance(bad, np.generic) else bad  # 'a', not np.str_('a')
        raise ValueError(f"y must hold numbers (these are regression targets); got dtype "
                         f"{arr.dtype} with the entry {bad!r}") from None


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _finite(out: torch.Tensor, what: str) -> torch.Tensor:
    """``out`` unchanged when every entry is finite, else a ValueError naming X: a kernel or
    feature map that overflowed on X's scale gives NaN or inf, never a silent prediction."""
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"X is too large for this model: {what} is not finite (overflow on "
                         "X's scale); rescale X, e.g. with sklearn's StandardScaler")
    return out


class _TorchRegressor(RegressorMixin, BaseEstimator):
    """Validation, tags and the tensor-in / tensor-out rule shared by the regressors."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _fit_data(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        X, y = validate_data(self, _numpy(X), _numeric_targets(_numpy(y)), multi_output=True,
                             y_numeric=True, dtype=np.float64)
        return X, np.asarray(y, dtype=np.float64)

    def _predict_data(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, _numpy(X), reset=False, dtype=np.float64)

    @staticmethod
    def _out(pred: torch.Tensor, X: Any) -> Any:
        return pred if isinstance(X, torch.Tensor) else pred.detach().cpu().numpy()


class RandomFeaturesRegressor(_TorchRegressor):
    """Random-features ridge regression (Ghorbani et al. 2019, Eq. (2)).

    fit draws W (seeded), then a_hat = argmin_a ||phi(X) a - y||^2 + m s_m^2 ridge ||a||^2
    (with an unpenalised offset when ``fit_intercept``), solved by :func:`lazylab.solve.lstsq`
    (Cholesky on the normal / dual equations, SVD fallback; ridge = 0 gives the minimum-norm
    solution, the ridgeless limit); predict returns phi(X) a_hat (+ c).

    **The ridge is in kernel units.** With phi(x) = s_m sigma(W x) (m features) write
    F F^T = m s_m^2 K_m, K_m(x, z) = (1/m) sum_i sigma(w_i.x) sigma(w_i.z), which tends to
    the kernel E_w[sigma(w.x) sigma(w.z)] as m grows. By the push-through identity the fitted
    values are F (F^T F + lam I)^-1 F^T y = K_m (K_m + lam / (m s_m^2) I)^-1 y, so the penalty
    lam = m s_m^2 ridge on a is kernel ridge regression on K_m with ``ridge``: the same
    ``ridge`` means the same fit at every width (and as :class:`KernelRegressor`'s and
    sklearn ``KernelRidge``'s ``alpha``), instead of a penalty that fades as 1/m.

    **Defaults.** ``weight_std=None`` draws w_i ~ N(0, I_d / d) (Ghorbani et al.'s "(I)"),
    so on standardized inputs the pre-activations have unit variance and K_m's diagonal is
    about E[sigma(g)^2] (1/2 for relu), the scale of an RBF kernel's 1; ``ridge=1.0`` and
    ``fit_intercept=True`` are then sklearn ``Ridge`` / ``KernelRidge``'s defaults. With
    ridge 0 and no offset, one 5-fold split of standardized digits (labels as targets) gave
    R^2 -0.133 on a fold: one test image 12x farther from the origin than the training
    ones, extrapolated linearly by relu features.

    The parameters are checked at fit against ``_parameter_constraints`` (scikit-learn's
    validation): a value outside them is refused with one ``ValueError`` naming the
    parameter and what it must be.

    Parameters
    ----------
    width : number of random features m.
    activation : activation name (:data:`lazylab.activations.ACTIVATIONS`, checked at fit)
        or an :class:`lazylab.activations.Activation`; default relu.
    ridge : >= 0, in kernel units (above): the penalty on the sum of squares of a is
        m s_m^2 ridge; default 1.0.
    seed : seed of the generator that draws W; default 0.
    device : where the features are computed ("cpu", "cuda", "auto", ...); default "cpu".
    weight_std : > 0: rows w_i ~ N(0, weight_std^2 I); None (default): 1 / sqrt(d).
    covariance : (d, d) covariance of the rows w_i, replacing ``weight_std``, as in
        :class:`lazylab.models.RandomFeatures`; None (default): isotropic.
    scaling : the output scale s_m, "none" (default, 1), "ntk" (m^-1/2) or "mf" (1/m), as in
        :class:`lazylab.models.RandomFeatures`.
    fit_intercept : fit an unpenalised offset c (by centring features and targets); default
        True.
    dtype : compute dtype, "float64" (default: least squares on near-singular features) or
        "float32" (a ``torch.dtype`` is accepted too).

    Attributes
    ----------
    model_ : the fitted :class:`lazylab.models.RandomFeatures` module (a and c set, for one
        target).
    coef_ : (m,) or (m, k) numpy array, the coefficients a_hat.
    intercept_ : float or (k,) numpy array, the offsets c (0 without ``fit_intercept``).
    penalty_ : the penalty m s_m^2 ridge applied to ||a||^2.
    n_features_in_ : number of input features d seen by fit.

    See Also
    --------
    KernelRegressor : kernel ridge regression with the kernel K_m tends to as m grows.

    lazylab.models.RandomFeatures : the feature map as a torch module.

    sklearn.kernel_ridge.KernelRidge : the ``alpha`` that ``ridge`` equals.

    Examples
    --------
    >>> import numpy as np
    >>> from lazylab.estimators import RandomFeaturesRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)); y = np.maximum(X[:, 0], 0) + 0.5 * X[:, 1]
    >>> est = RandomFeaturesRegressor(width=300, ridge=1e-3, seed=1).fit(X, y)
    >>> est.coef_.shape, est.n_features_in_
    ((300,), 5)
    >>> bool(est.score(X, y) > 0.95)  # R^2 on the training set
    True
    >>> est.predict(X[:4]).shape  # numpy in, numpy out
    (4,)
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "width": [Interval(Integral, 1, None, closed="left")],
        "activation": [str, Activation],  # a name is looked up at fit (its registry grows)
        "ridge": [_NONNEGATIVE],
        "seed": [Integral],
        "device": _DEVICE,
        "weight_std": [_POSITIVE, None],
        "covariance": ["array-like", None],
        "scaling": [_one_of("none", "ntk", "mf")],
        "fit_intercept": ["boolean"],
        "dtype": [_one_of(*_DTYPES), torch.dtype],
    }

    def __init__(self, width: int = 100, activation: str = "relu", ridge: float = 1.0,
                 seed: int = 0, device: str = "cpu", weight_std: float | None = None,
                 covariance: np.ndarray | None = None, scaling: str = "none",
                 fit_intercept: bool = True, dtype: str = "float64"):
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

    @_fit_context(prefer_skip_nested_validation=True)  # type: ignore[untyped-decorator]
    def fit(self, X, y) -> RandomFeaturesRegressor:
        """Draw the features and solve the ridge least-squares problem for a (and c).

        Parameters
        ----------
        X : (n, d) array-like or tensor of inputs.
        y : (n,) or (n, k) targets.

        Returns
        -------
        RandomFeaturesRegressor
            The fitted estimator (``self``).
        """
        dev = check_device(self.device)
        Xn, yn = self._fit_data(X, y)
        dt = self.dtype if isinstance(self.dtype, torch.dtype) else _DTYPES[self.dtype]
        Xt = torch.tensor(Xn, dtype=dt, device=dev)
        yt = torch.tensor(yn, dtype=dt, device=dev)
        gen = torch.Generator(device=dev).manual_seed(int(self.seed))
        cov = None if self.covariance is None else torch.as_tensor(self.covariance)
        std = Xt.shape[1] ** -0.5 if self.weight_std is None else self.weight_std
        model = RandomFeatures(Xt.shape[1], self.width, activation=self.activation,
                               weight_std=std, covariance=cov,
                               scaling=self.scaling, bias=self.fit_intercept, generator=gen,
                               device=dev, dtype=dt)
        F = model.features(Xt)
        # kernel units (class docstring): F F^T = m s_m^2 K_m
        penalty = float(self.ridge) * model.width * model.scale ** 2
        if self.fit_intercept:
            # The unpenalised offset is eliminated by centring: c = mean(y) - mean(F) a.
            Fm, ym = F.mean(0), yt.mean(0)
            coef = lstsq(F - Fm, yt - ym, ridge=penalty)
            intercept = ym - Fm @ coef
        else:
            coef = lstsq(F, yt, ridge=penalty)
            intercept = torch.zeros(yt.shape[1:], dtype=dt, device=dev)
        self.penalty_ = penalty
        if coef.dim() == 1:
            with torch.no_grad():
                model.a.copy_(coef)
                if self.fit_intercept:
                    assert model.c is not None  # bias=self.fit_intercept above
                    model.c.copy_(intercept)
        _finite(coef, "the least-squares solution on the random features of X")
        self.model_, self._coef, self._intercept = model, coef, intercept
        self.coef_ = coef.detach().cpu().numpy()
        ic = intercept.detach().cpu().numpy()
        self.intercept_ = float(ic) if ic.ndim == 0 else ic
        return self

    def predict(self, X):
        """f(X) = phi(X) a_hat (+ c), one column per target.

        Parameters
        ----------
        X : (n', d) array-like or tensor of inputs.

        Returns
        -------
        ndarray or Tensor
            (n',) or (n', k) predictions: a tensor for a tensor X, else a numpy array.
        """
        Xn = self._predict_data(X)
        Xt = torch.tensor(Xn, dtype=self._coef.dtype, device=self._coef.device)
        with torch.no_grad():
            out = self.model_.features(Xt) @ self._coef + self._intercept
        return self._out(_finite(out, "the prediction"), X)


class KernelRegressor(_TorchRegressor):
    """Kernel ridge(less) regression at any n.

    fit solves (K + ridge I) alpha = y; predict returns k(X, X_train) alpha. ``ridge`` has
    sklearn ``KernelRidge``'s ``alpha`` convention. ``solver="auto"`` solves directly
    (Cholesky, float64, eigendecomposition fallback) when the n x n float64 kernel takes at
    most ``memory_budget`` bytes (default: the device's block budget, 256 MiB on a CPU, i.e.
    n <= 5792), and by Nystrom-preconditioned conjugate gradients over float32 kernel tiles
    (:func:`lazylab.solve.kernel_regression`, memory O(n (d + rank))) above it; ``"direct"``
    and ``"cg"`` force one. A CG fit that stops above ``tol`` warns with the residual reached;
    one estimated at more than a minute (one timed kernel tile, times the tiles of a product,
    times ``max_iter``) warns with the estimate before it starts and prints progress lines to
    stderr (:func:`lazylab.solve.kernel_regression`).

    Refused with a ValueError naming the input: X whose kernel overflows (k(x, x) ~ |x|^2 for
    the NTK: |x| above ~1e154 in float64, ~1e19 in the CG path's float32 tiles; rescale X),
    y that is not numeric, and a ``device`` that is not available here. No fit or prediction
    returns NaN or inf in silence. The parameters are checked at fit against
    ``_parameter_constraints`` (scikit-learn's validation): a value outside them is refused
    with one ``ValueError`` naming the parameter and what it must be.

    Parameters
    ----------
    kernel : "ntk", "nngp", "gaussian" (the names of
        :data:`lazylab.kernels.protocol.KERNEL_REGISTRY`; see
        :func:`lazylab.solve.kernel_solver.make_kernel`), or a kernel object: any object with
        ``__call__(X, Z=None)``, ``diag(X)``, ``device`` and ``dtype``
        (:class:`lazylab.kernels.protocol.Kernel`), such as
        :class:`lazylab.kernels.deep.DeepKernel`; it is stored as given (``clone`` copies it)
        and evaluated on the 2-D (n, d) inputs, its matrix taken to float64. An object lacking
        a member is refused at fit with a ValueError naming ``kernel``. Default "ntk".
    activation : activation of the NTK / NNGP (default relu; Arora et al.'s H-inf with
        ``trained="first"``); no effect on a kernel object.
    trained : "first" (default: the first layer trained) or "both" (both layers) for the
        NTK; no effect on the other kernels.
    bandwidth : > 0, of the Gaussian kernel exp(-|x - z|^2 / (2 bandwidth^2)); None
        (default): sqrt(d Var(X) / 2) of the training X, i.e. sklearn's ``gamma="scale"``
        (= 1/d, sklearn ``KernelRidge``'s rbf default, on standardized X;
        :func:`lazylab.solve.kernel_solver.default_bandwidth`).
    bias : >= 0, standard deviation b of a trained first-layer bias of the NTK / NNGP's
        two-layer net, sigma(w.x + b beta) with beta ~ N(0, 1) (the neural-tangents ``b_std``
        convention): exactly the kernel of the inputs with one constant coordinate b
        appended, since (w, beta) ~ N(0, I_{d+1}); 0 (default): no bias. The output layer has
        none. No effect on the Gaussian kernel (a constant coordinate leaves distances). A
        kernel object sees the augmented inputs too.
    ridge : >= 0; 0 (default): ridgeless interpolation, the minimum-norm solution when K is
        singular.
    solver : "auto" (default, by ``memory_budget``), "direct" or "cg".
    tol : > 0, relative residual of the CG solve (its float32 tiles reach about 1e-5, not
        much less); default 1e-4.
    rank : >= 1, Nystrom preconditioner rank (at most n); default 200.
    max_iter : >= 1, CG iteration cap; default 500.
    seed : seed of the Nystrom landmarks; default 0.
    device : where kernels are computed ("cpu", "cuda", "auto", ...); default "cpu".
    memory_budget : >= 0 bytes for the n x n float64 kernel of the direct solve; None
        (default): the device's block budget (above).

    Attributes
    ----------
    solver_ : the solver used, "direct" or "cg".
    alpha_ : (n,) or (n, k) float64 tensor, the coefficients.
    bandwidth_ : the Gaussian bandwidth used (None for the other kernels).
    n_iter_ : CG iterations (1 for the direct solve).
    fit_ : the :class:`lazylab.solve.KernelRegression` of a CG fit (CG info, residuals);
        None after a direct solve.
    n_features_in_ : number of input features d seen by fit.

    See Also
    --------
    RandomFeaturesRegressor : the same regression with a finite random-features kernel.

    lazylab.solve.kernel_regression : the CG solver, on tensors.

    lazylab.kernels.deep.DeepKernel : the kernels of deep networks, as kernel objects.

    sklearn.kernel_ridge.KernelRidge : ``ridge`` is its ``alpha``.

    Examples
    --------
    >>> import numpy as np
    >>> import torch
    >>> from lazylab.estimators import KernelRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((150, 3)); y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    >>> est = KernelRegressor(kernel="ntk", ridge=1e-3).fit(X, y)
    >>> est.solver_, est.n_iter_  # 150 x 150 fits the memory budget: one Cholesky solve
    ('direct', 1)
    >>> bool(est.score(X, y) > 0.99)  # R^2 on the training set (nearly interpolates)
    True
    >>> pred = est.predict(torch.as_tensor(X[:4]))  # tensors in, tensors out
    >>> type(pred).__name__, tuple(pred.shape)
    ('Tensor', (4,))
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        # the registry's names as they are when fit runs (a dict view, not a copy); an
        # object's other members (device, dtype) are checked at fit (check_kernel)
        "kernel": [StrOptions(KERNEL_REGISTRY.keys()), HasMethods(["__call__", "diag"])],
        "activation": [str, Activation],
        "trained": [_one_of("first", "both")],
        "bandwidth": [_POSITIVE, None],
        "bias": [_NONNEGATIVE],
        "ridge": [_NONNEGATIVE],
        "solver": [_one_of("auto", "direct", "cg")],
        "tol": [_POSITIVE],
        "rank": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "seed": [Integral],
        "device": _DEVICE,
        "memory_budget": [_NONNEGATIVE, None],
    }

    def __init__(self, kernel: str | Kernel = "ntk", activation: str = "relu",
                 trained: str = "first", bandwidth: float | None = None, bias: float = 0.0,
                 ridge: float = 0.0,
                 solver: str = "auto", tol: float = 1e-4, rank: int = 200,
                 max_iter: int = 500, seed: int = 0, device: str = "cpu",
                 memory_budget: int | None = None):
        self.kernel = kernel
        self.activation = activation
        self.trained = trained
        self.bandwidth = bandwidth
        self.bias = bias
        self.ridge = ridge
        self.solver = solver
        self.tol = tol
        self.rank = rank
        self.max_iter = max_iter
        self.seed = seed
        self.device = device
        self.memory_budget = memory_budget

    def _choose(self, n: int) -> str:
        if self.solver != "auto":
            return self.solver
        budget = (memory_budget(self.device) if self.memory_budget is None
                  else int(self.memory_budget))
        return "direct" if 8 * n * n <= budget else "cg"

    @_fit_context(prefer_skip_nested_validation=True)  # type: ignore[untyped-decorator]
    def fit(self, X, y) -> KernelRegressor:
        """Solve (K + ridge I) alpha = y for the coefficients alpha.

        Parameters
        ----------
        X : (n, d) array-like or tensor of training inputs.
        y : (n,) or (n, k) targets.

        Returns
        -------
        KernelRegressor
            The fitted estimator (``self``).
        """
        dev = check_device(self.device)
        Xn, yn = self._fit_data(X, y)
        Xt = self._augment(torch.tensor(Xn, device=dev))
        yt = torch.tensor(yn, device=dev)
        self._kfn = self._kernel(Xt, Xn.shape[1])
        self.solver_ = self._choose(len(Xt))
        if self.solver_ == "direct":
            check_kernel_finite(self._kfn, Xt, dtype=torch.float64)
            # .to: a no-op for the named kernels (float64 on X's device); a kernel object
            # may compute elsewhere or in float32
            K = _finite(self._kfn(Xt, None).to(device=dev, dtype=torch.float64),
                        "the kernel matrix k(X, X)")
            self.alpha_ = _finite(kernel_ridge(K, yt, ridge=float(self.ridge)),
                                  "the solution of (K + ridge I) alpha = y")
            self.fit_ = None
            self.n_iter_ = 1  # one factorization
        else:
            gen = torch.Generator().manual_seed(int(self.seed))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RuntimeWarning)
                self.fit_ = kernel_regression(
                    Xt, yt, kernel=self._kfn, ridge=float(self.ridge), tol=float(self.tol),
                    rank=min(int(self.rank), Xt.shape[0]), max_iter=int(self.max_iter),
                    generator=gen, device=dev)
            if not self.fit_.info.converged:
                warnings.warn(
                    f"KernelRegressor: conjugate gradients stopped at relative residual "
                    f"{self.fit_.info.relative_residual:.3g} > tol={self.tol:g} after "
                    f"{self.fit_.info.iterations} iterations (Nystrom rank "
                    f"{self.fit_.preconditioner_rank}); raise max_iter, ridge or rank, or use "
                    "solver='direct' if the kernel fits in memory", RuntimeWarning,
                    stacklevel=3)
            for w in caught:
                if "did not reach tol" not in str(w.message):
                    warnings.warn(w.message, w.category, stacklevel=3)
            self.alpha_ = _finite(self.fit_.alpha, "the solution of (K + ridge I) alpha = y")
            self.n_iter_ = max(1, self.fit_.info.iterations)
        self._X = Xt
        return self

    def _kernel(self, Xt: torch.Tensor, d: int) -> Kernel:
        """The kernel object of ``kernel`` (a name from the registry, with its options, or
        the object itself, checked against the protocol); sets ``bandwidth_``."""
        self.bandwidth_ = None
        if not isinstance(self.kernel, str):
            return check_kernel(self.kernel, "kernel")
        if self.kernel == "gaussian":
            self.bandwidth_ = (default_bandwidth(Xt[:, :d]) if self.bandwidth is None
                               else self.bandwidth)
        return make_kernel(self.kernel, activation=self.activation,  # type: ignore[return-value]
                           trained=self.trained, bandwidth=self.bandwidth_)

    def _augment(self, Xt: torch.Tensor) -> torch.Tensor:
        """X with the constant coordinate ``bias`` appended (the first-layer bias), or X."""
        if float(self.bias) == 0:
            return Xt
        return torch.cat([Xt, torch.full((len(Xt), 1), float(self.bias), dtype=Xt.dtype,
                                         device=Xt.device)], dim=1)

    def predict(self, X):
        """k(X, X_train) alpha, one column per target.

        Parameters
        ----------
        X : (n', d) array-like or tensor of inputs.

        Returns
        -------
        ndarray or Tensor
            (n',) or (n', k) predictions: a tensor for a tensor X, else a numpy array.
        """
        Xn = self._predict_data(X)
        Xt = self._augment(torch.tensor(Xn, device=self._X.device))
        if self.fit_ is not None:
            out = self.fit_.predict(Xt)
        else:
            rows = max(1, (1 << 24) // max(1, len(self._X)))
            out = torch.cat([self._kfn(Xt[i:i + rows], self._X).to(self.alpha_) @ self.alpha_
                             for i in range(0, len(Xt), rows)]) if len(Xt) else \
                torch.zeros((0, *self.alpha_.shape[1:]), dtype=torch.float64)
        return self._out(_finite(out, "the kernel between X and the training inputs"), X)
