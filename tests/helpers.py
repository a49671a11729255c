"""Helpers shared by the test suite (no store fakes live here)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

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


class Worker(threading.Thread):
    """A thread that records what its target returned or raised, for the test to re-raise."""

    def __init__(self, target: Callable[[], Any], name: str | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self._target_fn = target
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._target_fn()
        except BaseException as exc:
            self.error = exc

    def outcome(self, timeout: float = 30.0) -> Any:
        """Join the thread and return its result, re-raising whatever it raised."""
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} still running after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.result
