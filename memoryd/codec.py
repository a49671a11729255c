"""The encoding of stored records: event records and conversation metadata.

An event is stored as a msgpack map with short keys::

    {"s": 1,            # schema version (SCHEMA_VERSION)
     "v": 7,            # conversation version
     "k": "appended",   # kind
     "m": [{...}, ...], # messages, as maps
     "t": 1717000000.5, # timestamp, float seconds
     "i": "key-1",      # idempotency key (omitted when None)
     "d": {...}}        # kind-specific data (omitted when None)

Every unpack is bounded and plain: the input length is capped before decoding, every
str/bin/array/map length is capped by the input length, map keys must be str (or bytes,
in internal values), msgpack ext types (including timestamps) are refused, and nothing
is ever unpickled. Undecodable bytes raise `CorruptRecord`, never a msgpack exception.
Arrays decode as lists and maps as dicts, so validated messages round-trip exactly.

A stored value is sealed before it is written: `seal` appends a CRC-32 of the value
and of the key it is stored under, and `unseal` checks it on every read, so a flipped
bit, a zeroed range or a value found under another key raises `CorruptRecord` instead of
decoding into wrong content. The checksum is zlib's CRC-32 (the standard library's, so no
dependency; it detects every burst of up to 32 flipped bits). `STORE_FORMAT` names this framing.

Those msgpack rules, and the internal-value and network-body encodings built directly
on them (`pack_value`, `pack_wire` and their unpacks), are in the private
`memoryd._codec_msgpack`, re-exported here; no other module imports msgpack.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from operator import getitem, itemgetter
from typing import TYPE_CHECKING, Any, NoReturn, cast

from memoryd import events
from memoryd._codec_msgpack import (
    MAX_VALUE_BYTES,
    MAX_WIRE_BYTES,
    Buffer,
    pack_bounded,
    pack_packed_array_map,
    pack_value,
    pack_wire,
    split_packed,
    unpack_bounded,
    unpack_map_holding_packed,
    unpack_value,
    unpack_wire,
)
from memoryd.errors import CorruptRecord
from memoryd.events import KINDS, SCHEMA_VERSION

if TYPE_CHECKING:
    from memoryd.events import Event

__all__ = [
    "MAX_RECORD_BYTES",
    "MAX_VALUE_BYTES",
    "MAX_WIRE_BYTES",
    "SEAL_BYTES",
    "STORE_FORMAT",
    "SUPPORTED_SCHEMA_VERSIONS",
    "Buffer",
    "pack_event",
    "pack_event_fields",
    "pack_meta",
    "pack_packed_array_map",
    "pack_value",
    "pack_wire",
    "seal",
    "split_packed",
    "unpack_event",
    "unpack_kind_and_messages",
    "unpack_kind_and_packed_messages",
    "unpack_meta",
    "unpack_value",
    "unpack_wire",
    "unseal",
    "unseal_all",
    "unseal_kinds_and_messages",
    "unseal_kinds_and_packed_messages",
]

MAX_RECORD_BYTES = 1 << 30
"""The largest event record `pack_event` writes and `unpack_event` reads (1 GiB)."""

SUPPORTED_SCHEMA_VERSIONS = frozenset({SCHEMA_VERSION})
"""Event schema versions this code can read."""

STORE_FORMAT = 2
"""The on-disk format of a store's values: 2 seals every value with `seal`; 1 (no
checksums) is no longer read."""

SEAL_BYTES = 4
"""Bytes `seal` adds to a value."""

_crc32 = zlib.crc32
_CRC32_RESIDUE = 0x2144DF1C  # CRC-32 of any message followed by its own CRC, little-endian

_RECORD_KEYS = frozenset({"s", "v", "k", "m", "t", "i", "d"})


# --------------------------------------------------------------------------- sealed values


def seal(key: bytes, value: bytes) -> bytes:
    """Frame a value for storage under ``key``: the value, then a CRC-32 of key and value.

    Args:
        key: the key the value is stored under (covered by the checksum, so a value
            read back under another key fails `unseal`).
        value: the encoded value.

    Returns:
        ``value`` followed by the 4 checksum bytes (little-endian, so the CRC-32 of the
        key and the whole frame is CRC-32's fixed residue, one pass to check).
    """
    return value + _crc32(value, _crc32(key)).to_bytes(SEAL_BYTES, "little")


def unseal(key: bytes, framed: Buffer) -> Buffer:
    """Check a value written by `seal` under ``key`` and return the value inside.

    Args:
        key: the key it was read under.
        framed: the stored bytes.

    Returns:
        The value, without the checksum (a slice of ``framed``, of its type).

    Raises:
        CorruptRecord: the bytes are shorter than a checksum, or the checksum does not
            match key and value: the stored bytes are damaged.
    """
    if _crc32(framed, _crc32(key)) != _CRC32_RESIDUE or len(framed) < SEAL_BYTES:
        raise CorruptRecord(
            f"stored value ({memoryview(framed).nbytes} bytes) fails its checksum: "
            "its bytes are damaged"
        )
    return framed[:-SEAL_BYTES]


# --------------------------------------------------------------------------- event records


def pack_event(event: Event, *, max_bytes: int = MAX_RECORD_BYTES, trusted: bool = False) -> bytes:
    """Encode an event as a schema-versioned msgpack record.

    Args:
        event: The event.
        max_bytes: The largest record to produce.
        trusted: the messages and data were already validated as JSON-compatible
            (``messages.validate``), so the pre-pack walk over them is skipped.

    Returns:
        The record bytes.

    Raises:
        ValueError: The event holds values that cannot be stored (bytes, sets, integers
            outside 64 bits, lone surrogates, ...) or encodes to more than ``max_bytes``.
    """
    return pack_event_fields(
        version=event.version,
        kind=str(event.kind),
        messages=event.messages,
        timestamp=event.timestamp,
        idempotency_key=event.idempotency_key,
        data=event.data,
        max_bytes=max_bytes,
        trusted=trusted,
    )


def pack_event_fields(
    *,
    version: int,
    kind: str,
    messages: Sequence[Mapping[str, Any]],
    timestamp: float,
    idempotency_key: str | None = None,
    data: Mapping[str, Any] | None = None,
    max_bytes: int = MAX_RECORD_BYTES,
    trusted: bool = False,
) -> bytes:
    """Encode an event record from its fields, without building an `Event` first.

    The store's writer uses this on its hot path for fields it has already checked.

    Args:
        version: the conversation's version after the event.
        kind: the event kind.
        messages: the messages it carries.
        timestamp: commit time, seconds since the epoch.
        idempotency_key: the writer's key, or None.
        data: kind-specific data, or None.
        max_bytes: the largest record to produce.
        trusted: skip the pre-pack walk (values already validated).

    Returns:
        The record bytes, identical to `pack_event` of the same event.

    Raises:
        ValueError: a value cannot be stored, or the record is too large.
    """
    record: dict[str, Any] = {
        "s": SCHEMA_VERSION,
        "v": version,
        "k": kind,
        "m": messages if isinstance(messages, list | tuple) else list(messages),
        "t": float(timestamp),
    }
    if idempotency_key is not None:
        record["i"] = idempotency_key
    if data is not None:
        record["d"] = dict(data)
    return pack_bounded(
        record, allow_bytes=False, max_bytes=max_bytes, what="event", trusted=trusted
    )


def _corrupt(message: str) -> NoReturn:
    raise CorruptRecord(message)


def _unpack_record(data: Buffer, max_bytes: int) -> dict[str, Any]:
    """An event record as a map of a schema version this code reads."""
    record = unpack_bounded(data, allow_bytes=False, max_bytes=max_bytes, what="event record")
    if not isinstance(record, dict):
        _corrupt(f"event record is a {type(record).__name__}, not a map")
    if "s" not in record:
        _corrupt("event record has no schema version ('s')")
    schema = record["s"]
    if type(schema) is not int or schema not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))
        _corrupt(
            f"event record has schema version {schema!r}; this memoryd reads version "
            f"{supported}. A newer memoryd may have written it: upgrade to read it"
        )
    return record


def unpack_kind_and_messages(
    data: Buffer, *, max_bytes: int = MAX_RECORD_BYTES
) -> tuple[str, list[dict[str, Any]]]:
    """Decode only what a history read uses: an event record's kind and messages.

    A read of the last N messages decodes N records; building and fully checking an
    `Event` for each (timestamp, key, data) costs more than the decoding itself, so
    this checks the schema version, the kind and the messages only. `unpack_event`
    checks everything.

    Returns:
        ``(kind, messages)``; the messages are fresh dicts.

    Raises:
        CorruptRecord: as `unpack_event`, for the fields it reads.
    """
    record = _unpack_record(data, max_bytes)
    kind = record.get("k")
    if not isinstance(kind, str) or kind not in KINDS:
        _corrupt(f"event record has kind {kind!r}, not one of {sorted(KINDS)}")
    messages = record.get("m")
    if not isinstance(messages, list) or not all(map(isinstance, messages, repeat(dict))):
        _corrupt("event record messages are not an array of maps")
    return kind, messages


def unpack_kind_and_packed_messages(data: Buffer) -> tuple[str, int, bytes]:
    """An event record's kind and its messages still encoded, for answers sent as msgpack.

    The record's other fields are decoded and its schema version and kind checked as
    `unpack_kind_and_messages` does; the messages are copied, not decoded (they were
    checked before they were stored, and the record's checksum before this call).

    Returns:
        ``(kind, how many messages, the messages back to back)``; split them with
        `split_packed`.

    Raises:
        CorruptRecord: the record is not a map of a schema this code reads, its kind is
            unknown, or its messages are not an array.
    """
    record, count, packed = unpack_map_holding_packed(bytes(data), "m", what="event record")
    schema = record.get("s")
    if type(schema) is not int or schema not in SUPPORTED_SCHEMA_VERSIONS:
        _corrupt(f"event record has schema version {schema!r}; this memoryd reads another")
    kind = record.get("k")
    if not isinstance(kind, str) or kind not in KINDS:
        _corrupt(f"event record has kind {kind!r}, not one of {sorted(KINDS)}")
    return kind, count, packed


# --------------------------------------------------------------------------- many records at once
#
# A history read of one-message events decodes one record per message. Checked one at
# a time, each record costs several Python calls (its checksum, its decode, its field
# checks); the functions below check and decode a run of records with a fixed number
# of calls whatever its length: the checksums in one pass, the records in one msgpack
# decode, the fields in one pass each. They refuse what the one-record functions
# refuse, without saying which record failed: a caller that needs to name it checks
# the records one by one (`unseal`, `unpack_kind_and_messages`).

_STRIP_SEAL = slice(None, -SEAL_BYTES)
_SCHEMA_VERSION_KIND_MESSAGES = itemgetter("s", "v", "k", "m")


def unseal_all(keys: Sequence[bytes], framed: Sequence[Buffer]) -> None:
    """Check many values written by `seal`: ``framed[i]`` under ``keys[i]``.

    Raises:
        CorruptRecord: the counts differ, or a value is shorter than a checksum or
            fails its checksum.
    """
    if len(keys) != len(framed):
        _corrupt(f"{len(framed)} stored values for {len(keys)} keys")
    if not framed:
        return
    if set(map(_crc32, framed, map(_crc32, keys))) != {_CRC32_RESIDUE} or (
        min(map(len, framed)) < SEAL_BYTES
    ):
        _corrupt("a stored value fails its checksum: its bytes are damaged")


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def unseal_kinds_and_messages(
    keys: Sequence[bytes],
    framed: Sequence[Buffer],
    versions: Sequence[int],
    *,
    max_bytes: int = MAX_RECORD_BYTES,
) -> tuple[Sequence[str], Sequence[list[dict[str, Any]]]]:
    """`unseal` and `unpack_kind_and_messages` of many event records, in one pass each.

    Every checksum is checked, every record must hold the version it is read for
    (``versions[i]`` for ``framed[i]``), and the records are decoded under the same
    bounds as one by one (no ext types, no binary data, str map keys, lengths capped
    by the input) in a single msgpack decode of the records back to back.

    Args:
        keys: the key each record was read under.
        framed: the stored records, sealed.
        versions: the version each record must hold.
        max_bytes: the largest record to accept.

    Returns:
        ``(kinds, messages)``: for each record its kind and its messages (fresh dicts),
        in the order given.

    Raises:
        CorruptRecord: a record fails its checksum, does not decode, or holds another
            version, schema, kind or messages than `unpack_kind_and_messages` accepts.
            The message does not say which record: check them one by one to name it.
    """
    unseal_all(keys, framed)
    count = len(framed)
    if not count:
        return (), ()
    unsealed = cast("map[Buffer]", map(getitem, framed, repeat(_STRIP_SEAL)))
    body = b"".join((_array_header(count), *unsealed))
    if len(body) > max_bytes and max(map(len, framed)) > max_bytes + SEAL_BYTES:
        _corrupt(f"an event record is over {max_bytes} bytes")
    # an empty record adds no value: the decode runs short and fails
    records = unpack_bounded(body, allow_bytes=False, max_bytes=len(body), what="event records")
    if type(records) is not list or len(records) != count:
        _corrupt("event records do not decode to one value each")
    try:
        schemas, found, kinds, messages = zip(
            *map(_SCHEMA_VERSION_KIND_MESSAGES, records), strict=True
        )
        known_kinds = set(kinds) <= KINDS  # only a str equals a str
    except (KeyError, TypeError) as exc:  # not a map, a field missing, an unhashable kind
        raise CorruptRecord(f"an event record is not a map of its fields ({exc!r})") from None
    if found != tuple(versions):
        _corrupt("an event record holds another version than its key")
    if set(map(type, schemas)) != {int} or not set(schemas) <= SUPPORTED_SCHEMA_VERSIONS:
        _corrupt("an event record has a schema version this memoryd does not read")
    if not known_kinds:
        _corrupt(f"an event record has a kind not one of {sorted(KINDS)}")
    if set(map(type, messages)) != {list} or not (
        set(map(type, chain.from_iterable(messages))) <= {dict}
    ):
        _corrupt("event record messages are not an array of maps")
    return kinds, messages


def _packed_layout() -> re.Pattern[bytes]:
    """The sealed record `pack_event_fields` writes for an event without idempotency
    key and data: a map of exactly s, v, k, m, t in that order. Its last field is a
    float64 of fixed length, so the messages end exactly 15 bytes (the ``t`` field and
    the seal) before the value does, whatever they hold."""
    schemas = b"|".join(re.escape(pack_value(v)) for v in sorted(SUPPORTED_SCHEMA_VERSIONS))
    kinds = b"|".join(re.escape(pack_value(kind)) for kind in sorted(KINDS))
    return re.compile(
        rb"\x85\xa1s(?:" + schemas + rb")"
        rb"\xa1v(?:[\x00-\x7f]|\xcc.|\xcd.{2}|\xce.{4}|\xcf.{8})"
        rb"\xa1k(" + kinds + rb")"
        rb"\xa1m([\x90-\x9f]|\xdc.{2}|\xdd.{4})(.*)"
        rb"\xa1t\xcb.{8}.{4}",
        re.DOTALL,
    )


_PACKED_LAYOUT = _packed_layout()
_KIND_OF = {pack_value(kind): kind for kind in KINDS}
_FIXARRAY_COUNT = {bytes((0x90 | n,)): n for n in range(16)}
_GROUPS: Any = re.Match.groups


def unseal_kinds_and_packed_messages(
    keys: Sequence[bytes], framed: Sequence[Buffer]
) -> tuple[Sequence[str], Sequence[int], Sequence[bytes]]:
    """`unseal` and `unpack_kind_and_packed_messages` of many event records.

    Every checksum is checked in one pass. A record of the layout the writer gives an
    event without idempotency key and data (the common one) is read by one match of
    that layout, which checks its schema version and kind and finds its messages by
    their position; any other record is read by `unpack_kind_and_packed_messages`.

    Returns:
        ``(kinds, message counts, the messages of each record back to back)``, in the
        order given.

    Raises:
        CorruptRecord: a record fails its checksum, or as
            `unpack_kind_and_packed_messages`. The message does not say which record.
    """
    unseal_all(keys, framed)
    matches = list(map(_PACKED_LAYOUT.fullmatch, framed))
    if None in matches:
        return _kinds_and_packed_one_by_one(framed, matches)
    kind_bytes, heads, packed = zip(*map(_GROUPS, matches), strict=True)
    counts = cast("list[int]", list(map(_FIXARRAY_COUNT.get, heads)))
    if None in counts:  # an event of 16 messages or more
        counts = [
            int.from_bytes(head[1:], "big") if len(head) > 1 else head[0] & 0x0F for head in heads
        ]
    return list(map(_KIND_OF.__getitem__, kind_bytes)), counts, packed


def _kinds_and_packed_one_by_one(
    framed: Sequence[Buffer], matches: list[re.Match[bytes] | None]
) -> tuple[list[str], list[int], list[bytes]]:
    kinds: list[str] = []
    counts: list[int] = []
    packed: list[bytes] = []
    for value, match in zip(framed, matches, strict=True):
        if match is None:
            kind, count, messages = unpack_kind_and_packed_messages(value[:-SEAL_BYTES])
        else:
            kind_byte, head, messages = match.groups()
            kind = _KIND_OF[kind_byte]
            count = int.from_bytes(head[1:], "big") if len(head) > 1 else head[0] & 0x0F
        kinds.append(kind)
        counts.append(count)
        packed.append(messages)
    return kinds, counts, packed


def unpack_event(data: Buffer, *, max_bytes: int = MAX_RECORD_BYTES) -> Event:
    """Decode an event record written by `pack_event`.

    Args:
        data: The record bytes (bytes, bytearray or memoryview).
        max_bytes: The largest record to accept.

    Returns:
        The event; its messages are fresh dicts and lists.

    Raises:
        CorruptRecord: The bytes are not a valid record: garbage, truncated, too large,
            holding ext types or binary data, a missing or unknown field, or a schema
            version this code does not read.
        TypeError: ``data`` is not a bytes-like object.
    """
    record = _unpack_record(data, max_bytes)
    unknown = record.keys() - _RECORD_KEYS
    if unknown:
        _corrupt(f"event record has unknown fields {sorted(unknown)}")
    missing = {"v", "k", "m", "t"} - record.keys()
    if missing:
        _corrupt(f"event record lacks the fields {sorted(missing)}")
    messages = record["m"]
    if not isinstance(messages, list):
        _corrupt(f"event record messages are a {type(messages).__name__}, not an array")
    data_field = record.get("d")
    if data_field is not None and not isinstance(data_field, Mapping):
        _corrupt(f"event record data is a {type(data_field).__name__}, not a map")
    try:
        return events.Event(
            version=record["v"],
            kind=record["k"],
            messages=tuple(messages),
            timestamp=record["t"],
            idempotency_key=record.get("i"),
            data=data_field,
        )
    except ValueError as exc:
        raise CorruptRecord(f"event record is invalid: {exc}") from exc


# --------------------------------------------------------------------------- metadata


_META = struct.Struct(">QQQ")


def pack_meta(version: int, first: int, count: int, cid: str) -> bytes:
    """Encode a conversation's metadata record: three big-endian u64 and the id as UTF-8.

    Args:
        version: the conversation's version.
        first: its first live version (the last clear's marker, or 1).
        count: how many messages it holds.
        cid: its id (already validated).

    Returns:
        The record.
    """
    return _META.pack(version, first, count) + cid.encode("utf-8")


def unpack_meta(data: Buffer) -> tuple[int, int, int, str]:
    """Decode `pack_meta`.

    Returns:
        ``(version, first, count, cid)``.

    Raises:
        CorruptRecord: the record is too short or its id is not UTF-8.
    """
    raw = bytes(data)
    if len(raw) <= _META.size:
        raise CorruptRecord(f"metadata record is {len(raw)} bytes; it needs over {_META.size}")
    try:
        cid = raw[_META.size :].decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecord("metadata record holds an id that is not UTF-8") from None
    version, first, count = _META.unpack_from(raw)
    return version, first, count, cid
