"""Event records and the pure reducer that turns an event log into a history.

Every change to a conversation is one `Event`; the conversation's version is the version
of its last event (0 for a conversation never written). `apply` folds one event into a
history and `replay` folds a whole log. The global change feed (``tail``) yields `Change`
values: an event plus its global ``position`` and its ``conversation_id``.

What each kind carries:

============  =============================================  ==========================
kind          messages                                       effect on the history
============  =============================================  ==========================
appended      the messages added, at least one               extended by them
cleared       none                                           emptied
popped        the removed message (at most one)              last message dropped
forked        the source's history (maybe none)              replaced by them
compacted     summary messages, if any; ``data`` says which  unchanged
              versions they replace
memo          none or any; ``data`` holds the memo           unchanged
============  =============================================  ==========================

``data`` is a JSON-compatible mapping (str keys; str, int, float, bool, None, list and
dict values) so the codec can store it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "KINDS",
    "SCHEMA_VERSION",
    "Change",
    "Event",
    "EventKind",
    "apply",
    "replay",
    "walk_back",
]

SCHEMA_VERSION = 1
"""The version of the stored event record layout written by this code."""


class EventKind(StrEnum):
    """The kinds of event; each member equals its lower-case str value."""

    APPENDED = "appended"
    CLEARED = "cleared"
    POPPED = "popped"
    FORKED = "forked"
    COMPACTED = "compacted"
    MEMO = "memo"


KINDS = frozenset(kind.value for kind in EventKind)
"""Every valid event kind, as plain str."""

# plain str constants for the hot loops (an enum attribute lookup costs more)
_APPENDED, _CLEARED, _POPPED, _FORKED = "appended", "cleared", "popped", "forked"
_WITH_MESSAGES = frozenset({_APPENDED, _FORKED})


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


def _apply_in_place(history: list[dict[str, Any]], event: Event) -> None:
    """Fold one event into ``history`` in place (the shared core of `apply` and `replay`)."""
    kind = event.kind
    if kind == EventKind.APPENDED:
        history.extend(event.messages)
    elif kind == EventKind.CLEARED:
        history.clear()
    elif kind == EventKind.POPPED:
        if history:
            history.pop()
    elif kind == EventKind.FORKED:
        history[:] = event.messages
    # compacted and memo leave the messages as they are.


def apply(history: list[dict[str, Any]], event: Event) -> list[dict[str, Any]]:
    """Fold one event into a history.

    The result is a new list; ``history`` is not changed. The message dicts are shared
    with ``history`` and ``event`` rather than copied: copy them before handing them to
    code that may mutate them.

    Args:
        history: The messages before the event, oldest first.
        event: The event to apply.

    Returns:
        The messages after the event. A popped event on an empty history leaves it empty.
    """
    result = list(history)
    _apply_in_place(result, event)
    return result


def replay(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Fold a conversation's log, oldest first, into its history.

    Runs in time linear in the number of messages. To get the history as it was at
    version ``n``, pass only the events up to ``n``.

    Args:
        events: The events in log order.

    Returns:
        The resulting messages (shared with the events, not copied).

    Raises:
        ValueError: The versions do not strictly increase.
    """
    history: list[dict[str, Any]] = []
    previous = 0
    for event in events:
        if event.version <= previous:
            raise ValueError(
                f"event version {event.version} follows version {previous}; "
                "replay needs the log in increasing version order"
            )
        previous = event.version
        _apply_in_place(history, event)
    return history


def walk_back(
    newest_first: Iterable[tuple[str, Sequence[dict[str, Any]] | None]], limit: int | None
) -> list[dict[str, Any]]:
    """The history from a log walked backwards from the wanted version: `replay` in reverse.

    Reading the last N messages this way touches only the events that hold them.
    Popped events hide one earlier message each; a ``cleared`` event ends the walk,
    a ``forked`` one ends it after its messages; ``memo`` and ``compacted`` leave the
    history alone. Both stores read their histories with it; pass a lazy iterable to
    stop reading as soon as ``limit`` messages are found.

    Args:
        newest_first: ``(kind, messages)`` pairs, newest first; the messages may be
            None for a ``popped`` event.
        limit: keep only the last ``limit`` messages (None: all).

    Returns:
        The messages, oldest first.
    """
    out: list[dict[str, Any]] = []
    if limit == 0:
        return out
    skip = 0
    for kind, messages in newest_first:
        if kind == _POPPED:
            skip += 1
            continue
        if kind == _CLEARED:
            break
        if messages is not None and kind in _WITH_MESSAGES:
            if not skip and (limit is None or len(out) + len(messages) <= limit):
                out.extend(reversed(messages))  # the whole event (the common case)
            else:
                kept = len(messages) - skip  # the last `skip` messages were popped
                skip = max(0, -kept)
                if kept > 0:
                    need = kept if limit is None else min(kept, limit - len(out))
                    out.extend(reversed(messages[kept - need : kept]))
            if kind == _FORKED or (limit is not None and len(out) >= limit):
                break
    out.reverse()
    return out
