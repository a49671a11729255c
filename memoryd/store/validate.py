"""Argument checks every store handle runs in the caller's thread, before any actor sees them."""

from __future__ import annotations

import math
from typing import Any

from memoryd.store.lmdb.keys import MAX_IDEMPOTENCY_KEY_BYTES

__all__ = [
    "check_after",
    "check_idempotency_key",
    "check_optional_count",
    "check_prefix",
    "check_timeout",
    "check_version_arg",
]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_optional_count(value: Any, name: str) -> int | None:
    """``None`` or an int >= 0: a count (``limit``) or, as `check_version_arg`, a version
    (``expected_version``, ``at_version``)."""
    if value is None:
        return None
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an int >= 0 or None, not {value!r}")
    return int(value)


check_version_arg = check_optional_count
"""``None`` or an int >= 0 (``expected_version``, ``at_version``); one check with
`check_optional_count`."""


def check_after(value: Any, name: str = "after") -> int:
    """An int >= 0 (a version or position to read after)."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, not {value!r}")
    return int(value)


def check_timeout(value: Any, name: str = "timeout") -> float:
    """A finite number of seconds >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def check_idempotency_key(value: Any) -> str | None:
    """``None`` or a non-empty str of at most 256 UTF-8 bytes."""
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
    """A str that can be encoded as UTF-8."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, not {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} cannot be encoded as UTF-8") from None
    return value
