"""The SQLite unit store: exact round trips, per-unit commits, fresh vs resumed runs."""

from __future__ import annotations

import math
import sqlite3
import struct

import pytest

from lazylab.store import STORE_NAME, Store

# Floats whose decimal form is long or special: JSON must give back the same 64 bits.
AWKWARD = [0.1 + 0.2, 1 / 3, 5e-324, 1.7976931348623157e308, -0.0, 2.0**-1074 * 3,
           math.pi * 1e-300, 123456789.12345679]


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def test_rows_round_trip_bitwise(tmp_path):
    rows = [{"method": "m", "x": v, "value": -v, "metric": "r"} for v in AWKWARD]
    rows.append({"method": "m", "x": 1.0, "value": math.inf, "metric": "inf"})
    with Store(tmp_path / "s.sqlite") as st:
        st.begin("e", "h", {"p": 1}, fresh=True)
        st.put_unit("e", "h", '{"n":1}', 0, rows, seconds=0.25)
    with Store(tmp_path / "s.sqlite") as st:  # a new connection reads what was committed
        back = st.units("e", "h")[('{"n":1}', 0)]
        assert st.seconds("e", "h") == 0.25
    assert [bits(r["x"]) for r in back] == [bits(r["x"]) for r in rows]
    assert [bits(r["value"]) for r in back] == [bits(r["value"]) for r in rows]


def test_each_unit_is_committed_when_put(tmp_path):
    path = tmp_path / "s.sqlite"
    st = Store(path)
    st.begin("e", "h", {}, fresh=True)
    st.put_unit("e", "h", "a", 0, [], seconds=0.0)
    # Another reader sees the unit before the writer closes: it was committed, not pending.
    other = sqlite3.connect(path)
    assert other.execute("SELECT COUNT(*) FROM units").fetchone()[0] == 1
    st.put_unit("e", "h", "a", 1, [], seconds=0.0)
    assert other.execute("SELECT COUNT(*) FROM units").fetchone()[0] == 2
    assert st._con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    st.close()


def test_fresh_begin_discards_and_resume_checks_hash(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        st.begin("e", "h1", {"p": 1}, fresh=True)
        for s in range(3):
            st.put_unit("e", "h1", "k", s, [{"v": s}], seconds=1.0)
        st.begin("other", "g", {}, fresh=True)
        st.put_unit("other", "g", "k", 0, [], seconds=1.0)
        assert st.done("e", "h1") == {("k", 0), ("k", 1), ("k", 2)}
        st.begin("e", "h1", {"p": 1}, fresh=False)  # resume, same config: keeps the units
        assert len(st.done("e", "h1")) == 3
        with pytest.raises(ValueError, match="another configuration"):
            st.begin("e", "h2", {"p": 2}, fresh=False)
        assert len(st.done("e", "h1")) == 3  # the refused resume changed nothing
        assert st.changes("e", {"p": 2}) == ["p"]
        st.begin("e", "h2", {"p": 2}, fresh=True)
        assert st.done("e", "h1") == set() and st.config("e") == {"p": 2}
        assert st.done("other", "g") == {("k", 0)}  # other experiments are untouched
        assert st.experiments() == ["e", "other"]


def test_changes_name_the_differing_parameters(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        old = {"scale": "quick", "params": {"d": 3, "ns": [1, 2], "s": 1.0}}
        st.begin("e", "h", old, fresh=True)
        assert st.changes("e", old) == []
        new = {"scale": "paper", "params": {"d": 3, "ns": [1, 3], "s": 1.0, "extra": 0}}
        assert st.changes("e", new) == ["scale", "extra", "ns"]
        assert st.changes("unknown", {"params": {"d": 1}}) == ["d"]


def test_delete_some_units(tmp_path):
    with Store(tmp_path / "s.sqlite") as st:
        st.begin("e", "h", {}, fresh=True)
        for s in range(4):
            st.put_unit("e", "h", "k", s, [], seconds=0.5)
        assert st.delete_units("e", {("k", 1), ("k", 3)}) == 2
        assert st.done("e", "h") == {("k", 0), ("k", 2)}
        assert st.seconds("e", "h") == 1.0


def test_open_existing_requires_the_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Store.open_existing(tmp_path / "missing.sqlite")


def test_a_full_disk_is_not_called_corruption(tmp_path, monkeypatch):
    """SQLite errors while the disk is full say "disk full ... --resume" (the store is intact),
    never "corrupted ... delete it"."""
    import os
    import sqlite3

    import lazylab.store as store_mod

    st = Store(tmp_path / STORE_NAME)
    st.close()
    fault = Store(tmp_path / STORE_NAME)._fault(sqlite3.OperationalError("database or disk is "
                                                                         "full"))
    assert "disk full" in str(fault) and "--resume" in str(fault) and "delete" not in str(fault)

    class Full:
        f_bavail, f_frsize = 0, 4096

    monkeypatch.setattr(os, "statvfs", lambda p: Full())
    fault = store_mod.Store.__new__(store_mod.Store)
    fault.path = tmp_path / STORE_NAME
    msg = str(fault._fault(sqlite3.DatabaseError("disk I/O error")))
    assert "disk full" in msg and "corrupted" not in msg
