"""The system-message index: where a conversation's system messages are in its history.

A window sends every system message of a conversation and only the last messages of
the rest (`memoryd.safe_window`). To read that without the whole log, every store keeps,
beside each conversation, its live system (and developer) messages by *ordinal*: the
message's index in the current history. Ordinals are stable because a history only
changes at its end: an append adds ordinals ``count .. count + n - 1``, a pop removes
ordinal ``count - 1``, and a clear or a fork starts again from 0.

Pure: a `Fold` takes the state before a write and the events the write adds, and says
which entries to drop and which to add; `with_system` cuts a full history the same way
a store's indexed read does. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memoryd.events import EventKind
from memoryd.messages import is_system

__all__ = ["Fold", "with_system"]

Message = dict[str, Any]

_APPENDED = EventKind.APPENDED.value
_POPPED = EventKind.POPPED.value
_CLEARED = EventKind.CLEARED.value
_FORKED = EventKind.FORKED.value


def with_system(history: Sequence[Message], limit: int | None) -> list[Message]:
    """The last ``limit`` messages of ``history``, after every system message before them.

    What ``StoreHandle.get(cid, limit=limit, system=True)`` returns, computed from the
    full history (the fallback of a conversation without an index, and of ``at_version``).

    Args:
        history: the whole history, oldest first.
        limit: how many of the last messages to take (None: all of them).

    Returns:
        A new list: the system messages before the tail, in order, then the tail.
    """
    if limit is None:
        return list(history)
    cut = max(0, len(history) - limit)
    return [m for m in history[:cut] if is_system(m)] + list(history[cut:])


class Fold:
    """The index change of one write: entries from ``floor`` on are dropped, ``added`` put.

    Start it from the conversation's message count before the write (its index is
    complete), or `rebuilt` from its full history (a conversation written before the
    index existed), then `apply` each event the write adds, oldest first.

    Args:
        count: the messages the conversation holds before the write.
    """

    __slots__ = ("added", "count", "floor", "reset", "start")

    def __init__(self, count: int) -> None:
        self.start = count
        self.count = count
        self.floor = count
        """Stored entries with an ordinal at or above this are dropped."""
        self.added: list[tuple[int, Message]] = []
        """Entries to put: (ordinal, system message), ordinals increasing."""
        self.reset = False
        """True when every stored entry is dropped (``floor`` is 0)."""

    @classmethod
    def rebuilt(cls, history: Sequence[Message]) -> Fold:
        """A fold that replaces whatever is stored with the index of ``history``."""
        fold = cls(len(history))
        fold.floor = 0
        fold.reset = True
        fold.added = [(i, m) for i, m in enumerate(history) if is_system(m)]
        return fold

    def apply(self, kind: str, messages: Iterable[Message]) -> None:
        """Account for one event of the write (``memo`` and ``compacted`` change nothing)."""
        if kind == _APPENDED:
            start = self.count
            for offset, message in enumerate(messages):
                if is_system(message):
                    self.added.append((start + offset, message))
                self.count += 1
        elif kind == _POPPED:
            if self.count > 0:
                self.count -= 1
                self.floor = min(self.floor, self.count)
                self.added = [entry for entry in self.added if entry[0] < self.count]
        elif kind in (_CLEARED, _FORKED):
            self.count = 0
            self.floor = 0
            self.reset = True
            self.added = []
            if kind == _FORKED:
                self.apply(_APPENDED, messages)

    @property
    def changes(self) -> bool:
        """True when the write changes the index."""
        return bool(self.added) or self.floor < self.start or self.reset
