"""Every experiment's parameters (name, type, bounds or choices, default), known without torch.

``lazylab reproduce ID --set KEY=VALUE`` checks the keys and the simple per-value constraints
against this manifest before the registry is imported (importing it imports torch, scipy,
matplotlib and every experiment module: seconds), so an unknown key, a non-numeric or
non-finite number, a value outside its bounds or a choice that does not exist is refused in
well under a second. The manifest is generated from each pydantic
parameter model's ``model_json_schema()`` by :func:`build_manifest` and stored next to this
module in ``param_manifest.json``; ``tests/test_param_manifest.py`` keeps it equal to the
registry (regenerate with ``make manifest``, i.e. ``python -m lazylab.runner.manifest``).

The fast check only ever *refuses* what pydantic would refuse too (a property test compares it
with :func:`lazylab.runner.params.resolve_spec` on fuzzed values); anything it cannot decide
(cross-field rules, ``multipleOf``, unusual number spellings) is left to the full validation
after the import, which stays the authority.

>>> check_value({"type": "integer", "minimum": 2, "maximum": 1000}, "1")
'must be >= 2'
>>> check_value({"type": "number", "exclusiveMinimum": 0}, "inf")
'must be a finite number'
>>> check_value({"type": "array", "items": {"type": "integer"}, "minItems": 1}, "10,x") is None
False
>>> check_value({"enum": ["relu", "tanh"], "type": "string"}, "relu") is None
True
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazylab.errors import InputError

if TYPE_CHECKING:
    from lazylab.experiments.base import Experiment

#: The generated manifest (package data).
MANIFEST_PATH = Path(__file__).with_name("param_manifest.json")

#: JSON-schema keys that the fast check reads (everything else is left to pydantic).
_KEPT = ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
         "items", "prefixItems", "minItems", "maxItems", "anyOf", "default")

#: Strings pydantic (lax mode) accepts as booleans, lower case.
_BOOLS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})


def _slim(schema: Any) -> Any:
    """The parts of a JSON schema the fast check uses (recursively), nothing else."""
    if isinstance(schema, list):
        return [_slim(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: _slim(v) if k in ("items", "prefixItems", "anyOf") else v
            for k, v in schema.items() if k in _KEPT}


def builtin(experiments: Iterable[Experiment]) -> list[Experiment]:
    """The experiments lazylab itself defines (plugins are not in the package's manifest)."""
    return [e for e in experiments if type(e).__module__.startswith("lazylab.experiments.")]


def build_manifest(experiments: Iterable[Experiment]) -> dict[str, dict[str, Any]]:
    """Experiment id -> parameter name -> its slimmed JSON schema, in registry order, for the
    built-in experiments among ``experiments``.

    Parameters
    ----------
    experiments
        The registered experiments (:func:`lazylab.experiments.all_experiments`).
    """
    out: dict[str, dict[str, Any]] = {}
    for e in builtin(experiments):
        props = e.Params.model_json_schema().get("properties", {})
        out[e.id] = {name: _slim(props.get(name, {})) for name in e.Params.model_fields}
    return out


def build_papers(experiments: Iterable[Experiment]) -> dict[str, str]:
    """Built-in experiment id -> paper key, in registry order (:mod:`lazylab.ids` reads it)."""
    return {e.id: e.paper for e in builtin(experiments)}


def write_manifest(path: Path = MANIFEST_PATH) -> Path:
    """Regenerate the manifest file from the registry (imports it, hence torch): the paper
    key of every built-in experiment and the schema of each of its parameters."""
    from lazylab.experiments import all_experiments

    exps = all_experiments()
    manifest = build_manifest(exps)
    lines = []
    for exp_id, fields in manifest.items():  # one line per parameter: readable diffs
        body = ",\n".join(f"   {json.dumps(k)}: {json.dumps(v, sort_keys=True)}"
                           for k, v in fields.items())
        lines.append(f"  {json.dumps(exp_id)}: {{\n{body}\n  }}")
    papers = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}"
                         for k, v in build_papers(exps).items())
    path.write_text("{\n \"papers\": {\n" + papers + "\n },\n \"params\": {\n"
                    + ",\n".join(lines) + "\n }\n}\n")
    return path


@cache
def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_manifest(path: Path = MANIFEST_PATH) -> dict[str, dict[str, Any]]:
    """The stored parameter manifest ({} when the file is missing or unreadable: no fast
    check)."""
    return dict(_load(path).get("params", {}))


def load_papers(path: Path = MANIFEST_PATH) -> dict[str, str]:
    """The stored id -> paper key of the built-in experiments ({} when unreadable)."""
    return dict(_load(path).get("papers", {}))


def _number(raw: str) -> float | None:
    """``raw`` as a float, or None when Python cannot read it as a number."""
    try:
        return float(raw)
    except ValueError:
        return None


def _bounds(schema: dict[str, Any], x: float) -> str | None:
    for key, ok, sym in (("minimum", x >= schema.get("minimum", -math.inf), ">="),
                         ("exclusiveMinimum", x > schema.get("exclusiveMinimum", -math.inf), ">"),
                         ("maximum", x <= schema.get("maximum", math.inf), "<="),
                         ("exclusiveMaximum", x < schema.get("exclusiveMaximum", math.inf), "<")):
        if key in schema and not ok:
            return f"must be {sym} {schema[key]}"
    return None


def _check_optional(schema: dict[str, Any], raw: str) -> str | None:
    """An ``anyOf`` field: ``none``/``null`` is accepted when one branch is null; a single
    non-null branch is checked as the field, several are left to the full validation."""
    branches = [b for b in schema["anyOf"] if b.get("type") != "null"]
    if len(branches) < len(schema["anyOf"]) and raw.lower() in ("none", "null"):
        return None
    return check_value(branches[0], raw) if len(branches) == 1 else None


def _check_array(schema: dict[str, Any], raw: str) -> str | None:
    """A list field: the comma-split item count against minItems/maxItems, then each item
    against its ``prefixItems`` entry or ``items``."""
    items = [] if raw == "" else [s.strip() for s in raw.split(",")]
    lo, hi = schema.get("minItems"), schema.get("maxItems")
    if lo is not None and len(items) < lo:
        return f"must have at least {lo} item(s)"
    if hi is not None and len(items) > hi:
        return f"must have at most {hi} item(s)"
    prefix = schema.get("prefixItems")
    for i, item in enumerate(items):
        sub = prefix[i] if prefix and i < len(prefix) else schema.get("items")
        why = check_value(sub, item) if isinstance(sub, dict) else None
        if why:
            return f"item {i + 1} ({item!r}) {why}"
    return None


def _check_number(kind: str, schema: dict[str, Any], raw: str) -> str | None:
    """An integer or number field: readable, finite, integral for integers, within bounds."""
    x = _number(raw)
    if x is None:
        return "must be an integer" if kind == "integer" else "must be a number"
    if not math.isfinite(x):
        return "must be a finite number"
    if kind == "integer" and x != int(x):
        return "must be an integer"
    return _bounds(schema, x)


def check_value(schema: dict[str, Any], raw: str) -> str | None:
    """Why pydantic would refuse the ``--set`` string ``raw`` for a field, or None.

    Mirrors :func:`lazylab.runner.params.coerce`: ``none``/``null`` for optional fields, lists
    split on commas, choices matched as text; then numbers are read and their bounds checked.
    None means "not refused here" (the full validation still runs).
    """
    if "anyOf" in schema:
        return _check_optional(schema, raw)
    kind = schema.get("type")
    if kind == "array":
        return _check_array(schema, raw)
    if "enum" in schema:
        if raw in {str(c) for c in schema["enum"]}:
            return None
        return "must be one of " + ", ".join(map(str, schema["enum"]))
    if kind == "boolean":
        return None if raw.lower() in _BOOLS else "must be true or false"
    if kind in ("integer", "number"):
        return _check_number(kind, schema, raw)
    return None


def _selected(targets: Sequence[str], manifest: dict[str, Any]) -> list[str]:
    from lazylab.ids import EXPERIMENT_PAPERS

    ids: list[str] = []
    for t in targets:
        picked = (list(manifest) if t == "all" else
                  [i for i, p in EXPERIMENT_PAPERS.items() if p == t] or [t])
        ids += [i for i in picked if i not in ids]
    return ids


def _new_in_source(key: str, ids: Sequence[str], manifest: dict[str, Any]) -> bool:
    """Whether a field ``key: ...`` appears in the source of the experiments' paper packages
    although no experiment of those papers has it in the manifest.

    Guards a stale manifest (an experiment gained a parameter and ``make manifest`` was not
    run yet): such a key is then left to the full validation instead of being refused.
    """
    import re

    from lazylab.ids import EXPERIMENT_PAPERS

    papers = {EXPERIMENT_PAPERS.get(i, "") for i in ids} - {""}
    if any(key in fields for i, fields in manifest.items()
           if EXPERIMENT_PAPERS.get(i) in papers):
        return False  # the definition found would be that known parameter
    root = Path(__file__).resolve().parent.parent / "experiments"
    files = list(root.glob("*.py"))
    for paper in papers:
        files += list((root / paper).glob("*.py"))
    pattern = re.compile(rf"^\s+{re.escape(key)}\s*:", re.M)
    for f in files:
        try:
            if pattern.search(f.read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            continue
    return False


def check_assignments(targets: Sequence[str], assignments: dict[str, str],
                      manifest: dict[str, dict[str, Any]] | None = None,
                      option: str = "--set") -> None:
    """Refuse an unknown ``--set`` key or a value outside its field's simple constraints.

    Raises :class:`InputError` with the same one-line message the full validation gives
    (``option`` names the command-line option in it).
    Does nothing when a target is not in the manifest (an experiment registered by a plugin,
    or a stale manifest): the registry then decides.
    """
    manifest = load_manifest() if manifest is None else manifest
    ids = _selected(targets, manifest)
    if not ids or any(i not in manifest for i in ids):
        return
    known = sorted({k for i in ids for k in manifest[i]})
    for key, raw in assignments.items():
        if key not in known:
            if _new_in_source(key, ids, manifest):
                return  # a parameter added since the manifest was generated: the registry decides
            close = difflib.get_close_matches(key, known, n=3)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise InputError(f"unknown {option} key {key!r}: no parameter of that name in "
                             f"{', '.join(ids)}; {hint}`lazylab show ID` lists the keys")
        for i in ids:
            if key in manifest[i]:
                why = check_value(manifest[i][key], raw)
                if why:
                    raise InputError(f"{option} {key}={raw}: {key} {why} ({i})")


if __name__ == "__main__":
    print(f"wrote {write_manifest()}")
