"""Schemas of the JSON files an output directory holds, for reading them back safely.

``lazylab report DIR`` reads config.json, claims.json and robustness.json that anything may
have edited. :func:`read_checked` parses one and validates it against its schema
(:class:`ConfigFile`, :data:`CLAIMS`, :class:`RobustnessFile`) before any of it is used, so a
crafted file gives one :class:`JsonFileError` line naming it instead of an ``AttributeError``
deep in the report (``"details": "x"``), an unhashable ``TypeError`` (``"experiment": ["a"]``)
or a ``RecursionError`` (deeply nested arrays).

The schemas are strict about the fields lazylab reads and the types it writes (no coercion:
``"seeds": "2"`` is refused), and allow extra fields, so files written by older or newer
versions with more keys still read. Nesting is limited to :data:`MAX_DEPTH` levels and size to
:data:`MAX_BYTES`: lazylab's own files nest at most 4 levels deep and stay far below 1 MiB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, field_validator

#: Deepest nesting of arrays and objects accepted (lazylab writes at most 4 levels).
MAX_DEPTH = 32
#: Largest file read (bytes).
MAX_BYTES = 64 * 2**20


class JsonFileError(ValueError):
    """A JSON file of an output directory that is unreadable or fails its schema; the message
    is one line, ``PATH REASON``; ``reason`` alone is kept for messages of their own."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path} {reason}")
        self.path, self.reason = path, reason


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


#: A number as lazylab writes it: a float or int, null for non-finite, or the strings "nan",
#: "inf", "-inf" of older versions.
Number = float | int | str | None


class PolicyRecord(_Record):
    """config.json's ``policy``: the execution options the reproduce command carries."""

    threads: int | None = None
    allow_tf32: bool | None = None
    memory_budget: float | int | None = None


class ConfigFile(_Record):
    """``ID/config.json``: the fields the report and the rebuild read."""

    experiment: str | None = None
    paper: str | None = None
    figure: str | None = None
    summary: str | None = None
    scale: str | None = None
    device: str | None = None
    status: str | None = None
    git_revision: str | None = None
    config_hash: str | None = None
    command: str | None = None
    seeds: int = 1
    params: dict[str, Any] = {}
    data: dict[str, Any] | None = None
    versions: dict[str, Any] | None = None
    policy: PolicyRecord | None = None
    timing: dict[str, Any] | None = None

    @field_validator("experiment")
    @classmethod
    def _slug(cls, v: str | None) -> str | None:
        from lazylab.ids import id_problem

        problem = None if v is None else id_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


class ClaimRecord(_Record):
    """One record of ``ID/claims.json``."""

    id: str
    statement: str | None = None
    held: bool | None = None
    status: str | None = None
    measured: Number | list[Number] = None
    expected: Number | list[Number] = None
    tolerance: Number | list[Number] = None
    ratio: Number = None
    comparison: str | None = None
    error_model: str | None = None
    details: dict[str, Any] | None = None


#: ``ID/claims.json``: a list of claim records.
CLAIMS: TypeAdapter[list[ClaimRecord]] = TypeAdapter(list[ClaimRecord])


class RobustnessFile(_Record):
    """``ID/robustness.json`` (``lazylab robustness``): one summary line per claim."""

    experiment: str | None = None
    summary: dict[str, str]
    settings: list[Any] = []
    seeds: int | str = 0


def _depth_ok(data: Any, limit: int) -> bool:
    """Whether ``data`` nests at most ``limit`` arrays/objects deep (iterative: no recursion)."""
    stack = [(data, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            if d > limit:
                return False
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return True


def _first_error(e: ValidationError) -> str:
    """The first schema violation as ``field: message`` (``[0].details: ...`` in a list)."""
    err = e.errors()[0]
    loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{loc or 'the top level'}: {err['msg']}{more}"


def read_checked(path: Path, schema: type[BaseModel] | TypeAdapter[Any]) -> Any:
    """The parsed content of ``path`` (as plain JSON values) once it passes ``schema``.

    JsonFileError, one line naming ``path``, when the file cannot be read, is larger than
    :data:`MAX_BYTES`, is not JSON, nests deeper than :data:`MAX_DEPTH` or fails the schema.
    """
    try:
        if path.stat().st_size > MAX_BYTES:
            raise JsonFileError(path, f"is larger than {MAX_BYTES // 2**20} MiB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise JsonFileError(path, f"cannot be read ({type(e).__name__}: "
                            f"{str(e)[:120]})") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise JsonFileError(path, f"is nested too deeply (more than {MAX_DEPTH} levels)") \
            from None
    except ValueError as e:
        raise JsonFileError(path, f"is not JSON ({str(e)[:120]})") from None
    if not _depth_ok(data, MAX_DEPTH):
        raise JsonFileError(path, f"is nested too deeply (more than {MAX_DEPTH} levels)")
    adapter = schema if isinstance(schema, TypeAdapter) else TypeAdapter(schema)
    try:
        adapter.validate_python(data)
    except ValidationError as e:
        raise JsonFileError(path, f"does not match its schema ({_first_error(e)})") from None
    return data
