"""The event records, `Event` and `Change`: frozen dataclasses that check their fields.

`memoryd.events` is where users and the rest of memoryd name them; it loads this module
on first use, so code that never builds or checks a record (a daemon client that only
reads messages) does not load `dataclasses`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memoryd._event_kinds import KINDS, EventKind

__all__ = ["Change", "Event"]


def _check_fields(value: Event | Change) -> tuple[str, tuple[dict[str, Any], ...]]:
    """Check the fields shared by `Event` and `Change`.

    Args:
        value: The event or change being built.

    Returns:
        The kind as a plain str and the messages as a tuple.

    Raises:
        ValueError: A field has the wrong type or value.
    """
    version: Any = value.version
    kind: Any = value.kind
    messages: Any = value.messages
    timestamp: Any = value.timestamp
    idempotency_key: Any = value.idempotency_key
    data: Any = value.data
    if type(version) is not int or version < 1:
        raise ValueError(f"event version must be an int >= 1, got {version!r}")
    if not isinstance(kind, str) or kind not in KINDS:
        raise ValueError(f"event kind must be one of {sorted(KINDS)}, got {kind!r}")
    kind = str(kind)
    if not isinstance(messages, tuple | list):
        raise ValueError(f"event messages must be a tuple of dicts, got {type(messages).__name__}")
    messages = tuple(messages)
    if not all(isinstance(message, dict) for message in messages):
        raise ValueError("event messages must all be dicts")
    if kind == EventKind.APPENDED and not messages:
        raise ValueError("an appended event needs at least one message")
    if kind == EventKind.CLEARED and messages:
        raise ValueError("a cleared event carries no messages")
    if kind == EventKind.POPPED and len(messages) > 1:
        raise ValueError("a popped event carries at most the one message it removed")
    if (
        isinstance(timestamp, bool)
        or not isinstance(timestamp, int | float)
        or not math.isfinite(timestamp)
    ):
        raise ValueError(f"event timestamp must be a finite number, got {timestamp!r}")
    if idempotency_key is not None and not isinstance(idempotency_key, str):
        raise ValueError(
            f"event idempotency_key must be a str or None, got {type(idempotency_key).__name__}"
        )
    if data is not None and not isinstance(data, Mapping):
        raise ValueError(f"event data must be a mapping or None, got {type(data).__name__}")
    return kind, messages


def _shared_fields(value: Event | Change) -> dict[str, Any]:
    """The fields `Event` and `Change` share, by name, to build one from the other."""
    return {
        "version": value.version,
        "kind": value.kind,
        "messages": value.messages,
        "timestamp": value.timestamp,
        "idempotency_key": value.idempotency_key,
        "data": value.data,
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One change to one conversation, as stored in its log.

    A list passed as ``messages`` is stored as a tuple, and an `EventKind` as a plain str.

    Attributes:
        version: The conversation's version after this event (1 for its first event).
        kind: One of `KINDS`.
        messages: The messages the event carries (see the module table).
        timestamp: When it was committed, in seconds since the epoch.
        idempotency_key: The key the writer gave, or None.
        data: Kind-specific JSON-compatible data (fork source, memo, compaction range).

    Raises:
        ValueError: A field has the wrong type or value.
    """

    version: int
    kind: str
    messages: tuple[dict[str, Any], ...]
    timestamp: float
    idempotency_key: str | None = None
    data: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        kind, messages = _check_fields(self)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "messages", messages)


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One entry of the global change feed: an event, where it is, and whose it is.

    Attributes:
        position: The global commit position (1, 2, 3, ... in commit order).
        conversation_id: The conversation the event belongs to.
        version: As in `Event`.
        kind: As in `Event`.
        messages: As in `Event`.
        timestamp: As in `Event`.
        idempotency_key: As in `Event`.
        data: As in `Event`.

    Raises:
        ValueError: A field has the wrong type or value.
    """

    # The fields are those of `Event` after the two of the feed: a change is not an
    # event (build.py tells them apart), so it repeats the declarations, not the checks.
    position: int
    conversation_id: str
    version: int
    kind: str
    messages: tuple[dict[str, Any], ...]
    timestamp: float
    idempotency_key: str | None = None
    data: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if type(self.position) is not int or self.position < 1:
            raise ValueError(f"change position must be an int >= 1, got {self.position!r}")
        if not isinstance(self.conversation_id, str) or not self.conversation_id:
            raise ValueError(
                f"change conversation_id must be a non-empty str, got {self.conversation_id!r}"
            )
        kind, messages = _check_fields(self)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "messages", messages)

    @classmethod
    def from_event(cls, event: Event, *, position: int, conversation_id: str) -> Change:
        """Wrap an event with its place in the global feed.

        Args:
            event: The event.
            position: Its global commit position.
            conversation_id: The conversation it belongs to.

        Returns:
            The change.

        Raises:
            ValueError: ``position`` or ``conversation_id`` is invalid.
        """
        return cls(position=position, conversation_id=conversation_id, **_shared_fields(event))

    @property
    def event(self) -> Event:
        """The change as a plain `Event`."""
        return Event(**_shared_fields(self))
