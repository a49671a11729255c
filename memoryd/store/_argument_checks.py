"""The argument checks of store calls, and the limits they enforce. Pure.

`memoryd.store.requests` re-exports them: the read methods of `StoreHandle` use them,
and so do the write request builders (`memoryd.store._write_requests`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from memoryd._json_values import compact_json_bytes, copy_json_or_raise
from memoryd._shown import described
from memoryd.messages import BOOKKEEPING_PREFIX

__all__ = [
    "HIDDEN_PREFIX",
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "MAX_IMPORT_VERSION",
    "MAX_VERSION",
    "RECORD_KINDS",
    "check_after",
    "check_data",
    "check_idempotency_key",
    "check_optional_count",
    "check_optional_version",
    "check_prefix",
    "check_timeout",
    "hidden",
]

RECORD_KINDS = frozenset({"compacted", "memo"})

MAX_IDEMPOTENCY_KEY_BYTES = 256
"""The longest idempotency key, in UTF-8 bytes, on every backend (an LMDB key stops at 511
bytes, and a key of its index holds one)."""

MAX_IMPORT_VERSION = 1 << 53
"""The highest version an import may write: far above any real log, and low enough
that the conversation can still be written after it (and that every JSON reader
holds it exactly)."""
"""The event kinds `StoreHandle.record` writes: they leave the history unchanged."""

HIDDEN_PREFIX = BOOKKEEPING_PREFIX
"""Conversations whose id starts with this are memoryd's own bookkeeping (run journals):
`StoreHandle.conversations` lists them only when asked for by this prefix, and
`StoreHandle.tail` (so exports and followers) never shows them; no turn is written
there (`memoryd.messages.validate_turn_conversation_id`)."""


def hidden(cid: str, prefix: str = "") -> bool:
    """True when ``cid`` is hidden from a listing by ``prefix``. Pure.

    Args:
        cid: A conversation id.
        prefix: The listing's prefix ("" for a plain listing or the change feed).

    Returns:
        True for an id in `HIDDEN_PREFIX`'s space unless ``prefix`` reaches into it.
    """
    return cid.startswith(HIDDEN_PREFIX) and not prefix.startswith(HIDDEN_PREFIX)


# --------------------------------------------------------------------------- argument checks


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MAX_VERSION = 2**64 - 1
"""The highest version a store can hold (a key's 8 bytes)."""


def check_optional_count(value: Any, name: str) -> int | None:
    """``None`` or an int >= 0: a count (``limit``; a huge one means all).

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if value is None:
        return None
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an int >= 0 or None, not {described(value)}")
    return int(value)


def check_optional_version(value: Any, name: str) -> int | None:
    """``None`` or a version: an int from 0 to 2**64-1 (``expected_version``,
    ``at_version``).

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value <= MAX_VERSION:
        raise ValueError(f"{name} must be an int from 0 to 2**64-1 or None, not {described(value)}")
    return int(value)


def check_after(value: Any, name: str = "after") -> int:
    """An int from 0 to 2**64-2: a version or position to read after (versions and
    positions end at 2**64-1, so nothing comes after that).

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if not _is_int(value):
        raise ValueError(f"{name} must be an int >= 0, not {described(value)}")
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, not {value}")
    if value >= MAX_VERSION:
        raise ValueError(
            f"{name} must be at most 2**64-2 (positions end there), not {described(value)}"
        )
    return int(value)


def check_timeout(value: Any, name: str = "timeout") -> float:
    """A finite number of seconds >= 0.

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def check_idempotency_key(value: Any) -> str | None:
    """``None`` or a non-empty str of at most 256 UTF-8 bytes.

    Raises:
        ValueError: Anything else.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"idempotency_key must be a non-empty str or None, not {value!r}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("idempotency_key cannot be encoded as UTF-8") from None
    if size > MAX_IDEMPOTENCY_KEY_BYTES:
        raise ValueError(
            f"idempotency_key is {size} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES}"
        )
    return value


def check_prefix(value: Any, name: str) -> str:
    """A str that can be encoded as UTF-8 (a ``prefix`` or an ``after`` id).

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, not {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} cannot be encoded as UTF-8") from None
    return value


def check_data(data: Any, max_bytes: int, what: str = "data") -> dict[str, Any] | None:
    """A plain copy of an event's ``data``: None, or a mapping of JSON values.

    The JSON-value rules are those of messages (`memoryd._json_values`).

    Args:
        data: The candidate.
        max_bytes: The largest compact-JSON size in UTF-8 bytes.
        what: Its name in error messages.

    Returns:
        The copy, or None.

    Raises:
        ValueError: ``data`` is not None or a mapping, holds a value that is not
            JSON-compatible (the error names its path), or is larger than ``max_bytes``.
    """
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} must be a mapping or None, not {type(data).__name__}")
    plain: dict[str, Any] = copy_json_or_raise(data, what, error=ValueError)
    size = len(compact_json_bytes(plain, what, error=ValueError))
    if size > max_bytes:
        raise ValueError(f"{what} is {size} bytes as compact JSON; the limit is {max_bytes}")
    return plain
