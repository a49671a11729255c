"""The LMDB key layout: unambiguous, fixed-width, ordered keys.

Each conversation gets an internal number (``conv_num``, a uint64 counter) the first time
it is written; the ``names`` sub-database maps the conversation id (UTF-8) to it. Keys
built from numbers are big-endian, so byte order is numeric order:

=====================  ==============================  ==========================================
sub-database           key                             value (encoded by the codec)
=====================  ==============================  ==========================================
``NAMES_DB``           `name_key` (cid as UTF-8)       `conv_num_bytes` (8 bytes)
``EVENTS_DB``          `event_key` (conv BE8 + ver     the event record
                       BE8, 16 bytes)
``POSITIONS_DB``       `position_key` (BE8)            where the change is, e.g. its `event_key`
``META_DB``            `conv_num_bytes` (8 bytes)      per-conversation metadata
``IDEMPOTENCY_DB``     `idempotency_key` (conv BE8 +   the version the key produced
                       key as UTF-8)
=====================  ==============================  ==========================================

One conversation's events are the contiguous range `conversation_bounds` returns; since
every event key is exactly 16 bytes and starts with the fixed-width number, no conversation
id can be a prefix of another's keys (the trap of ``cid + NUL`` prefixes). "Last N" is a
reverse cursor walk from the range's upper bound.
"""

from __future__ import annotations

import struct
from typing import Any

from memoryd.messages import validate_conversation_id
from memoryd.store.requests import MAX_IDEMPOTENCY_KEY_BYTES

__all__ = [
    "EVENTS_DB",
    "EVENT_KEY_SIZE",
    "IDEMPOTENCY_DB",
    "MAX_U64",
    "META_DB",
    "NAMES_DB",
    "POSITIONS_DB",
    "SUB_DATABASES",
    "U64_SIZE",
    "conv_num_bytes",
    "conversation_bounds",
    "decode_conv_num",
    "decode_event_key",
    "decode_idempotency_key",
    "decode_name_key",
    "decode_position_key",
    "event_key",
    "idempotency_key",
    "name_key",
    "position_key",
]

NAMES_DB = b"names"
"""Sub-database: conversation id (UTF-8) -> conv_num (8 bytes)."""

EVENTS_DB = b"events"
"""Sub-database: event key (conv_num BE8 + version BE8) -> event record."""

POSITIONS_DB = b"positions"
"""Sub-database: global position (BE8) -> where that change is stored."""

META_DB = b"meta"
"""Sub-database: conv_num (8 bytes) -> per-conversation metadata."""

IDEMPOTENCY_DB = b"idempotency"
"""Sub-database: conv_num BE8 + idempotency key (UTF-8) -> the version it produced."""

SUB_DATABASES = (NAMES_DB, EVENTS_DB, POSITIONS_DB, META_DB, IDEMPOTENCY_DB)
"""Every sub-database name, to size ``max_dbs`` and open them all."""

MAX_U64 = 2**64 - 1
"""The largest number a key can hold."""

U64_SIZE = 8
"""Bytes in one big-endian number."""

EVENT_KEY_SIZE = 2 * U64_SIZE
"""Bytes in an event key."""

_U64 = struct.Struct(">Q")
_U64_PAIR = struct.Struct(">QQ")


def _check_u64(value: Any, name: str) -> int:
    if type(value) is not int:
        raise ValueError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= MAX_U64:
        raise ValueError(f"{name} must be between 0 and 2**64-1, got {value}")
    return value


def _decode_u64(data: bytes | memoryview, name: str) -> int:
    raw = bytes(data)
    if len(raw) != U64_SIZE:
        raise ValueError(f"{name} must be {U64_SIZE} bytes, got {len(raw)}")
    return int.from_bytes(raw, "big")


def conv_num_bytes(conv_num: int) -> bytes:
    """Encode a conversation number as 8 big-endian bytes.

    Args:
        conv_num: The internal conversation number.

    Returns:
        The 8-byte encoding (the ``META_DB`` key and the ``NAMES_DB`` value).

    Raises:
        ValueError: ``conv_num`` is not an int in 0 .. 2**64-1.
    """
    if type(conv_num) is int and 0 <= conv_num <= MAX_U64:
        return _U64.pack(conv_num)
    return _check_u64(conv_num, "conv_num").to_bytes(U64_SIZE, "big")


def decode_conv_num(data: bytes | memoryview) -> int:
    """Decode `conv_num_bytes`.

    Args:
        data: 8 bytes.

    Returns:
        The conversation number.

    Raises:
        ValueError: ``data`` is not 8 bytes long.
    """
    return _decode_u64(data, "conv_num")


def event_key(conv_num: int, version: int) -> bytes:
    """Build the key of one event.

    Args:
        conv_num: The internal conversation number.
        version: The event's version.

    Returns:
        16 bytes: conv_num then version, both big-endian.

    Raises:
        ValueError: Either number is not an int in 0 .. 2**64-1.
    """
    if type(conv_num) is int and type(version) is int:
        try:
            return _U64_PAIR.pack(conv_num, version)
        except struct.error:
            pass  # out of range: the checks below name the number
    _check_u64(conv_num, "conv_num")
    _check_u64(version, "version")
    return conv_num.to_bytes(U64_SIZE, "big") + version.to_bytes(U64_SIZE, "big")


def decode_event_key(key: bytes | memoryview) -> tuple[int, int]:
    """Split an event key into its numbers.

    Args:
        key: A key built by `event_key`.

    Returns:
        ``(conv_num, version)``.

    Raises:
        ValueError: ``key`` is not 16 bytes long.
    """
    raw = bytes(key)
    if len(raw) != EVENT_KEY_SIZE:
        raise ValueError(f"an event key must be {EVENT_KEY_SIZE} bytes, got {len(raw)}")
    return int.from_bytes(raw[:U64_SIZE], "big"), int.from_bytes(raw[U64_SIZE:], "big")


def conversation_bounds(conv_num: int) -> tuple[bytes, bytes]:
    """Give the inclusive key range holding exactly one conversation's events.

    Walk forward with ``cursor.set_range(first)`` while ``key <= last``. Walk backward
    ("last N") by positioning past the range (``cursor.set_range(last)``, which lands on a
    later conversation's key, or ``cursor.last()`` when it finds nothing), stepping back
    once if the cursor sits after ``last``, then with ``prev()`` while ``key >= first``.

    Args:
        conv_num: The internal conversation number.

    Returns:
        ``(event_key(conv_num, 0), event_key(conv_num, 2**64-1))``.

    Raises:
        ValueError: ``conv_num`` is not an int in 0 .. 2**64-1.
    """
    return event_key(conv_num, 0), event_key(conv_num, MAX_U64)


def position_key(position: int) -> bytes:
    """Build the ``POSITIONS_DB`` key of one global change position.

    Args:
        position: The global commit position.

    Returns:
        8 big-endian bytes, so that key order is commit order.

    Raises:
        ValueError: ``position`` is not an int from 0 to 2**64-1.
    """
    if type(position) is int and 0 <= position <= MAX_U64:
        return _U64.pack(position)
    return _check_u64(position, "position").to_bytes(U64_SIZE, "big")


def decode_position_key(key: bytes | memoryview) -> int:
    """Read the global position back from a ``POSITIONS_DB`` key.

    Args:
        key: A key built by `position_key`.

    Returns:
        The position.

    Raises:
        ValueError: ``key`` is not 8 bytes long.
    """
    return _decode_u64(key, "position key")


def name_key(cid: str) -> bytes:
    """Build the ``NAMES_DB`` key of a conversation id.

    Args:
        cid: The conversation id.

    Returns:
        The id as UTF-8 (at most 256 bytes).

    Raises:
        InvalidConversationId: ``cid`` is not a valid conversation id (a ValueError).
    """
    return validate_conversation_id(cid).encode("utf-8")


def decode_name_key(key: bytes | memoryview) -> str:
    """Decode `name_key`.

    Args:
        key: The UTF-8 bytes.

    Returns:
        The conversation id.

    Raises:
        ValueError: ``key`` is not valid UTF-8.
    """
    return bytes(key).decode("utf-8")


def idempotency_key(conv_num: int, key: str) -> bytes:
    """Build the ``IDEMPOTENCY_DB`` key of one conversation's idempotency key.

    Idempotency keys are scoped to their conversation: the same key in two conversations
    names two different writes.

    Args:
        conv_num: The internal conversation number.
        key: The caller's idempotency key.

    Returns:
        conv_num as 8 big-endian bytes, then the key as UTF-8.

    Raises:
        ValueError: ``conv_num`` is out of range, or ``key`` is not a non-empty str of at
            most 256 UTF-8 bytes.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"an idempotency key must be a non-empty str, got {key!r}")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "an idempotency key must be encodable as UTF-8; it has a lone surrogate"
        ) from None
    if len(encoded) > MAX_IDEMPOTENCY_KEY_BYTES:
        raise ValueError(
            f"idempotency key is {len(encoded)} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}"
        )
    return conv_num_bytes(conv_num) + encoded


def decode_idempotency_key(data: bytes | memoryview) -> tuple[int, str]:
    """Split an ``IDEMPOTENCY_DB`` key into the conversation number and the caller's key.

    Args:
        data: A key built by `idempotency_key`: 8 big-endian bytes, then UTF-8.

    Returns:
        ``(conv_num, key)``.

    Raises:
        ValueError: ``data`` is too short or not valid UTF-8 after the number.
    """
    raw = bytes(data)
    if len(raw) <= U64_SIZE:
        raise ValueError(f"an idempotency key entry must be over {U64_SIZE} bytes")
    return int.from_bytes(raw[:U64_SIZE], "big"), raw[U64_SIZE:].decode("utf-8")
