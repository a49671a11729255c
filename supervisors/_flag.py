"""StopFlag: an actor's stopped flag, without the machinery of a `threading.Event`.

Pykka gives every actor a `threading.Event` (``actor_stopped``) and asks only
``set()`` and ``is_set()`` of it; an Event carries a Condition, a lock, a deque and
two bound methods, all kept alive as long as the actor. A flag is one slot; the
Event a waiter needs is made the first time somebody waits.
"""

from __future__ import annotations

import threading

__all__ = ["StopFlag"]

_making = threading.Lock()


class StopFlag:
    """A set-once flag with `threading.Event`'s ``set``, ``is_set`` and ``wait``."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        """True once `set` was called."""
        return self._set

    def set(self) -> None:
        """Set the flag and wake whoever waits."""
        self._set = True  # written before the event is read; `wait` does the reverse
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the flag is set, or ``timeout`` seconds pass.

        Returns:
            True when the flag is set.
        """
        if self._set:
            return True
        with _making:
            if self._event is None:
                self._event = threading.Event()
        event = self._event
        if self._set:  # set between the first look and the event's making
            event.set()
        return event.wait(timeout)
