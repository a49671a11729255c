"""Restart intensity: how many restarts a supervisor tolerates in a sliding window.

This follows OTP's ``supervisor:add_restart/1`` exactly: the restart being
attempted is counted *before* it happens, restarts at least ``now - period_s``
old stay in the window (the edge is inclusive), and the supervisor gives up as
soon as the window holds more than ``max_restarts`` entries.
Pure: the caller passes the time in.
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["RestartIntensity"]


class RestartIntensity:
    """A sliding window of restart times.

    Args:
        max_restarts: restarts tolerated inside one window (0 = none).
        period_s: the window's length in seconds (> 0).

    Raises:
        ValueError: if ``max_restarts`` is negative or ``period_s`` is not positive.
    """

    __slots__ = ("_restarts", "max_restarts", "period_s")

    def __init__(self, max_restarts: int, period_s: float) -> None:
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts must be an int >= 0, not {max_restarts!r}")
        if (
            isinstance(period_s, bool)
            or not isinstance(period_s, int | float)
            or not math.isfinite(period_s)
            or period_s <= 0
        ):
            raise ValueError(f"period_s must be a finite number > 0, not {period_s!r}")
        self.max_restarts = max_restarts
        self.period_s = float(period_s)
        self._restarts: deque[float] = deque()

    def record(self, now: float) -> bool:
        """Count one restart at time ``now``.

        Args:
            now: the current time on the supervisor's (monotonic) clock.

        Returns:
            True if the restart may proceed, False if the intensity is exceeded
            and the supervisor must give up.
        """
        threshold = now - self.period_s
        while self._restarts and self._restarts[0] < threshold:
            self._restarts.popleft()
        self._restarts.append(now)
        return len(self._restarts) <= self.max_restarts

    @property
    def in_window(self) -> int:
        """Restarts counted in the current window (as of the last ``record``)."""
        return len(self._restarts)
