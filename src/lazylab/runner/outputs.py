"""File IO of an output directory: atomic writes, results.csv, strict JSON, figures, and the
experiment folders a directory holds.

Every file is written to a temporary sibling, fsynced, then renamed, so a reader (or a run
killed mid-write) sees the old file or the new one, never a torn one. ``results.csv`` numbers
are written with ``repr`` so that reading them back with ``float`` gives the same bits.
"""

from __future__ import annotations

import csv
import functools
import glob
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazylab.errors import StoreFault

if TYPE_CHECKING:
    from lazylab.experiments.base import Results

#: Per-experiment outputs that a fresh run replaces (config.json is rewritten separately).
OUTPUT_FILES = ("results.csv", "claims.json", "{id}.png", "{id}.svg")


def temp_path(path: Path) -> Path:
    """A temporary sibling of ``path`` (same folder, so the rename is atomic). Leftovers of
    writers that died mid-write (``kill -9``) are removed first: their pid is gone."""
    _remove_stale_tmp(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _remove_stale_tmp(path: Path) -> None:
    """Delete ``.NAME.PID.tmp`` siblings of ``path`` whose process no longer exists."""
    try:
        leftovers = list(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))
    except OSError:
        return
    for f in leftovers:
        pid = f.name[len(path.name) + 2:-4]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            f.unlink(missing_ok=True)
        except (PermissionError, OverflowError, OSError):
            continue


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file, fsync, then rename.

    A reader (or a run killed mid-write) sees the old file or the new one, never a torn one.
    """
    tmp = temp_path(path)
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    from lazylab.experiments.base import COLUMNS

    extra: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k not in COLUMNS:
                extra.setdefault(k, None)
    return [*COLUMNS, *sorted(extra)]


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_results_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write the tidy table (atomically); the standard columns first, facet columns after."""
    cols = _columns(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    atomic_write(path, buf.getvalue())


def read_results(path: str | Path) -> Results:
    """Read a ``results.csv`` back (x and value as floats, seed as int or None)."""
    from lazylab.experiments.base import Results

    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            r = dict(r)
            r["x"] = float(r["x"])
            r["value"] = float(r["value"])
            r["seed"] = int(r["seed"]) if r["seed"] != "" else None
            rows.append(r)
    return Results(rows)


def _json_safe(v: Any) -> Any:
    """Strict JSON: non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    return v


def write_json(path: Path, obj: Any) -> None:
    """Strict JSON (non-finite floats as strings), written atomically."""
    atomic_write(path, json.dumps(_json_safe(obj), indent=2, allow_nan=False) + "\n")


_SUPERSCRIPT = str.maketrans("0123456789-", "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077"
                             "\u2078\u2079\u207b")
_MATH_POWER = re.compile(r"\$\\mathdefault\{(-?)(?:([0-9.]+)\\times)?([0-9.]+)\^\{(-?[0-9]+)\}\}\$")


def plain_power(label: str) -> str:
    r"""A log-axis tick label of matplotlib's mathtext (``$\mathdefault{10^{-2}}$``,
    ``$\mathdefault{2\times10^{1}}$``) as plain text with Unicode superscripts ("10⁻²",
    "2×10¹"); any other label unchanged.

    >>> plain_power(r"$\mathdefault{10^{-2}}$"), plain_power("0.5")
    ('10⁻²', '0.5')
    """
    m = _MATH_POWER.fullmatch(label)
    if m is None:
        return label
    sign, coeff, base, exponent = m.groups()
    return f"{sign}{coeff + chr(0xD7) if coeff else ''}{base}{exponent.translate(_SUPERSCRIPT)}"


def plain_log_ticks(fig: Any) -> None:
    """Give every log axis of ``fig`` tick labels in plain text (:func:`plain_power`).

    Matplotlib writes them as mathtext, which it parses with a pure-Python grammar once per
    label, dpi and renderer: a fifth of the quick suite's figure drawing (12 of 56 CPU-s for
    1013 parses), for labels that plain text sets the same way. Only the default
    ``LogFormatterSciNotation`` formatters are wrapped; an axis with its own formatter keeps it.
    """
    from matplotlib.ticker import LogFormatterSciNotation

    plain = _plain_log_formatter()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                             (axis.get_minor_formatter, axis.set_minor_formatter)):
                f = get()
                if type(f) is LogFormatterSciNotation:
                    put(plain(f))


@functools.cache
def _plain_log_formatter() -> type:
    """The formatter class of :func:`plain_log_ticks` (made on first use: matplotlib is
    imported only by commands that draw)."""
    from matplotlib.ticker import Formatter

    class PlainLogFormatter(Formatter):
        """A log formatter's labels through :func:`plain_power`; its tick selection (which
        minor ticks get labels) is the wrapped formatter's."""

        def __init__(self, inner: Formatter):
            self.inner = inner

        def set_axis(self, axis: Any) -> None:
            super().set_axis(axis)
            self.inner.set_axis(axis)

        def set_locs(self, locs: Any) -> None:
            self.inner.set_locs(locs)

        def __call__(self, x: float, pos: int | None = None) -> str:
            return plain_power(self.inner(x, pos))

        def format_data(self, value: float) -> str:
            return self.inner.format_data(value)

        def format_data_short(self, value: float) -> str:
            return self.inner.format_data_short(value)

    return PlainLogFormatter


def save_figure(fig: Any, folder: Path, stem: str, *, dpi: int = 150) -> None:
    """Save ``fig`` as ``folder/stem.png`` and ``.svg``, each atomically (a temporary file,
    then a rename); a fixed hash salt and no date keep the SVG identical across identical
    runs. Log-axis tick labels are written as plain text first (:func:`plain_log_ticks`)."""
    import matplotlib.pyplot as plt

    plain_log_ticks(fig)

    with plt.rc_context({"svg.hashsalt": "lazylab"}):
        for fmt, kw in (("png", {"dpi": dpi}), ("svg", {"metadata": {"Date": None}})):
            final = folder / f"{stem}.{fmt}"
            tmp = temp_path(final)
            try:
                fig.savefig(tmp, format=fmt, bbox_inches="tight", **kw)
                os.replace(tmp, final)
            finally:
                tmp.unlink(missing_ok=True)


def experiment_dirs(out_dir: Path, strict: bool = False,
                    warn: Callable[[str], None] | None = None,
                    ) -> list[tuple[Path, dict[str, Any]]]:
    """Subdirectories holding a readable config.json that passes its schema
    (:class:`lazylab.runner.schemas.ConfigFile`), in registry order then by name.

    ``strict``: a config.json that cannot be read, parsed or validated raises
    :class:`StoreFault` naming it (``lazylab report``); otherwise it is skipped, with one line
    to ``warn`` (the report written after a run).
    """
    from lazylab.experiments import all_experiments
    from lazylab.runner.schemas import ConfigFile, JsonFileError, read_checked

    found = []
    for sub in sorted(out_dir.iterdir()):
        cfg = sub / "config.json"
        if not (sub.is_dir() and cfg.is_file()):
            continue
        try:
            found.append((sub, read_checked(cfg, ConfigFile)))
        except JsonFileError as e:
            if strict:
                why = e.reason if e.reason.startswith("cannot be read") else \
                    f"cannot be read: it {e.reason}"
                raise StoreFault(f"{cfg} {why}; torn or edited: rerun the experiment with "
                                 f"--resume --out {out_dir}") from None
            if warn is not None:
                warn(f"{e}; skipped")
    order = {e.id: i for i, e in enumerate(all_experiments())}
    found.sort(key=lambda t: (order.get(t[0].name, len(order)), t[0].name))
    return found
