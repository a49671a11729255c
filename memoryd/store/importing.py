"""The rules of an exact import (`StoreHandle.import_events`), shared by every backend.

Pure: the functions take the conversation's state and the events to import and
return what to write, or raise `ConflictError`; the backends read the state and
write the events (`lmdb_ops.import_events`, `redis_writes`), so an import means
the same on LMDB and on Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from memoryd.errors import ConflictError
from memoryd.events import Event, EventKind

__all__ = ["count_after", "same_event", "state_after", "to_write"]

_APPENDED = EventKind.APPENDED.value
_POPPED = EventKind.POPPED.value
_CLEARED = EventKind.CLEARED.value
_FORKED = EventKind.FORKED.value

Stored = Callable[[int, int], Mapping[int, Event]]
"""``stored(low, high)``: the stored events with versions ``low`` to ``high``, by version
(those deleted by a clear are missing)."""


def same_event(stored: Event, event: Event) -> bool:
    """Whether two events agree in version, kind, messages and data (not timestamp or key)."""
    return (
        stored.version == event.version
        and stored.kind == event.kind
        and list(stored.messages) == list(event.messages)
        and (None if stored.data is None else dict(stored.data))
        == (None if event.data is None else dict(event.data))
    )


def count_after(count: int, event: Event) -> int:
    """The message count after ``event``, as the other writes count it.

    appended +n, popped -1 (never below 0), cleared 0, forked n, memo/compacted unchanged.
    """
    kind = event.kind
    if kind == _APPENDED:
        return count + len(event.messages)
    if kind == _POPPED:
        return max(0, count - 1)
    if kind == _CLEARED:
        return 0
    if kind == _FORKED:
        return len(event.messages)
    return count


def state_after(new: Sequence[Event], *, first: int, count: int) -> tuple[int, int]:
    """The first live version and the message count once ``new`` is written."""
    for event in new:
        if event.kind == _CLEARED:
            first = event.version
        count = count_after(count, event)
    return first, count


def to_write(
    cid: str,
    events: Sequence[Event],
    *,
    current: int,
    first: int,
    count: int,
    stored: Stored,
) -> Sequence[Event]:
    """The events of an import still to be written, after checking all of them.

    ``events`` were checked by the handle (valid, versions increasing by one).
    Events at or below the current version must be stored and identical (those
    older than the last clear are deleted and cannot be compared: skipped); the
    others must continue at the current version + 1, or, when the conversation
    holds no messages, with a ``cleared`` marker at any later version.

    Args:
        cid: the conversation id (for the error messages).
        events: the events to import, oldest first.
        current: the conversation's version (0 if never written).
        first: its first live version (1 if never cleared).
        count: the messages it holds now.
        stored: reads the stored events of a version range; called only when
            some events are at or below ``current``.

    Returns:
        The events above ``current``, in order (empty: nothing to write).

    Raises:
        ConflictError: an event differs from the stored one, or the events do not
            continue the log.
    """
    skip = 0
    while skip < len(events) and events[skip].version <= current:
        skip += 1
    if skip:
        have_all = stored(events[0].version, events[skip - 1].version)
        for event in events[:skip]:
            if event.version < first:
                continue
            have = have_all.get(event.version)
            if have is None or not same_event(have, event):
                found = "nothing" if have is None else f"a {have.kind!r} event"
                raise ConflictError(
                    f"{cid!r} holds {found} at version {event.version} where the import has "
                    f"a different {event.kind!r} event; nothing was imported. Import into "
                    "another conversation id, or clear this one first",
                    expected=None,
                    actual=current,
                )
    new = events[skip:]
    if not new:
        return new
    head = new[0]
    if head.version != current + 1 and not (head.kind == _CLEARED and count == 0):
        raise ConflictError(
            f"the import continues {cid!r} at version {head.version} with a {head.kind!r} "
            f"event, but the conversation is at version {current}"
            + ("" if count == 0 else f" holding {count} messages")
            + "; only the next version, or a cleared marker on a conversation holding no "
            "messages, can continue it. Nothing was imported",
            expected=head.version - 1,
            actual=current,
        )
    return new
