"""The embedded SQLite store of finished work units (``DIR/lazylab.sqlite``).

One row per finished unit, keyed by ``(experiment, config_hash, unit_key, seed_index)``:

* ``unit_key`` is the unit's canonical JSON (:func:`lazylab.seeding.canonical_key`);
* ``rows`` is the JSON list of result rows the unit returned. JSON writes floats with
  ``repr``, so every stored number reads back bitwise identical;
* ``checksum`` is the SHA-256 of ``rows``, verified whenever units are read back (``report``
  and ``--resume``), so a unit whose stored rows were altered or do not parse is named;
* ``seconds`` and ``finished_at`` record the unit's compute time and completion time.

Faults of the file itself (read-only, truncated, corrupted, 0 bytes, not a database) raise
:class:`lazylab.errors.StoreFault` (exit 2): one line naming the file and what to do.

A second table remembers, per experiment, the resolved configuration the stored units belong
to, so a ``--resume`` with different parameters is refused instead of mixing results. A third
keeps the theory rows each finished run computed (checksummed like the units), so ``lazylab
report`` re-assembles without recomputing them: at paper scale some take longer than a unit
(``arora-learnability``'s kernels at n = 10^4: 13 minutes on a laptop CPU).

Each finished unit is committed in its own transaction, so an interrupted run loses at most the
units that were still running. The database runs in WAL mode (readers never block the writer)
and only the main process writes: worker processes return rows, they never open the store.

>>> import tempfile, pathlib
>>> with Store(pathlib.Path(tempfile.mkdtemp()) / "s.sqlite") as st:
...     st.begin("toy", "h1", {"n": 3}, fresh=True)
...     st.put_unit("toy", "h1", '{"n":3}', 0, [{"value": 0.1}], seconds=0.5)
...     st.units("toy", "h1")[('{"n":3}', 0)]
[{'value': 0.1}]
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from lazylab.errors import StoreFault

#: File name of the store inside an output directory.
STORE_NAME = "lazylab.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS configs (
    experiment  TEXT PRIMARY KEY,
    config_hash TEXT NOT NULL,
    config      TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS units (
    experiment  TEXT    NOT NULL,
    config_hash TEXT    NOT NULL,
    unit_key    TEXT    NOT NULL,
    seed_index  INTEGER NOT NULL,
    rows        TEXT    NOT NULL,
    seconds     REAL    NOT NULL,
    finished_at TEXT    NOT NULL,
    checksum    TEXT    NOT NULL,
    PRIMARY KEY (experiment, config_hash, unit_key, seed_index)
);
CREATE TABLE IF NOT EXISTS theory (
    experiment  TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    rows        TEXT NOT NULL,
    checksum    TEXT NOT NULL,
    PRIMARY KEY (experiment, config_hash)
);
"""

#: A stored unit's identity: (canonical unit key, seed index).
StoredUnit = tuple[str, int]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def checksum(payload: str) -> str:
    """SHA-256 (hex) of a unit's stored JSON rows."""
    return hashlib.sha256(payload.encode()).hexdigest()


_F = TypeVar("_F", bound=Callable[..., Any])

_ADVICE = ("move it away (or delete it) to start afresh, or restore it from a backup")


def _faults(fn: _F) -> _F:
    """Turn sqlite3 errors into one-line StoreFaults naming the file."""

    @functools.wraps(fn)
    def wrapper(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as e:
            raise self._fault(e) from None
    return wrapper  # type: ignore[return-value]


def _disk_full(path: Path) -> bool:
    """Whether the file system holding ``path`` has (almost) no free space left: SQLite
    reports a full disk during its open-time checks as an I/O or "malformed" error, which must
    not be read as corruption of an intact store."""
    import os

    try:
        st = os.statvfs(path.parent if path.parent.exists() else ".")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


class Store:
    """Finished work units of every experiment run into one output directory.

    Parameters
    ----------
    path
        The SQLite file; its parent directory is created if needed.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_file() and self.path.stat().st_size == 0:
            raise StoreFault(f"store {self.path} is empty (0 bytes: truncated?); {_ADVICE}")
        self._con: sqlite3.Connection | None = None
        try:
            # isolation_level=None: we open and commit transactions explicitly, one per unit.
            self._con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._con.execute("PRAGMA journal_mode=WAL")
            self._con.execute("PRAGMA synchronous=NORMAL")
            ok = self._con.execute("PRAGMA quick_check").fetchone()
            if ok is None or ok[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed ({ok[0] if ok else '?'})")
            self._con.executescript(_SCHEMA)
            cols = {r[1] for r in self._con.execute("PRAGMA table_info(units)")}
            if "checksum" not in cols:
                raise sqlite3.DatabaseError("written by an older lazylab (no checksums)")
        except sqlite3.Error as e:
            fault = self._fault(e)
            if self._con is not None:
                self._con.close()
            raise fault from None

    def _fault(self, e: sqlite3.Error) -> StoreFault:
        msg = str(e)
        if "disk is full" in msg or "database or disk is full" in msg or _disk_full(self.path):
            return StoreFault(f"disk full writing {self.path} ({msg}): free space, then run the "
                              "same command with --resume; the stored units are intact")
        if "readonly" in msg or "read-only" in msg:
            return StoreFault(f"store {self.path} is read-only ({msg}); make it and its folder "
                              "writable, or use another --out")
        if isinstance(e, sqlite3.OperationalError) and "locked" in msg:
            return StoreFault(f"store {self.path} is locked by another process ({msg})")
        if isinstance(e, sqlite3.OperationalError) and "unable to open" in msg:
            return StoreFault(f"store {self.path} cannot be opened ({msg}); check the folder's "
                              "permissions")
        return StoreFault(f"store {self.path} is corrupted or not a lazylab store ({msg}); "
                          f"{_ADVICE}")

    @classmethod
    def open_existing(cls, path: str | Path) -> Store:
        """Open a store that must already exist (``FileNotFoundError`` otherwise)."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"no lazylab store at {path}")
        return cls(path)

    # ---- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- configurations -----------------------------------------------------------------
    @_faults
    def config_hash(self, experiment: str) -> str | None:
        """Hash of the configuration whose units are stored for ``experiment`` (or None)."""
        r = self._con.execute("SELECT config_hash FROM configs WHERE experiment = ?",
                              (experiment,)).fetchone()
        return None if r is None else str(r[0])

    @_faults
    def config(self, experiment: str) -> dict[str, Any] | None:
        """The stored configuration of ``experiment`` (or None)."""
        r = self._con.execute("SELECT config FROM configs WHERE experiment = ?",
                              (experiment,)).fetchone()
        return None if r is None else json.loads(r[0])

    def changes(self, experiment: str, config: dict[str, Any]) -> list[str]:
        """Top-level keys, and keys of ``params``, where ``config`` differs from the stored one."""
        old = self.config(experiment) or {}
        keys = [k for k in sorted(set(old) | set(config)) if k != "params"
                and old.get(k) != config.get(k)]
        op, np_ = old.get("params") or {}, config.get("params") or {}
        return keys + [k for k in sorted(set(op) | set(np_)) if op.get(k) != np_.get(k)]

    @_faults
    def begin(self, experiment: str, config_hash: str, config: dict[str, Any], *,
              fresh: bool) -> None:
        """Declare the configuration about to be run.

        ``fresh=True`` discards every stored unit of ``experiment`` (a new run); otherwise the
        stored configuration must be absent or have the same hash (a resumed run).
        """
        with self._transaction():
            old = self.config_hash(experiment)
            if fresh:
                self._con.execute("DELETE FROM units WHERE experiment = ?", (experiment,))
            elif old is not None and old != config_hash:
                raise ValueError(f"the store holds {experiment} units of another configuration")
            self._con.execute(
                "INSERT OR REPLACE INTO configs VALUES (?, ?, ?, ?)",
                (experiment, config_hash, json.dumps(config, sort_keys=True), _now()))

    # ---- units --------------------------------------------------------------------------
    @_faults
    def put_unit(self, experiment: str, config_hash: str, unit_key: str, seed_index: int,
                 rows: list[dict[str, Any]], *, seconds: float) -> None:
        """Commit one finished unit (its own transaction; a re-run replaces it)."""
        payload = json.dumps(rows)
        with self._transaction():
            self._con.execute(
                "INSERT OR REPLACE INTO units VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (experiment, config_hash, unit_key, int(seed_index), payload, float(seconds),
                 _now(), checksum(payload)))

    @_faults
    def done(self, experiment: str, config_hash: str) -> set[StoredUnit]:
        """Identities of the stored units of one configuration."""
        cur = self._con.execute(
            "SELECT unit_key, seed_index FROM units WHERE experiment = ? AND config_hash = ?",
            (experiment, config_hash))
        return {(str(k), int(s)) for k, s in cur}

    @_faults
    def units(self, experiment: str, config_hash: str) -> dict[StoredUnit, list[dict[str, Any]]]:
        """Rows of every stored unit of one configuration."""
        cur = self._con.execute(
            "SELECT unit_key, seed_index, rows, checksum FROM units "
            "WHERE experiment = ? AND config_hash = ?", (experiment, config_hash))
        out = {}
        for k, s, r, c in cur:
            where = (f"store {self.path}: unit {k} (seed index {s}) of {experiment}")
            fix = (f"; delete the store or rerun with --fresh (or `lazylab reproduce "
                   f"{experiment} --resume` after removing that unit)")
            if not isinstance(r, str) or checksum(r) != c:
                raise StoreFault(f"{where}: stored rows fail their checksum (corrupted){fix}")
            try:
                rows = json.loads(r)
            except ValueError as e:
                raise StoreFault(f"{where}: stored rows do not parse ({e}){fix}") from None
            if not isinstance(rows, list):
                raise StoreFault(f"{where}: stored rows are not a list{fix}")
            out[(str(k), int(s))] = rows
        return out

    # ---- theory rows ----------------------------------------------------------------------
    @_faults
    def put_theory(self, experiment: str, config_hash: str,
                   rows: list[dict[str, Any]]) -> None:
        """Store the theory rows of one configuration (replacing earlier ones)."""
        payload = json.dumps(rows)
        with self._transaction():
            self._con.execute("INSERT OR REPLACE INTO theory VALUES (?, ?, ?, ?)",
                              (experiment, config_hash, payload, checksum(payload)))

    @_faults
    def theory(self, experiment: str, config_hash: str) -> list[dict[str, Any]] | None:
        """The stored theory rows of one configuration, or None (never stored, e.g. a store
        written by an older lazylab); StoreFault if they fail their checksum."""
        r = self._con.execute("SELECT rows, checksum FROM theory WHERE experiment = ? AND "
                              "config_hash = ?", (experiment, config_hash)).fetchone()
        if r is None:
            return None
        payload, c = r
        if not isinstance(payload, str) or checksum(payload) != c:
            raise StoreFault(f"store {self.path}: the theory rows of {experiment} fail their "
                             f"checksum (corrupted); run `lazylab report DIR --recompute-theory`"
                             f" or delete the store")
        rows = json.loads(payload)
        if not isinstance(rows, list):
            raise StoreFault(f"store {self.path}: the theory rows of {experiment} are not a "
                             f"list; run `lazylab report DIR --recompute-theory`")
        return rows

    @_faults
    def count(self, experiment: str) -> int:
        """Number of stored units of ``experiment`` (any configuration)."""
        r = self._con.execute("SELECT COUNT(*) FROM units WHERE experiment = ?",
                              (experiment,)).fetchone()
        return int(r[0])

    @_faults
    def seconds(self, experiment: str, config_hash: str) -> float:
        """Total compute time of the stored units of one configuration."""
        r = self._con.execute(
            "SELECT COALESCE(SUM(seconds), 0) FROM units "
            "WHERE experiment = ? AND config_hash = ?", (experiment, config_hash)).fetchone()
        return float(r[0])

    @_faults
    def delete_units(self, experiment: str, keys: set[StoredUnit] | None = None) -> int:
        """Delete some (or all) stored units of ``experiment``; returns how many."""
        with self._transaction():
            if keys is None:
                cur = self._con.execute("DELETE FROM units WHERE experiment = ?", (experiment,))
                return cur.rowcount
            n = 0
            for k, s in keys:
                cur = self._con.execute(
                    "DELETE FROM units WHERE experiment = ? AND unit_key = ? AND seed_index = ?",
                    (experiment, k, int(s)))
                n += cur.rowcount
            return n

    @_faults
    def experiments(self) -> list[str]:
        """Experiments with a stored configuration."""
        cur = self._con.execute("SELECT experiment FROM configs ORDER BY experiment")
        return [str(r[0]) for r in cur]

    # ---- internals ----------------------------------------------------------------------
    def _transaction(self) -> _Transaction:
        return _Transaction(self._con)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, con: sqlite3.Connection | None):
        if con is None:
            raise sqlite3.ProgrammingError("the store is closed")
        self._con = con

    def __enter__(self) -> None:
        self._con.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._con.execute("ROLLBACK" if exc_type is not None else "COMMIT")
