"""How something retried in a loop tells its log about an outage: once, not at every
try. Pure.

A Redis store's batch writer tries again every few tens of milliseconds while Redis is
unreachable (`memoryd.store.redis.batch`), and an agent system's reaper every tick
while its store is away (`memoryd.agents.placement`); a warning at each try floods the
log with hundreds of lines a second of outage. An `Outage` says what to log instead:
its ``first`` event at the first failure, its ``again`` event at most every `REPEAT_S`
while it lasts, and, once a try goes through, how long it lasted and how many tries
failed (the caller logs its own "back again" event with them).
"""

from __future__ import annotations

import threading

__all__ = ["REPEAT_S", "Outage"]

REPEAT_S = 5.0
"""The least time between two warnings of one outage."""


class Outage:
    """The state of one thing that fails and is tried again (thread-safe).

    Args:
        first: The event to log at the first failure of an outage.
        again: The event to log while it lasts, at most every ``repeat_s``.
        repeat_s: The least time between two warnings of one outage.
    """

    def __init__(self, first: str, again: str, *, repeat_s: float = REPEAT_S) -> None:
        self.first = first
        self.again = again
        self.repeat_s = repeat_s
        self._lock = threading.Lock()
        self._since: float | None = None
        self._warned_at = 0.0
        self._tries = 0

    @property
    def ongoing(self) -> bool:
        """True between a failure and the next try that went through."""
        return self._since is not None

    def lost(self, now: float) -> str | None:
        """A try failed at ``now`` (monotonic seconds).

        Returns:
            The event to log as a warning, or None (said a moment ago).
        """
        with self._lock:
            self._tries += 1
            if self._since is None:
                self._since = self._warned_at = now
                return self.first
            if now - self._warned_at >= self.repeat_s:
                self._warned_at = now
                return self.again
            return None

    def reached(self, now: float) -> tuple[float, int] | None:
        """A try went through at ``now``.

        Returns:
            ``(seconds down, tries)`` when this ends an outage, else None.
        """
        if self._since is None:  # the usual case: no lock
            return None
        with self._lock:
            if self._since is None:
                return None
            ended = (now - self._since, self._tries)
            self._since, self._tries = None, 0
            return ended
