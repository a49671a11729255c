"""An add's body encoded straight from the caller's messages: each checked once, not copied.

`StoreHandle.add` checks a batch by copying every message into plain values
(`memoryd.messages.check`) and measuring each copy as compact JSON. A handle on the
daemon sends the batch at once, so the encoding is the snapshot: `encode_add` walks each
message once, without copying it, and encodes the body from the caller's own objects.

It answers only when it can prove the general check would take the batch exactly as
it is: every message a plain dict whose values are exact JSON types (no subclass, no
other mapping), nothing the check would normalise (``tool_calls: None`` or ``[]``, an
assistant message without ``content``), and a body small enough that no message can
pass the size limit (see `JSON_PER_MSGPACK_BYTE`). Anything else (a bad message, a
lone surrogate, a large body) gets None, and the caller takes the general path, which
raises the documented error or copies what needs normalising. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memoryd import codec
from memoryd._json_values import MAX_NESTING_DEPTH
from memoryd._message_checks import ROLES, check_structure
from memoryd.errors import InvalidMessage

__all__ = ["JSON_PER_MSGPACK_BYTE", "encode_add", "is_plain_message"]

JSON_PER_MSGPACK_BYTE = 6
"""A JSON value's compact encoding is shorter than this many bytes per byte of its msgpack.

Each msgpack value takes at least one byte, and its JSON plus one separator byte takes
at most this many per byte: a str of n UTF-8 bytes (n + 1 or more in msgpack) is at
most 6n + 2 in JSON (``\\u00XX`` escapes of control characters, quotes), ``false``
plus a comma is 6 bytes for msgpack's 1, a fixint 3 plus 1 for 1, a float at most
24 plus 1 for 9, an int at most 20 plus 1 for 2 or more, and an array or map adds
its brackets (2 for a header of at least 1 byte) while each element or key and value
brings its own separator. So a body whose length times this is within the limit holds
no message over it.
"""

_TEXT_ROLES = ROLES - {"tool"}
"""The roles of a message that a role and a str content make whole (a tool message
also needs its call's id)."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1


def _plain(value: Any, depth: int) -> bool:
    """True when ``value`` (at nesting level ``depth``) holds only exact JSON types that
    `memoryd._json_values.copy_json` would copy unchanged."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is int:
        in_range: bool = _INT_MIN <= value <= _INT_MAX
        return in_range
    if kind is float:
        return math.isfinite(value)
    if depth > MAX_NESTING_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) is not str and not _plain(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:
            if type(item) is not str and not _plain(item, depth + 1):
                break
        else:
            return True
    return False


def is_plain_message(message: Any) -> bool:
    """True when the general check takes ``message`` as it is: valid, and nothing to change.

    Args:
        message: a candidate message.

    Returns:
        False for anything the check would refuse or normalise (the caller then runs it).
    """
    if type(message) is not dict:
        return False
    if len(message) == 2 and type(message.get("content")) is str:  # a role and a text
        role = message.get("role")
        return type(role) is str and role in _TEXT_ROLES
    if "content" not in message or not _plain(message, 1):
        return False
    if "tool_calls" in message:
        calls = message["tool_calls"]
        if calls is None or calls == []:  # the check drops them
            return False
    try:
        check_structure(message)  # reads only: neither normalisation above applies
    except InvalidMessage:
        return False
    return True


def encode_add(
    messages: Sequence[Any], idempotency_key: str, max_message_bytes: int
) -> bytes | None:
    """The msgpack body of an add of ``messages``, or None where the general path must run.

    Args:
        messages: a list or tuple of messages, as the caller gave them.
        idempotency_key: the add's key (already checked).
        max_message_bytes: the store's limit on one message's compact JSON.

    Returns:
        The body (messages, key and no expected version), or None when a message is not
        plainly valid, cannot be encoded, or the body is too large to prove every
        message within the limit.
    """
    if not messages:
        return None
    for message in messages:
        if not is_plain_message(message):
            return None
    body = {"messages": messages, "idempotency_key": idempotency_key, "expected_version": None}
    try:
        content = codec.pack_wire(body, trusted=True)
    except ValueError:  # a lone surrogate: the general check names it
        return None
    if len(content) * JSON_PER_MSGPACK_BYTE > max_message_bytes:
        return None
    return content
