"""An agent instance's inbox, which a caller may borrow to run a call in its own thread.

While the inbox is borrowed the instance's actor takes no message from it, so a run in
the caller's thread has the instance to itself; messages queue up meanwhile (a kill or
a shutdown is seen there by the run's step hook, which stops the run at its next step
boundary) and the actor takes them once the inbox is given back.
"""

from __future__ import annotations

import queue
import time
from typing import Any

from pykka.messages import ProxyCall

__all__ = ["Inbox"]

_CONTROL = {("_sv_kill",), ("_sv_shutdown",)}
"""The control messages of `supervisors.SupervisedActor` that end an incarnation."""


def _control_in(messages: Any) -> bool:
    """True when an inbox's queued envelopes hold a kill or a shutdown."""
    return any(
        isinstance(envelope.message, ProxyCall) and envelope.message.attr_path in _CONTROL
        for envelope in messages
    )


class Inbox(queue.Queue[Any]):
    """A Pykka inbox (a ``queue.Queue``) that a caller may borrow."""

    def __init__(self) -> None:
        super().__init__()
        self.borrowed = False

    def borrow(self) -> bool:
        """Borrow the inbox, unless it is borrowed or a kill or shutdown waits in it.

        Returns:
            True when the caller now holds it.
        """
        with self.mutex:
            if self.borrowed or _control_in(self.queue):
                return False
            self.borrowed = True
            return True

    def give_back(self) -> None:
        """End a borrow: the actor takes its messages again."""
        with self.mutex:
            self.borrowed = False
            if self.queue:
                self.not_empty.notify()

    def control_pending(self) -> bool:
        """True when a kill or a shutdown waits in the inbox."""
        with self.mutex:
            return _control_in(self.queue)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """Take the next message, waiting while the inbox is empty or borrowed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.not_empty:
            while self.borrowed or not self._qsize():
                left = None if deadline is None else deadline - time.monotonic()
                if not block or (left is not None and left <= 0):
                    raise queue.Empty
                self.not_empty.wait(left)
            item = self._get()
            self.not_full.notify()
            return item
