"""Input distributions of the five papers, drawn with an explicit ``torch.Generator``.

Every sampler returns an ``(n, d)`` tensor on ``device`` (default: the generator's device) in
``dtype`` (default float32). The generator must live on that device, as torch requires.

Radius conventions differ between the papers, so every sampler states its scale:

* Arora et al. 2019 and Allen-Zhu & Li 2019 (T3) use unit-norm inputs, ``||x|| = 1``
  (``sphere(radius=1)``, ``hypercube(radius=1)`` i.e. entries +-1/sqrt(d)).
* Nichani, Bai & Lee 2022 and Ghorbani et al. 2019 use ``E[x x^T] = I_d``: Unif(S^{d-1}(sqrt d))
  (``sphere(radius=math.sqrt(d))``) or N(0, I_d) (``gaussian``).
* Bai & Lee 2020 use Unif(S^{d-1}(B_x)); their 2-XOR and Allen-Zhu & Li's Sec. 8.1 task use the
  unnormalised cube {+-1}^d (``hypercube()``, radius sqrt(d)).

Example
-------
>>> import torch
>>> from lazylab.data.samplers import sphere
>>> X = sphere(4, 3, radius=2.0, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
>>> bool(torch.allclose(X.norm(dim=1), torch.full((4,), 2.0, dtype=torch.float64)))
True
"""

from __future__ import annotations

import math

import numpy as np
import torch

Device = torch.device | str | None


def _check_size(n: int, d: int) -> None:
    if int(n) != n or n < 0:
        raise ValueError(f"n must be a non-negative integer; got {n!r}")
    if int(d) != d or d < 1:
        raise ValueError(f"d must be a positive integer; got {d!r}")


def _device(generator: torch.Generator, device: Device) -> torch.device:
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator; got {type(generator).__name__}")
    dev = generator.device if device is None else torch.device(device)
    if dev.type != generator.device.type:
        raise ValueError(f"device {dev} differs from the generator's device {generator.device}; "
                         "create the generator on the device you sample on")
    return dev


def _check_radius(radius: float) -> None:
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be a positive finite number; got {radius!r}")


def gaussian(n: int, d: int, *, generator: torch.Generator, device: Device = None,
             dtype: torch.dtype = torch.float32,
             cov_sqrt: torch.Tensor | None = None) -> torch.Tensor:
    """x ~ N(0, S S^T) with S = ``cov_sqrt`` (default S = I_d, so x ~ N(0, I_d)).

    Drawn as x = S z with z ~ N(0, I_d), i.e. ``X = Z @ S.T``. ``cov_sqrt`` may be any
    (d, d) matrix: a Cholesky factor, a symmetric square root, or a rotation times a diagonal.
    Ghorbani et al. 2019 (Sec. 2) use N(0, I_d); Nichani et al.'s code uses it as a proxy for
    the sphere of radius sqrt(d).
    """
    _check_size(n, d)
    dev = _device(generator, device)
    Z = torch.randn(int(n), int(d), generator=generator, device=dev, dtype=dtype)
    if cov_sqrt is None:
        return Z
    S = torch.as_tensor(cov_sqrt)
    if S.shape != (d, d):
        raise ValueError(f"cov_sqrt must have shape ({d}, {d}); got {tuple(S.shape)}")
    return Z @ S.to(device=dev, dtype=dtype).T


def sphere(n: int, d: int, *, radius: float = 1.0, generator: torch.Generator,
           device: Device = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x ~ Unif(S^{d-1}(radius)), drawn as x = radius * g / ||g|| with g ~ N(0, I_d).

    ``radius=1`` gives Arora et al.'s unit-norm inputs; ``radius=math.sqrt(d)`` gives
    Nichani et al.'s S^{d-1}(sqrt d) where E[x x^T] = I_d (Cov = radius^2/d * I_d in general).
    """
    _check_size(n, d)
    _check_radius(radius)
    g = gaussian(n, d, generator=generator, device=device, dtype=dtype)
    # A zero Gaussian vector has probability 0; clamp only guards against 0/0 in float32.
    return radius * g / g.norm(dim=1, keepdim=True).clamp_min(torch.finfo(dtype).tiny)


def rademacher(shape: int | tuple[int, ...], *, generator: torch.Generator,
               device: Device = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """I.i.d. uniform signs in {-1, +1} of the given shape (also: fully random labels)."""
    dev = _device(generator, device)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(int(s) != s or s < 0 for s in shape):
        raise ValueError(f"shape must hold non-negative integers; got {shape!r}")
    bits = torch.randint(0, 2, shape, generator=generator, device=dev)
    return (2 * bits - 1).to(dtype)


def hypercube(n: int, d: int, *, radius: float | None = None, generator: torch.Generator,
              device: Device = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x uniform on the cube {-s, +s}^d with s = radius / sqrt(d), so ||x|| = radius exactly.

    The default ``radius=None`` means s = 1: x uniform on {-1, +1}^d (radius sqrt(d)), as in
    Bai & Lee's 2-XOR (Sec. 5.2) and Allen-Zhu & Li's Sec. 8.1 task. ``radius=1`` gives
    entries +-1/sqrt(d) (Allen-Zhu & Li, Fig. 4 task; Bai & Lee with B_x = 1).
    """
    _check_size(n, d)
    s = 1.0
    if radius is not None:
        _check_radius(radius)
        s = radius / math.sqrt(d)
    return s * rademacher((int(n), int(d)), generator=generator, device=device, dtype=dtype)


def anisotropic_sphere(n: int, d: int, *, kappa: float, radius: float = 1.0,
                       rotate: bool = False, generator: torch.Generator, device: Device = None,
                       dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x = radius * g / ||g|| with g ~ N(0, Lambda), Lambda = diag(kappa, 1, ..., 1).

    With ``rotate=True`` Lambda is replaced by O Lambda O^T for a Haar-random rotation O drawn
    from the same generator. ``kappa`` is the condition number of Cov(g): ``kappa=1`` is the
    uniform sphere, large ``kappa`` concentrates x near +-radius * e_1. It meets the
    condition-number hypothesis of Bai & Lee 2020's Theorem 6 (Sec. 5.1) and interpolates
    between isotropic data (M_{x,op} ~ 1/sqrt(d)) and degenerate data (M_{x,op} -> 1).
    """
    _check_size(n, d)
    _check_radius(radius)
    if not (math.isfinite(kappa) and kappa > 0):
        raise ValueError(f"kappa must be a positive finite number; got {kappa!r}")
    dev = _device(generator, device)
    scale = torch.ones(d, device=dev, dtype=dtype)
    scale[0] = math.sqrt(kappa)
    g = gaussian(n, d, generator=generator, device=dev, dtype=dtype) * scale
    if rotate:
        # QR of a Gaussian matrix with the signs of diag(R) fixed is Haar on O(d).
        q, r = torch.linalg.qr(gaussian(d, d, generator=generator, device=dev, dtype=dtype))
        q = q * torch.where(torch.diagonal(r) < 0, -1.0, 1.0).to(dtype)
        g = g @ q.T
    return radius * g / g.norm(dim=1, keepdim=True).clamp_min(torch.finfo(dtype).tiny)


def projection_law(n: int, d: int, *, generator: torch.Generator, device: Device = None,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """z = u . x for a fixed unit u and x ~ Unif(S^{d-1}(sqrt d)): the law tau_d.

    Density Gamma(d/2) / (sqrt(pi d) Gamma((d-1)/2)) (1 - z^2/d)^{(d-3)/2} on [-sqrt d, sqrt d]
    (the inputs of Nichani et al. 2022, Sec. 2.1); tau_d -> N(0, 1) as d grows. Drawn as
    z = sqrt(d) (2B - 1) with B ~ Beta((d-1)/2, (d-1)/2), needing d >= 2. torch's Beta takes no
    generator, so a numpy Generator is seeded from ``generator`` (still fully determined by it).
    """
    _check_size(n, d)
    if d < 2:
        raise ValueError(f"d must be at least 2 for the projection law tau_d; got {d}")
    dev = _device(generator, device)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=dev).item())
    b = np.random.default_rng(seed).beta((d - 1) / 2, (d - 1) / 2, size=int(n))
    return torch.as_tensor(math.sqrt(d) * (2 * b - 1), dtype=dtype, device=dev)


def hard_instance_inputs(n: int, d: int, d1: int, *, background: str = "gaussian",
                         generator: torch.Generator, device: Device = None,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Allen-Zhu & Li 2019, Eq. (7.1): x = (x_cube, x_bg) / sqrt(d).

    x_cube is uniform on {-1, +1}^{d1}; the d - d1 background coordinates are arbitrary in the
    paper: ``"gaussian"`` (N(0, 1) entries), ``"cube"`` (+-1 entries) or ``"zeros"``. The first d1
    coordinates of sqrt(d) x are the +-1 variables the hard target reads.
    """
    _check_size(n, d)
    if int(d1) != d1 or not 1 <= d1 <= d:
        raise ValueError(f"d1 must be an integer in [1, d={d}]; got {d1!r}")
    if background not in ("gaussian", "cube", "zeros"):
        raise ValueError(f"background must be 'gaussian', 'cube' or 'zeros'; got {background!r}")
    dev = _device(generator, device)
    cube = hypercube(n, d1, generator=generator, device=dev, dtype=dtype)
    if background == "gaussian":
        bg = gaussian(n, d - d1, generator=generator, device=dev, dtype=dtype) if d > d1 \
            else cube[:, :0]
    elif background == "cube":
        bg = hypercube(n, d - d1, generator=generator, device=dev, dtype=dtype) if d > d1 \
            else cube[:, :0]
    else:
        bg = torch.zeros(int(n), d - d1, device=dev, dtype=dtype)
    return torch.cat([cube, bg], dim=1) / math.sqrt(d)
