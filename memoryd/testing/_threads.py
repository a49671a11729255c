"""A thread whose outcome the test collects: the value returned, or the exception re-raised."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Worker"]


class Worker(threading.Thread):
    """A daemon thread that keeps what its target returned or raised.

    Args:
        target: called once, with no arguments, in the new thread.
        name: the thread's name, shown when it does not finish in time.
    """

    def __init__(self, target: Callable[[], Any], name: str | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self._call = target
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        """Call the target and keep its result or its exception.

        Runs in the worker thread.
        """
        try:
            self.result = self._call()
        except BaseException as exc:
            self.error = exc

    def outcome(self, timeout: float = 30.0) -> Any:
        """Join the thread and return its result, re-raising whatever it raised.

        Args:
            timeout: seconds to wait for the thread to finish.

        Returns:
            What the target returned.

        Raises:
            AssertionError: the thread is still running after ``timeout`` seconds.
        """
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} still running after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.result
