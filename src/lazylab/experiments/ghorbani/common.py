"""Shared machinery of the Ghorbani, Mei, Misiakiewicz, Montanari (2019) experiments.

Every model of the paper with activation u^2 (or u^2 - 1) is a quadratic form

    f(x) = c + x^T M x,

so after training we read off (M, c) and score it exactly with the data model's
``risk_of_quadratic`` (the population risk R of the paper's Eqs. (4)-(5), no test-sample
noise), besides the test risk on fresh samples the paper reports.  The three regimes are
trained on samples (as in Sec. 4):

* RF (Eq. (2), sigma = u^2 - 1 as in Corollary 1, no offset as in footnote 2): least squares
  on n samples through chunked normal equations; M = W^T diag(a) W, c = -sum_i a_i.
* NT (Eq. (3), sigma = u^2): f = c + sum_i 2 (w_i.x)(u_i.x), linear in (U, c).
  - ``lstsq``: least squares on n samples.  The N d features (w_i.x) x_j span exactly the
    quadratic forms x^T M x with M in S_W = {M sym : P_perp M P_perp = 0} (Eq. (3) at
    sigma = u^2), and
    least squares depends on the features only through their span, so we regress on a basis of
    S_W: in coordinates z = V^T x with V = [Q, Q_perp] (Q an orthonormal basis of span W), the
    monomials z_a z_b (a <= b <= k) and z_a z_b (a <= k < b), k = rank W.  That is
    k(k+1)/2 + k(d-k) + 1 columns instead of N d + 1, with the identical fitted function.
  - ``sgd``: one-pass SGD on the linearization (:class:`lazylab.models.LinearizedModel` of the
    network at its random init), the paper's protocol; M = W^T U + U^T W.
* NN: the network itself trained by one-pass minibatch SGD (:func:`lazylab.train.fit`) with the
  companion code's schedule (lr, lr/10, lr/15; not stated in the paper); M = W^T diag(a) W.

Default step sizes.  Minibatch SGD on (y - f)^2 is mean-square stable for
eta < 2 / (lambda_max(H) + Tr(H)/b) (H the Hessian of the population loss, b the batch), and at
a constant step its excess risk over the limit is a fraction m ~ eta Tr(H) / (2b) of the limit
(LMS misadjustment).  The largest curvature is along the trace direction of M
(E[(x^T I x)^2]/d ~ d).  For NT, f = c + 2 x^T W^T U x: the gain from U to that direction is
2 sqrt(rho), so lambda_max ~ 8 rho d = 8N, and Tr(H) = 2 E||grad_U f||^2 ~ 8 N d.  For the qf
NN, grad_W f = 2 (W x) x^T gives lambda_max ~ 8 Tr(W^T W) and Tr(H) ~ 8 Tr(W^T W) d, with
Tr(W^T W) ~ Tr B ~ sqrt(d).  Hence

    eta_NT = min(1/8, 0.13 b/d) / N,      eta_NN = coef / (sqrt(d) (1 + d/b)),

with coef = 0.18 for qf (0.02 at d = 40, b = 100, tuned there) and 0.36 for the mixture's NN
(second layer trained too; 0.05 at d = 30).  1/(8N) is half NT's curvature bound; b/d is the
scaling of the noise bound 2b/Tr(H), and 0.13 was the best of five multiples at d = 200,
N = 100, 1e5 steps (risk 0.407 vs the limit 0.387; a quarter of it, 0.60, was still far from
converged: NT's SGD is slow, and the lr/10, lr/15 tails remove most of the noise).  Measured
at d = 450, N = 225, 2e5 steps: NN 0.0387 vs its limit 0.0357.  ``lr_factors`` (the paper's
"best step size from a grid") tries multiples of these and keeps the best run
(:func:`lazylab.experiments.toolkit.grid_search`).

NT's offset.  ||x||^2 = d + O(sqrt d) is nearly the constant feature times d, so the trace
direction of M (curvature ~ 8N) and the offset c (curvature 2) are nearly collinear: SGD learns
the trace part of M at once and the offset that centres it 4N times slower, and the risk climbs
above R0 before it falls (at d = 450, N = 180: 1.17 R0 after 4000 steps, still 1.05 after
1.1 x 10^5).  The offset therefore steps at ``nt_offset_lr_scale(N)`` = 2N times the step of
U, which puts c's step times curvature at half the trace direction's: a preconditioner of the
same linear model: Sec. 4 of the paper says only that NT is trained by SGD with a step size
from a grid, not how the offset steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import torch
from pydantic import Field

from lazylab.data.mixture import GaussianMixture, diag_delta
from lazylab.data.quadratic import QuadraticTarget, exponential_B
from lazylab.experiments.base import ExperimentParams
from lazylab.models import LinearizedModel, TwoLayerNet, gaussian_weights
from lazylab.solve import NormalEquations
from lazylab.train import fit, ghorbani_paper
from lazylab.train.packed import PackedQuadResult, train_packed_nt, train_packed_quad

Sampler = Callable[[int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


class GhorbaniParams(ExperimentParams):
    """Parameters every Ghorbani experiment shares: the problem and the SGD protocol."""

    d: int = Field(40, ge=4, le=4000, description="input dimension (paper: 450)")
    target_seed: int = Field(100, ge=0, description="seed of the target (B or Delta); the "
                             "companion code uses 100")
    batch_size: int = Field(100, ge=1, le=100_000, description="SGD minibatch size")
    nn_lr: float | None = Field(None, gt=0, le=10, description="NN step size; default "
                                "0.18/(sqrt(d)(1 + d/batch_size))")
    nt_lr: float | None = Field(None, gt=0, le=10, description="NT SGD step size; default "
                                "min(1/8, 0.13 batch_size/d)/N")
    lr_factors: list[Annotated[float, Field(gt=0, le=1000)]] = Field(
        [1.0], min_length=1, description="SGD step sizes tried, as multiples of nn_lr / nt_lr; "
        "the run with the lowest final risk is kept (the paper's best-of-grid choice)")
    tail_fraction: float = Field(0.15, ge=0, le=0.5, description="length of each of the lr/10 "
                                 "and lr/15 phases, as a fraction of sgd_steps")
    init_scale: float = Field(0.3, gt=0, le=10, description="NN init scale s: w_i ~ N(0, "
                              "s^2 I/(max(N,d) sqrt(d))), i.e. Tr W^T W = s^2 Tr B")


@dataclass(frozen=True)
class QuadForm:
    """A trained model as f(x) = c + x^T M x (M symmetric float64 numpy, c float)."""

    M: np.ndarray
    c: float


@dataclass(frozen=True)
class Problem:
    """A data model of the paper with what the experiments need from it.

    ``risk(q)`` is the exact population risk R/R0 of a quadratic form; ``sampler(dtype)``
    returns a callable (n, generator) -> (X, y).
    """

    kind: str  # "qf" or "mg"
    model: QuadraticTarget | GaussianMixture
    r0: float

    @property
    def d(self) -> int:
        return self.model.d

    def risk(self, q: QuadForm) -> float:
        return self.model.risk_of_quadratic(q.M, q.c) / self.r0

    def sampler(self, dtype: torch.dtype = torch.float32) -> Sampler:
        model = self.model

        def draw(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
            return model.sample(n, gen, dtype=dtype)

        return draw


def qf_problem(d: int, seed: int) -> Problem:
    """The quadratic target of Fig. 1: B = diag(Exp(1))/sqrt(d), b0 = -Tr B (centred)."""
    target = QuadraticTarget(exponential_B(d, seed))
    return Problem("qf", target, target.norm2())


def mg_problem(d: int, seed: int) -> Problem:
    """The mixture of Fig. 2: Sigma = I, Delta = diag(U{1, 1.5, 2})/sqrt(d); R0 = E y^2 = 1."""
    return Problem("mg", GaussianMixture(diag_delta(d, seed)), 1.0)


def draw_weights(d: int, N: int, gen: torch.Generator, *, covariance: np.ndarray | None = None,
                 dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """(N, d) rows w_i ~ N(0, Gamma): Gamma = I/d ("(I)") or ``covariance`` (e.g. B / Tr B)."""
    if covariance is None:
        return gaussian_weights(d, N, weight_std=d ** -0.5, generator=gen, dtype=dtype)
    return gaussian_weights(d, N, covariance=torch.as_tensor(covariance), generator=gen,
                            dtype=dtype)


# ------------------------------------------------------------------------------- least squares
def _accumulate(ne: NormalEquations, features: Callable[[torch.Tensor], torch.Tensor],
                sampler: Sampler, n: int, chunk: int, gen: torch.Generator) -> None:
    done = 0
    while done < n:
        k = min(chunk, n - done)
        X, y = sampler(k, gen)
        ne.add(features(X), y)
        done += k


def fit_rf(W: torch.Tensor, sampler: Sampler, n: int, chunk: int,
           gen: torch.Generator) -> tuple[QuadForm, float]:
    """Least-squares RF fit on n samples, features sigma(w_i.x) = (w_i.x)^2 - 1, no offset.

    Returns the fitted model as a quadratic form (M = W^T diag(a) W, c = -sum a) and the
    training mean squared error.
    """
    W = W.to(torch.float64)
    ne = NormalEquations(W.shape[0], device=W.device)
    _accumulate(ne, lambda X: (X.to(W) @ W.T) ** 2 - 1.0, sampler, n, chunk, gen)
    a = ne.solve()
    train = float(ne.residual(a))
    Wn, an = W.cpu().numpy(), a.cpu().numpy()
    return QuadForm((Wn.T * an) @ Wn, -float(an.sum())), train


def nt_basis_size(d: int, N: int) -> int:
    """Columns of the NT least-squares basis: k(k+1)/2 + k(d-k) + 1 with k = min(N, d)."""
    k = min(int(N), int(d))
    return k * (k + 1) // 2 + k * (d - k) + 1


def fit_nt_lstsq(W: torch.Tensor, sampler: Sampler, n: int, chunk: int,
                 gen: torch.Generator) -> tuple[QuadForm, float]:
    """Least-squares fit of the NT class F_NT(W) (Eq. (3)) on n samples, in a basis of S_W.

    See the module docstring: the basis spans the same functions as the N d features
    (w_i.x) x_j (plus the constant), so the fitted function is the NT least-squares fit.
    Returns (quadratic form, training mean squared error).
    """
    W = W.to(torch.float64)
    d = W.shape[1]
    U, s, _ = torch.linalg.svd(W.T, full_matrices=True)
    k = int((s > max(W.shape) * torch.finfo(torch.float64).eps * s[0]).sum())
    iu, ju = torch.triu_indices(k, k, device=W.device)

    def features(X: torch.Tensor) -> torch.Tensor:
        Z = X.to(W) @ U
        u, v = Z[:, :k], Z[:, k:]
        cols = [u[:, iu] * u[:, ju], (u.unsqueeze(2) * v.unsqueeze(1)).reshape(len(X), -1),
                torch.ones(len(X), 1, dtype=W.dtype, device=W.device)]
        return torch.cat(cols, dim=1)

    p = iu.numel() + k * (d - k) + 1
    ne = NormalEquations(p, device=W.device)
    _accumulate(ne, features, sampler, n, chunk, gen)
    coef = ne.solve()
    train = float(ne.residual(coef))
    coef = coef.cpu()
    nq = iu.numel()
    Mz = torch.zeros(d, d, dtype=torch.float64)
    # z_a z_b with a < b appears once, so its coefficient is 2 Mz[a, b]; likewise z_a z_b
    # across the two blocks.
    Mz[iu, ju] = coef[:nq] / torch.where(iu == ju, 1.0, 2.0).to(coef)
    Mz[ju, iu] = Mz[iu, ju]
    R = coef[nq:nq + k * (d - k)].reshape(k, d - k) / 2
    Mz[:k, k:] = R
    Mz[k:, :k] = R.T
    Uc = U.cpu()
    M = (Uc @ Mz @ Uc.T).numpy()
    return QuadForm(0.5 * (M + M.T), float(coef[-1])), train


def test_risk(q: QuadForm, sampler: Sampler, n: int, chunk: int, gen: torch.Generator,
              r0: float, device: torch.device) -> float:
    """Mean of (y - c - x^T M x)^2 over n fresh samples, divided by R0 (the paper's test error)."""
    M = torch.as_tensor(q.M, dtype=torch.float64, device=device)
    total, done = 0.0, 0
    while done < n:
        k = min(chunk, n - done)
        X, y = sampler(k, gen)
        X = X.to(M)
        f = q.c + ((X @ M) * X).sum(1)
        total += float(((y.to(M) - f) ** 2).sum())
        done += k
    return total / n / r0


# ------------------------------------------------------------------------------- SGD
@dataclass(frozen=True)
class SGDConfig:
    """One-pass minibatch SGD: steps, batch, base lr, schedule tails (fractions of steps)."""

    steps: int
    batch_size: int
    lr: float
    tail_fraction: float

    def schedule(self):
        tail = int(round(self.tail_fraction * self.steps))
        return ghorbani_paper(self.steps, tail, tail)


def nn_lr(d: int, batch: int, lr: float | None, coef: float = 0.18) -> float:
    """NN step size: ``lr`` or coef / (sqrt(d) (1 + d/batch)) (module docstring)."""
    return float(lr) if lr is not None else coef / (math.sqrt(d) * (1 + d / batch))


def nt_lr(d: int, N: int, batch: int, lr: float | None) -> float:
    """NT step size: ``lr`` or min(1/8, 0.13 batch/d) / N (module docstring)."""
    return float(lr) if lr is not None else min(0.125, 0.13 * batch / d) / N


#: LMS misadjustment targeted by :func:`nt_lr_learning` (excess risk / limit at a constant step).
NT_MISADJUSTMENT = 0.05


def nt_lr_learning(d: int, N: int, batch: int, lr: float | None) -> float:
    """NT step size for the risk-vs-samples curves: ``lr`` or the step whose LMS misadjustment
    eta Tr(H) / (2 batch) is NT_MISADJUSTMENT, with Tr(H) ~ 8 N d (module docstring):
    eta = 2 NT_MISADJUSTMENT batch / (8 N d), capped by :func:`nt_lr`. At a constant step the
    risk then sits within ~5% of its limit, so the curve's shape comes from learning, not
    from the step-size cuts of the schedule.
    """
    if lr is not None:
        return float(lr)
    return min(nt_lr(d, N, batch, None), 2 * NT_MISADJUSTMENT * batch / (8 * N * d))


def nt_offset_lr_scale(N: int) -> float:
    """The NT offset's step over U's, 2N (module docstring: c's curvature is 2, the trace
    direction's ~ 8N, and the two are nearly collinear)."""
    return 2.0 * N


def nn_init(problem: Problem, N: int, init_scale: float, gen: torch.Generator,
            device: torch.device) -> TwoLayerNet:
    """The paper's NN at initialization (see :func:`train_nn`), drawn from ``gen``."""
    d = problem.d
    mg = problem.kind == "mg"
    std = init_scale / math.sqrt(max(N, d) * (1.0 if mg else math.sqrt(d)))
    net = TwoLayerNet(d, N, activation="quad", scaling="none", a_init="ones", weight_std=std,
                      train_second=mg, bias=True, generator=gen, device=device,
                      dtype=torch.float32)
    if mg:
        with torch.no_grad():
            net.a.zero_()
    return net


def quad_form(W: torch.Tensor, a: torch.Tensor, c: float) -> QuadForm:
    """f(x) = sum_i a_i (w_i . x)^2 + c as c + x^T M x, M = W^T diag(a) W (float64)."""
    Wn = W.detach().double().cpu().numpy()
    an = a.detach().double().cpu().numpy()
    return QuadForm((Wn.T * an) @ Wn, float(c))


def train_nn(problem: Problem, N: int, cfg: SGDConfig, init_scale: float, gen: torch.Generator,
             device: torch.device, *, log_steps: list[int] | None = None,
             on_eval: Callable[[QuadForm], dict[str, float]] | None = None):
    """Train the paper's NN by one-pass SGD on fresh samples; returns (QuadForm, History).

    qf (Theorem 3): f = sum_i (w_i.x)^2 + c, second layer fixed to 1; first layer
    w_i ~ N(0, s^2 I/(max(N, d) sqrt(d))), s = ``init_scale``, so Tr(W^T W) = s^2 sqrt(d)
    min(N/d, 1) is a fraction s^2 of Tr B ~ sqrt(d) at any d and N: a small init (Theorem 3
    asks only for an absolutely continuous init law) that also keeps the curvature along the
    trace direction, ~8 Tr(W^T W), below that of the target at any d (the default step assumes
    Tr(W^T W) ~ sqrt(d)).
    mg (Theorem 6): f = sum_i a_i (w_i.x)^2 + c with a trained from a = 0 (companion code), so
    each neuron's sign is learned (a +1 start would leave positive neurons stuck at w = 0, a
    local minimum for them when Delta is positive definite); w_i ~ N(0, s^2 I/max(N, d)).
    """
    net = nn_init(problem, N, init_scale, gen, device)

    def quad() -> QuadForm:
        return quad_form(net.W, net.scale * net.a.detach(), float(net.c.detach()))

    hist = fit(net, sampler=problem.sampler(), loss="mse", optimizer="one_pass", lr=cfg.lr,
               steps=cfg.steps, batch_size=cfg.batch_size, schedule=cfg.schedule(),
               log_steps=log_steps if log_steps is not None else [cfg.steps],
               eval_fn=(lambda _m: on_eval(quad())) if on_eval is not None else None,
               generator=gen)
    return quad(), hist


def nt_init(d: int, N: int, gen: torch.Generator, device: torch.device) -> TwoLayerNet:
    """The network the NT model linearizes (w_i ~ N(0, I/d), a = 1), drawn from ``gen``."""
    return TwoLayerNet(d, N, activation="quad", scaling="none", a_init="ones",
                       weight_std=d ** -0.5, bias=True, generator=gen, device=device,
                       dtype=torch.float32)


def nt_quad_form(W: torch.Tensor, U: torch.Tensor, c: float) -> QuadForm:
    """f(x) = 2 sum_i (w_i . x)(u_i . x) + c as c + x^T M x, M = W^T U + U^T W (float64)."""
    M = W.detach().double().cpu().numpy().T @ U.detach().double().cpu().numpy()
    return QuadForm(M + M.T, float(c))


def train_nt_sgd(problem: Problem, N: int, cfg: SGDConfig, gen: torch.Generator,
                 device: torch.device, *, log_steps: list[int] | None = None,
                 on_eval: Callable[[QuadForm], dict[str, float]] | None = None):
    """Train the NT model (linearization at w_i ~ N(0, I/d), U = 0) by one-pass SGD.

    Returns (QuadForm, History, W) with W the (N, d) random first layer.
    """
    lin = LinearizedModel(nt_init(problem.d, N, gen, device), include_f0=False,
                          wrt=("W", "c"))
    W = lin.base.W.detach()

    def quad() -> QuadForm:
        return nt_quad_form(W, lin.direction["W"], float(lin.direction["c"].detach()))

    params = [lin.direction["W"],
              {"params": [lin.direction["c"]], "lr_scale": nt_offset_lr_scale(N)}]
    hist = fit(lin, sampler=problem.sampler(), loss="mse", optimizer="one_pass", lr=cfg.lr,
               params=params,
               steps=cfg.steps, batch_size=cfg.batch_size, schedule=cfg.schedule(),
               log_steps=log_steps if log_steps is not None else [cfg.steps],
               eval_fn=(lambda _m: on_eval(quad())) if on_eval is not None else None,
               generator=gen)
    return quad(), hist, W


def train_lr_grid(problem: Problem, N: int, cfg: SGDConfig, factors: Sequence[float],
                  init_scale: float | None, gen: torch.Generator, device: torch.device, *,
                  log_steps: Sequence[int]) -> PackedQuadResult:
    """NN (``init_scale`` given, :func:`train_nn`'s model) or NT (None, :func:`train_nt_sgd`'s)
    at width N trained at every step size ``cfg.lr x factors`` as one packed network, from one
    initialization drawn from ``gen`` on one sample stream from ``gen`` (as separate runs
    restarted from ``gen``'s state would see). Member k's exact risk R/R0 is logged at
    ``log_steps`` (``result.log_eval[k]``) with its batch losses (``result.log_loss[k]``)."""
    F = len(factors)
    kw: dict[str, Any] = dict(lrs=[cfg.lr * f for f in factors], sampler=problem.sampler(),
                              steps=cfg.steps, batch_size=cfg.batch_size,
                              schedule=cfg.schedule(), log_steps=log_steps)
    if init_scale is not None:
        net = nn_init(problem, N, init_scale, gen, device)
        return train_packed_quad(
            [net.W.detach()] * F, a0=[net.scale * net.a.detach()] * F,
            train_second=problem.kind == "mg", generator=gen,
            eval_fn=lambda _j, prm: problem.risk(quad_form(*prm)), **kw)
    W = nt_init(problem.d, N, gen, device).W.detach()
    return train_packed_nt([W] * F, generator=gen, offset_lr_scale=nt_offset_lr_scale(N),
                           eval_fn=lambda _j, prm: problem.risk(nt_quad_form(*prm)), **kw)
