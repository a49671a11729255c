"""Reads of one-message events check and decode a run of records at a time.

Each record still has its checksum checked and must sit under its own version's key: a
flipped bit or a missing version anywhere in a run raises `CorruptRecord` naming that
version, on the decoding read and on the read that keeps messages encoded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import codec
from memoryd.errors import CorruptRecord
from memoryd.messages import assistant, user
from memoryd.store import lookup
from memoryd.store.lmdb import reads
from memoryd.store.lmdb.layout import meta_of
from tests.store.lmdb._damage import delete_event, flip_event_bit


def _packed(store: Any, cid: str, limit: int | None) -> list[dict[str, Any]]:
    engine = lookup.engine(store.name)
    count, chunks = engine.read(
        lambda txn, dbs: reads.history_packed(txn, dbs, meta_of(txn, dbs, cid), limit)
    )
    body = codec.pack_packed_array_map("messages", count, chunks)
    messages: list[dict[str, Any]] = codec.unpack_wire(body)["messages"]
    return messages


def _dict(store: Any, cid: str, limit: int | None) -> list[dict[str, Any]]:
    return list(store.get(cid, limit=limit))


READS: dict[str, Callable[[Any, str, int | None], list[dict[str, Any]]]] = {
    "decoded": _dict,
    "packed": _packed,
}


def _one_message_events(data: Path, count: int) -> list[dict[str, Any]]:
    store = memoryd.LmdbStore.start(str(data))
    written = [user(f"message {i} " * 10) for i in range(count)]
    try:
        for message in written:
            store.add("c", [message])
    finally:
        store.stop()
    return written


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("limit", [None, 50, 7])
def test_a_run_of_one_message_events_reads_like_one_event(
    tmp_path: Path, read: str, limit: int | None
) -> None:
    """The last N of N one-message events (and all of them) are those messages, in order."""
    written = _one_message_events(tmp_path / "data", 60)
    store = memoryd.LmdbStore.start(str(tmp_path / "data"))
    try:
        expected = written if limit is None else written[-limit:]
        assert READS[read](store, "c", limit) == expected
    finally:
        store.stop()


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("damaged", [60, 45, 11, 1])
def test_a_flipped_bit_in_a_run_names_its_version(tmp_path: Path, read: str, damaged: int) -> None:
    """A flipped bit in any record of a run raises CorruptRecord naming that version."""
    _one_message_events(tmp_path / "data", 60)
    flip_event_bit(tmp_path / "data", "c", damaged)
    store = memoryd.LmdbStore.start(str(tmp_path / "data"))
    try:
        with pytest.raises(CorruptRecord, match=f"event {damaged} of conversation 'c'"):
            READS[read](store, "c", None)
        if damaged > 10:
            with pytest.raises(CorruptRecord, match=f"event {damaged} of conversation 'c'"):
                READS[read](store, "c", 61 - damaged)
        assert len(READS[read](store, "c", 60 - damaged)) == 60 - damaged  # the run after it
    finally:
        store.stop()


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("missing", [59, 30, 1])
def test_a_missing_version_in_a_run_is_named(tmp_path: Path, read: str, missing: int) -> None:
    """A record deleted from the middle of a run is reported missing, by its version."""
    _one_message_events(tmp_path / "data", 60)
    delete_event(tmp_path / "data", "c", missing)
    store = memoryd.LmdbStore.start(str(tmp_path / "data"))
    try:
        with pytest.raises(CorruptRecord, match=f"event {missing} of conversation 'c'.*missing"):
            READS[read](store, "c", None)
    finally:
        store.stop()


@pytest.mark.parametrize("read", READS)
def test_runs_apply_pops_clears_and_mixed_sizes(tmp_path: Path, read: str) -> None:
    """Runs of mixed events (big and small, popped, after a clear, with idempotency keys)
    read the history the store's rules give."""
    store = memoryd.LmdbStore.start(str(tmp_path / "data"))
    try:
        store.add("c", [user("gone")])
        store.clear("c")
        history: list[dict[str, Any]] = []
        for i in range(40):
            batch = [user(f"u{i}-{j}") for j in range(1 if i % 3 else 20)]
            store.add("c", batch, idempotency_key=f"k{i}" if i % 2 else None)
            history.extend(batch)
            if i % 7 == 0:
                store.pop("c")
                history.pop()
        store.add("c", [assistant("last")])
        history.append(assistant("last"))
        for limit in (None, 1, 5, 21, 50, 400):
            expected = history if limit is None else history[-limit:]
            assert READS[read](store, "c", limit) == expected
    finally:
        store.stop()


@pytest.mark.parametrize("read", READS)
def test_a_later_run_checks_its_records_too(tmp_path: Path, read: str) -> None:
    """When the first run holds too few messages, the next run continues right below it,
    and a missing record there is named."""
    data = tmp_path / "data"
    store = memoryd.LmdbStore.start(str(data))
    big = [user(f"big {i}") for i in range(100)]
    small = [user(f"small {i}") for i in range(10)]
    try:
        store.add("c", big)  # version 1
        for message in small:  # versions 2 to 11
            store.add("c", [message])
        assert READS[read](store, "c", 50) == (big + small)[-50:]
        assert READS[read](store, "c", 12) == (big + small)[-12:]
    finally:
        store.stop()
    delete_event(data, "c", 4)
    store = memoryd.LmdbStore.start(str(data))
    try:
        assert READS[read](store, "c", 5) == small[-5:]
        with pytest.raises(CorruptRecord, match=r"event 4 of conversation 'c'.*missing"):
            READS[read](store, "c", 50)
    finally:
        store.stop()
