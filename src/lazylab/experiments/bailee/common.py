"""Shared pieces of the Bai & Lee (2020) experiments: nets, activations, chunking, slope bias.

Every experiment uses the paper's setting (Sec. 2, Eqs. (1) and (3)): a symmetric-init
:class:`TwoLayerNet` with a = (+1, ..., +1, -1, ..., -1) (``a_init="ones"``), prefactor
m^{-1/2}, w0_r ~ N(0, B_x^-2 I) and inputs on the sphere of radius B_x, float64 (the gaps reach
1e-6 at m = 1e6).

Slope claims (:func:`lazylab.experiments.toolkit.series_slope_claim`) fit log y = b log m + c
by least squares over the width grid (means over seeds) and hold when
|b - b_pred| <= bias + K_SE se(b) (two-sided; K_SE = 3 from :mod:`lazylab.experiments.toolkit`):
``bias`` is the finite-width allowance of each experiment (the relative O(m^{-1/4}) to
O(m^{-1/2}) corrections of the leading-order laws, which tilt a fit over three decades starting
at m = 100 by a few hundredths, :func:`fit_tilt`) and se(b) the standard error of the fitted
slope from its residuals (the Monte Carlo scatter over w0, signs and test points).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from lazylab.activations import Activation, get_activation
from lazylab.data import sphere
from lazylab.experiments.toolkit import loglog_fit
from lazylab.ids import paper_of
from lazylab.models import TwoLayerNet
from lazylab.models.bailee.constructions import phase_sine
from lazylab.seeding import derive_seed, torch_generator

PAPER = paper_of(__name__)  # the key of this package in lazylab.ids.PAPERS
F64 = torch.float64
#: Elements of an (n, m) block computed at once (memory ~ 8 bytes x a few x this).
CHUNK_ELEMS = 1 << 22


def resolve_activation(name: str) -> Activation:
    """An activation by name; ``"sin_shift"`` is sin(u + pi/4) (:func:`phase_sine`)."""
    return phase_sine(math.pi / 4) if name == "sin_shift" else get_activation(name)


def width_grid(m_min: int, m_max: int, points: int) -> list[int]:
    """Even widths on a geometric grid from m_min to m_max (symmetric init needs even m)."""
    if m_max < m_min:
        raise ValueError(f"m_max must be >= m_min; got {m_min} and {m_max}")
    ms = np.geomspace(m_min, m_max, max(points, 1)) if points > 1 else np.array([m_min])
    return sorted({int(2 * round(m / 2)) for m in ms})


def make_net(d: int, m: int, *, activation: str | Activation, B_x: float, seed: int,
             device: torch.device, dtype: torch.dtype = F64) -> TwoLayerNet:
    """The paper's symmetric-init net (Eq. (3)) of width m with w0 ~ N(0, B_x^-2 I)."""
    return TwoLayerNet(d, m, activation=activation, init="symmetric", a_init="ones",
                       weight_std=1.0 / B_x, dtype=dtype, device=device,
                       generator=torch_generator(seed, device))


def data_generator(data_seed: int, *parts, device: torch.device | str = "cpu",
                   ) -> torch.Generator:
    """A generator for test points and directions shared by all units (so the width sweep
    compares the same x and v, and only the initialization varies with m)."""
    return torch_generator(derive_seed("bailee-data", data_seed, *parts), device)


def random_direction(d: int, norm: float, generator: torch.Generator,
                     dtype: torch.dtype = F64) -> torch.Tensor:
    """A uniformly random direction in R^d with the given norm."""
    v = torch.randn(d, generator=generator, device=generator.device, dtype=dtype)
    return norm * v / v.norm()


def sphere_points_and_direction(tag: str, d: int, n_test: int, B_x: float, data_seed: int,
                                device: torch.device | str = "cpu",
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Test points x uniform on the sphere of radius B_x and a direction v of norm
    sqrt(d)/B_x, drawn from :func:`data_generator` so every width sees the same (x, v)."""
    g = data_generator(data_seed, tag, d, n_test)
    X = sphere(n_test, d, radius=B_x, generator=g, dtype=F64)
    v = random_direction(d, math.sqrt(d) / B_x, g)
    return X.to(device), v.to(device)


def input_chunks(X: torch.Tensor, width: int) -> Iterator[torch.Tensor]:
    """Row blocks of X whose (rows x width) preactivation blocks fit in CHUNK_ELEMS."""
    rows = max(1, CHUNK_ELEMS // max(int(width), 1))
    yield from X.split(rows)


def block_elems(n: int, width: int) -> int:
    """Elements of the largest (rows, width) block :func:`input_chunks` yields for n inputs
    (the unit of the chunked experiments' memory models)."""
    width = max(int(width), 1)
    return min(int(n), max(1, CHUNK_ELEMS // width)) * width


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope of log y on log x and its standard error (:func:`toolkit.loglog_fit`)."""
    f = loglog_fit(x, y)
    return f.slope, f.se


def fit_tilt(ms: Sequence[float], rel_at_100: float, gamma: float) -> float:
    """|OLS slope| of log(1 + c (m/100)^-gamma) against log m over the widths ``ms``.

    A leading-order law y = A m^b with a relative correction of size ``rel_at_100`` at m = 100
    decaying like m^-gamma, y = A m^b (1 + c (m/100)^-gamma), gives a log-log fit over ``ms``
    the slope b + tilt; this is the deterministic allowance (``bias``) of a slope claim, from
    the stated size of the correction, computed on the grid actually fitted.

    Examples
    --------
    >>> round(fit_tilt([100, 1000, 10000], 0.1, 0.5), 4)
    0.0185
    >>> fit_tilt([100, 1000], 0.0, 1.0)
    0.0
    """
    lx = np.log(np.asarray(ms, float))
    if len(lx) < 2:
        return 0.0
    y = np.log1p(rel_at_100 * (np.exp(lx) / 100.0) ** -gamma)
    c = lx - lx.mean()
    return abs(float(c @ y) / float(c @ c))

