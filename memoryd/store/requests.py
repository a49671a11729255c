"""Write requests: the values a handle sends to its store, their builders and every argument check.

Pure. Each builder (`add`, `record`, `import_events`, `clear`, `pop`, `fork`) checks
a caller's arguments and returns the request value, or raises the documented error
naming the problem (nothing is sent, so nothing is written); `result` turns a store's
raw answer into what the matching `StoreHandle` method returns. The sync methods of
`StoreHandle` and the awaitable paths (`StoreHandle.submit`, `AsyncStore`, the daemon)
share them, and the read methods use the argument checks (`check_after`, ...).

Messages are checked by `memoryd.messages.check`: a `CheckedMessages` batch is taken
as it is (only its sizes are compared with the store's limit), a plain list is fully
checked and copied. An event's ``data`` follows the same JSON-value rules as messages
(`memoryd._json_values`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memoryd import messages as msgs
from memoryd._json_values import compact_json_bytes, copy_json_or_raise
from memoryd.errors import InvalidMessage
from memoryd.events import Event

__all__ = [
    "HIDDEN_PREFIX",
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "MAX_IMPORT_VERSION",
    "RECORD_KINDS",
    "Add",
    "Clear",
    "Fork",
    "Import",
    "Pop",
    "Record",
    "WriteRequest",
    "add",
    "check_after",
    "check_data",
    "check_idempotency_key",
    "check_optional_count",
    "check_prefix",
    "check_timeout",
    "clear",
    "fork",
    "hidden",
    "import_events",
    "pop",
    "record",
    "result",
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

HIDDEN_PREFIX = "memoryd.run/"
"""Conversations whose id starts with this are memoryd's own bookkeeping (run journals):
`StoreHandle.conversations` lists them only when asked for by this prefix, and
`StoreHandle.tail` (so exports and followers) never shows them."""


def hidden(cid: str, prefix: str = "") -> bool:
    """True when ``cid`` is hidden from a listing by ``prefix``. Pure.

    Args:
        cid: A conversation id.
        prefix: The listing's prefix ("" for a plain listing or the change feed).

    Returns:
        True for an id in `HIDDEN_PREFIX`'s space unless ``prefix`` reaches into it.
    """
    return cid.startswith(HIDDEN_PREFIX) and not prefix.startswith(HIDDEN_PREFIX)


# --------------------------------------------------------------------------- request values


@dataclass(frozen=True, kw_only=True, slots=True)
class Add:
    """Append ``messages`` to ``cid`` as one event (and clear ``then_clear`` with it)."""

    cid: str
    messages: tuple[dict[str, Any], ...]
    idempotency_key: str | None = None
    expected_version: int | None = None
    then_clear: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Clear:
    """Delete ``cid``'s messages, keeping a ``cleared`` marker."""

    cid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Pop:
    """Remove ``cid``'s last message."""

    cid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Fork:
    """Start ``target`` as a copy of ``source`` (at ``at_version``)."""

    source: str
    target: str
    at_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Record:
    """Append a ``memo`` or ``compacted`` event to ``cid``; its history is unchanged."""

    cid: str
    kind: str
    messages: tuple[dict[str, Any], ...] = ()
    data: dict[str, Any] | None = None
    idempotency_key: str | None = None
    expected_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Import:
    """Write ``events`` to ``cid`` as they are (versions, timestamps, keys, data kept).

    Events already in the log (version <= the conversation's version) must be
    identical and are skipped; the rest continue the log.
    """

    cid: str
    events: tuple[Event, ...]


WriteRequest = Add | Clear | Pop | Fork | Record | Import


# --------------------------------------------------------------------------- argument checks


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_optional_count(value: Any, name: str) -> int | None:
    """``None`` or an int >= 0: a count (``limit``) or a version (``expected_version``,
    ``at_version``).

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if value is None:
        return None
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an int >= 0 or None, not {value!r}")
    return int(value)


def check_after(value: Any, name: str = "after") -> int:
    """An int >= 0 (a version or position to read after).

    Raises:
        ValueError: Anything else, naming ``name``.
    """
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, not {value!r}")
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


def _checked_messages(messages: Any, max_bytes: int) -> tuple[dict[str, Any], ...]:
    """A possibly empty list or tuple of messages, checked (`msgs.check`)."""
    if not isinstance(messages, list | tuple):
        raise InvalidMessage(
            f"messages must be a list or tuple of message dicts, got {type(messages).__name__}"
        )
    return msgs.check(messages, max_bytes=max_bytes) if messages else ()


def _checked_event(event: Any, index: int, max_bytes: int) -> Event:
    """A normalised copy of one event to import, or an error naming its index."""
    if not isinstance(event, Event):
        raise ValueError(f"events[{index}] must be an Event, not {type(event).__name__}")
    try:
        checked = _checked_messages(event.messages, max_bytes)
    except InvalidMessage as exc:
        raise InvalidMessage(f"events[{index}] (version {event.version}): {exc}") from None
    try:
        key = check_idempotency_key(event.idempotency_key)
        data = check_data(event.data, max_bytes, f"events[{index}].data")
    except ValueError as exc:
        raise ValueError(f"events[{index}] (version {event.version}): {exc}") from None
    return Event(
        version=event.version,
        kind=event.kind,
        messages=checked,
        timestamp=float(event.timestamp),
        idempotency_key=key,
        data=data,
    )


# --------------------------------------------------------------------------- builders


def add(
    cid: str,
    messages: Sequence[dict[str, Any]],
    *,
    idempotency_key: str | None,
    expected_version: int | None,
    max_bytes: int,
    then_clear: str | None = None,
) -> Add:
    """The request of `StoreHandle.add` (its checks and errors).

    ``messages`` may be a `CheckedMessages`: it is sent as it is.

    Raises:
        ValueError: ``then_clear`` names ``cid`` itself.
    """
    cid = msgs.validate_conversation_id(cid)
    if then_clear is not None:
        then_clear = msgs.validate_conversation_id(then_clear)
        if then_clear == cid:
            raise ValueError(f"then_clear names the conversation added to ({cid!r}); name another")
    return Add(
        cid=cid,
        messages=msgs.check(messages, max_bytes=max_bytes),
        idempotency_key=check_idempotency_key(idempotency_key),
        expected_version=check_optional_count(expected_version, "expected_version"),
        then_clear=then_clear,
    )


def record(
    cid: str,
    kind: str,
    *,
    messages: Sequence[dict[str, Any]],
    data: Mapping[str, Any] | None,
    idempotency_key: str | None,
    expected_version: int | None,
    max_bytes: int,
) -> Record:
    """The request of `StoreHandle.record` (its checks and errors)."""
    cid = msgs.validate_conversation_id(cid)
    if not isinstance(kind, str) or kind not in RECORD_KINDS:
        raise ValueError(
            f"record() writes only the kinds {sorted(RECORD_KINDS)}, not {kind!r}; "
            "use add, clear, pop or fork for the others"
        )
    return Record(
        cid=cid,
        kind=kind,
        messages=_checked_messages(messages, max_bytes),
        data=check_data(data, max_bytes),
        idempotency_key=check_idempotency_key(idempotency_key),
        expected_version=check_optional_count(expected_version, "expected_version"),
    )


def import_events(cid: str, events: Sequence[Event], *, max_bytes: int) -> Import:
    """The request of `StoreHandle.import_events` (its checks and errors)."""
    cid = msgs.validate_conversation_id(cid)
    if not isinstance(events, Sequence) or isinstance(events, str | bytes):
        raise ValueError(f"events must be a sequence of Event, not {type(events).__name__}")
    if not events:
        raise ValueError("events is empty; give at least one event to import")
    checked: list[Event] = []
    for index, event in enumerate(events):
        if checked and isinstance(event, Event) and event.version != checked[-1].version + 1:
            raise ValueError(
                f"events[{index}] has version {event.version} after version "
                f"{checked[-1].version}; an event log's versions increase by one"
            )
        checked.append(_checked_event(event, index, max_bytes))
    last = checked[-1].version
    if last > MAX_IMPORT_VERSION:
        raise ValueError(
            f"events[{len(checked) - 1}] has version {last}; an import writes versions "
            f"up to 2**53 ({MAX_IMPORT_VERSION}), so the conversation can be written after it"
        )
    return Import(cid=cid, events=tuple(checked))


def clear(cid: str) -> Clear:
    """The request of `StoreHandle.clear`."""
    return Clear(cid=msgs.validate_conversation_id(cid))


def pop(cid: str) -> Pop:
    """The request of `StoreHandle.pop`."""
    return Pop(cid=msgs.validate_conversation_id(cid))


def fork(source: str, target: str, *, at_version: int | None) -> Fork:
    """The request of `StoreHandle.fork` (its checks and errors)."""
    source = msgs.validate_conversation_id(source)
    target = msgs.validate_conversation_id(target)
    if source == target:
        raise ValueError(f"cannot fork {source!r} into itself; pick another target id")
    return Fork(
        source=source, target=target, at_version=check_optional_count(at_version, "at_version")
    )


def result(request: WriteRequest, answer: Any) -> Any:
    """What the `StoreHandle` method of ``request`` returns, from the store's raw answer."""
    if isinstance(request, Clear):
        return None
    if isinstance(request, Pop):
        return None if answer is None else dict(answer)
    return int(answer)
