"""Bounded request-body decoding: what a body may cost in memory once decoded.

A JSON or msgpack body of small values decodes to many Python objects, each far
larger than the bytes that encode it (an empty list is 1 msgpack byte and 56 bytes
in memory). `decode_body` caps what a body may take decoded at `MEMORY_PER_BODY_BYTE`
times its size (plus `MEMORY_FLOOR` for small bodies):

* JSON is measured before it is decoded: its structural characters (counted at C
  speed, outside strings when the quick count is over) bound how many values it holds;
  a body that could not fit is refused without building anything;
* msgpack is measured as it is decoded (`memoryd.codec.unpack_wire`'s ``max_memory``):
  every array and map is charged when complete, and the decode stops at the budget;
  a body of at most `SMALL_MSGPACK_BYTES` cannot reach the budget even if every byte
  became the costliest object, so it is decoded without the measuring (a Python call
  per array and map that a chat message's add does not need).

Nesting past what the decoders allow, or any other malformed body, is a
`memoryd.errors.HttpError` 400 that names the problem: never a 500.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memoryd import codec
from memoryd.errors import CorruptRecord, HttpError

__all__ = [
    "MEMORY_FLOOR",
    "MEMORY_PER_BODY_BYTE",
    "SMALL_MSGPACK_BYTES",
    "decode_body",
    "json_memory_estimate",
    "memory_budget",
]

MEMORY_PER_BODY_BYTE = 16
"""How many bytes of decoded objects one body byte may become. A body of the smallest
real chat messages (``{"role":"user","content":"hi"}``) takes about 9 (JSON) to 14
(msgpack) times its size; a body of empty arrays would take 24 (JSON) to 72 (msgpack)."""

MEMORY_FLOOR = 1 << 20
"""Every body may take this much decoded, whatever its size (small bodies of small values)."""

MSGPACK_WORST_BYTES = 72
"""The most memory one msgpack byte can become decoded: an empty map (one byte) is a
64-byte dict and its 8-byte slot in its parent; every other one-byte value costs less,
and longer values cost less per byte."""

SMALL_MSGPACK_BYTES = MEMORY_FLOOR // (2 * MSGPACK_WORST_BYTES)
"""msgpack bodies up to this size are decoded unmeasured: at the worst they take half
of `MEMORY_FLOOR`, which every body may take."""

_VALUE_BYTES = 64
"""What one JSON value costs decoded at most, its slot in its parent included (a
short str is 49 bytes and up, a list 56, a dict 64, a float 24, a pointer 8)."""

_ENTRY_BYTES = 32
"""What one object member costs beyond its value (a dict's hash-table entry)."""

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def memory_budget(size: int) -> int:
    """The most bytes of decoded objects a body of ``size`` bytes may take."""
    return MEMORY_FLOOR + MEMORY_PER_BODY_BYTE * size


def _structure_cost(text: bytes) -> int:
    values = text.count(b",") + text.count(b"[") + text.count(b"{")
    return _VALUE_BYTES * (values + 1) + _ENTRY_BYTES * text.count(b":")


def json_memory_estimate(raw: bytes, budget: int) -> int:
    """An upper estimate of what ``raw`` (JSON) takes decoded, exact enough to compare
    with ``budget``.

    The structural characters are counted over the whole text first (a C-speed count
    that also counts those inside strings, so it can only overestimate); only when that
    count is over ``budget`` are strings cut out and the structure counted again.
    """
    cost = _structure_cost(raw) + len(raw)
    if cost <= budget:
        return cost
    return _structure_cost(_JSON_STRING.sub(b"", raw)) + len(raw)


def decode_body(raw: bytes, kind: str, max_items: int = 0) -> Any:
    """Decode a JSON or msgpack request body within its memory budget.

    Args:
        raw: the body (not empty).
        kind: ``"msgpack"`` or ``"json"``.
        max_items: msgpack arrays and maps may hold this many elements whatever the
            body's length (the route's own limit; otherwise one per 64 body bytes).

    Returns:
        The decoded value.

    Raises:
        HttpError: 400 when the body is not valid, nests too deeply, or would take
            more than `memory_budget` bytes decoded.
    """
    budget = memory_budget(len(raw))
    try:
        if kind == "msgpack":
            if len(raw) <= SMALL_MSGPACK_BYTES:
                return codec.unpack_wire(raw, max_bytes=len(raw))
            return codec.unpack_wire(
                raw, max_bytes=len(raw), max_memory=budget, max_items=max_items
            )
        estimate = json_memory_estimate(raw, budget)
        if estimate > budget:
            raise HttpError(
                400,
                "ValueError",
                f"the request body of {len(raw)} bytes holds too many small values for its "
                f"size: it would take about {estimate} bytes decoded, over the daemon's "
                f"limit of {budget}",
            )
        return json.loads(raw)
    except RecursionError:
        raise HttpError(
            400, "ValueError", "the request body cannot be decoded: it nests too deeply"
        ) from None
    except (ValueError, CorruptRecord) as exc:
        raise HttpError(400, "ValueError", f"the request body cannot be decoded: {exc}") from None
