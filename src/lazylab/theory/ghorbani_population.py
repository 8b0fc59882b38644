"""Exact finite-d population risks (n = infinity, no sampling) for quadratic activations,
Ghorbani, Mei, Misiakiewicz, Montanari (2019), from the Gaussian moments of quadratic forms (the
paper states only the asymptotic limits).

Shape convention (as in the paper): **W has shape (d, N); its columns are the neurons w_i.**
(``lazylab.models.TwoLayerNet.W`` stores rows, so pass ``net.W.T``.)  Inputs may be numpy
arrays or torch tensors; the computation runs in torch float64 on ``device`` (default: W's
device if W is a tensor, else CPU).  Risks are returned normalised, R/R0, as Python floats.

Every model with activation u^2 (or u^2 - 1) is a quadratic form f(x) = c + x^T M x, so its risk
follows from E[(x^T A x + a)^2] = 2||A||_F^2 + (Tr A + a)^2 (x ~ N(0, I)) and the mixture formula
Q(M, c) of :mod:`lazylab.data.mixture`:

    RF-qf  sigma = u^2 - 1 (+ lam1 u): G = 2 (W^T W)^{o2} + e e^T + lam1^2 W^T W,
           e_i = ||w_i||^2 - 1, v_i = 2 w_i^T B w_i, R = 2||B||_F^2 - v^T G^+ v
           (centred target, no offset).
    NT-qf  R = 2 ||P_perp B P_perp||_F^2, P_perp the projector onto span(W)^perp.
    RF-mg  m_s = diag(W^T C_s W) - 1 (C_+- = Sigma -+ Delta),
           G = 1/2 sum_s [m_s m_s^T + 2 (W^T C_s W)^{o2}], v = -diag(W^T Delta W),
           R = 1 - v^T G^+ v.
    NT-mg  min Q(M, -Tr(M Sigma)) over S_W = {M : P_perp M P_perp = 0} by conjugate gradients.
    NN-mg  Q(-alpha M_N) minimised over alpha, M_N the rank-N truncation of Delta~.
    NN-qf  L(W, c) = 2||B - W W^T||_F^2 + (Tr(B - W W^T) + b0 - c)^2 and its gradient.

Example
-------
>>> import numpy as np
>>> from lazylab.data.quadratic import exponential_B
>>> B = exponential_B(30, seed=0)
>>> W = np.random.default_rng(1).standard_normal((30, 40)) / np.sqrt(30)
>>> nt_qf_population(W, B)        # N >= d: the NT class holds every quadratic form
0.0
"""

from __future__ import annotations

import numpy as np
import torch

_F64 = torch.float64


def _dev(device, *xs) -> torch.device:
    if device is not None:
        return torch.device(device)
    for x in xs:
        if isinstance(x, torch.Tensor):
            return x.device
    return torch.device("cpu")


def _t(name: str, x, device: torch.device, *, square: bool = False,
       rows: int | None = None) -> torch.Tensor:
    t = (x.detach() if isinstance(x, torch.Tensor)
         else torch.as_tensor(np.asarray(x, dtype=np.float64)))
    t = t.to(device=device, dtype=_F64)
    if t.ndim != 2 or (square and t.shape[0] != t.shape[1]):
        raise ValueError(f"{name} must be a {'square ' if square else ''}matrix; "
                         f"got shape {tuple(t.shape)}")
    if rows is not None and t.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows (W is (d, N), columns = neurons); "
                         f"got shape {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must have finite entries")
    if square:
        t = 0.5 * (t + t.T)
    return t


def _psd_solve_quad(G: torch.Tensor, v: torch.Tensor) -> float:
    """v^T G^+ v for PSD G: Cholesky when G is comfortably PD, else an eigen pseudo-inverse
    (relative cutoff N eps lambda_max, numpy's pinv convention)."""
    n = G.shape[0]
    L, info = torch.linalg.cholesky_ex(G)
    if int(info) == 0:
        dg = torch.diagonal(L) ** 2
        if float(dg.min()) > 1e-10 * float(dg.max()):
            z = torch.cholesky_solve(v.unsqueeze(1), L).squeeze(1)
            return float(v @ z)
    ev, V = torch.linalg.eigh(G)
    keep = ev > n * torch.finfo(_F64).eps * ev.max().clamp(min=0)
    p = V[:, keep].T @ v
    return float((p**2 / ev[keep]).sum())


def perp_basis(W: torch.Tensor) -> torch.Tensor:
    """Orthonormal basis (d, d - r) of span(W)^perp for W (d, N), r its numerical rank
    (tolerance max(d, N) eps s_max); empty when W spans R^d."""
    d, N = W.shape
    if N == 0:
        return torch.eye(d, dtype=W.dtype, device=W.device)
    eps = torch.finfo(W.dtype).eps
    # Singular values alone settle the common full-rank case; then a complete QR gives the
    # complement more cheaply than a full SVD.
    s = torch.linalg.svdvals(W)
    full = float(s[0]) > 0 and bool((s > max(d, N) * eps * float(s[0])).all())
    if full and N >= d:
        return W.new_zeros(d, 0)
    if full:
        return torch.linalg.qr(W, mode="complete").Q[:, N:]
    U, s, _ = torch.linalg.svd(W, full_matrices=True)
    r = int((s > max(d, N) * eps * float(s[0])).sum()) if float(s[0]) > 0 else 0
    return U[:, r:]


# ----------------------------------------------------------------------------- qf
def rf_qf_population(W, B, *, lam1: float = 0.0, device=None) -> float:
    """Exact RF risk R/R0 for the centred target x^T B x - Tr B, features
    sigma(w_i^T x) with sigma = u^2 - 1 + lam1 u, no offset (Eq. (2)); R0 = 2||B||_F^2.

    Solves the N x N normal equations G a = v (Cholesky; ~1 s at d = 450, N = 4500).
    """
    dev = _dev(device, W, B)
    Bt = _t("B", B, dev, square=True)
    Wt = _t("W", W, dev, rows=Bt.shape[0])
    K = Wt.T @ Wt
    e = torch.diagonal(K) - 1.0
    G = 2.0 * K * K + torch.outer(e, e)
    if lam1 != 0.0:
        G = G + float(lam1) ** 2 * K
    v = 2.0 * ((Bt @ Wt) * Wt).sum(dim=0)
    r0 = 2.0 * float((Bt**2).sum())
    if r0 == 0:
        raise ValueError("B must be nonzero")
    return max(0.0, 1.0 - _psd_solve_quad(G, v) / r0)


def nt_qf_population(W, B, *, device=None) -> float:
    """Exact NT risk R/R0 = ||P_perp B P_perp||_F^2 / ||B||_F^2 (Theorem 2's finite-W form;
    the offset absorbs the mean).  Exactly 0.0 when rank W = d (then S_W is all of Sym_d)."""
    dev = _dev(device, W, B)
    Bt = _t("B", B, dev, square=True)
    U = perp_basis(_t("W", W, dev, rows=Bt.shape[0]))
    if U.shape[1] == 0:
        return 0.0
    return float(((U.T @ Bt @ U) ** 2).sum() / (Bt**2).sum())


def nn_qf_population_loss(W, c, B, b0) -> tuple[float, torch.Tensor | np.ndarray, float]:
    """Theorem 3's population loss (raw, not normalised) and its gradient:

        L(W, c) = 2 ||B - W W^T||_F^2 + s^2,   s = Tr(B - W W^T) + b0 - c,
        grad_W L = -8 (B - W W^T) W - 4 s W,    dL/dc = -2 s       (L as in Sec. 2.3).

    W is (d, N).  Returns (L, grad_W, dL/dc) with grad_W of W's type (torch or numpy).
    """
    dev = _dev(None, W)
    Bt = _t("B", B, dev, square=True)
    Wt = _t("W", W, dev, rows=Bt.shape[0])
    R = Bt - Wt @ Wt.T
    s = float(torch.trace(R)) + float(b0) - float(c)
    L = 2.0 * float((R**2).sum()) + s * s
    gW = -8.0 * (R @ Wt) - 4.0 * s * Wt
    if isinstance(W, torch.Tensor):
        return L, gW.to(W.dtype), -2.0 * s
    return L, gW.cpu().numpy(), -2.0 * s


def nn_qf_population_gd(W0, c0: float, B, b0: float | None = None, *, lr: float, steps: int,
                        record_every: int = 1, device=None):
    """Gradient descent on L(W, c) (the deterministic gradient-flow proxy of Theorem 3).

    Parameters
    ----------
    W0 : (d, N) initial first layer (e.g. 0.3 N(0, I/d) entries).
    c0 : initial offset.  b0 : target offset (default -Tr B).
    lr : step size (0.02 for B = diag(Exp(1))/sqrt(d), d = 50).  steps : iterations.
    record_every : store L/R0 every this many steps (and at the end).

    Returns
    -------
    (W, c, history): final W (torch float64, (d, N)), final c, and a numpy array of
    (step, L/R0) rows, R0 = 2||B||_F^2 + (b0 + Tr B)^2.
    """
    if lr <= 0 or int(steps) != steps or steps < 0 or record_every < 1:
        raise ValueError("need lr > 0, integer steps >= 0 and record_every >= 1")
    dev = _dev(device, W0, B)
    Bt = _t("B", B, dev, square=True)
    W = _t("W0", W0, dev, rows=Bt.shape[0]).clone()
    b0 = -float(torch.trace(Bt)) if b0 is None else float(b0)
    trB = float(torch.trace(Bt))
    r0 = 2.0 * float((Bt**2).sum()) + (b0 + trB) ** 2
    c = float(c0)
    hist = []
    for k in range(int(steps) + 1):
        R = Bt - W @ W.T
        s = float(torch.trace(R)) + b0 - c
        if k % record_every == 0 or k == steps:
            hist.append((k, (2.0 * float((R**2).sum()) + s * s) / r0))
        if k == steps:
            break
        W = W + lr * (8.0 * (R @ W) + 4.0 * s * W)
        c = c + lr * 2.0 * s
    return W, c, np.asarray(hist)


# ----------------------------------------------------------------------------- mg
def _mg(Delta, Sigma, dev):
    Dt = _t("Delta", Delta, dev, square=True)
    d = Dt.shape[0]
    St = (torch.eye(d, dtype=_F64, device=dev) if Sigma is None
          else _t("Sigma", Sigma, dev, square=True))
    if St.shape != Dt.shape:
        raise ValueError(f"Sigma must be ({d}, {d}); got {tuple(St.shape)}")
    return Dt, St


def _q(M: torch.Tensor, Dt: torch.Tensor, St: torch.Tensor) -> float:
    """Q(M, c*) with the optimal offset c* = -Tr(M Sigma) (mixture risk, O(1/d) term kept)."""
    MD, MS = M @ Dt, M @ St
    tD = float(torch.trace(MD))
    return 1.0 + 2 * tD + tD**2 + 2 * float((MS * MS.T).sum()) + 2 * float((MD * MD.T).sum())


def rf_mg_population(W, Delta, *, Sigma=None, device=None) -> float:
    """Exact RF risk (R0 = 1) on the mixture with features (w_i^T x)^2 - 1, no offset."""
    dev = _dev(device, W, Delta)
    Dt, St = _mg(Delta, Sigma, dev)
    Wt = _t("W", W, dev, rows=Dt.shape[0])
    G = torch.zeros(Wt.shape[1], Wt.shape[1], dtype=_F64, device=dev)
    m = {}
    KS, KD = Wt.T @ (St @ Wt), Wt.T @ (Dt @ Wt)
    for s in (1, -1):
        K = KS - s * KD
        m[s] = torch.diagonal(K) - 1.0
        G += 0.5 * (torch.outer(m[s], m[s]) + 2.0 * K * K)
    v = 0.5 * (m[1] - m[-1])
    return max(0.0, 1.0 - _psd_solve_quad(G, v))


def nt_mg_population(W, Delta, tol: float = 1e-10, *, Sigma=None, max_iter: int = 2000,
                     device=None) -> float:
    """Exact NT risk on the mixture (R0 = 1), including the O(1/d) term 2 Tr(M Delta M Delta).

    The NT class (sigma = u^2) is {c + x^T M x : M in S_W}, S_W = {M sym : P_perp M P_perp = 0}.
    With c = -Tr(M Sigma), Q is quadratic in M; its minimiser solves

        Pi_S(4 Sigma M Sigma + 4 Delta M Delta + 2 Tr(M Delta) Delta) = -2 Pi_S(Delta),
        Pi_S(M) = M - P_perp M P_perp,

    a symmetric positive-definite system on S_W solved by conjugate gradients to relative
    residual ``tol``.  Theorem 5's value (:func:`lazylab.theory.ghorbani.nt_mg_given_W`) is
    the same minimum without that term, hence a lower bound for PSD Delta.
    """
    dev = _dev(device, W, Delta)
    Dt, St = _mg(Delta, Sigma, dev)
    U = perp_basis(_t("W", W, dev, rows=Dt.shape[0]))

    def proj(M: torch.Tensor) -> torch.Tensor:
        if U.shape[1] == 0:
            return M
        return M - U @ (U.T @ M @ U) @ U.T

    def op(M: torch.Tensor) -> torch.Tensor:
        return proj(4 * St @ M @ St + 4 * Dt @ M @ Dt + 2 * torch.trace(M @ Dt) * Dt)

    b = -2.0 * proj(Dt)
    bn = float(torch.linalg.norm(b))
    M = torch.zeros_like(Dt)
    if bn == 0:
        return _q(M, Dt, St)
    r = b.clone()
    p = r.clone()
    rr = float((r * r).sum())
    for _ in range(int(max_iter)):
        Ap = op(p)
        alpha = rr / float((p * Ap).sum())
        M = M + alpha * p
        r = r - alpha * Ap
        rr_new = float((r * r).sum())
        if rr_new**0.5 <= tol * bn:
            break
        p = r + (rr_new / rr) * p
        rr = rr_new
    else:
        raise RuntimeError(f"conjugate gradients did not reach tol={tol} in {max_iter} steps")
    return _q(proj(0.5 * (M + M.T)), Dt, St)


def nn_mg_population(N: int, Delta, *, Sigma=None, device=None) -> float:
    """Finite-d NN value on the mixture (R0 = 1): the best scaled rank-N truncation.

    M = -alpha Sigma^-1/2 T_N Sigma^-1/2, T_N the rank-N truncation (largest |eigenvalues|)
    of Delta~ = Sigma^-1/2 Delta Sigma^-1/2, and c = -Tr(M Sigma).  Q(alpha) is quadratic,
    Q = 1 - 2 alpha t + alpha^2 (t^2 + 2 Tr(D Sigma D Sigma) + 2 Tr(D Delta D Delta)) with
    D = Sigma^-1/2 T_N Sigma^-1/2, t = Tr(D Delta), so the minimum over alpha is
    1 - t^2 / (t^2 + 2 Tr(D Sigma D Sigma) + 2 Tr(D Delta D Delta)).  It is the risk of a
    network with N neurons, an upper bound on the exact rank-N minimum and equal to Theorem 6
    up to the O(1/d) term.
    """
    if int(N) != N or N < 0:
        raise ValueError(f"N must be a non-negative integer; got {N!r}")
    dev = _dev(device, Delta)
    Dt, St = _mg(Delta, Sigma, dev)
    ev, V = torch.linalg.eigh(St)
    if float(ev.min()) <= 0:
        raise ValueError("Sigma must be positive definite")
    Sih = (V / ev.sqrt()) @ V.T
    lam, Q = torch.linalg.eigh(Sih @ Dt @ Sih)
    keep = torch.argsort(lam.abs(), descending=True)[: int(N)]
    if keep.numel() == 0:
        return 1.0
    T = (Q[:, keep] * lam[keep]) @ Q[:, keep].T
    D = Sih @ T @ Sih
    DS, DD = D @ St, D @ Dt
    t = float(torch.trace(DD))
    den = t * t + 2 * float((DS * DS.T).sum()) + 2 * float((DD * DD.T).sum())
    return 1.0 if den == 0 else 1.0 - t * t / den
