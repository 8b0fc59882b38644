"""Disjoint parts of one experiment's paper-scale projection, added up into its estimate.

A projection of a large experiment can be split, e.g. one panel of a figure per process
(``--set panels=a`` and ``--set panels=b``), so that the parts run side by side. A part is a
set of ``--set`` overrides each of which narrows a list parameter to a non-empty subset of its
paper value; everything else stays at paper scale. Its units are then a subset of the
experiment's. Parts are stored by their label (``"panels=a"``) and the experiment's estimate
is their sum once the stored parts' units are disjoint and together are the experiment's units.
Each part pays the experiment's ``prepare`` and ``theory`` once, so the sum counts those once
per part (an upper bound by that much).
"""

from __future__ import annotations

import json
from typing import Any

from lazylab.cli import parse_assignments
from lazylab.errors import InputError
from lazylab.experiments import get_experiment
from lazylab.runner.params import coerce, describe_validation_error


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["panels=a", "widths=20,50"]`` -> {"panels": "a", "widths": "20,50"}, as ``lazylab
    reproduce --set`` parses them; ValueError naming an item that is not KEY=VALUE."""
    try:
        return parse_assignments(items)
    except InputError as e:
        raise ValueError(str(e)) from None


def check_overrides(exp_id: str, overrides: dict[str, str]) -> None:
    """ValueError in one line (as ``lazylab reproduce`` words it) when ``exp_id`` has no such
    parameter or a value is not allowed at paper scale."""
    from pydantic import ValidationError

    exp = get_experiment(exp_id)
    unknown = sorted(set(overrides) - set(exp.Params.model_fields))
    if unknown:
        raise ValueError(f"--set {unknown[0]}: {exp_id} has no parameter {unknown[0]!r} "
                         f"(`lazylab show {exp_id}` lists them)")
    try:
        _params(exp, overrides)
    except ValidationError as e:
        raise ValueError(describe_validation_error(exp, e, overrides, "paper")) from None


def parse_label(label: str) -> dict[str, str]:
    """``"panels=a widths=20,50"`` -> {"panels": "a", "widths": "20,50"}."""
    return dict(kv.split("=", 1) for kv in label.split())


def label_of(overrides: dict[str, str]) -> str:
    return " ".join(f"{k}={overrides[k]}" for k in sorted(overrides))


def _params(exp: Any, overrides: dict[str, str]) -> Any:
    fields = exp.Params.model_fields
    return exp.resolve("paper", {k: coerce(fields[k].annotation, v) for k, v in overrides.items()})


def _units(exp: Any, overrides: dict[str, str]) -> set[str]:
    return {json.dumps(u, sort_keys=True) for u in exp.units(_params(exp, overrides))}


def check_part(exp_id: str, overrides: dict[str, str]) -> str:
    """The part's label; ValueError naming the override when ``overrides`` do not select a part
    of ``exp_id`` at paper scale (module docstring)."""
    check_overrides(exp_id, overrides)
    exp = get_experiment(exp_id)
    full = exp.resolve("paper")
    part = _params(exp, overrides)
    for k in overrides:
        whole, sub = getattr(full, k), getattr(part, k)
        if not isinstance(whole, list) or not sub or not set(map(str, sub)) <= set(
                map(str, whole)):
            raise ValueError(
                f"--set {k}={overrides[k]}: a part of {exp_id} narrows a list parameter to a "
                f"non-empty subset of its paper value ({whole!r}); its estimate is not a part")
    if not _units(exp, overrides) <= _units(exp, {}):
        raise ValueError(f"--set {label_of(overrides)}: units outside {exp_id}'s paper units")
    return label_of(overrides)


def covers(exp_id: str, labels: list[str]) -> bool:
    """The parts ``labels`` are disjoint and together are ``exp_id``'s paper units."""
    exp = get_experiment(exp_id)
    seen: set[str] = set()
    for label in labels:
        units = _units(exp, parse_label(label))
        if units & seen:
            return False
        seen |= units
    return seen == _units(exp, {})
