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

`Event` and `Change` are loaded on their first use (from `memoryd._event_records`), so a
program that never builds or checks a record does not load `dataclasses`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memoryd._event_kinds import KINDS, SCHEMA_VERSION, EventKind
from memoryd._lazy import lazy_names

if TYPE_CHECKING:
    from memoryd._event_records import Change, Event

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

_RECORDS = frozenset({"Change", "Event"})
"""The names defined in `memoryd._event_records`, loaded on first use (`__getattr__`)."""


__getattr__ = lazy_names(globals(), __name__, "memoryd._event_records", _RECORDS)


# plain str constants for the hot loops (an enum attribute lookup costs more)
_APPENDED, _CLEARED, _POPPED, _FORKED = "appended", "cleared", "popped", "forked"
_WITH_MESSAGES = frozenset({_APPENDED, _FORKED})


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
