"""Risks of Bai & Lee (2020) and a recipe that trains the randomized network.

For data (x_i, y_i), i = 1..n, a loss l, a symmetric-init net with weights W0 and the movement
U (Bai & Lee's W), with Sigma = diag(iid Unif{+-1}):

    L~(U)       = E_Sigma L(U Sigma) = E_Sigma mean_i l(y_i, f(x_i; W0 + U Sigma))   (Sec. 3.1)
    L~_lam(U)   = L~(U) + lam ||U||_{2,4}^8                                         (Eq. (9))
    L^Q(U)      = mean_i l(y_i, f^Q_U(x_i)),
    f^Q_U(x)    = (s_m / 2) sum_r a_r sigma''(w0_r . x) (u_r . x)^2                 (Sec. 4.1)

For the squared loss the randomized risk is exact (not stated in the paper; it follows from
the independence of the signs across neurons, Eq. (2)):
E_Sigma (y - f)^2 = (y - E_Sigma f)^2 + Var_Sigma f, with the per-neuron moments of
:class:`lazylab.models.SignRandomizedNet`. Other losses use Monte Carlo over Sigma.

Training recipe (the paper fixes no algorithm or step size; Sec. 4 points to saddle-escaping
methods such as noisy SGD): gradient descent on L~ (+ the regularizer), either with a
fresh Sigma per step (``objective="fresh_sigma"``, an unbiased stochastic gradient of L~) or on
the exact squared-loss L~ (``objective="exact"``), optionally with Langevin noise, started from
a small random U: U = 0 is a stationary point (a saddle) of L~, so plain GD from 0 never moves.

Example
-------
>>> import torch
>>> from lazylab.models import TwoLayerNet, SignRandomizedNet
>>> g = torch.Generator().manual_seed(0)
>>> net = TwoLayerNet(3, 40, activation="relu3_6", init="symmetric", a_init="ones",
...                   dtype=torch.float64, generator=g)
>>> X = torch.randn(8, 3, generator=g, dtype=torch.float64)
>>> y = torch.randn(8, generator=g, dtype=torch.float64)
>>> rnet = SignRandomizedNet(net)          # U = 0: f(W0) = 0, so L~(0) = mean(y^2) / 2
>>> abs(float(randomized_risk(rnet, X, y).detach()) - float(0.5 * (y ** 2).mean())) < 1e-12
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import torch

from lazylab.models.randomized import SignRandomizedNet
from lazylab.models.two_layer import TwoLayerNet
from lazylab.train.history import History
from lazylab.train.loop import fit
from lazylab.train.losses import LossFn, get_loss
from lazylab.train.regularizers import norm_2_4_penalty
from lazylab.train.schedules import Schedule

#: Squared losses whose randomized risk has a closed form, with their (scale, reduction).
EXACT_SQUARED_LOSSES: dict[str, tuple[float, str]] = {
    "mse": (1.0, "mean"), "half_mse": (0.5, "mean"), "half_sse": (0.5, "sum"),
}


def _check_xy(X: torch.Tensor, y: torch.Tensor) -> None:
    if X.dim() != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, d) and y (n,); got {tuple(X.shape)} and "
                         f"{tuple(y.shape)}")


def sign_moments(rnet: SignRandomizedNet, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E_Sigma f, Var_Sigma f) of f(X; W0 + U Sigma) in one pass (exact: the signs of Eq. (2) are
    independent across neurons):

        E_Sigma f   = s_m sum_r a_r [sigma(w0_r.x + u_r.x) + sigma(w0_r.x - u_r.x)] / 2 (+ c),
        Var_Sigma f = s_m^2 sum_r a_r^2 [(sigma(w0_r.x + u_r.x) - sigma(w0_r.x - u_r.x)) / 2]^2.

    The same numbers as ``rnet.expectation`` and ``rnet.variance``, sharing the two activation
    evaluations (about 2.5x faster per training step, which matters for GD on L~).
    """
    base = rnet.base
    Z = base.preactivation(X)
    V = X @ rnet.direction().T
    Sp, Sm = base.act(Z + V), base.act(Z - V)
    mean = base.scale * (0.5 * (Sp + Sm) @ base.a)
    if base.c is not None:
        mean = mean + base.c
    var = base.scale**2 * ((0.5 * (Sp - Sm)) ** 2 @ base.a**2)
    return mean, var


def linear_term_second_moment(rnet: SignRandomizedNet, X: torch.Tensor) -> torch.Tensor:
    """E_Sigma (f^L_{U Sigma}(x))^2 = s_m^2 sum_r a_r^2 sigma'(w0_r . x)^2 (u_r . x)^2 (Sec. 3).

    E_Sigma f^L_{U Sigma} = 0, so this is also its variance; it is O(m^{-1/2} ||U||_{2,4}^2)
    (Lemma 11(a)), the implicit penalty inside the squared-loss randomized risk.
    """
    base = rnet.base
    D1 = base.act.deriv(base.preactivation(X), 1)
    V = X @ rnet.direction().T
    return base.scale**2 * ((D1 * V) ** 2 @ base.a**2)


def quadratic_risk(net: TwoLayerNet, X: torch.Tensor, y: torch.Tensor, U: torch.Tensor,
                   loss: str | LossFn = "half_mse") -> torch.Tensor:
    """L^Q(U) = l(f^Q_U(X), y) with f^Q the closed-form second Taylor term of ``net`` at its
    weights (:meth:`TwoLayerNet.taylor_terms`); differentiable in U."""
    _check_xy(X, y)
    return get_loss(loss)(net.taylor_terms(X, U, 2)[2], y)


def randomized_risk(rnet: SignRandomizedNet, X: torch.Tensor, y: torch.Tensor,
                    loss: str | LossFn = "half_mse", *, n_draws: int | None = None,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """L~(U) = E_Sigma l(f(X; W0 + U Sigma), y), differentiable in ``rnet.U``.

    Exact for the squared losses of :data:`EXACT_SQUARED_LOSSES` when ``n_draws`` is None:
    c * red_i[(y_i - E f(x_i))^2 + Var f(x_i)]; otherwise the mean over ``n_draws`` independent
    Sigma (an unbiased estimate, needed for e.g. the logistic loss).
    """
    _check_xy(X, y)
    if n_draws is None:
        if not isinstance(loss, str) or loss not in EXACT_SQUARED_LOSSES:
            raise ValueError(f"the exact randomized risk needs loss in "
                             f"{', '.join(EXACT_SQUARED_LOSSES)}; got {loss!r} (pass n_draws "
                             "for a Monte Carlo estimate)")
        c, red = EXACT_SQUARED_LOSSES[loss]
        mean, var = sign_moments(rnet, X)
        per = (y - mean) ** 2 + var
        return c * (per.mean() if red == "mean" else per.sum())
    if int(n_draws) != n_draws or n_draws < 1:
        raise ValueError(f"n_draws must be a positive integer; got {n_draws!r}")
    fn = get_loss(loss)
    outs = rnet.sample_outputs(X, int(n_draws), generator)
    return torch.stack([fn(o, y) for o in outs]).mean()


def regularized_randomized_risk(rnet: SignRandomizedNet, X: torch.Tensor, y: torch.Tensor,
                                lam: float, loss: str | LossFn = "half_mse", *,
                                n_draws: int | None = None,
                                generator: torch.Generator | None = None) -> torch.Tensor:
    """L~_lam(U) = L~(U) + lam ||U||_{2,4}^8 (Bai & Lee 2020, Eq. (9); Corollary 3)."""
    return (randomized_risk(rnet, X, y, loss, n_draws=n_draws, generator=generator)
            + norm_2_4_penalty(lam, attr="U")(rnet))


@dataclass
class FreshSigmaForward:
    """``forward`` for :func:`lazylab.train.fit`: f(X; W0 + U Sigma) with a fresh Sigma drawn
    from ``generator`` at every call, so each GD step follows an unbiased gradient of L~."""

    generator: torch.Generator

    def __call__(self, model: SignRandomizedNet, X: torch.Tensor) -> torch.Tensor:
        return model(X, generator=self.generator)


class ExactSignMoments:
    """``forward`` / ``loss`` pair for :func:`fit` on the exact squared-loss L~.

    The forward returns the (n, 2) stack [E_Sigma f, Var_Sigma f]; the loss maps it to
    c * red[(y - E f)^2 + Var f], which is L~ for the named squared loss.
    """

    def __init__(self, loss: str = "half_mse"):
        if loss not in EXACT_SQUARED_LOSSES:
            raise ValueError(f"loss must be one of {', '.join(EXACT_SQUARED_LOSSES)} for the "
                             f"exact objective; got {loss!r}")
        self.scale, self.reduction = EXACT_SQUARED_LOSSES[loss]

    @staticmethod
    def forward(model: SignRandomizedNet, X: torch.Tensor) -> torch.Tensor:
        return torch.stack(sign_moments(model, X), dim=-1)

    def loss(self, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        per = (y - pred[:, 0]) ** 2 + pred[:, 1]
        return self.scale * (per.mean() if self.reduction == "mean" else per.sum())


def train_randomized(rnet: SignRandomizedNet, X: torch.Tensor, y: torch.Tensor, *, lr: float,
                     steps: int, generator: torch.Generator,
                     objective: Literal["fresh_sigma", "exact"] = "fresh_sigma",
                     loss: str | LossFn = "half_mse", lam: float = 0.0,
                     noise_std: float = 0.0, schedule: Schedule | None = None,
                     log_points: int = 10,
                     eval_fn: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
                     ) -> History:
    """Full-batch GD on L~_lam(U) = L~(U) + lam ||U||_{2,4}^8, in place (Sec. 4; the paper fixes
    no step size).

    Parameters
    ----------
    rnet : the randomized net; its U is trained (start it small and random, not at 0).
    X, y : training data, y of shape (n,).
    lr, steps : step size and number of GD steps.
    generator : the source of the fresh Sigma per step and of the Langevin noise.
    objective : ``"fresh_sigma"`` (one Sigma per step, any loss) or ``"exact"`` (the closed-form
        squared-loss L~; deterministic).
    loss : the loss l (a name of :mod:`lazylab.train.losses` or a callable).
    lam : the weight of the ||U||_{2,4}^8 regularizer (0: none).
    noise_std : Langevin noise, U <- U - lr grad + sqrt(2 lr) noise_std xi (noisy GD, the
        saddle-escaping method the paper cites).
    schedule : learning-rate multiplier per step (:mod:`lazylab.train.schedules`), e.g. a
        cosine decay so that the last iterate settles.
    log_points, eval_fn : logging, as in :func:`lazylab.train.fit`.

    Returns
    -------
    History of the training objective (the data part; the regularizer is logged separately).
    """
    _check_xy(X, y)
    if objective not in ("fresh_sigma", "exact"):
        raise ValueError(f"objective must be 'fresh_sigma' or 'exact'; got {objective!r}")
    reg = norm_2_4_penalty(lam, attr="U") if lam > 0 else None
    if objective == "exact":
        if not isinstance(loss, str):
            raise ValueError("objective='exact' needs a named squared loss")
        exact = ExactSignMoments(loss)
        fwd: Callable = exact.forward
        loss_fn: str | LossFn = exact.loss
    else:
        fwd, loss_fn = FreshSigmaForward(generator), loss
    return fit(rnet, data=(X, y), loss=loss_fn, optimizer="gd", lr=lr, steps=steps,
               schedule=schedule, regularizer=reg, forward=fwd, noise_std=noise_std,
               noise_mode="langevin", generator=generator, params=["U"], log_points=log_points,
               eval_fn=eval_fn)
