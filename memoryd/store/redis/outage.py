"""How a Redis store tells its log about an outage: once, not at every retry. Pure.

The batch writer tries again every few tens of milliseconds while Redis is unreachable
(`memoryd.store.redis.batch`); a warning at each try floods the log with hundreds of
lines a second of outage. An `Outage` says what to log instead: ``redis_unreachable``
at the first lost connection, ``redis_still_unreachable`` at most every
`REPEAT_S` while it lasts, and ``redis_reachable_again`` (how long, how many tries)
once a send goes through.
"""

from __future__ import annotations

import threading

__all__ = ["REPEAT_S", "Outage"]

REPEAT_S = 5.0
"""The least time between two warnings of one outage."""


class Outage:
    """The state of one store's connection to Redis (thread-safe).

    Args:
        repeat_s: The least time between two warnings of one outage.
    """

    def __init__(self, repeat_s: float = REPEAT_S) -> None:
        self.repeat_s = repeat_s
        self._lock = threading.Lock()
        self._since: float | None = None
        self._warned_at = 0.0
        self._tries = 0

    @property
    def ongoing(self) -> bool:
        """True between a lost connection and the next send that went through."""
        return self._since is not None

    def lost(self, now: float) -> str | None:
        """A connection was lost at ``now`` (monotonic seconds).

        Returns:
            The event to log as a warning, or None (said a moment ago).
        """
        with self._lock:
            self._tries += 1
            if self._since is None:
                self._since = self._warned_at = now
                return "redis_unreachable"
            if now - self._warned_at >= self.repeat_s:
                self._warned_at = now
                return "redis_still_unreachable"
            return None

    def reached(self, now: float) -> tuple[float, int] | None:
        """A send went through at ``now``.

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
