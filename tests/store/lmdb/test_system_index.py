"""The LMDB system-message index across the store's history: a data directory written
before the index existed keeps working, and its next write fills the index; its entries
are sealed like every value, and `memoryd check` compares them with the live history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lmdb
import pytest

import memoryd
from memoryd import _codec_runs, codec
from memoryd.codec import pack_value
from memoryd.messages import assistant, system, user
from memoryd.store import lookup
from memoryd.store.lmdb import check
from memoryd.store.lmdb.keys import NAMES_DB
from memoryd.store.lmdb.layout import SYSTEM_DB, get, put
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
        conv = bytes(get(txn, dbs.names, cid.encode()))  # the conversation number, unsealed
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


def _indexed_store(path: Path) -> None:
    """A closed store whose conversations hold system messages after every kind of write."""
    store = memoryd.LmdbStore.start(str(path))
    try:
        store.add("a", [system("persona"), user("u1"), assistant("a1")])
        store.add("a", [system("late"), user("u2")])
        store.pop("a")
        store.add("b", [system("gone"), user("x")])
        store.clear("b")
        store.add("b", [user("y"), system("kept")])
        store.fork("a", "f")
    finally:
        store.stop()


def _tamper(path: Path, change: Any) -> None:
    """Run ``change(txn, system_db)`` on the closed store's ``system`` sub-database."""
    env = lmdb.open(str(path), max_dbs=8, subdir=True)
    try:
        db = env.open_db(SYSTEM_DB, create=False)
        names = env.open_db(NAMES_DB, create=False)
        with env.begin(write=True) as txn:
            change(txn, db, bytes(get(txn, names, b"a")))
    finally:
        env.close()


def test_check_finds_a_sound_index_sound(tmp_path: Path) -> None:
    """After add, pop, clear and fork every index entry matches the live history."""
    path = tmp_path / "data"
    _indexed_store(path)
    assert check.check_store(path).problems == []
    _forget_the_index(path)
    assert check.check_store(path).problems == []  # no index at all is sound too


def test_check_finds_an_entry_that_is_not_the_history(tmp_path: Path) -> None:
    """An entry sealed right but holding another message, and a missing entry, are found."""
    path = tmp_path / "data"
    _indexed_store(path)

    def change(txn: Any, db: Any, conv: bytes) -> None:
        put(txn, db, conv + (0).to_bytes(8, "big"), pack_value(system("someone else")))
        assert txn.delete(conv + (3).to_bytes(8, "big"), db=db)  # "late"

    _tamper(path, change)
    problems = check.check_store(path).problems
    assert any("conversation 'a'" in p and "entry 0 differs" in p for p in problems), problems
    assert any("conversation 'a'" in p and "lacks the system messages at 3" in p for p in problems)


def test_a_damaged_entry_fails_its_checksum_in_reads_and_in_check(tmp_path: Path) -> None:
    """A flipped bit in an index entry: the windowed read raises, and check names it."""
    path = tmp_path / "data"
    _indexed_store(path)

    def change(txn: Any, db: Any, conv: bytes) -> None:
        key = conv + (0).to_bytes(8, "big")
        raw = bytearray(txn.get(key, db=db))
        raw[len(raw) // 2] ^= 0x10
        txn.put(key, bytes(raw), db=db)

    _tamper(path, change)
    problems = check.check_store(path).problems
    assert any("system-message index" in p and "checksum" in p for p in problems), problems
    store = memoryd.LmdbStore.start(str(path))
    try:
        with pytest.raises(memoryd.CorruptRecord, match="system-message index entry 0"):
            store.get("a", limit=1, system=True)
        assert texts(store.get("a")) == ["persona", "u1", "a1", "late"]  # the log is sound
    finally:
        store.stop()


def test_a_windowed_read_with_a_persona_reads_the_window_not_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A persona stored first is read from the index: a windowed read of a long
    conversation checks the records of its tail and one index entry, never the whole
    log (the read stays O(window))."""
    store = memoryd.LmdbStore.start(str(tmp_path / "data"))
    try:
        store.add("c", [system("persona")])
        for i in range(200):
            store.add("c", [user(f"u{i}"), assistant(f"a{i}")])
        unsealed: list[bytes] = []
        real = codec.unseal

        def counting(key: bytes, value: Any) -> Any:
            unsealed.append(bytes(key))
            return real(key, value)

        real_all = _codec_runs.unseal_all

        def counting_all(keys: Any, values: Any) -> None:
            unsealed.extend(map(bytes, keys))
            real_all(keys, values)

        monkeypatch.setattr(codec, "unseal", counting)
        monkeypatch.setattr(_codec_runs, "unseal_all", counting_all)
        window = ["persona", "u198", "a198", "u199", "a199"]
        assert texts(store.get("c", limit=4, system=True)) == window
        windowed = len(unsealed)
        unsealed.clear()
        assert len(store.get("c")) == 401
        whole = len(unsealed)
    finally:
        store.stop()
    assert whole >= 201  # the whole read checks every event record
    assert windowed <= 8  # names, meta, two tail events, the persona's entry: not the log
