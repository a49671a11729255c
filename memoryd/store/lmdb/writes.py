"""The event log's writes inside one LMDB transaction.

Every function takes an open transaction and the sub-database handles; none
opens, commits or closes anything. Write operations check everything first and
write last, so a refused request (a conflict, a bad version) leaves nothing in
the shared batch transaction. Every write that changes a history updates the
conversation's system-message index (`memoryd.store.systems`) in the same
transaction. The layout (sub-databases, metadata, counters) is
`memoryd.store.lmdb.layout`, the reads are `memoryd.store.lmdb.reads`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lmdb

from memoryd import codec
from memoryd.errors import ConflictError, CorruptRecord, UnknownConversation
from memoryd.events import Event, EventKind
from memoryd.messages import is_system
from memoryd.store import importing
from memoryd.store.lmdb import keys
from memoryd.store.lmdb.layout import (
    DAMAGED,
    Counters,
    Dbs,
    Meta,
    get,
    put,
    put_meta,
    system_key,
)
from memoryd.store.lmdb.reads import event_range, history
from memoryd.store.requests import supersede_refused
from memoryd.store.systems import Fold

__all__ = ["append", "clear", "erase", "fork", "import_events", "pop"]

_APPENDED = EventKind.APPENDED.value
_POPPED = EventKind.POPPED.value
_CLEARED = EventKind.CLEARED.value
_MEMO = EventKind.MEMO.value
_COMPACTED = EventKind.COMPACTED.value
_FORKED = EventKind.FORKED.value


# -- the system-message index ----------------------------------------------------


def _fold(txn: lmdb.Transaction, dbs: Dbs, meta: Meta | None) -> Fold:
    """The index change a write starts from: the conversation's count, or, for one
    written before the index existed, a rebuild from its full history (read before
    the write changes anything)."""
    if meta is None:
        return Fold(0)
    if not meta.indexed:
        return Fold.rebuilt(history(txn, dbs, meta))
    return Fold(meta.count)


def _save_index(txn: lmdb.Transaction, dbs: Dbs, meta: Meta, fold: Fold, *, fresh: bool) -> None:
    """Write ``fold`` into the ``system`` sub-database (every value sealed, as every
    other); mark the index complete."""
    if fresh:
        put(txn, dbs.system, system_key(meta.conv), b"")
    if not fold.changes:
        return
    if fold.floor < fold.start or fold.reset:
        cursor = txn.cursor(db=dbs.system)
        head = system_key(meta.conv)
        if cursor.set_range(system_key(meta.conv, fold.floor)):
            while cursor.key() and bytes(cursor.key()).startswith(head):
                if not cursor.delete():
                    break
    for ordinal, message in fold.added:
        put(txn, dbs.system, system_key(meta.conv, ordinal), codec.pack_value(message))


# -- writes -----------------------------------------------------------------


def _write_event(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    old: Meta | None,
    *,
    cid: str,
    event: Event,
    count: int,
    record: bytes | None = None,
    fold: Fold | None = None,
    save_index: bool = True,
) -> Meta:
    """Append ``event`` and update metadata, counters and the system-message index.

    The event is encoded (unless its ``record`` is given, already encoded) before
    anything is written, so an unencodable one leaves the transaction untouched.
    ``fold`` is the index change of the write so far; by default it starts from
    ``old``. An import passes one fold across its events and saves it once, at the end
    (``save_index=False``).
    """
    if record is None:
        record = codec.pack_event(event, trusted=True)
    if fold is None:
        fold = _fold(txn, dbs, old)
    fold.apply(event.kind, event.messages)
    return _write_record(
        txn,
        dbs,
        ctr,
        old,
        cid=cid,
        record=record,
        version=event.version,
        kind=event.kind,
        idempotency_key=event.idempotency_key,
        count=count,
        fold=fold if save_index else None,
    )


def _write_record(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    old: Meta | None,
    *,
    cid: str,
    record: bytes,
    version: int,
    kind: str,
    idempotency_key: str | None,
    count: int,
    fold: Fold | None,
    starts_log: bool = False,
) -> Meta:
    """Write an encoded event record with its position, metadata, idempotency key, and
    the system-message index change ``fold`` (already applied to the event; None: the
    caller saves the index). The log starts anew at a ``cleared`` event, or at one that
    ``starts_log`` (a superseding memo)."""
    fresh = old is None or not old.indexed
    if old is None:
        conv = ctr.next_conv
        ctr.next_conv += 1
        put(txn, dbs.names, cid.encode("utf-8"), keys.conv_num_bytes(conv))
        old = Meta(conv, 0, 1, 0, cid)
        if not ctr.unlogged(old):
            ctr.kept += 1
    first = version if kind == _CLEARED or starts_log else old.first
    meta = Meta(old.conv, version, first, count, cid)
    event_key = keys.event_key(meta.conv, version)
    put(txn, dbs.events, event_key, record)
    if not ctr.unlogged(meta):  # an unlogged conversation's events take no position
        put(txn, dbs.positions, keys.position_key(ctr.next_pos), event_key)
        ctr.next_pos += 1
    put_meta(txn, dbs, meta)
    if fold is not None:
        _save_index(txn, dbs, meta, fold, fresh=fresh)
    ctr.dirty[cid] = meta
    if (old.count > 0) != (count > 0):
        ctr.live += 1 if count > 0 else -1
    if idempotency_key is not None:
        put(
            txn,
            dbs.idem,
            keys.idempotency_key(meta.conv, idempotency_key),
            version.to_bytes(8, "big"),
        )
    return meta


def _preflight(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    cid: str,
    *,
    idempotency_key: str | None,
    expected_version: int | None,
) -> tuple[Meta | None, int | None]:
    """The checks every append-like write makes before writing anything.

    Returns:
        ``(meta, done)``: ``done`` is the original version when the idempotency key
        was seen before (nothing is to be written), else None.

    Raises:
        ConflictError: ``expected_version`` is not the current version.
    """
    meta = ctr.meta(txn, dbs, cid)
    if idempotency_key is not None and meta is not None:
        try:
            done = get(txn, dbs.idem, keys.idempotency_key(meta.conv, idempotency_key))
        except CorruptRecord as exc:
            raise CorruptRecord(
                f"idempotency key {idempotency_key!r} of {cid!r}: {exc}; {DAMAGED}"
            ) from None
        if done is not None:
            return meta, int.from_bytes(done, "big")
    current = 0 if meta is None else meta.version
    if expected_version is not None and expected_version != current:
        raise ConflictError(expected=expected_version, actual=current)
    return meta, None


def append(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    cid: str,
    *,
    kind: str,
    messages: Sequence[dict[str, Any]],
    data: dict[str, Any] | None,
    idempotency_key: str | None,
    expected_version: int | None,
    now: float,
    supersede: bool = False,
) -> int:
    """Write one event at the next version: an ``appended`` event (`StoreHandle.add`)
    or a ``memo``/``compacted`` one (`StoreHandle.record`); returns the new version.

    A repeated idempotency key returns the original version and writes nothing.
    Only ``appended`` events change the message count; the fields were checked by
    the handle, so the record is packed without another walk. A superseding memo
    deletes the conversation's live events first and starts its log anew, as a
    clear does (their change-feed positions, if any, then name versions below the
    first live one, which the feed skips).

    Raises:
        ConflictError: ``expected_version`` is not the current version.
        ValueError: an ``appended`` event without messages, or another kind; a
            superseding memo aimed at a conversation that holds messages.
    """
    if kind == _APPENDED:
        if not messages:
            raise ValueError("an appended event needs at least one message")
    elif kind not in (_MEMO, _COMPACTED):
        raise ValueError(f"record() writes memo or compacted events, not {kind!r}")
    meta, done = _preflight(
        txn, dbs, ctr, cid, idempotency_key=idempotency_key, expected_version=expected_version
    )
    if done is not None:
        return done
    if supersede and meta is not None:
        if meta.count:
            raise supersede_refused(cid, meta.count)  # before anything is written
        _delete_live(txn, dbs, meta)
    version = (0 if meta is None else meta.version) + 1
    record = codec.pack_event_fields(
        version=version,
        kind=kind,
        messages=messages,
        timestamp=now,
        idempotency_key=idempotency_key,
        data=data,
        trusted=True,
    )
    count = (0 if meta is None else meta.count) + (len(messages) if kind == _APPENDED else 0)
    fold: Fold | None = None  # None: the index is complete and this write leaves it as it is
    if meta is None or not meta.indexed or (kind == _APPENDED and any(map(is_system, messages))):
        fold = _fold(txn, dbs, meta)
        fold.apply(kind, messages)
    _write_record(
        txn,
        dbs,
        ctr,
        meta,
        cid=cid,
        record=record,
        version=version,
        kind=kind,
        idempotency_key=idempotency_key,
        count=count,
        fold=fold,
        starts_log=supersede,
    )
    return version


def clear(txn: lmdb.Transaction, dbs: Dbs, ctr: Counters, cid: str, *, now: float) -> None:
    """Delete the conversation's events and write a ``cleared`` marker (no-op when empty);
    an unlogged hidden conversation is erased instead (`erase`)."""
    meta = ctr.meta(txn, dbs, cid)
    if meta is not None and ctr.unlogged(meta):
        erase(txn, dbs, ctr, meta)
        return
    if meta is None or meta.count == 0:
        return
    event = Event(version=meta.version + 1, kind=_CLEARED, messages=(), timestamp=now)
    fold = Fold(meta.count)  # a clear drops every entry: no rebuild needed
    _delete_live(txn, dbs, meta)
    _write_event(txn, dbs, ctr, meta, cid=cid, event=event, count=0, fold=fold)


def erase(txn: lmdb.Transaction, dbs: Dbs, ctr: Counters, meta: Meta) -> None:
    """Remove an unlogged hidden conversation from the file: its events, system-message
    index, idempotency keys, metadata and name. It had no change-feed position, so
    nothing names it any more; its id reads as never written (version 0)."""
    head = keys.conv_num_bytes(meta.conv)
    for db in (dbs.events, dbs.system, dbs.idem):
        _delete_prefixed(txn, db, head)
    txn.delete(head, db=dbs.meta)
    txn.delete(meta.cid.encode("utf-8"), db=dbs.names)
    if meta.count > 0:
        ctr.live -= 1
    ctr.dirty[meta.cid] = None


def _delete_prefixed(txn: lmdb.Transaction, db: Any, head: bytes) -> None:
    """Delete every key of ``db`` that starts with ``head``."""
    cursor = txn.cursor(db=db)
    if cursor.set_range(head):
        while cursor.key() and bytes(cursor.key()).startswith(head):
            if not cursor.delete():
                break


def _delete_live(txn: lmdb.Transaction, dbs: Dbs, meta: Meta) -> None:
    """Delete the conversation's live events (first live version to current), as a clear does."""
    cursor = txn.cursor(db=dbs.events)
    high = keys.event_key(meta.conv, meta.version)
    if cursor.set_range(keys.event_key(meta.conv, meta.first)):
        while cursor.key() and bytes(cursor.key()) <= high:
            if not cursor.delete():
                break


def pop(
    txn: lmdb.Transaction, dbs: Dbs, ctr: Counters, cid: str, *, now: float
) -> dict[str, Any] | None:
    """Remove the last message with a ``popped`` event; None (no write) when empty."""
    meta = ctr.meta(txn, dbs, cid)
    if meta is None or meta.count == 0:
        return None
    last = history(txn, dbs, meta, limit=1)
    if not last:
        raise CorruptRecord(f"{cid!r} counts {meta.count} messages but none was found")
    event = Event(version=meta.version + 1, kind=_POPPED, messages=(last[0],), timestamp=now)
    _write_event(txn, dbs, ctr, meta, cid=cid, event=event, count=meta.count - 1)
    return last[0]


def fork(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    source: str,
    target: str,
    *,
    at_version: int | None,
    now: float,
) -> int:
    """Start ``target`` as a copy of ``source``'s history; returns target's new version.

    Raises:
        UnknownConversation: ``source`` was never written (nothing is written).
        ValueError: ``at_version`` is out of range.
        ConflictError: ``target`` holds messages.
    """
    src = ctr.meta(txn, dbs, source)
    if src is None:
        raise UnknownConversation(
            f"cannot fork {source!r}: it was never written; nothing was written to {target!r}"
        )
    copied = history(txn, dbs, src, at_version=at_version)
    source_version = (0 if src is None else src.version) if at_version is None else at_version
    dst = ctr.meta(txn, dbs, target)
    if dst is not None and dst.count > 0:
        raise ConflictError(
            f"fork target {target!r} already holds {dst.count} messages (version "
            f"{dst.version}); clear it or fork into a new conversation id",
            expected=None,
            actual=dst.version,
        )
    event = Event(
        version=(0 if dst is None else dst.version) + 1,
        kind=_FORKED,
        messages=tuple(copied),
        timestamp=now,
        data={"source": source, "source_version": source_version},
    )
    return _write_event(txn, dbs, ctr, dst, cid=target, event=event, count=len(copied)).version


def _stored_events(
    txn: lmdb.Transaction, dbs: Dbs, meta: Meta, low: int, high: int
) -> dict[int, Event]:
    """The stored events with versions ``low`` to ``high`` (those not deleted), by version."""
    return {event.version: event for event in event_range(txn, dbs, meta, low, high)}


def import_events(
    txn: lmdb.Transaction, dbs: Dbs, ctr: Counters, cid: str, events: Sequence[Event]
) -> int:
    """Write ``events`` verbatim (version, kind, messages, timestamp, key, data).

    ``events`` were checked by the handle (valid, versions increasing by one).
    Events at or below the current version must be stored and identical (those
    older than the last clear are deleted and cannot be compared: skipped); the
    others continue at the current version + 1, or, when the conversation holds no
    messages, with a ``cleared`` marker at any later version. A ``cleared`` event
    deletes the live events before it, as `clear` does. Everything is checked
    (`importing.to_write`) and encoded before the first write.

    Returns:
        The conversation's version afterwards.

    Raises:
        ConflictError: an event differs from the stored one, or the events do not
            continue the log.
    """
    meta = ctr.meta(txn, dbs, cid)
    current = 0 if meta is None else meta.version

    def stored(low: int, high: int) -> dict[int, Event]:
        assert meta is not None  # only asked for events at or below a version > 0
        return _stored_events(txn, dbs, meta, low, high)

    count = 0 if meta is None else meta.count
    new = importing.to_write(
        cid,
        events,
        current=current,
        first=1 if meta is None else meta.first,
        count=count,
        stored=stored,
    )
    if not new:
        return current
    records = [codec.pack_event(event, trusted=True) for event in new]
    fold = _fold(txn, dbs, meta)
    fresh = meta is None or not meta.indexed
    for event, record in zip(new, records, strict=True):
        if event.kind == _CLEARED and meta is not None:
            _delete_live(txn, dbs, meta)
        count = importing.count_after(count, event)
        meta = _write_event(
            txn,
            dbs,
            ctr,
            meta,
            cid=cid,
            event=event,
            count=count,
            record=record,
            fold=fold,
            save_index=False,
        )
    assert meta is not None  # at least one event was written
    _save_index(txn, dbs, meta, fold, fresh=fresh)
    return new[-1].version
