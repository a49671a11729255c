"""Restart backoff: a crash-looping child is restarted later and later, never given up on.

A child whose spec carries a `Backoff` keeps its own restart window (the
supervisor's ``max_restarts`` in ``period_s``). Restarts inside it happen at once,
as without a backoff. A restart past it is delayed instead of counted toward the
supervisor's intensity: by ``initial_s``, then ``factor`` times longer for each
further restart past the window, up to ``max_s``; once the window holds no more
than ``max_restarts`` restarts again, restarts are immediate again. So a child
whose resource fails for a while (a flaky disk) is retried with growing pauses,
its siblings and its supervisor live on, and it comes back at most ``max_s``
after the fault clears. Pure: the caller passes the time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from supervisors._errors import ChildSpecError
from supervisors._intensity import RestartIntensity

__all__ = ["Backoff", "BackoffWindow"]


def _check(value: object, what: str, minimum: float) -> None:
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= minimum
        and value > 0
    )
    if not ok:
        raise ChildSpecError(
            f"backoff: {what} must be a finite number >= {minimum:g}, not {value!r}"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Backoff:
    """How long a child past its restart window waits before each restart.

    Attributes:
        initial_s: the first delay.
        max_s: the longest delay.
        factor: how much longer each further delay is (>= 1).

    Raises:
        ChildSpecError: a field out of range.
    """

    initial_s: float = 0.05
    max_s: float = 2.0
    factor: float = 2.0

    def __post_init__(self) -> None:
        _check(self.initial_s, "initial_s", 0.0)
        _check(self.max_s, "max_s", self.initial_s)
        _check(self.factor, "factor", 1.0)

    def delay(self, over: int) -> float:
        """The delay of the ``over``-th consecutive restart past the window (1 = first)."""
        if over <= 0:
            return 0.0
        exponent = min(over - 1, 64)  # past this the cap has long been reached
        return float(min(self.max_s, self.initial_s * self.factor**exponent))


class BackoffWindow:
    """One child's restart window and how far past it it is.

    Args:
        backoff: the delays.
        max_restarts: immediate restarts tolerated within ``period_s``.
        period_s: the window's length.
    """

    __slots__ = ("_over", "_window", "backoff")

    def __init__(self, backoff: Backoff, max_restarts: int, period_s: float) -> None:
        self.backoff = backoff
        self._window = RestartIntensity(max_restarts, period_s)
        self._over = 0

    def next_delay(self, now: float) -> float:
        """Count a restart at ``now``; returns how long to wait before it (0: at once)."""
        if self._window.record(now):
            self._over = 0
            return 0.0
        self._over += 1
        return self.backoff.delay(self._over)

    @property
    def over(self) -> int:
        """Consecutive restarts past the window (0 while restarts are immediate)."""
        return self._over
