"""``--set KEY=VALUE`` strings to validated parameters, with one-line messages.

:func:`check_keys` refuses a key no selected experiment has; :func:`coerce` shapes a string for
pydantic (lists split on commas, Literal choices matched,
``none`` for optional fields); pydantic validates the rest (bounds, choices, finite floats);
:func:`describe_validation_error` names each bad parameter and what is allowed;
:func:`resolve_spec` then runs the experiment's own ``validate(p)`` (:func:`validate`) and
computes the grid once, all before the store is touched or anything is computed.

>>> coerce(list[int], "10, 20,30")  # pydantic then converts the items to int
['10', '20', '30']
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lazylab.errors import InputError
from lazylab.runner.policy import ExecutionPolicy, check_precision
from lazylab.runner.spec import RunSpec

if TYPE_CHECKING:
    import torch
    from pydantic import ValidationError

    from lazylab.experiments.base import Experiment, ExperimentParams

#: The most seeds per unit a run accepts (a sane cap: 10^4 seeds of the smallest grid already
#: take hours; a crafted config.json with more is refused instead of hanging).
SEEDS_MAX = 10_000


def check_seeds(seeds: int, what: str = "--seeds") -> None:
    """InputError unless ``1 <= seeds <= SEEDS_MAX``."""
    if not 1 <= seeds <= SEEDS_MAX:
        raise InputError(f"{what} must be between 1 and {SEEDS_MAX}; got {seeds}")


def check_keys(exps: Sequence[Experiment], assignments: dict[str, str]) -> None:
    """InputError naming a ``--set`` key that no selected experiment has (with close matches);
    a key some of them have is applied to those only (:func:`resolve_spec`)."""
    known = sorted({k for e in exps for k in e.Params.model_fields})
    for key in assignments:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            ids = ", ".join(e.id for e in exps)
            raise InputError(f"unknown --set key {key!r}: no parameter of that name in {ids}; "
                             f"{hint}`lazylab show ID` lists the keys")


def coerce(ann: Any, raw: str) -> Any:
    """A ``--set`` string shaped for pydantic: lists split on commas, Literal choices matched,
    ``none`` for optional fields; pydantic then validates and converts the rest."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated:
        return coerce(typing.get_args(ann)[0], raw)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(ann)
        if type(None) in args and raw.lower() in ("none", "null"):
            return None
        rest = [a for a in args if a is not type(None)]
        return coerce(rest[0], raw) if len(rest) == 1 else raw
    if origin in (list, tuple, set, frozenset):
        if raw == "":
            return []
        item = (typing.get_args(ann) or (str,))[0]
        return [coerce(item, s.strip()) for s in raw.split(",")]
    if origin is typing.Literal:
        for choice in typing.get_args(ann):
            if str(choice) == raw:
                return choice
    return raw


_MESSAGES = {
    "greater_than_equal": "must be >= {ge}", "greater_than": "must be > {gt}",
    "less_than_equal": "must be <= {le}", "less_than": "must be < {lt}",
    "literal_error": "must be {expected}", "int_parsing": "must be an integer",
    "int_from_float": "must be an integer", "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false", "too_short": "must have at least {min_length} "
    "item(s)", "too_long": "must have at most {max_length} item(s)",
    "string_type": "must be a string", "list_type": "must be a comma-separated list",
}


def describe_validation_error(exp: Experiment, err: ValidationError,
                              assignments: dict[str, str], scale: str) -> str:
    """One line naming each bad parameter, what is allowed, and where the value came from."""
    allowed = {r["name"]: r["allowed"] for r in exp.param_table()}
    parts = []
    for e in err.errors():
        loc = [str(x) for x in e["loc"]]
        name = loc[0] if loc else ""
        shown = name + "".join(f"[{x}]" for x in loc[1:])
        tmpl = _MESSAGES.get(e["type"])
        try:
            what = tmpl.format(**e.get("ctx", {})) if tmpl else e["msg"]
        except KeyError:
            what = e["msg"]
        if tmpl is None or e["type"].endswith("_parsing"):
            if allowed.get(name, "any") != "any":
                what += f" (allowed: {allowed[name]})"
        what = " ".join(str(what).split())  # one line
        if name in assignments:
            parts.append(f"--set {name}={assignments[name]}: {shown} {what} ({exp.id})")
        elif name:
            parts.append(f"{exp.id}: parameter {shown} {what} (scale {scale})")
        else:
            parts.append(f"{exp.id}: invalid parameters: {what}")
    return "; ".join(parts)


def _check_finite_text(exp: Experiment, overrides: dict[str, Any],
                       assignments: dict[str, str]) -> None:
    """Refuse ``inf``/``nan`` in a ``--set`` value before any validator computes with it."""
    fields = exp.Params.model_fields
    for name, v in overrides.items():
        ann = str(fields[name].annotation) if name in fields else ""
        if "float" not in ann and "int" not in ann:
            continue  # a text parameter may legitimately be "nan"
        items = v if isinstance(v, list) else [v]
        for x in items:
            if not isinstance(x, str):
                continue
            try:
                bad = not math.isfinite(float(x))
            except ValueError:
                continue
            if bad:
                raise InputError(f"--set {name}={assignments[name]}: {name} must be a finite "
                                 f"number ({exp.id})")


def _check_finite(exp: Experiment, values: dict[str, Any], assignments: dict[str, str]) -> None:
    """InputError for a NaN or infinite float anywhere in the parameters (lists included)."""
    for name, v in values.items():
        items = v if isinstance(v, list | tuple) else [v]
        if any(isinstance(x, float) and not math.isfinite(x) for x in items):
            shown = f"--set {name}={assignments[name]}" if name in assignments else name
            raise InputError(f"{shown}: {name} must be a finite number ({exp.id})")


def check_ranges(exp: Experiment, p: Any) -> None:
    """Every pair of parameters ``X_min`` / ``X_max`` must satisfy X_min < X_max (equal ends
    give a one-point grid, reversed ends an empty one): InputError naming both otherwise.

    >>> from types import SimpleNamespace
    >>> from pydantic import BaseModel
    >>> class P(BaseModel):
    ...     m_min: int = 100
    ...     m_max: int = 100
    >>> check_ranges(SimpleNamespace(id="x"), P())
    Traceback (most recent call last):
    ...
    lazylab.errors.InputError: --set m_min=100: must be below m_max = 100 (x needs a range of m)
    """
    values = p.model_dump()
    for name, lo in values.items():
        if not name.endswith("_min") or f"{name[:-4]}_max" not in values:
            continue
        hi_name = f"{name[:-4]}_max"
        hi = values[hi_name]
        if lo is not None and hi is not None and not lo < hi:
            raise InputError(f"--set {name}={lo}: must be below {hi_name} = {hi} ({exp.id} "
                             f"needs a range of {name[:-4]})")


def check_grid(exp: Experiment, p: Any, units: list[dict[str, Any]]) -> None:
    """The grid has at least ``exp.min_distinct[key]`` distinct values of each unit key the
    experiment's claims fit along (a slope needs three points): InputError otherwise."""
    for key, need in getattr(exp, "min_distinct", {}).items():
        vals = {json.dumps(u[key], sort_keys=True) for u in units if key in u}
        if len(vals) < need:
            shown = ", ".join(sorted(vals, key=lambda v: (len(v), v)))
            raise InputError(f"{exp.id}: these parameters give {len(vals)} distinct value(s) "
                             f"of {key} ({shown or 'none'}); its claims need at least {need}: "
                             f"widen the grid (`lazylab show {exp.id}` lists its parameters)")


def with_precision(policy: ExecutionPolicy, exp: Experiment, scale: str, device: torch.device,
                   precision: str = "auto") -> ExecutionPolicy:
    """The policy with TF32 on or off for this experiment: ``precision`` "tf32" or "fp32",
    or for "auto" the experiment's declaration at the scale (:attr:`Experiment.precision`);
    ``policy.allow_tf32`` is an alias of "tf32" (:func:`~lazylab.runner.policy.check_precision`,
    the one check of the switch). TF32 exists on CUDA GPUs only: elsewhere it is always off, so
    a CPU run's identity does not depend on the option."""
    precision = check_precision(precision, allow_tf32=policy.allow_tf32)
    if precision == "auto":
        precision = exp.precision.get(scale, "fp32")
    return replace(policy, allow_tf32=precision == "tf32" and device.type == "cuda")


def validate(exp: Experiment, p: ExperimentParams, scale: str) -> None:
    """The experiment's own checks, ``exp.validate(p)``; an experiment whose ``validate`` takes
    a ``scale`` argument (a range only one scale refuses, e.g. the quick d range of
    :class:`~lazylab.experiments.ghorbani.widths.WidthExperiment`) gets it too."""
    if "scale" in inspect.signature(exp.validate).parameters:
        exp.validate(p, scale=scale)  # type: ignore[call-arg]
    else:
        exp.validate(p)


def _resolve_params(exp: Experiment, scale: str, assignments: dict[str, str]) -> Any:
    """The scale's values, then ``assignments`` for the keys this experiment has, checked by
    pydantic, for finite numbers and ordered ``X_min < X_max`` ranges."""
    from pydantic import ValidationError

    fields = exp.Params.model_fields
    overrides = {k: coerce(fields[k].annotation, v) for k, v in assignments.items()
                 if k in fields}
    _check_finite_text(exp, overrides, assignments)
    try:
        p = exp.resolve(scale, overrides)
    except ValidationError as e:
        raise InputError(describe_validation_error(exp, e, assignments, scale)) from None
    except (ValueError, ArithmeticError, TypeError) as e:
        # A model validator that computes with the raw values (e.g. a default derived from
        # them) failed: still bad input, reported in one line.
        sets = ", ".join(f"{k}={v}" for k, v in assignments.items() if k in fields)
        raise InputError(f"{exp.id}: invalid parameters{f' ({sets})' if sets else ''}: "
                         f"{type(e).__name__}: {' '.join(str(e).split())}") from None
    _check_finite(exp, p.model_dump(), assignments)
    check_ranges(exp, p)
    return p


def resolve_spec(exp: Experiment, scale: str, assignments: dict[str, str], seeds: int | None,
                 device: torch.device, policy: ExecutionPolicy | None = None,
                 precision: str = "auto") -> RunSpec:
    """A validated :class:`RunSpec`: the scale's values, then ``assignments`` (``--set``
    strings) for the keys this experiment has, then ``exp.validate(p)`` and the grid of work
    units (computed here once: :attr:`RunSpec.unit_keys`); InputError naming the parameter
    otherwise. Nothing is computed and no store is touched."""
    p = _resolve_params(exp, scale, assignments)
    validate(exp, p, scale)
    seeds = seeds or exp.default_seeds.get(scale, 1)
    policy = with_precision(policy or ExecutionPolicy(), exp, scale, device, precision)
    spec = RunSpec(exp, p, scale, seeds, device, policy)
    try:
        units = spec.unit_keys
    except ValueError as e:
        raise InputError(f"{exp.id}: {e}") from None
    if not units:
        raise InputError(f"{exp.id}: these parameters give an empty grid of work units")
    check_grid(exp, p, units)
    check_seeds(seeds)
    _ = spec.data_fingerprints  # the files found now ($LAZYLAB_DATA, data_root), not later
    return spec
