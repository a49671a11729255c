"""Helpers shared by the test suite (no store fakes live here)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from memoryd.testing._threads import Worker

__all__ = ["Worker", "wait_until"]

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 2.0,
    *,
    interval: float = 0.005,
    message: str | None = None,
) -> T:
    """Poll ``predicate`` until it returns a truthy value or ``timeout`` seconds pass.

    Args:
        predicate: called repeatedly; its first truthy result is returned.
        timeout: the deadline, in seconds from the call.
        interval: pause between polls.
        message: what to say when the deadline passes.

    Returns:
        The first truthy value the predicate returned.

    Raises:
        AssertionError: the predicate stayed falsy until the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(message or f"condition not met within {timeout} s: {predicate!r}")
        time.sleep(interval)
