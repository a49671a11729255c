"""Reads and writes of the event log inside one LMDB transaction.

Every function takes an open transaction and the sub-database handles; none
opens, commits or closes anything. Write operations check everything first and
write last, so a refused request (a conflict, a bad version) leaves nothing in
the shared batch transaction.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import lmdb

from memoryd import codec, keys
from memoryd.errors import ConflictError, CorruptRecord
from memoryd.events import Change, Event, EventKind, walk_back
from memoryd.store import importing

__all__ = [
    "Counters",
    "Dbs",
    "Meta",
    "add",
    "clear",
    "conversations",
    "events",
    "fork",
    "history",
    "import_events",
    "meta_of",
    "open_dbs",
    "pop",
    "record",
    "tail",
]

SYS_DB = b"sys"
_LIVE = b"live_conversations"
_META_CACHE_SIZE = 1 << 16
_APPENDED = EventKind.APPENDED.value
_POPPED = EventKind.POPPED.value
_CLEARED = EventKind.CLEARED.value
_MEMO = EventKind.MEMO.value
_COMPACTED = EventKind.COMPACTED.value
_FORKED = EventKind.FORKED.value


@dataclass(frozen=True, slots=True)
class Dbs:
    """Handles of the sub-databases of one environment."""

    names: Any
    events: Any
    positions: Any
    meta: Any
    idem: Any
    sys: Any


def open_dbs(env: lmdb.Environment) -> Dbs:
    """Open (creating if needed) every sub-database. Call with no transaction open."""
    return Dbs(
        names=env.open_db(keys.NAMES_DB),
        events=env.open_db(keys.EVENTS_DB),
        positions=env.open_db(keys.POSITIONS_DB),
        meta=env.open_db(keys.META_DB),
        idem=env.open_db(keys.IDEMPOTENCY_DB),
        sys=env.open_db(SYS_DB),
    )


@dataclass(frozen=True, slots=True)
class Meta:
    """Per-conversation metadata: its number, version, first live version, message count."""

    conv: int
    version: int
    first: int
    count: int
    cid: str


def meta_of(txn: lmdb.Transaction, dbs: Dbs, cid: str) -> Meta | None:
    """The conversation's metadata, or None if it was never written."""
    raw = txn.get(cid.encode("utf-8"), db=dbs.names)  # cid was validated by the handle
    if raw is None:
        return None
    conv = keys.decode_conv_num(raw)
    packed = txn.get(keys.conv_num_bytes(conv), db=dbs.meta)
    if packed is None:
        raise CorruptRecord(f"conversation {cid!r} has a number but no metadata")
    version, first, count, _ = codec.unpack_meta(packed)
    return Meta(conv, version, first, count, cid)


def _put_meta(txn: lmdb.Transaction, dbs: Dbs, meta: Meta) -> None:
    value = codec.pack_meta(meta.version, meta.first, meta.count, meta.cid)
    txn.put(keys.conv_num_bytes(meta.conv), value, db=dbs.meta)


def _counter(txn: lmdb.Transaction, dbs: Dbs, name: bytes, default: int) -> int:
    raw = txn.get(name, db=dbs.sys)
    return default if raw is None else int.from_bytes(raw, "big")


def _last_number(txn: lmdb.Transaction, db: Any) -> int:
    """The number of the last 8-byte big-endian key of ``db`` (0 when empty)."""
    cursor = txn.cursor(db=db)
    if not cursor.last():
        return 0
    return int.from_bytes(bytes(cursor.key())[: keys.U64_SIZE], "big")


@dataclass(slots=True)
class Counters:
    """Store-wide counters, kept in memory by the writer.

    The next conversation number and position are derived from the last keys at
    open (those keys are never deleted); only the live-conversation count is
    stored, and only in batches that change it.
    """

    next_conv: int
    next_pos: int
    live: int
    saved_live: int
    cache: dict[str, Meta] = field(default_factory=dict)
    """Committed metadata the writer has seen (shared across batches)."""
    dirty: dict[str, Meta] = field(default_factory=dict)
    """Metadata this batch wrote; merged into ``cache`` only if the batch commits."""

    @classmethod
    def load(cls, txn: lmdb.Transaction, dbs: Dbs) -> Counters:
        """Read the counters as committed."""
        live = _counter(txn, dbs, _LIVE, 0)
        return cls(
            next_conv=_last_number(txn, dbs.meta) + 1,
            next_pos=_last_number(txn, dbs.positions) + 1,
            live=live,
            saved_live=live,
        )

    def meta(self, txn: lmdb.Transaction, dbs: Dbs, cid: str) -> Meta | None:
        """The conversation's metadata as this batch sees it (cached; else read)."""
        meta = self.dirty.get(cid)
        if meta is None:
            meta = self.cache.get(cid)
        if meta is None:
            meta = meta_of(txn, dbs, cid)
            if meta is not None:
                self.cache[cid] = meta  # committed state: safe to keep
        return meta

    def committed(self) -> None:
        """The batch committed: its metadata becomes the cached state."""
        if len(self.cache) > _META_CACHE_SIZE:
            self.cache.clear()
        self.cache.update(self.dirty)
        self.dirty = {}

    def save(self, txn: lmdb.Transaction, dbs: Dbs) -> None:
        """Write what changed into the batch's transaction."""
        if self.live != self.saved_live:
            txn.put(_LIVE, self.live.to_bytes(8, "big"), db=dbs.sys)
            self.saved_live = self.live

    def copy(self) -> Counters:
        """A copy for one batch, kept only if it commits (the cache is shared, read-mostly)."""
        return Counters(self.next_conv, self.next_pos, self.live, self.saved_live, self.cache)


# -- reads ------------------------------------------------------------------


def _check_version(meta: Meta | None, at_version: int, cid: str) -> None:
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
            _check_version(meta, at_version, "conversation")
        return []
    upto = meta.version if at_version is None else at_version
    if at_version is not None:
        _check_version(meta, at_version, meta.cid)
    if upto == 0 or limit == 0:
        return []
    lowest = keys.event_key(meta.conv, meta.first)
    cursor = txn.cursor(db=dbs.events)
    if not cursor.set_key(keys.event_key(meta.conv, upto)):
        raise CorruptRecord(f"event {upto} of {meta.cid!r} is missing")
    return walk_back(_kinds_and_messages(cursor, lowest), limit)


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
    return _counter(txn, dbs, _LIVE, 0)


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
) -> Meta:
    """Append ``event`` and update metadata and counters.

    The event is encoded before anything is written, so an unencodable one
    leaves the transaction untouched.
    """
    record = codec.pack_event(event, trusted=True)
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
) -> Meta:
    """Write an encoded event record with its position, metadata and idempotency key."""
    if old is None:
        conv = ctr.next_conv
        ctr.next_conv += 1
        txn.put(cid.encode("utf-8"), keys.conv_num_bytes(conv), db=dbs.names)
        old = Meta(conv, 0, 1, 0, cid)
    first = version if kind == _CLEARED else old.first
    meta = Meta(old.conv, version, first, count, cid)
    event_key = keys.event_key(meta.conv, version)
    txn.put(event_key, record, db=dbs.events)
    txn.put(keys.position_key(ctr.next_pos), event_key, db=dbs.positions)
    ctr.next_pos += 1
    _put_meta(txn, dbs, meta)
    ctr.dirty[cid] = meta
    if (old.count > 0) != (count > 0):
        ctr.live += 1 if count > 0 else -1
    if idempotency_key is not None:
        txn.put(
            keys.idempotency_key(meta.conv, idempotency_key),
            version.to_bytes(8, "big"),
            db=dbs.idem,
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
        done = txn.get(keys.idempotency_key(meta.conv, idempotency_key), db=dbs.idem)
        if done is not None:
            return meta, int.from_bytes(done, "big")
    current = 0 if meta is None else meta.version
    if expected_version is not None and expected_version != current:
        raise ConflictError(expected=expected_version, actual=current)
    return meta, None


def add(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    cid: str,
    messages: list[dict[str, Any]],
    *,
    idempotency_key: str | None,
    expected_version: int | None,
    now: float,
) -> int:
    """Append ``messages`` as one event; returns the new version.

    Raises:
        ConflictError: ``expected_version`` is not the current version.
    """
    if not messages:
        raise ValueError("an appended event needs at least one message")
    return _append(
        txn,
        dbs,
        ctr,
        cid,
        kind=_APPENDED,
        messages=messages,
        data=None,
        idempotency_key=idempotency_key,
        expected_version=expected_version,
        now=now,
    )


def record(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    cid: str,
    *,
    kind: str,
    messages: list[dict[str, Any]],
    data: dict[str, Any] | None,
    idempotency_key: str | None,
    expected_version: int | None,
    now: float,
) -> int:
    """Append a ``memo`` or ``compacted`` event (history and message count unchanged).

    Mirrors `add`: a repeated idempotency key returns the original version.

    Raises:
        ConflictError: ``expected_version`` is not the current version.
        ValueError: a kind other than ``memo`` or ``compacted``.
    """
    if kind not in (_MEMO, _COMPACTED):
        raise ValueError(f"record() writes memo or compacted events, not {kind!r}")
    return _append(
        txn,
        dbs,
        ctr,
        cid,
        kind=kind,
        messages=messages,
        data=data,
        idempotency_key=idempotency_key,
        expected_version=expected_version,
        now=now,
    )


def _append(
    txn: lmdb.Transaction,
    dbs: Dbs,
    ctr: Counters,
    cid: str,
    *,
    kind: str,
    messages: list[dict[str, Any]],
    data: dict[str, Any] | None,
    idempotency_key: str | None,
    expected_version: int | None,
    now: float,
) -> int:
    """The write of `add` and `record`: checks, then one event at the next version.

    Only ``appended`` events change the message count; the fields were checked by
    the handle, so the record is packed without another walk.
    """
    meta, done = _preflight(
        txn, dbs, ctr, cid, idempotency_key=idempotency_key, expected_version=expected_version
    )
    if done is not None:
        return done
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
    written = _write_record(
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
    )
    return written.version


def clear(txn: lmdb.Transaction, dbs: Dbs, ctr: Counters, cid: str, *, now: float) -> None:
    """Delete the conversation's events and write a ``cleared`` marker (no-op when empty)."""
    meta = ctr.meta(txn, dbs, cid)
    if meta is None or meta.count == 0:
        return
    event = Event(version=meta.version + 1, kind=_CLEARED, messages=(), timestamp=now)
    _delete_live(txn, dbs, meta)
    _write_event(txn, dbs, ctr, meta, cid=cid, event=event, count=0)


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
        ValueError: ``at_version`` is out of range.
        ConflictError: ``target`` holds messages.
    """
    src = ctr.meta(txn, dbs, source)
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
    out: dict[int, Event] = {}
    low = max(low, meta.first)
    if low > high:
        return out
    cursor = txn.cursor(db=dbs.events)
    high_key = keys.event_key(meta.conv, high)
    if not cursor.set_range(keys.event_key(meta.conv, low)):
        return out
    for key, value in cursor:
        if bytes(key) > high_key:
            break
        event = codec.unpack_event(value)
        out[event.version] = event
    return out


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
    for event, record in zip(new, records, strict=True):
        if event.kind == _CLEARED and meta is not None:
            _delete_live(txn, dbs, meta)
        count = importing.count_after(count, event)
        meta = _write_record(
            txn,
            dbs,
            ctr,
            meta,
            cid=cid,
            record=record,
            version=event.version,
            kind=event.kind,
            idempotency_key=event.idempotency_key,
            count=count,
        )
    return new[-1].version


def iter_event_records(txn: lmdb.Transaction, dbs: Dbs) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, record) of the events sub-database (for verification tools)."""
    for key, value in txn.cursor(db=dbs.events):
        yield bytes(key), bytes(value)
