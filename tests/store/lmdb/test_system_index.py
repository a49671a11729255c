"""The LMDB system-message index across the store's history: a data directory written
before the index existed keeps working, and its next write fills the index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb

import memoryd
from memoryd.messages import assistant, system, user
from memoryd.store import lookup
from memoryd.store.lmdb.keys import NAMES_DB
from memoryd.store.lmdb.layout import SYSTEM_DB
from memoryd.testing import texts


def _forget_the_index(path: Path) -> None:
    """Make ``path`` look like a directory written before the index: no ``system`` db."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        db = env.open_db(SYSTEM_DB)
        with env.begin(write=True) as txn:
            txn.drop(db, delete=True)
            assert txn.get(SYSTEM_DB) is None  # the sub-database's entry is gone
            assert txn.get(NAMES_DB) is not None
    finally:
        env.close()


def _marked(store: memoryd.LmdbStore, cid: str) -> int:
    """How many ``system`` entries (marker included) the store holds for ``cid``."""
    engine = lookup.engine(store.name)
    assert engine is not None

    def count(txn: Any, dbs: Any) -> int:
        conv = txn.get(cid.encode(), db=dbs.names)
        cursor = txn.cursor(db=dbs.system)
        if not cursor.set_range(conv):
            return 0
        return sum(1 for key in cursor.iternext(values=False) if bytes(key).startswith(conv))

    return engine.read(count)


def test_an_old_directory_reads_right_and_is_indexed_by_its_next_write(tmp_path: Path) -> None:
    """Without an index a windowed read falls back to one full read (the same answer);
    the next write of each conversation fills its index (the marker and one entry per
    live system message), whatever that write is."""
    path = tmp_path / "data"
    store = memoryd.LmdbStore.start(str(path))
    for cid in ("add", "pop", "memo", "clear"):
        store.add(cid, [system("persona"), user("u1"), assistant("a1")])
        store.add(cid, [system("late"), user("u2"), assistant("a2")])
    store.stop()
    _forget_the_index(path)

    store = memoryd.LmdbStore.start(str(path))
    try:
        assert _marked(store, "add") == 0
        for cid in ("add", "pop", "memo", "clear"):
            assert texts(store.get(cid, limit=1, system=True)) == ["persona", "late", "a2"]
        store.add("add", [user("u3")])
        store.pop("pop")
        store.record("memo", "memo", data={"memo": "m"})
        store.clear("clear")
        assert texts(store.get("add", limit=1, system=True)) == ["persona", "late", "u3"]
        assert texts(store.get("pop", limit=1, system=True)) == ["persona", "late", "u2"]
        assert texts(store.get("memo", limit=1, system=True)) == ["persona", "late", "a2"]
        assert store.get("clear", limit=1, system=True) == []
        assert [_marked(store, c) for c in ("add", "pop", "memo", "clear")] == [3, 3, 3, 1]
    finally:
        store.stop()
