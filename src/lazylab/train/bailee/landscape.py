"""Landscape checks of Bai & Lee (2020), Sec. 4: directional derivatives, Hessian forms along
randomly signed directions, and the inequalities of Lemma 1, Theorem 2 and Corollary 3.

For a risk R(W) and a planted W* (rows w*_r), with Sigma' = diag(iid Unif{+-1}):

    E_Sigma' grad^2 R(W)[W* Sigma', W* Sigma'] = sum_r grad^2 R(W)[e_r w*_r, e_r w*_r]

(the cross terms r != s average to 0), and the landscape inequality reads

    E_Sigma' grad^2 R(W)[W* Sigma', W* Sigma'] <= <grad R(W), W> - 2 (R(W) - OPT) + err.   (*)

For the clean risk L^Q (Lemma 1; its proof, App. B.1) the left side splits exactly into

    term I  = (2/n) sum_i l'(y_i, f^Q_W(x_i)) f^Q_{W*}(x_i)      (Sigma' D_i Sigma' = D_i)
    E term II = (1/n) sum_i l''(y_i, f^Q_W(x_i)) s_m^2 sum_r a_r^2 sigma''(w0_r.x_i)^2
                (w_r . x_i)^2 (w*_r . x_i)^2 >= 0,

and convexity plus 2-homogeneity give term I <= <grad L^Q(W), W> - 2 (L^Q(W) - L^Q(W*)), so
(*) holds with err = E term II = O(||W||_{2,4}^2 ||W*||_{2,4}^2 / m).

Derivatives use autograd on a leaf parameter: set its value, then call the helpers with a
closure ``risk()`` that evaluates the objective at the parameter's current value.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from lazylab.models.two_layer import TwoLayerNet
from lazylab.train.bailee.randomized_risk import quadratic_risk
from lazylab.train.losses import LossFn, get_loss

Risk = Callable[[], torch.Tensor]


def loss_derivatives(loss: str | LossFn, pred: torch.Tensor, y: torch.Tensor,
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample (l'(y_i, z_i), l''(y_i, z_i)) in z of a separable, mean-reduced loss.

    Autograd of loss(z, y) = (1/n) sum_i l(y_i, z_i): the gradient is l'_i / n and, the terms
    being separable, the gradient of its sum is the Hessian diagonal l''_i / n.
    """
    fn = get_loss(loss)
    n = pred.shape[0]
    with torch.enable_grad():
        z = pred.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(z, y), z, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), z, allow_unused=True)
    h = torch.zeros_like(z) if h is None else h
    return (n * g).detach(), (n * h).detach()


def directional_derivatives(risk: Risk, param: torch.Tensor, V: torch.Tensor,
                            ) -> tuple[float, float, float]:
    """(R(W), <grad R(W), V>, grad^2 R(W)[V, V]) at the current value W of ``param``."""
    if V.shape != param.shape:
        raise ValueError(f"V must have the shape of the parameter {tuple(param.shape)}; got "
                         f"{tuple(V.shape)}")
    with torch.enable_grad():
        val = risk()
        (g,) = torch.autograd.grad(val, param, create_graph=True)
        d1 = (g * V).sum()
        (hv,) = torch.autograd.grad(d1, param, allow_unused=True)
    d2 = 0.0 if hv is None else float((hv * V).sum())
    return float(val.detach()), float(d1.detach()), d2


def expected_sign_hessian_form(risk: Risk, param: torch.Tensor, W_star: torch.Tensor, *,
                               n_draws: int | None = None,
                               generator: torch.Generator | None = None,
                               ) -> tuple[float, float]:
    """(E_Sigma' grad^2 R(W)[W* Sigma', W* Sigma'], its standard error) at the parameter's W.

    Exact (standard error 0) when ``n_draws`` is None: the sum over rows r of the Hessian form
    along e_r w*_r (one Hessian-vector product per row, for small m). Otherwise the mean over
    ``n_draws`` random sign vectors.
    """
    if W_star.shape != param.shape or W_star.dim() != 2:
        raise ValueError(f"W_star must have the parameter's (m, d) shape {tuple(param.shape)}")
    with torch.enable_grad():
        (g,) = torch.autograd.grad(risk(), param, create_graph=True)

        def form(V: torch.Tensor) -> float:
            (hv,) = torch.autograd.grad((g * V).sum(), param, retain_graph=True,
                                        allow_unused=True)
            return 0.0 if hv is None else float((hv * V).sum())

        if n_draws is None:
            total = 0.0
            for r in range(W_star.shape[0]):
                if bool((W_star[r] != 0).any()):
                    V = torch.zeros_like(W_star)
                    V[r] = W_star[r]
                    total += form(V)
            return total, 0.0
        if generator is None or int(n_draws) < 2:
            raise ValueError("n_draws >= 2 and a generator are needed for the Monte Carlo form")
        vals = []
        for _ in range(int(n_draws)):
            s = torch.randint(0, 2, (W_star.shape[0],), generator=generator,
                              device=generator.device)
            vals.append(form((2 * s - 1).to(W_star).unsqueeze(1) * W_star))
    t = torch.tensor(vals, dtype=torch.float64)
    return float(t.mean()), float(t.std() / math.sqrt(len(vals)))


def landscape_gap(risk: Risk, param: torch.Tensor, W_star: torch.Tensor, opt: float, *,
                  n_draws: int | None = None,
                  generator: torch.Generator | None = None) -> dict[str, float]:
    """Both sides of (*) at the parameter's current value W (Theorem 2 / Corollary 3).

    Returns lhs = E_Sigma' grad^2 R[W* Sigma', W* Sigma'] (and its standard error ``lhs_se``),
    rhs = <grad R(W), W> - 2 (R(W) - opt) and violation = lhs - rhs (<= err when (*) holds).
    """
    lhs, se = expected_sign_hessian_form(risk, param, W_star, n_draws=n_draws,
                                         generator=generator)
    val, d1, _ = directional_derivatives(risk, param, param.detach().clone())
    rhs = d1 - 2.0 * (val - opt)
    return {"lhs": lhs, "lhs_se": se, "rhs": rhs, "violation": lhs - rhs, "risk": val,
            "grad_dot_w": d1}


def lemma1_terms(net: TwoLayerNet, X: torch.Tensor, y: torch.Tensor, U: torch.Tensor,
                 U_star: torch.Tensor, loss: str | LossFn = "logistic") -> dict[str, float]:
    """The exact pieces of Lemma 1 for the clean risk L^Q at U with planted U*.

    Returns term_I, term_II (= E_Sigma term II), lhs = term_I + term_II,
    rhs = <grad L^Q(U), U> - 2 (L^Q(U) - L^Q(U*)) (computed by autograd, independently of the
    2-homogeneity used in the proof), and the values L^Q(U), L^Q(U*).
    """
    Z0 = net.preactivation(X)
    D2 = net.act.deriv(Z0, 2)
    with torch.no_grad():
        fq = net.taylor_terms(X, U, 2)[2]
        fq_star = net.taylor_terms(X, U_star, 2)[2]
        l1, l2 = loss_derivatives(loss, fq, y)
        term_I = float(2.0 * (l1 * fq_star).mean())
        V, Vs = X @ U.T, X @ U_star.T
        inner = net.scale**2 * ((D2 * V * Vs) ** 2 @ net.a**2)
        term_II = float((l2 * inner).mean())
        lq_star = float(quadratic_risk(net, X, y, U_star, loss))
    Uvar = U.detach().clone().requires_grad_(True)
    val, d1, _ = directional_derivatives(lambda: quadratic_risk(net, X, y, Uvar, loss), Uvar,
                                         U.detach())
    rhs = d1 - 2.0 * (val - lq_star)
    return {"term_I": term_I, "term_II": term_II, "lhs": term_I + term_II, "rhs": rhs,
            "risk": val, "risk_star": lq_star}


def _neuron_blocks(m: int, n: int, block_elems: int) -> list[slice]:
    """Column (neuron) slices whose (n x block) arrays hold about ``block_elems`` numbers."""
    step = max(1, int(block_elems) // max(int(n), 1))
    return [slice(s, min(s + step, m)) for s in range(0, m, step)]


def squared_landscape_terms(net: TwoLayerNet, X: torch.Tensor, y: torch.Tensor,
                            U: torch.Tensor, U_star: torch.Tensor, *,
                            block_elems: int = 1 << 21) -> dict[str, float]:
    """The exact pieces of Lemma 1 and Theorem 2 at U for the squared loss l = (y - z)^2 / 2.

    With Z = X W0^T, V = X U^T, C = X U*^T (n x m), P_k = sigma^(k)(Z + V),
    M_k = sigma^(k)(Z - V), s = s_m, the randomized risk is exact (the signs are independent
    across neurons),

        L~(U) = (1/2) mean_i [(y_i - mu_i)^2 + v_i],
        mu_i = s sum_r a_r (P0 + M0)_ir / 2,   v_i = s^2 sum_r a_r^2 h_ir^2,  h = (P0 - M0) / 2,

    and so are its derivatives. Along U itself (all rows scaled together)

        <grad L~(U), U> = mean_i [-(y_i - mu_i) mu'_i + v'_i / 2],
        mu' = s sum_r a_r (P1 - M1) V / 2,   v' = s^2 sum_r a_r^2 2 h (P1 + M1) V / 2,

    and, since E_Sigma' grad^2 L~[U* Sigma', U* Sigma'] is the sum over rows r of the form along
    e_r u*_r (the cross terms average out), each row r moving only its own column,

        LHS~ = sum_r mean_i [ (dmu_ir)^2 - (y_i - mu_i) d2mu_ir
                              + s^2 a_r^2 ((dh_ir)^2 + h_ir d2h_ir) ],
        dmu = s a (P1 - M1) C / 2,  d2mu = s a (P2 + M2) C^2 / 2,
        dh = (P1 + M1) C / 2,       d2h = (P2 - M2) C^2 / 2.

    For the clean risk L^Q (f^Q_U = (s/2) sum_r a_r sigma''(Z) V^2, l' = f^Q - y, l'' = 1;
    Bai & Lee 2020, Lemma 1 and App. B.1):

        L^Q(U) = (1/2) mean (f^Q_U - y)^2,   <grad L^Q(U), U> = 2 mean l' f^Q_U,
        term I = 2 mean l' f^Q_{U*},   E term II = mean s^2 sum_r a_r^2 sigma''(Z)^2 V^2 C^2.

    Returns
    -------
    dict with ``risk_q``, ``grad_q`` (<grad L^Q, U>), ``term_I``, ``term_II``, ``risk_q_star``
    (L^Q(U*)), ``risk_tilde``, ``grad_tilde``, ``hess_tilde`` (LHS~). The Lemma 1 violation
    at OPT = L^Q(U*) is term_I + term_II - grad_q + 2 (risk_q - risk_q_star) and the Theorem 2
    one hess_tilde - grad_tilde + 2 (risk_tilde - risk_q_star).

    Computed in two passes over blocks of neurons (:func:`_neuron_blocks`): the sums over
    neurons mu, v, f^Q_U, f^Q_{U*} (:func:`_neuron_sums`), then the row-separable derivatives
    (:func:`_row_derivatives`).
    """
    if U.shape != net.W.shape or U_star.shape != net.W.shape:
        raise ValueError(f"U and U_star must have the shape of W {tuple(net.W.shape)}")
    blocks = _neuron_blocks(net.width, X.shape[0], block_elems)
    with torch.no_grad():
        mu, var, fq, fq_star = _neuron_sums(net, X, U, U_star, blocks)
        res, lq = y - mu, fq - y
        dmu_sum, dv_sum, hess, term2 = _row_derivatives(net, X, U, U_star, blocks, res)
    return {
        "risk_q": float(0.5 * (lq**2).mean()),
        "grad_q": float(2 * (lq * fq).mean()),
        "term_I": float(2 * (lq * fq_star).mean()),
        "term_II": term2,
        "risk_q_star": float(0.5 * ((fq_star - y) ** 2).mean()),
        "risk_tilde": float(0.5 * (res**2 + var).mean()),
        "grad_tilde": float((-res * dmu_sum + 0.5 * dv_sum).mean()),
        "hess_tilde": hess,
    }


def _neuron_sums(net: TwoLayerNet, X: torch.Tensor, U: torch.Tensor, U_star: torch.Tensor,
                 blocks: list[slice]
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pass 1 of :func:`squared_landscape_terms`: (mu, v, f^Q_U, f^Q_{U*}), each (n,),
    summed over the neurons one block at a time."""
    s, act = net.scale, net.act
    W0, a = net.W.detach(), net.a.detach()
    mu = torch.zeros(X.shape[0], dtype=X.dtype, device=X.device)
    var = torch.zeros_like(mu)
    fq = torch.zeros_like(mu)
    fq_star = torch.zeros_like(mu)
    for b in blocks:
        Z, V, C = X @ W0[b].T, X @ U[b].T, X @ U_star[b].T
        P0, M0 = act(Z + V), act(Z - V)
        mu += s * (0.5 * (P0 + M0)) @ a[b]
        var += s**2 * (0.5 * (P0 - M0)) ** 2 @ a[b] ** 2
        D2 = act.deriv(Z, 2)
        fq += 0.5 * s * (D2 * V**2) @ a[b]
        fq_star += 0.5 * s * (D2 * C**2) @ a[b]
    return mu, var, fq, fq_star


def _row_derivatives(net: TwoLayerNet, X: torch.Tensor, U: torch.Tensor,
                     U_star: torch.Tensor, blocks: list[slice], res: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """Pass 2 of :func:`squared_landscape_terms` (row-separable, residual ``res`` = y - mu):
    (mu' and v' along U, each (n,), LHS~, E term II)."""
    s, act = net.scale, net.act
    W0, a = net.W.detach(), net.a.detach()
    dmu_sum = torch.zeros_like(res)
    dv_sum = torch.zeros_like(res)
    hess = 0.0
    term2 = 0.0
    for b in blocks:
        Z, V, C = X @ W0[b].T, X @ U[b].T, X @ U_star[b].T
        P0, M0 = act(Z + V), act(Z - V)
        P1, M1 = act.deriv(Z + V, 1), act.deriv(Z - V, 1)
        P2, M2 = act.deriv(Z + V, 2), act.deriv(Z - V, 2)
        h = 0.5 * (P0 - M0)
        ab, a2 = a[b], a[b] ** 2
        dmu_sum += s * (0.5 * (P1 - M1) * V) @ ab
        dv_sum += s**2 * (2 * h * 0.5 * (P1 + M1) * V) @ a2
        dmu = 0.5 * s * (P1 - M1) * C * ab
        d2mu = 0.5 * s * (P2 + M2) * C**2 * ab
        dh, d2h = 0.5 * (P1 + M1) * C, 0.5 * (P2 - M2) * C**2
        per = dmu**2 - res[:, None] * d2mu + s**2 * a2 * (dh**2 + h * d2h)
        hess += float(per.sum(1).mean())
        D2 = act.deriv(Z, 2)
        term2 += float((s**2 * (D2**2 * V**2 * C**2) @ a2).mean())
    return dmu_sum, dv_sum, hess, term2
