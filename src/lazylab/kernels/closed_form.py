"""Infinite-width NNGP and NTK of the two-layer net f(x) = m^-1/2 sum_r a_r sigma(w_r . x).

With w_r ~ N(0, I_d) and a_r = +-1, as m -> infinity the tangent kernel of f converges to
(Jacot et al. 2018; Arora et al. 2019, Eq. (3) and Sec. 3; Ghorbani et al. 2019, Eq. (5))

    first layer  (df/dw_r):  K_1(x, z) = (x.z) E_w[sigma'(w.x) sigma'(w.z)],
    second layer (df/da_r):  K_2(x, z) = E_w[sigma(w.x) sigma(w.z)]     (the NNGP kernel),

and ``trained="first"`` returns K_1, ``trained="both"`` K_1 + K_2. Both depend on (x, z) only
through a = |x|^2, b = |z|^2, c = x.z (the covariance of (w.x, w.z)), and so hold for any
norms, not only on the sphere. Evaluation, per activation:

* the activation's hooks ``Activation.dual`` (K_2) and ``Activation.derivative_dual``
  (E[sigma' sigma'], the factor of K_1) when it has them: relu^k (relu, relu2, relu3,
  relu3_6: Cho & Saul arc-cosine kernels, :mod:`.arccos`), polynomials (quad, quad_centered,
  linear: Gaussian moments, :mod:`.dual`), erf and sin (closed forms, :mod:`.dual`), and any
  user activation that passes its own; relu^k's full NTK is one fused arc-cosine evaluation
  (for relu K_1 is Arora et al.'s H_inf(x, z) = x.z (pi - arccos(cos angle)) / (2 pi)).
* anything else (tanh, sigmoid, softplus, user activations): 2-D Gaussian quadrature after a
  Cholesky factorisation of the 2x2 covariance (:mod:`.quadrature`), accurate to ~1e-11.

``method="quadrature"`` forces the quadrature path for any activation (to cross-check).

Example
-------
>>> import torch
>>> X = torch.eye(2, dtype=torch.float64)
>>> ntk(X).tolist()          # H_inf: |x|^2 / 2 on the diagonal, 0 for orthogonal points
[[0.5, 0.0], [0.0, 0.5]]
>>> float(nngp(X, activation="quad")[0, 0])   # E[g^4] = 3
3.0
"""

from __future__ import annotations

import torch

from lazylab.activations import Activation, get_activation
from lazylab.duals._inputs import check_choice, check_pair
from lazylab.duals.arccos import relu_power_ntk
from lazylab.kernels.quadrature import gaussian_expectation

_TRAINED = ("first", "both")
_METHODS = ("auto", "quadrature")


def _prepare(X: torch.Tensor, Z: torch.Tensor | None, activation: str | Activation,
             method: str) -> tuple[Activation, torch.Tensor, torch.Tensor | None]:
    act = get_activation(activation)
    check_choice("method", method, _METHODS)
    X, Z = check_pair(X, Z)
    return act, X, Z


def _nngp(act: Activation, X: torch.Tensor, Z: torch.Tensor | None, method: str
          ) -> torch.Tensor:
    if method == "auto" and act.dual is not None:
        return act.dual(X, Z)
    return gaussian_expectation(act.fn, act.fn, X, Z)


def _derivative(act: Activation, X: torch.Tensor, Z: torch.Tensor | None, method: str
                ) -> torch.Tensor:
    if method == "auto" and act.derivative_dual is not None:
        return act.derivative_dual(X, Z)
    if act.relu_power == 0:
        raise ValueError("activation must have a derivative in L2 for the NTK; the step "
                         "function (relu_power=0) has none")

    def d1(u: torch.Tensor) -> torch.Tensor:
        return act.deriv(u, 1)

    return gaussian_expectation(d1, d1, X, Z)


def nngp(X: torch.Tensor, Z: torch.Tensor | None = None, *,
         activation: str | Activation = "relu", method: str = "auto") -> torch.Tensor:
    """NNGP kernel E_w[sigma(w.x) sigma(w.z)], w ~ N(0, I_d).

    Parameters
    ----------
    X : (n, d) floating tensor.
    Z : (n', d) tensor or None (then Z = X and the result is a symmetric Gram matrix).
    activation : a name of :mod:`lazylab.activations` or an ``Activation``.
    method : ``"auto"`` (exact formula where one exists) or ``"quadrature"``.

    Returns
    -------
    (n, n') tensor on X's device and dtype.
    """
    act, X, Z = _prepare(X, Z, activation, method)
    return _nngp(act, X, Z, method)


def derivative_kernel(X: torch.Tensor, Z: torch.Tensor | None = None, *,
                      activation: str | Activation = "relu", method: str = "auto"
                      ) -> torch.Tensor:
    """E_w[sigma'(w.x) sigma'(w.z)], the factor of the first-layer NTK besides x.z."""
    act, X, Z = _prepare(X, Z, activation, method)
    return _derivative(act, X, Z, method)


def ntk(X: torch.Tensor, Z: torch.Tensor | None = None, *,
        activation: str | Activation = "relu", trained: str = "first",
        method: str = "auto") -> torch.Tensor:
    """Infinite-width NTK of f(x) = m^-1/2 sum_r a_r sigma(w_r . x), a_r = +-1.

    K(x, z) = (x.z) E_w[sigma'(w.x) sigma'(w.z)]  (+ E_w[sigma(w.x) sigma(w.z)] if "both").

    Parameters
    ----------
    X : (n, d) floating tensor.
    Z : (n', d) tensor or None (then Z = X).
    activation : a name of :mod:`lazylab.activations` or an ``Activation``.
    trained : ``"first"`` (first layer only; Arora et al.'s H_inf for relu) or ``"both"``.
    method : ``"auto"`` (exact formula where one exists) or ``"quadrature"``.

    Returns
    -------
    (n, n') tensor on X's device and dtype.
    """
    act, X, Z = _prepare(X, Z, activation, method)
    check_choice("trained", trained, _TRAINED)
    if method == "auto" and act.relu_power is not None and act.relu_power >= 1:
        return relu_power_ntk(X, Z, power=act.relu_power, scale=act.relu_scale,
                              trained=trained)
    K = _derivative(act, X, Z, method)
    K.mul_(X @ (X if Z is None else Z).T)
    if trained == "both":
        K.add_(_nngp(act, X, Z, method))
    return K
