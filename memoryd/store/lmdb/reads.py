"""Reads of the event log inside one LMDB transaction: histories, event logs, the
conversation listing and the change feed. Nothing here writes.

Every value read is checked against its checksum (`memoryd.codec.unseal`), and every
walk checks that it finds each version it expects, so a damaged or missing record
raises `CorruptRecord` naming the conversation and version, never a wrong answer."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, islice, repeat
from typing import Any, TypeVar

import lmdb

from memoryd import _codec_runs, codec
from memoryd.errors import CorruptRecord
from memoryd.events import Change, Event, EventKind
from memoryd.store.lmdb import keys
from memoryd.store.lmdb.layout import DAMAGED, LIVE, Dbs, Meta, counter, get, meta_of, system_key
from memoryd.store.systems import with_system

__all__ = [
    "check_version",
    "conversations",
    "event_range",
    "events",
    "history",
    "history_packed",
    "history_with_system",
    "iter_event_records",
    "last_packed",
    "live_conversations",
    "tail",
]

_T = TypeVar("_T")


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


def _damaged(meta: Meta, version: int, problem: object) -> CorruptRecord:
    return CorruptRecord(f"event {version} of conversation {meta.cid!r}: {problem}; {DAMAGED}")


def _event(meta: Meta, version: int, key: bytes, value: codec.Buffer) -> Event:
    """The event stored at ``key``, which must be sound and hold ``version``."""
    try:
        event = codec.unpack_event(codec.unseal(key, value))
    except CorruptRecord as exc:
        raise _damaged(meta, version, exc) from None
    if event.version != version:
        raise _damaged(meta, version, f"its record holds version {event.version}")
    return event


def history(
    txn: lmdb.Transaction,
    dbs: Dbs,
    meta: Meta | None,
    *,
    limit: int | None = None,
    at_version: int | None = None,
    cid: str = "the conversation",
) -> list[dict[str, Any]]:
    """The conversation's messages, chronological: all, or the last ``limit``.

    ``cid`` names the conversation in an error when it was never written (``meta`` is
    None then, and holds no id).

    Walks the event log backwards from the wanted version, so the last N
    messages cost O(N) records, not the whole log. Every record read is checked
    (its checksum, and that it is the very next version down).

    Raises:
        ValueError: ``at_version`` is past the end or before the last clear.
        CorruptRecord: a record it needs is damaged or missing.
    """
    if meta is None:
        if at_version:
            check_version(meta, at_version, cid)
        return []
    upto = meta.version if at_version is None else at_version
    if at_version is not None:
        check_version(meta, at_version, meta.cid)
    if upto == 0 or limit == 0:
        return []
    cursor = txn.cursor(db=dbs.events)
    if not cursor.set_key(keys.event_key(meta.conv, upto)):
        raise _damaged(meta, upto, "it is missing")
    _, chunks = _walk_back(_Runs(cursor, meta, upto, limit), _decoded_run, limit, _cut_list)
    if len(chunks) == 1:
        return chunks[0]  # fresh from the decode
    chunks.reverse()
    return list(chain.from_iterable(chunks))


def history_packed(
    txn: lmdb.Transaction, dbs: Dbs, meta: Meta | None, limit: int | None
) -> tuple[int, list[bytes]]:
    """`history` with the messages left msgpack-encoded as they are stored.

    The same walk (each record's checksum and version checked, pops, clears and forks
    applied), without decoding the messages: an answer sent as msgpack copies them.

    Returns:
        ``(how many messages, chunks of encoded messages, oldest first)``.

    Raises:
        CorruptRecord: a record it needs is damaged or missing.
    """
    if meta is None or meta.version == 0 or limit == 0:
        return 0, []
    cursor = txn.cursor(db=dbs.events)
    if not cursor.set_key(keys.event_key(meta.conv, meta.version)):
        raise _damaged(meta, meta.version, "it is missing")

    def cut(packed: bytes, count: int, low: int, high: int) -> bytes:
        return b"".join(codec.split_packed(packed, count, what=f"event of {meta.cid!r}")[low:high])

    count, chunks = _walk_back(_Runs(cursor, meta, meta.version, limit), _packed_run, limit, cut)
    chunks.reverse()
    return count, chunks


def last_packed(
    txn: lmdb.Transaction, dbs: Dbs, cid: str, limit: int | None
) -> tuple[int, list[bytes]]:
    """`history_packed` of conversation ``cid`` (a validated id), its metadata read here
    without the system-message index marker, which a last-N read does not use.

    Raises:
        CorruptRecord: its metadata or a record the read needs is damaged or missing.
    """
    return history_packed(txn, dbs, meta_of(txn, dbs, cid, index=False), limit)


_APPENDED, _CLEARED, _POPPED, _FORKED = (
    EventKind.APPENDED.value,
    EventKind.CLEARED.value,
    EventKind.POPPED.value,
    EventKind.FORKED.value,
)
_WITH_MESSAGES = frozenset({_APPENDED, _FORKED})


def history_with_system(
    txn: lmdb.Transaction, dbs: Dbs, meta: Meta | None, limit: int | None
) -> list[dict[str, Any]]:
    """The last ``limit`` messages after every system message before them, chronological.

    The tail is the reverse walk of `history`; the system messages before it come
    from the conversation's index, all in this one transaction, so both are one
    snapshot. A conversation without an index (written before there was one) is read
    whole, once per call, until its next write fills the index.

    Raises:
        CorruptRecord: a record or index entry it reads is damaged or missing.
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
        for raw_key, value in cursor:
            key = bytes(raw_key)
            if key >= boundary:
                break
            head.append(_index_entry(meta, key, value))
    return head + tail


def _index_entry(meta: Meta, key: bytes, value: codec.Buffer) -> dict[str, Any]:
    """The system message of one index entry, its checksum checked."""
    try:
        message = codec.unpack_value(codec.unseal(key, value))
        if not isinstance(message, dict):
            raise CorruptRecord(f"it holds a {type(message).__name__}, not a message")
    except CorruptRecord as exc:
        ordinal = int.from_bytes(key[keys.U64_SIZE :], "big")
        raise CorruptRecord(
            f"system-message index entry {ordinal} of conversation {meta.cid!r}: {exc}; {DAMAGED}"
        ) from None
    return message


# -- the reverse walk, a run of records at a time -------------------------------------
#
# A last-N read of one-message events reads N records. Each run of records is fetched
# with one cursor pass and its records checked (each under the key of its version) and
# decoded by `codec` in a fixed number of calls, so a record costs no Python statement
# of its own. The first run is sized from the conversation's messages per event; each
# further run is twice the last.

_event_key = struct.Struct(">QQ").pack  # `keys.event_key`: conversation number, version

_Payload = TypeVar("_Payload", list[dict[str, Any]], bytes)
_Run = tuple[Sequence[str], Sequence[int], Sequence[_Payload]]


def _first_run(meta: Meta, upto: int, limit: int | None) -> int:
    """Records to read first: all live ones, or as many as ``limit`` messages take at
    the conversation's mean messages per event."""
    live = upto - meta.first + 1
    if limit is None or meta.count == 0:
        return live
    events = meta.version - meta.first + 1
    return max(1, min(live, -(-limit * events // meta.count)))


class _Runs:
    """Runs of records from version ``upto`` (where the cursor is) back to the first
    live version: ``next()`` gives ``(versions, their keys, the sealed records)``, or
    None past the first live version.

    The records are taken in cursor order, without their keys: each is then checked
    against its checksum under the key of the version it should hold, which it only
    passes if it is that version's record (a missing version shifts every record after
    it onto another key). A run that fails is walked again, key by key, to name the
    missing version or the damaged record.
    """

    __slots__ = ("cursor", "meta", "size", "started", "top")

    def __init__(self, cursor: lmdb.Cursor, meta: Meta, upto: int, limit: int | None) -> None:
        self.cursor = cursor
        self.meta = meta
        self.size = _first_run(meta, upto, limit)
        self.top = upto
        self.started = False

    def next(self) -> tuple[range, tuple[bytes, ...], list[bytes]] | None:
        meta = self.meta
        top = self.top
        if top < meta.first:
            return None
        cursor = self.cursor
        n = min(self.size, top - meta.first + 1)
        versions = range(top, top - n, -1)
        if n == 1:
            expected: tuple[bytes, ...] = (_event_key(meta.conv, top),)
        else:
            expected = tuple(map(_event_key, repeat(meta.conv), versions))
        # the cursor is on the record before this run (on the first run's first record)
        if self.started and not cursor.prev():
            values: list[bytes] = []
        elif n == 1:
            values = [cursor.value()]  # type: ignore[list-item]  # bytes: buffers=False
        else:
            values = list(islice(cursor.iterprev(keys=False), n))  # type: ignore[arg-type]  # bytes too
        self.started = True
        if len(values) != n or cursor.key() != expected[-1]:
            _check_keys(cursor, meta, versions, expected)
            raise _damaged(meta, versions[-1], "the records before it are out of place")
        self.top = top - n
        self.size *= 2
        return versions, expected, values


def _check_keys(
    cursor: lmdb.Cursor, meta: Meta, versions: range, expected: tuple[bytes, ...]
) -> None:
    """Raise for the first of ``versions`` whose key is not where it belongs, if one is."""
    found = []
    if cursor.set_key(expected[0]):
        found = [key for key, _ in islice(cursor.iterprev(), len(expected))]
    for version, key, raw_key in zip(versions, expected, (*found, None), strict=False):
        if raw_key != key:
            raise _damaged(meta, version, "it is missing")


def _one_by_one(
    cursor: lmdb.Cursor,
    meta: Meta,
    versions: range,
    keys_: Sequence[bytes],
    values: Sequence[bytes],
    *,
    unpack: Callable[[codec.Buffer], _T],
) -> list[_T]:
    """``unpack`` of each sealed record, the first damaged one named by its version
    (or the first missing one, when a record fails its checksum for being another's)."""
    out: list[_T] = []
    for version, key, value in zip(versions, keys_, values, strict=True):
        try:
            out.append(unpack(codec.unseal(key, value)))
        except CorruptRecord as exc:
            _check_keys(cursor, meta, versions, tuple(keys_))  # a missing version first
            raise _damaged(meta, version, exc) from None
    return out


def _decoded_run(
    cursor: lmdb.Cursor,
    meta: Meta,
    versions: range,
    keys_: tuple[bytes, ...],
    values: list[bytes],
) -> _Run[list[dict[str, Any]]]:
    """A run's kinds, message counts and decoded messages."""
    if len(values) == 1:  # one record: nothing to share the calls with
        unpack = codec.unpack_kind_and_messages
        try:
            kind, messages = unpack(codec.unseal(keys_[0], values[0]))
        except CorruptRecord:  # name the record
            kind, messages = _one_by_one(cursor, meta, versions, keys_, values, unpack=unpack)[0]
        return (kind,), (len(messages),), (messages,)
    try:
        kinds, batch = _codec_runs.unseal_kinds_and_messages(keys_, values, versions)
    except CorruptRecord:  # name the record
        pairs = _one_by_one(
            cursor, meta, versions, keys_, values, unpack=codec.unpack_kind_and_messages
        )
        kinds, batch = [p[0] for p in pairs], [p[1] for p in pairs]
    return kinds, list(map(len, batch)), batch


def _packed_run(
    cursor: lmdb.Cursor,
    meta: Meta,
    versions: range,
    keys_: tuple[bytes, ...],
    values: list[bytes],
) -> _Run[bytes]:
    """A run's kinds, message counts and messages still encoded."""
    unpack = codec.unpack_kind_and_packed_messages
    if len(values) == 1:  # one record: nothing to share the calls with
        try:
            kind, count, packed = unpack(codec.unseal(keys_[0], values[0]))
        except CorruptRecord:  # name the record
            kind, count, packed = _one_by_one(cursor, meta, versions, keys_, values, unpack=unpack)[
                0
            ]
        return (kind,), (count,), (packed,)
    try:
        return _codec_runs.unseal_kinds_and_packed_messages(keys_, values)
    except CorruptRecord:  # name the record
        triples = _one_by_one(cursor, meta, versions, keys_, values, unpack=unpack)
        return [t[0] for t in triples], [t[1] for t in triples], [t[2] for t in triples]


def _cut_list(
    messages: list[dict[str, Any]], count: int, low: int, high: int
) -> list[dict[str, Any]]:
    return messages[low:high]


def _walk_back(
    runs: _Runs,
    decode: Callable[[lmdb.Cursor, Meta, range, tuple[bytes, ...], list[bytes]], _Run[_Payload]],
    limit: int | None,
    cut: Callable[[_Payload, int, int, int], _Payload],
) -> tuple[int, list[_Payload]]:
    """`memoryd.events.walk_back` over runs of records: pops, clears and forks applied.

    ``decode`` reads each run of ``runs``; a run of appended events that fits the limit
    is taken whole in one step.

    Returns:
        ``(how many messages, each event's kept messages, newest event first)``; ``cut``
        keeps messages ``low`` to ``high`` of an event's ``count``.
    """
    chunks: list[_Payload] = []
    count = 0
    skip = 0
    cursor, meta = runs.cursor, runs.meta
    while (run := runs.next()) is not None:
        kinds, counts, payloads = decode(cursor, meta, *run)
        if not skip and kinds.count(_APPENDED) == len(kinds):
            total = sum(counts)
            if limit is None or count + total <= limit:
                chunks.extend(payloads)
                count += total
                if count == limit:
                    break
                continue
        for kind, n, payload in zip(kinds, counts, payloads, strict=True):
            if kind == _POPPED:
                skip += 1
                continue
            if kind == _CLEARED:
                return count, chunks
            if kind not in _WITH_MESSAGES:
                continue
            if not skip and (limit is None or count + n <= limit):
                chunks.append(payload)  # the whole event (the common case)
                count += n
            else:
                kept = n - skip  # the last `skip` messages were popped
                skip = max(0, -kept)
                if kept > 0:
                    need = kept if limit is None else min(kept, limit - count)
                    chunks.append(cut(payload, n, kept - need, kept))
                    count += need
            if kind == _FORKED or (limit is not None and count >= limit):
                return count, chunks
    return count, chunks


def event_range(txn: lmdb.Transaction, dbs: Dbs, meta: Meta, low: int, high: int) -> list[Event]:
    """The conversation's stored events from version ``low`` to ``high``, oldest first.

    Versions before the first live one were deleted by a clear and are skipped; every
    other version in the range must be stored, sound and hold its own version.

    Raises:
        CorruptRecord: a record in the range is damaged or missing.
    """
    low = max(low, meta.first)
    high = min(high, meta.version)
    out: list[Event] = []
    if low > high:
        return out
    prefix = keys.conv_num_bytes(meta.conv)
    cursor = txn.cursor(db=dbs.events)
    version = low
    if cursor.set_range(prefix + low.to_bytes(keys.U64_SIZE, "big")):
        for raw_key, value in cursor:
            if version > high:
                break
            key = prefix + version.to_bytes(keys.U64_SIZE, "big")
            if raw_key != key:
                raise _damaged(meta, version, "it is missing")
            out.append(_event(meta, version, key, value))
            version += 1
    if version <= high:
        raise _damaged(meta, version, "it is missing")
    return out


def events(
    txn: lmdb.Transaction, dbs: Dbs, meta: Meta | None, after: int, limit: int | None = None
) -> list[Event]:
    """The conversation's stored events with a version above ``after``, oldest first: at
    most ``limit`` of them (None: all).

    Raises:
        CorruptRecord: a record it reads is damaged or missing.
    """
    if meta is None or after >= meta.version or limit == 0:
        return []
    low = max(after + 1, meta.first)  # the versions before `first` were cleared
    high = meta.version if limit is None else min(meta.version, low + limit - 1)
    return event_range(txn, dbs, meta, low, high)


def conversations(
    txn: lmdb.Transaction,
    dbs: Dbs,
    *,
    prefix: str,
    after: str | None,
    limit: int | None,
    include_empty: bool = False,
) -> list[str]:
    """Ids of conversations holding messages now (or ever written), sorted, paged.

    Raises:
        CorruptRecord: a name entry or metadata record it reads is damaged.
    """
    start = prefix.encode("utf-8")
    prefix_bytes = start
    after_bytes = None if after is None else after.encode("utf-8")
    if after_bytes is not None and after_bytes > start:
        start = after_bytes
    out: list[str] = []
    cursor = txn.cursor(db=dbs.names)
    if not cursor.set_range(start):
        return out
    for raw_key, value in cursor:
        key = bytes(raw_key)
        if not key.startswith(prefix_bytes):
            break
        if after_bytes is not None and key <= after_bytes:
            continue
        try:
            conv = codec.unseal(key, value)
            cid = keys.decode_name_key(key)
            if not include_empty:
                packed = get(txn, dbs.meta, bytes(conv))
                if packed is None:
                    raise CorruptRecord("it has a number but no metadata")
                _, _, count, stored = codec.unpack_meta(packed)
                if stored != cid:
                    raise CorruptRecord(f"its metadata names {stored!r}")
                if count == 0:
                    continue
        except (CorruptRecord, ValueError) as exc:
            raise CorruptRecord(f"conversation name entry {key!r}: {exc}; {DAMAGED}") from None
        out.append(cid)
        if limit is not None and len(out) >= limit:
            break
    return out


def tail(txn: lmdb.Transaction, dbs: Dbs, *, after: int, limit: int) -> list[Change]:
    """Changes with a position above ``after``, in commit order (deleted ones skipped).

    Raises:
        CorruptRecord: a position entry, the event it names or that event's
            conversation metadata is damaged or missing.
    """
    out: list[Change] = []
    if limit <= 0:
        return out
    cursor = txn.cursor(db=dbs.positions)
    if not cursor.set_range(keys.position_key(after + 1)):
        return out
    metas: dict[int, Meta] = {}
    for raw_key, value in cursor:
        pos_key = bytes(raw_key)
        try:
            event_key = bytes(codec.unseal(pos_key, value))
            position = keys.decode_position_key(pos_key)
            conv, version = keys.decode_event_key(event_key)
        except (CorruptRecord, ValueError) as exc:
            raise CorruptRecord(f"change at position key {pos_key!r}: {exc}; {DAMAGED}") from None
        meta = metas.get(conv)
        if meta is None:
            meta = metas[conv] = _meta_by_number(txn, dbs, conv, position)
        record = txn.get(event_key, db=dbs.events)
        if record is None:
            if version < meta.first:
                continue  # deleted by a later clear
            raise _damaged(meta, version, f"it is missing, though position {position} names it")
        event = _event(meta, version, event_key, record)
        out.append(Change.from_event(event, position=position, conversation_id=meta.cid))
        if len(out) >= limit:
            break
    return out


def _meta_by_number(txn: lmdb.Transaction, dbs: Dbs, conv: int, position: int) -> Meta:
    """The metadata of conversation number ``conv``, which the change at ``position`` names."""
    try:
        packed = get(txn, dbs.meta, keys.conv_num_bytes(conv))
        if packed is None:
            raise CorruptRecord("it names a conversation without metadata")
        version, first, count, cid = codec.unpack_meta(packed)
    except CorruptRecord as exc:
        raise CorruptRecord(f"change at position {position}: {exc}; {DAMAGED}") from None
    return Meta(conv, version, first, count, cid)


def live_conversations(txn: lmdb.Transaction, dbs: Dbs) -> int:
    """How many conversations hold messages now."""
    return counter(txn, dbs, LIVE, 0)


def iter_event_records(txn: lmdb.Transaction, dbs: Dbs) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, record) of the events sub-database, checksums checked (for tools).

    Raises:
        CorruptRecord: a record fails its checksum.
    """
    for raw_key, value in txn.cursor(db=dbs.events):
        key = bytes(raw_key)
        try:
            record = bytes(codec.unseal(key, value))
        except CorruptRecord as exc:
            raise CorruptRecord(f"event record under key {key!r}: {exc}; {DAMAGED}") from None
        yield key, record
