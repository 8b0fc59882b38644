"""The rows a unit or a theory returns, checked and normalised (shared by the jobs that compute
them and by the assembly of a run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_REQUIRED = ("method", "x_name", "x", "metric", "value")

Rows = list[dict[str, Any]]


def tidy_rows(rows: Any, *, kind: str, where: str) -> Rows:
    """Check and normalise rows returned by ``run_unit`` or ``theory``.

    Numbers become Python floats (so JSON and CSV write them exactly), ``kind`` is checked, and
    extra keys are kept if they are JSON scalars. ``where`` names the source in error messages.
    """
    if not isinstance(rows, list | tuple):
        raise TypeError(f"{where} must return a list of rows, got {type(rows).__name__}")
    out = []
    for r in rows:
        if not isinstance(r, Mapping):
            raise TypeError(f"{where} returned a row that is not a dict: {r!r}")
        missing = [k for k in _REQUIRED if k not in r]
        if missing:
            raise ValueError(f"{where} returned a row without {', '.join(missing)}: {dict(r)}")
        rk = r.get("kind", kind)
        if rk != kind:
            raise ValueError(f"{where} returned a row of kind {rk!r}; expected {kind!r}")
        t = {k: _scalar(v) for k, v in r.items() if k != "seed"}
        t.update(method=str(r["method"]), kind=kind, x_name=str(r["x_name"]),
                 x=float(r["x"]), metric=str(r["metric"]), value=float(r["value"]))
        out.append(t)
    return out


def _scalar(v: Any) -> Any:
    if hasattr(v, "item") and callable(v.item):  # numpy / torch scalars
        v = v.item()
    if v is None or isinstance(v, bool | int | float | str):
        return v
    raise TypeError(f"result rows may only hold numbers and strings, got {type(v).__name__}")
