"""Reads of the event log inside one LMDB transaction: histories, event logs, the
conversation listing and the change feed. Nothing here writes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lmdb

from memoryd import codec
from memoryd.errors import CorruptRecord
from memoryd.events import Change, Event, walk_back
from memoryd.store.lmdb import keys
from memoryd.store.lmdb.layout import LIVE, Dbs, Meta, counter, system_key
from memoryd.store.systems import with_system

__all__ = [
    "check_version",
    "conversations",
    "events",
    "history",
    "history_with_system",
    "iter_event_records",
    "live_conversations",
    "tail",
]


def check_version(meta: Meta | None, at_version: int, cid: str) -> None:
    current = 0 if meta is None else meta.version
    if at_version > current:
        raise ValueError(
            f"at_version={at_version} is past the end of {cid!r}, which is at version {current}"
        )
    if meta is not None and 0 < at_version < meta.first:
        raise ValueError(
            f"version {at_version} of {cid!r} was cleared at version {meta.first}; "
            "history before a clear is deleted"
        )


def history(
    txn: lmdb.Transaction,
    dbs: Dbs,
    meta: Meta | None,
    *,
    limit: int | None = None,
    at_version: int | None = None,
) -> list[dict[str, Any]]:
    """The conversation's messages, chronological: all, or the last ``limit``.

    Walks the event log backwards from the wanted version, so the last N
    messages cost O(N) records, not the whole log.

    Raises:
        ValueError: ``at_version`` is past the end or before the last clear.
    """
    if meta is None:
        if at_version:
            check_version(meta, at_version, "conversation")
        return []
    upto = meta.version if at_version is None else at_version
    if at_version is not None:
        check_version(meta, at_version, meta.cid)
    if upto == 0 or limit == 0:
        return []
    lowest = keys.event_key(meta.conv, meta.first)
    cursor = txn.cursor(db=dbs.events)
    if not cursor.set_key(keys.event_key(meta.conv, upto)):
        raise CorruptRecord(f"event {upto} of {meta.cid!r} is missing")
    return walk_back(_kinds_and_messages(cursor, lowest), limit)


def history_with_system(
    txn: lmdb.Transaction, dbs: Dbs, meta: Meta | None, limit: int | None
) -> list[dict[str, Any]]:
    """The last ``limit`` messages after every system message before them, chronological.

    The tail is the reverse walk of `history`; the system messages before it come
    from the conversation's index, all in this one transaction, so both are one
    snapshot. A conversation without an index (written before there was one) is read
    whole, once per call, until its next write fills the index.
    """
    if meta is None or limit is None:
        return history(txn, dbs, meta, limit=limit)
    if not meta.indexed:
        return with_system(history(txn, dbs, meta), limit)
    tail = history(txn, dbs, meta, limit=limit)
    boundary = system_key(meta.conv, meta.count - len(tail))
    head: list[dict[str, Any]] = []
    cursor = txn.cursor(db=dbs.system)
    if cursor.set_range(system_key(meta.conv, 0)):
        for key, value in cursor:
            if bytes(key) >= boundary:
                break
            head.append(codec.unpack_value(value))
    return head + tail


def _kinds_and_messages(
    cursor: lmdb.Cursor, lowest: bytes
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Each event's kind and messages, from the cursor's event back to key ``lowest``."""
    for raw_key, value in cursor.iterprev():
        if bytes(raw_key) < lowest:
            return
        yield codec.unpack_kind_and_messages(value)


def events(txn: lmdb.Transaction, dbs: Dbs, meta: Meta | None, after: int) -> list[Event]:
    """The conversation's stored events with a version above ``after``, oldest first."""
    if meta is None or after >= meta.version:
        return []
    start = max(after + 1, meta.first)
    high = keys.event_key(meta.conv, meta.version)
    cursor = txn.cursor(db=dbs.events)
    out: list[Event] = []
    if not cursor.set_range(keys.event_key(meta.conv, start)):
        return out
    for key, value in cursor:
        if bytes(key) > high:
            break
        out.append(codec.unpack_event(value))
    return out


def conversations(
    txn: lmdb.Transaction,
    dbs: Dbs,
    *,
    prefix: str,
    after: str | None,
    limit: int | None,
    include_empty: bool = False,
) -> list[str]:
    """Ids of conversations holding messages now (or ever written), sorted, paged."""
    start = prefix.encode("utf-8")
    prefix_bytes = start
    after_bytes = None if after is None else after.encode("utf-8")
    if after_bytes is not None and after_bytes > start:
        start = after_bytes
    out: list[str] = []
    cursor = txn.cursor(db=dbs.names)
    if not cursor.set_range(start):
        return out
    for raw_key, conv in cursor:
        key = bytes(raw_key)
        if not key.startswith(prefix_bytes):
            break
        if after_bytes is not None and key <= after_bytes:
            continue
        packed = None if include_empty else txn.get(bytes(conv), db=dbs.meta)
        if include_empty or (packed is not None and codec.unpack_meta(packed)[2] > 0):
            out.append(keys.decode_name_key(key))
            if limit is not None and len(out) >= limit:
                break
    return out


def tail(txn: lmdb.Transaction, dbs: Dbs, *, after: int, limit: int) -> list[Change]:
    """Changes with a position above ``after``, in commit order (deleted ones skipped)."""
    out: list[Change] = []
    if limit <= 0:
        return out
    cursor = txn.cursor(db=dbs.positions)
    if not cursor.set_range(keys.position_key(after + 1)):
        return out
    cids: dict[int, str] = {}
    for key, value in cursor:
        record = txn.get(value, db=dbs.events)
        if record is None:
            continue  # deleted by a later clear
        conv, _ = keys.decode_event_key(value)
        cid = cids.get(conv)
        if cid is None:
            packed = txn.get(keys.conv_num_bytes(conv), db=dbs.meta)
            if packed is None:
                raise CorruptRecord(
                    f"change at position {keys.decode_position_key(key)} "
                    "names a conversation without metadata"
                )
            cid = cids[conv] = codec.unpack_meta(packed)[3]
        event = codec.unpack_event(record)
        out.append(
            Change.from_event(event, position=keys.decode_position_key(key), conversation_id=cid)
        )
        if len(out) >= limit:
            break
    return out


def live_conversations(txn: lmdb.Transaction, dbs: Dbs) -> int:
    """How many conversations hold messages now."""
    return counter(txn, dbs, LIVE, 0)


def iter_event_records(txn: lmdb.Transaction, dbs: Dbs) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, record) of the events sub-database (for verification tools)."""
    for key, value in txn.cursor(db=dbs.events):
        yield bytes(key), bytes(value)
