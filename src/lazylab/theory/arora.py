"""Theory of Arora, Du, Hu, Li, Wang (ICML 2019), "Fine-Grained Analysis of Optimization and
Generalization for Overparameterized Two-Layer Neural Networks".

Network: f(x) = m^-1/2 sum_r a_r relu(w_r . x), a_r = +-1 fixed, w_r(0) ~ N(0, kappa^2 I),
unit-norm inputs, full-batch GD with step eta on Phi(W) = (1/2) sum_i (y_i - u_i)^2.
Everything here is a closed form of the Gram matrix (their Eq. (3))

    H_inf_ij = E_{w ~ N(0, I)}[ x_i.x_j 1{w.x_i >= 0, w.x_j >= 0} ]
             = x_i.x_j (pi - arccos(x_i.x_j)) / (2 pi),

built on :func:`lazylab.kernels.ntk` (``trained="first"``), always in float64:

* :func:`h_infinity`: H_inf, in row blocks for large n (and onto another device if asked);
* :func:`lazylab.solve.eigendecompose` -> :class:`~lazylab.solve.Spectrum` (descending
  eigenvalues lambda_i, vectors v_i);
* :func:`predicted_residual_norm`: Theorem 4.1 (Eq. (8)),
  ||y - u(k)|| ~ ||(I - eta H_inf)^k y|| = sqrt(sum_i (1 - eta lambda_i)^(2k) (v_i.y)^2);
* :func:`predicted_distance`: the main term of Lemma 5.3 after K steps (proof in App. D.1),
  D(K) = sqrt(sum_i (1 - (1 - eta lambda_i)^K)^2 (v_i.y)^2 / lambda_i) -> sqrt(y^T H^-1 y);
* :class:`lazylab.solve.GramSolver`: y^T H_inf^-1 y by a Cholesky solve; :func:`complexity_measure`
  sqrt(2 y^T H^-1 y / n) (Eq. (10));
* :func:`theorem51_bound`: Theorem 5.1 / Corollary 5.2 with the constants of its proof;
* :func:`theorem61_bound`, :func:`corollary62_bound`: learnable polynomials (Sec. 6);
* :func:`lemma_c3_bound`: ||H(0) - H_inf||_F at width m (App. C);
* :func:`worst_case_labels`, :func:`alignment_share`: Fig. 1's label constructions.

Example
-------
>>> import torch
>>> X = torch.nn.functional.normalize(torch.randn(50, 5, dtype=torch.float64,
...     generator=torch.Generator().manual_seed(0)), dim=1)
>>> H = h_infinity(X)
>>> round(float(H.diagonal().max()), 12)     # |x|^2 / 2 on the diagonal
0.5
>>> from lazylab.solve import eigendecompose
>>> spec = eigendecompose(H)
>>> y = worst_case_labels(spec)      # sqrt(n) v_n: the slowest direction of GD
>>> r = predicted_residual_norm(spec, y, eta=1 / spec.lambda_max, steps=[0, 100])
>>> round(float(r[0]) ** 2, 9), bool(r[1] < r[0])   # ||y||^2 = n at k = 0, then decays
(50.0, True)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch

from lazylab.device import block_elems
from lazylab.kernels import ntk
from lazylab.solve.spectral import GramSolver, Spectrum

# float64 values per entry of a row block of H_inf in the block-wise path (the block and its
# cosine scratch): block_elems(device) // 2 entries, 2^24 (128 MiB) on CPU (lazylab.device).
_SCRATCH_PER_ENTRY = 2


def _as_float64(X: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(X, torch.Tensor) or X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D torch tensor (n, d); got "
                         f"{getattr(X, 'shape', type(X).__name__)}")
    return X.to(torch.float64)


def h_infinity(X: torch.Tensor, Z: torch.Tensor | None = None, *,
               block_rows: int | None = None,
               out_device: torch.device | str | None = None) -> torch.Tensor:
    """Arora et al.'s Gram matrix H_inf(x, z) = x.z (pi - arccos(x.z / |x||z|)) / (2 pi).

    Computed in float64 (the theory checks need it) by :func:`lazylab.kernels.ntk`, one block
    of ``block_rows`` rows at a time so that only the result and one block of scratch are
    alive: for n = 10^4 that is 800 MB plus 128 MiB, and ``out_device="cpu"`` lets a GPU
    compute the blocks of a matrix kept in host memory.

    Parameters
    ----------
    X : (n, d) inputs (any float dtype; the paper's have unit norm, but any norms work).
    Z : (n', d) inputs or None (then Z = X and the result is symmetric with an exact diagonal
        |x_i|^2 / 2).
    block_rows : rows per block; None picks blocks of about block_elems(X.device) / 2 entries
        (:func:`lazylab.device.block_elems`: 2^24 on CPU), one block, i.e. a single
        :func:`lazylab.kernels.ntk` call, when the whole matrix is that small.
    out_device : where the result lives (default: X's device).

    Returns
    -------
    (n, n') float64 tensor.
    """
    X = _as_float64(X, "X")
    Zc = None if Z is None else _as_float64(Z, "Z").to(X.device)
    n = X.shape[0]
    n2 = n if Zc is None else Zc.shape[0]
    if block_rows is None:
        block_rows = max(1, block_elems(X.device) // (_SCRATCH_PER_ENTRY * max(n2, 1)))
    if int(block_rows) != block_rows or block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer or None; got {block_rows!r}")
    dev = torch.device(out_device) if out_device is not None else X.device
    if block_rows >= n:
        return ntk(X, Zc, activation="relu", trained="first").to(dev)
    out = torch.empty(n, n2, dtype=torch.float64, device=dev)
    ref = X if Zc is None else Zc
    for i0 in range(0, n, block_rows):
        i1 = min(n, i0 + block_rows)
        out[i0:i1] = ntk(X[i0:i1], ref, activation="relu", trained="first").to(dev)
    if Zc is None:
        _symmetrize_blocks(out, block_rows)
        # arccos(1) = 0 exactly: H(x, x) = |x|^2 / 2, whatever the rounding of the cosine.
        out.diagonal().copy_(0.5 * X.square().sum(1).to(dev))
    return out


def _symmetrize_blocks(H: torch.Tensor, b: int) -> None:
    """Average H with H^T in place, block by block (the row-block products of X X^T round
    differently on either side of the diagonal)."""
    n = H.shape[0]
    for i0 in range(0, n, b):
        i1 = min(n, i0 + b)
        for j0 in range(i0, n, b):
            j1 = min(n, j0 + b)
            avg = 0.5 * (H[i0:i1, j0:j1] + H[j0:j1, i0:i1].T)
            H[i0:i1, j0:j1] = avg
            H[j0:j1, i0:i1] = avg.T


def _labels(y: torch.Tensor, n: int) -> torch.Tensor:
    if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must be a 1-D tensor of {n} labels; got "
                         f"{getattr(y, 'shape', type(y).__name__)}")
    return y.to(torch.float64)


def _spectral_args(spectrum: Spectrum, y: torch.Tensor | None, proj: torch.Tensor | None
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    if (y is None) == (proj is None):
        raise ValueError("give exactly one of y (labels) or proj (their coefficients v_i.y)")
    if y is not None:
        c = spectrum.project(y)
    else:
        assert proj is not None  # exactly one of the two, checked above
        c = _labels(proj, spectrum.n)
    return spectrum.eigenvalues, c.to(spectrum.eigenvalues.device)


def _steps(steps: Iterable[int] | int) -> torch.Tensor:
    ks = torch.as_tensor([steps] if isinstance(steps, int) else list(steps), dtype=torch.float64)
    if ks.ndim != 1 or bool((ks < 0).any()) or bool((ks != ks.round()).any()):
        raise ValueError(f"steps must be non-negative integers; got {steps!r}")
    return ks


def _check_eta(eta: float) -> float:
    eta = float(eta)
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f"eta must be a finite number > 0; got {eta!r}")
    return eta


def predicted_residual_norm(spectrum: Spectrum, y: torch.Tensor | None = None, *,
                            eta: float, steps: Iterable[int] | int,
                            proj: torch.Tensor | None = None) -> torch.Tensor:
    """Theorem 4.1 (Eq. (8)): ||y - u(k)|| = sqrt(sum_i (1 - eta lambda_i)^(2k) (v_i.y)^2) +- eps.

    The residual of the linear dynamics u~(k+1) = u~(k) - eta H_inf (u~(k) - y), u~(0) = 0
    (Eq. (7)): y - u~(k) = (I - eta H_inf)^k y. The network follows it for small kappa and
    large m (Theorem 4.1's conditions), and exactly when u(0) = 0 and H(k) = H_inf.

    Parameters
    ----------
    spectrum : the :class:`Spectrum` of H_inf.
    y : (n,) labels, or ``proj`` = their coefficients v_i.y.
    eta : GD step size.
    steps : the iterations k (non-negative integers).

    Returns
    -------
    (len(steps),) float64 tensor of predicted ||y - u(k)||_2.
    """
    lam, c = _spectral_args(spectrum, y, proj)
    eta = _check_eta(eta)
    ks = _steps(steps).to(lam.device)
    # |1 - eta lambda|^(2k): even powers, so the sign of 1 - eta lambda never matters.
    decay = (1 - eta * lam).abs()[None, :] ** (2 * ks[:, None])
    return (decay * c.square()[None, :]).sum(1).sqrt()


def predicted_distance(spectrum: Spectrum, y: torch.Tensor | None = None, *, eta: float,
                       steps: Iterable[int] | int, proj: torch.Tensor | None = None
                       ) -> torch.Tensor:
    """Lemma 5.3's main term after K steps (its proof, App. D.1):

        ||W(K) - W(0)||_F ~ ||Z(0) T y||,  T = eta sum_{k<K} (I - eta H_inf)^k,
        D(K)^2 = y^T T H_inf T y = sum_i (1 - (1 - eta lambda_i)^K)^2 (v_i.y)^2 / lambda_i,

    which increases to sqrt(y^T H_inf^-1 y) as K -> infinity when 0 < eta lambda_i < 2.

    Returns
    -------
    (len(steps),) float64 tensor of D(K).
    """
    lam, c = _spectral_args(spectrum, y, proj)
    eta = _check_eta(eta)
    if float(lam[-1]) <= 0:
        raise ValueError(f"H must be positive definite for Lemma 5.3; lambda_min = "
                         f"{float(lam[-1]):.3g} (duplicate or parallel inputs?)")
    ks = _steps(steps).to(lam.device)
    fitted = 1 - (1 - eta * lam)[None, :] ** ks[:, None]
    return (fitted.square() * (c.square() / lam)[None, :]).sum(1).sqrt()


def complexity_measure(H: torch.Tensor | GramSolver, y: torch.Tensor) -> float:
    """The data-dependent complexity measure sqrt(2 y^T H_inf^-1 y / n) (Eq. (10)).

    Theorem 5.1: for a 1-Lipschitz loss with values in [0, 1] the population loss of the
    trained net is at most this plus O(sqrt(log(n / (lambda_0 delta)) / n)).
    """
    solver = H if isinstance(H, GramSolver) else GramSolver(H)
    return math.sqrt(2 * solver.quad(y) / solver.n)


def theorem51_bound(complexity: float, n: int, lambda_min: float, delta: float = 0.05) -> float:
    """Theorem 5.1 (and Corollary 5.2 for the 0-1 error) with the constants of its proof (D.3):

        L_D <= 1/sqrt(n) + 2 (sqrt(y^T H^-1 y / (2n)) + 2/sqrt(n)) + 3 sqrt(log(6N/delta) / (2n))
             = C + 5/sqrt(n) + 3 sqrt(log(6N/delta) / (2n)),     C = sqrt(2 y^T H^-1 y / n),

    where 1/sqrt(n) bounds the training loss once Phi <= 1/2, 2/sqrt(n) is the proof's slack in
    the Rademacher complexity (the grid B_i = i costs B <= B_i* <= B + 1, and the finite-width
    terms are at most 1/sqrt(n) for m large enough; they vanish as m -> infinity), and the last
    term is Theorem B.1 (loss in [0, 1], 1-Lipschitz) with failure probability delta/3 split by
    a union bound over the N = ceil(sqrt(n / lambda_0)) classes of the grid, since
    B <= sqrt(y^T H^-1 y) <= sqrt(|y|^2 / lambda_0) <= sqrt(n / lambda_0) for |y_i| <= 1.
    The non-degeneracy failure (another delta/3) is assumed away: lambda_0 is the measured one.
    """
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be a positive integer; got {n!r}")
    if not lambda_min > 0:
        raise ValueError(f"lambda_min must be > 0; got {lambda_min!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1); got {delta!r}")
    grid = math.ceil(math.sqrt(n / lambda_min))
    return (complexity + 5 / math.sqrt(n)
            + 3 * math.sqrt(math.log(6 * grid / delta) / (2 * n)))


def theorem61_bound(p: int, alpha: float = 1.0, beta_norm: float = 1.0, *,
                    tight: bool = False) -> float:
    """Theorem 6.1: for y_i = alpha (beta.x_i)^p with p = 1 or p even, unit-norm x_i,

        sqrt(y^T H_inf^-1 y) <= 3 p |alpha| ||beta||^p,

    and with ``tight=True`` the constants of its proof (App. E): 2 |alpha| ||beta|| for p = 1
    (from H_inf >= K/4) and sqrt(2 pi) (p - 1) |alpha| ||beta||^p for p = 2l (from
    H_inf >= K^(o 2l) / (2 pi (2l - 1)^2)). Odd p >= 3 are not covered (the kernel's odd part is
    only K/4) and raise.
    """
    if isinstance(p, bool) or int(p) != p or p < 1 or (p % 2 == 1 and p != 1):
        raise ValueError(f"p must be 1 or an even positive integer (Theorem 6.1); got {p!r}")
    if not beta_norm >= 0:
        raise ValueError(f"beta_norm must be >= 0; got {beta_norm!r}")
    scale = abs(alpha) * beta_norm ** p
    if not tight:
        return 3 * p * scale
    return (2.0 if p == 1 else math.sqrt(2 * math.pi) * (p - 1)) * scale


def corollary62_bound(terms: Sequence[tuple[float, float, int]], *, tight: bool = False
                      ) -> float:
    """Corollary 6.2: y = sum_j alpha_j (beta_j.x)^(p_j) with every p_j in {1, 2, 4, 6, ...}
    has sqrt(y^T H^-1 y) <= sum_j 3 p_j |alpha_j| ||beta_j||^(p_j) (Eq. (13)), by the triangle
    inequality of the H^-1 norm. ``terms`` lists (alpha_j, ||beta_j||, p_j)."""
    return sum(theorem61_bound(p, a, b, tight=tight) for a, b, p in terms)


def lemma_c3_bound(n: int, width: int, delta: float = 0.1) -> float:
    """Lemma C.3: ||H(0) - H_inf||_F <= n sqrt(log(2 n^2 / delta) / (2m)) with probability
    1 - delta (Hoeffding on each entry, a mean of m terms in [0, 1], and a union bound).

    The entries x_i.x_j 1 1 lie in [-1, 1] when inner products can be negative (the proof of
    Lemma C.3 says [0, 1]), which doubles the range; the paper's [0, 1] constant is kept here.
    """
    if not (n >= 1 and width >= 1 and 0 < delta < 1):
        raise ValueError(f"need n >= 1, width >= 1 and delta in (0, 1); got n={n!r}, "
                         f"width={width!r}, delta={delta!r}")
    return n * math.sqrt(math.log(2 * n * n / delta) / (2 * width))


def worst_case_labels(spectrum: Spectrum, norm: float | None = None) -> torch.Tensor:
    """Fig. 1's worst-case labels: the eigenvector v_n of lambda_min(H_inf), scaled to
    ||y|| = sqrt(n) (default, the norm of +-1 labels, so loss curves start at the same Phi(0) =
    n/2; the paper says only "normalized eigenvector") or to ``norm``. Sign: the
    largest-magnitude entry is positive."""
    v = spectrum.eigenvectors[:, -1].clone()
    if float(v[int(v.abs().argmax())]) < 0:
        v.neg_()
    scale = math.sqrt(spectrum.n) if norm is None else float(norm)
    return v * scale


def alignment_share(spectrum: Spectrum | None = None, y: torch.Tensor | None = None, *,
                    proj: torch.Tensor | None = None) -> torch.Tensor:
    """Cumulative share of ||y||^2 on the top eigenvectors: s_k = sum_{i<=k} (v_i.y)^2 / ||y||^2
    (k = 1..n). For i.i.d. uniform +-1 labels independent of X, E[(v_i.y)^2] = 1 for every i,
    so E[s_k] = k/n: no alignment at all."""
    if proj is None:
        if spectrum is None or y is None:
            raise ValueError("give a spectrum and labels y, or proj")
        proj = spectrum.project(y)
    c2 = proj.to(torch.float64).square()
    total = float(c2.sum())
    if total == 0:
        raise ValueError("y is zero: its alignment is undefined")
    return c2.cumsum(0) / total


def default_learning_rate(spectrum: Spectrum) -> float:
    """eta = 1 / lambda_max(H_inf): the largest step for which every mode of the linear dynamics
    decays monotonically (0 < eta lambda_i <= 1); GD diverges beyond 2 / lambda_max (so the
    paper's eta = 1e-3 of App. A diverges on uncentred images at n = 10^4)."""
    return 1.0 / spectrum.lambda_max


def random_label_moments(L: torch.Tensor) -> tuple[float, float]:
    """Mean and standard deviation of q = y^T H^-1 y for i.i.d. uniform +-1 labels y, given the
    Cholesky factor L of H (H = L L^T):

        E q = tr(H^-1),   Var q = 2 sum_{i != j} (H^-1)_ij^2 = 2 (||H^-1||_F^2 - sum_i (H^-1)_ii^2),

    (E y_i y_j y_k y_l is 1 on paired indices only; by AM-HM, E q >= n^2 / tr(H) = 2n).
    """
    n = L.shape[0]
    eye = torch.eye(n, dtype=torch.float64, device=L.device)
    Linv = torch.linalg.solve_triangular(L.to(torch.float64), eye, upper=False)
    A = Linv.T @ Linv
    mean = float(A.diagonal().sum())
    var = 2.0 * float(A.square().sum() - A.diagonal().square().sum())
    return mean, math.sqrt(max(var, 0.0))


def corrupted_label_moments(H_inv: torch.Tensor, y: torch.Tensor, fraction: float
                            ) -> tuple[float, float]:
    """Mean and standard deviation of q = y_p^T H^-1 y_p when round(p n) of the +-1 labels y,
    a uniform subset, are redrawn from unif{-1, +1} (Fig. 2's corruption,
    :func:`lazylab.data.corrupt_labels`).

    With A = H^-1, k = round(p n) and c = (n - k)(n - k - 1) / (n (n - 1)) the chance that two
    given points both keep their label, E[y_p,i y_p,j] = c y_i y_j (i != j) and y_p,i^2 = 1, so

        E q = tr A + c (y^T A y - tr A)                                     (exact);

    q increases in p from y^T A y to tr(A) = E q of random labels when tr A > y^T A y. The
    variance treats the redrawn set as independent Bernoulli(p) choices (mu = (1 - p) y,
    B = A off its diagonal; the exact-size subset has slightly negatively correlated choices,
    hence a slightly smaller variance):

        Var q = 2 sum_{i != j} B_ij^2 (1 - mu_i^2 mu_j^2)
              + 4 sum_j (1 - mu_j^2) ((B mu)_j^2 - sum_i B_ij^2 mu_i^2),

    which is 2 sum_{i != j} A_ij^2 at p = 1 (:func:`random_label_moments`) and 0 at p = 0.
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"fraction must lie in [0, 1]; got {fraction!r}")
    A = H_inv.to(torch.float64)
    yv = _labels(y, A.shape[0]).to(A.device)
    n = A.shape[0]
    k = int(math.floor(fraction * n + 0.5))
    c = (n - k) * (n - k - 1) / (n * (n - 1)) if n > 1 else 1.0
    tr = float(A.diagonal().sum())
    mean = tr + c * (float(yv @ A @ yv) - tr)
    B = A - torch.diag(A.diagonal())
    mu = (1 - k / n) * yv
    m2 = mu.square()
    B2 = B.square()
    var = 2 * (float(B2.sum()) - float(m2 @ B2 @ m2))
    var += 4 * float((1 - m2) @ ((B @ mu).square() - B2 @ m2))
    return mean, math.sqrt(max(var, 0.0))
