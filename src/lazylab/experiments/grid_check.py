"""Distinct unit keys: every key of an experiment's grid names one unit.

The store keys a finished unit by ``(experiment, config hash, canonical key, seed index)``
(:func:`lazylab.seeding.canonical_key`), so a grid that lists a key twice would compute that
unit twice and write its rows twice into results.csv, while a resume would count it once.
The registry refuses such an experiment at registration (:func:`check_scales`, at every
declared scale); :func:`check_unit_keys` is the same check for any parameters, for the place
where a run plans its units.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lazylab.seeding import canonical_key

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

def duplicate_unit_keys(keys: Iterable[dict[str, Any]]) -> list[str]:
    """The canonical keys (sorted-key JSON) that occur more than once, in first-repeat order.

    >>> duplicate_unit_keys([{"n": 1}, {"n": 2}, {"n": 1}, {"n": 1}])
    ['{"n":1}']
    """
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for key in keys:
        try:
            kj = canonical_key(key)
        except (TypeError, ValueError) as e:
            raise ValueError(f"unit key {key!r} is not JSON-able ({e})") from None
        if kj in seen:
            repeated.setdefault(kj, None)
        seen.add(kj)
    return list(repeated)


def check_unit_keys(exp_id: str, keys: Iterable[dict[str, Any]], where: str = "") -> None:
    """ValueError naming the experiment and up to three repeated keys, if any key repeats."""
    repeated = duplicate_unit_keys(keys)
    if repeated:
        more = f" and {len(repeated) - 3} more" if len(repeated) > 3 else ""
        raise ValueError(f"experiment {exp_id!r}: units(){where} repeats the unit key(s) "
                         f"{', '.join(repeated[:3])}{more}; each unit key must be distinct")


def check_scales(exp: Experiment) -> None:
    """:func:`check_unit_keys` on the grid of every scale the experiment declares.

    A scale whose parameters do not validate is left to the parameter checks (the run refuses
    it with its own message); only the grid is judged here.
    """
    for scale in exp.scales:
        try:
            p = exp.resolve(scale)
        except ValueError:  # pydantic's ValidationError is a ValueError
            continue
        check_unit_keys(exp.id, exp.units(p), f" at scale {scale!r}")
