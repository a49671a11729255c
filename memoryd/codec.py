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
`memoryd._codec_msgpack`, re-exported here; no other module imports msgpack. The
checks and decodes of a run of event records at once (what a history read of
one-message events takes) are in `memoryd._codec_runs`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, NoReturn

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
