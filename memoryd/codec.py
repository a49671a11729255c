"""The msgpack encoding of stored records; the only module that imports msgpack.

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
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any, NoReturn

import msgpack

from memoryd.errors import CorruptRecord
from memoryd.events import KINDS, SCHEMA_VERSION, Event

__all__ = [
    "MAX_RECORD_BYTES",
    "MAX_VALUE_BYTES",
    "SUPPORTED_SCHEMA_VERSIONS",
    "pack_event",
    "pack_event_fields",
    "pack_meta",
    "pack_value",
    "unpack_event",
    "unpack_kind_and_messages",
    "unpack_meta",
    "unpack_value",
]

MAX_RECORD_BYTES = 1 << 30
"""The largest event record `pack_event` writes and `unpack_event` reads (1 GiB)."""

MAX_VALUE_BYTES = 64 << 20
"""The largest internal value `pack_value` writes and `unpack_value` reads (64 MiB)."""

MAX_WIRE_BYTES = 1 << 30
"""The largest network body `pack_wire` writes and `unpack_wire` reads by default (1 GiB)."""

SUPPORTED_SCHEMA_VERSIONS = frozenset({SCHEMA_VERSION})
"""Event schema versions this code can read."""

_RECORD_KEYS = frozenset({"s", "v", "k", "m", "t", "i", "d"})
_Buffer = bytes | bytearray | memoryview


class _RefusedExt(ValueError):
    """Raised by the ext hook: memoryd never writes msgpack ext types."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _refuse_ext(code: int, data: bytes) -> NoReturn:
    raise _RefusedExt(code)


# --------------------------------------------------------------------------- packing


def _check_packable(value: Any, allow_bytes: bool, depth: int = 0) -> None:
    """Refuse anything the matching unpack would refuse, before it is written.

    Raises:
        ValueError: ``value`` holds a type other than str, int, float, bool, None,
            list/tuple, dict (and bytes when allowed), or nests past msgpack's limit.
    """
    if depth > 512:
        raise ValueError("value nests deeper than 512 levels")
    if isinstance(value, str | int | float | bool) or value is None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) and not (allow_bytes and isinstance(key, bytes)):
                raise ValueError(f"map key {key!r} is a {type(key).__name__}, not a str")
            _check_packable(item, allow_bytes, depth + 1)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_packable(item, allow_bytes, depth + 1)
        return
    if allow_bytes and isinstance(value, bytes):
        return
    raise ValueError(f"a {type(value).__name__} cannot be stored; use JSON-compatible values")


def _pack(
    obj: Any, *, allow_bytes: bool, max_bytes: int, what: str, trusted: bool = False
) -> bytes:
    try:
        if not trusted:
            _check_packable(obj, allow_bytes)
        packed = msgpack.packb(obj, use_bin_type=True, datetime=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{what} cannot be encoded: {exc}") from exc
    if len(packed) > max_bytes:
        raise ValueError(f"{what} is {len(packed)} bytes encoded; the limit is {max_bytes}")
    return packed


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
        "m": list(messages),
        "t": float(timestamp),
    }
    if idempotency_key is not None:
        record["i"] = idempotency_key
    if data is not None:
        record["d"] = dict(data)
    return _pack(record, allow_bytes=False, max_bytes=max_bytes, what="event", trusted=trusted)


def pack_value(obj: Any, *, max_bytes: int = MAX_VALUE_BYTES) -> bytes:
    """Encode a small internal value (metadata, index entries).

    Args:
        obj: str, int, float, bool, None, bytes, or lists/tuples/dicts of them; dict keys
            must be str or bytes. Tuples decode as lists.
        max_bytes: The largest encoding to produce.

    Returns:
        The encoded bytes.

    Raises:
        ValueError: ``obj`` holds a value that cannot be stored or encodes to more than
            ``max_bytes``.
    """
    return _pack(obj, allow_bytes=True, max_bytes=max_bytes, what="value")


def pack_wire(obj: Any, *, max_bytes: int = MAX_WIRE_BYTES, trusted: bool = False) -> bytes:
    """Encode a JSON-compatible value as an ``application/msgpack`` network body.

    Args:
        obj: str, int, float, bool, None, and lists/tuples/dicts (str keys) of them.
        max_bytes: The largest body to produce.
        trusted: the value holds only validated messages and plain values, so the
            pre-pack walk over it is skipped.

    Returns:
        The body bytes.

    Raises:
        ValueError: ``obj`` holds a value JSON cannot carry, or encodes past ``max_bytes``.
    """
    return _pack(obj, allow_bytes=False, max_bytes=max_bytes, what="body", trusted=trusted)


# --------------------------------------------------------------------------- unpacking


def _unpackb(data: _Buffer, size: int, *, allow_bytes: bool) -> Any:
    """msgpack's decode with memoryd's rules: str keys, no ext types, no collection or
    str longer than the input could hold, bytes only where ``allow_bytes``."""
    return msgpack.unpackb(
        data,
        raw=False,
        use_list=True,
        strict_map_key=True,
        ext_hook=_refuse_ext,
        max_ext_len=0,
        max_bin_len=size if allow_bytes else 0,
        max_str_len=size,
        max_array_len=size,
        max_map_len=size,
    )


def _unpack(data: _Buffer, *, allow_bytes: bool, max_bytes: int, what: str) -> Any:
    if type(data) is bytes:
        size = len(data)
    elif isinstance(data, bytes | bytearray | memoryview):
        size = memoryview(data).nbytes
    else:
        raise TypeError(f"{what} must be bytes, got {type(data).__name__}")
    if size > max_bytes:
        raise CorruptRecord(f"{what} is {size} bytes; the limit is {max_bytes}")
    if size == 0:
        raise CorruptRecord(f"{what} is empty; the stored bytes are damaged")
    try:
        return _unpackb(data, size, allow_bytes=allow_bytes)
    except _RefusedExt as exc:
        raise CorruptRecord(
            f"{what} holds msgpack ext type {exc.code}; memoryd never writes ext types"
        ) from None
    except msgpack.ExtraData as exc:
        raise CorruptRecord(f"{what} has trailing bytes after the record") from exc
    except msgpack.StackError as exc:
        raise CorruptRecord(f"{what} nests too deeply to decode") from exc
    except msgpack.FormatError as exc:
        raise CorruptRecord(f"{what} is not valid msgpack") from exc
    except UnicodeDecodeError as exc:
        raise CorruptRecord(f"{what} holds a str that is not valid UTF-8") from exc
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
        reason = str(exc) or type(exc).__name__
        if "max_ext_len" in reason:
            reason = "it holds a msgpack ext type, which memoryd never writes"
        elif "incomplete input" in reason:
            reason = "it is truncated"
        elif "max_bin_len" in reason:
            reason = "it holds binary data where only JSON values belong"
        raise CorruptRecord(f"{what} cannot be decoded: {reason}") from exc


def _corrupt(message: str) -> NoReturn:
    raise CorruptRecord(message)


def _unpack_record(data: _Buffer, max_bytes: int) -> dict[str, Any]:
    """An event record as a map of a schema version this code reads."""
    record = _unpack(data, allow_bytes=False, max_bytes=max_bytes, what="event record")
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
    data: _Buffer, *, max_bytes: int = MAX_RECORD_BYTES
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


def unpack_event(data: _Buffer, *, max_bytes: int = MAX_RECORD_BYTES) -> Event:
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
        return Event(
            version=record["v"],
            kind=record["k"],
            messages=tuple(messages),
            timestamp=record["t"],
            idempotency_key=record.get("i"),
            data=data_field,
        )
    except ValueError as exc:
        raise CorruptRecord(f"event record is invalid: {exc}") from exc


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


def unpack_meta(data: _Buffer) -> tuple[int, int, int, str]:
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


def unpack_value(data: _Buffer, *, max_bytes: int = MAX_VALUE_BYTES) -> Any:
    """Decode a value written by `pack_value`.

    Args:
        data: The encoded bytes (bytes, bytearray or memoryview).
        max_bytes: The largest encoding to accept.

    Returns:
        The value, with arrays as lists and maps as dicts.

    Raises:
        CorruptRecord: The bytes are garbage, truncated, too large or hold ext types.
        TypeError: ``data`` is not a bytes-like object.
    """
    return _unpack(data, allow_bytes=True, max_bytes=max_bytes, what="stored value")


def unpack_wire(data: _Buffer, *, max_bytes: int = MAX_WIRE_BYTES) -> Any:
    """Decode an ``application/msgpack`` network body, bounded like every unpack here.

    Args:
        data: The body bytes.
        max_bytes: The largest body to accept.

    Returns:
        The value: lists, dicts with str keys, str, int, float, bool, None.

    Raises:
        CorruptRecord: The bytes are not one valid msgpack value of JSON-compatible
            types (garbage, truncated, trailing bytes, binary data, ext types, too large).
        TypeError: ``data`` is not a bytes-like object.
    """
    return _unpack(data, allow_bytes=False, max_bytes=max_bytes, what="msgpack body")
