"""Cost models scaled from an experiment's sizes (the runner's cost guard).

The unit-count rule (:meth:`Experiment.unit_count_seconds`) scales ``est_seconds`` by the number
of work units only, so ``--set steps=1000000`` or ``--set m=1000000`` (accepted values) would be
estimated at the quick run's time and run silently for hours. :func:`scaled_cost` (the default
:meth:`Experiment.cost`, with the sizes of the experiment's ``cost_sizes``) multiplies it by the
growth of each named size:

    seconds(p) = default_cost(p) x prod_k (size_k(p) / size_k(scale))^e_k

where ``size_k`` is the parameter's value (the largest item for a list) and ``e_k`` its stated
exponent (1 for GD steps, widths and sample counts that multiply the work; the products are a
lower bound where the true growth is faster, e.g. a kernel solve in n). Peak bytes come from an
optional ``peak`` rule (None: unknown).

>>> size_of([10, 40, 20]), size_of(7), size_of(None)
(40.0, 7.0, None)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment, ExperimentParams

__all__ = ["scaled_cost", "size_of"]


def size_of(v: Any) -> float | None:
    """A parameter value as a size: a number, or the largest item of a list (None otherwise)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list | tuple) and v and all(isinstance(x, int | float) for x in v):
        return float(max(v))
    return None


def scaled_cost(exp: Experiment, p: ExperimentParams, scale: str,
                sizes: Mapping[str, float],
                peak: Callable[[ExperimentParams], float] | None = None,
                ) -> tuple[float, float | None]:
    """``(seconds, peak bytes or None)`` of one seed: the unit-count default scaled by sizes.

    Parameters
    ----------
    exp, p, scale
        The experiment, the resolved parameters and the scale whose ``est_seconds`` anchor it.
    sizes
        Parameter name -> exponent ``e_k`` of the work in that size.
    peak
        Optional rule for the peak bytes at ``p``.
    """
    secs = exp.unit_count_seconds(p, scale)
    ref = exp.resolve(scale if scale in exp.scales else "quick")
    for name, e in sizes.items():
        now, then = size_of(getattr(p, name, None)), size_of(getattr(ref, name, None))
        if now and then and now > 0 and then > 0:
            secs *= (now / then) ** e
    return secs, (peak(p) if peak is not None else None)
