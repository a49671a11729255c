"""Inbox: a ``SupervisedActor``'s message queue, which a caller may borrow.

While the inbox is borrowed the actor takes no message from it, so code that runs in
the borrowing caller's thread has the actor to itself; messages queue up meanwhile
(`Inbox.control_pending` tells the borrower that a kill or a shutdown waits) and the
actor takes them once the inbox is given back.

A caller can also borrow an idle actor (``borrow(idle=True)``: it handles no message
and has none waiting) and run one of its methods in the caller's thread, as the actor
would have run it next: supervisors' handles do that instead of a round trip through
the supervisor's thread.

An actor whose thread starts lazily (``SupervisedActor.lazy_thread``) is held by its
inbox until its thread starts (``lazy``): the inbox tells it when a message arrives, so
it starts its thread then, and until then ``shutdown_actor`` stops it in the caller's
thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import pykka
from pykka import messages as pykka_messages
from pykka.messages import ProxyCall

__all__ = ["CONTROL", "NUDGE", "Inbox"]

CONTROL = frozenset({("_sv_kill",), ("_sv_shutdown",)})
"""The attribute paths of the control messages that end a ``SupervisedActor``."""

NUDGE = ProxyCall(attr_path=("_sv_nudge",), args=(), kwargs={})
"""A message that does nothing: it wakes a ``SupervisedActor``'s thread that waits for a
message, so an actor stopped from another thread ends its loop (no sender reaches it)."""


def _control_in(messages: Any) -> bool:
    """True when an inbox's queued envelopes hold a kill or a shutdown."""
    return any(
        isinstance(envelope.message, ProxyCall) and envelope.message.attr_path in CONTROL
        for envelope in messages
    )


def _refuse(envelope: Any, why: str) -> None:
    """Answer a message the stopped actor will never handle."""
    if envelope.reply_to is None:
        return
    if isinstance(envelope.message, pykka_messages._ActorStop):
        envelope.reply_to.set(None)
    else:
        error = pykka.ActorDeadError(why)
        envelope.reply_to.set_exception(exc_info=(pykka.ActorDeadError, error, None))


class Inbox:
    """A Pykka inbox (``put``, ``get``, ``empty``, as a ``queue.Queue``) that a caller
    may borrow. Unbounded: ``put`` never blocks.

    Attributes:
        mutex: Guards the inbox.
        queue: The messages waiting, oldest first (read under ``mutex``).
        borrowed: True while a caller holds the inbox.
        busy: True while the actor handles a message it took (from the moment it takes
            one until it asks for the next), and before it asks for its first.
        owner: A weak reference to the actor, set by a ``SupervisedActor``, or None.
        closed: Why the actor stopped, once it has (then nothing is queued: a message
            put is refused at once), or None.
        lazy: A ``SupervisedActor`` with ``lazy_thread`` that has not started its thread
            (the inbox keeps it alive, and calls its ``_wake()`` after every message
            put), or None.
    """

    __slots__ = (
        "__weakref__",
        "_arrived",
        "_ending",
        "borrowed",
        "busy",
        "closed",
        "lazy",
        "mutex",
        "owner",
        "queue",
    )

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self._arrived: threading.Condition | None = None  # made when the actor first waits
        self._ending = False  # the actor's thread waits in wait_given_back
        self.queue: deque[Any] = deque()
        self.borrowed = False
        self.busy = True
        self.closed: str | None = None
        self.owner: Callable[[], object] | None = None
        self.lazy: Any = None

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """Queue a message, then tell a ``lazy`` actor.

        Args:
            item: The message (a Pykka envelope).
            block: Ignored (the inbox is unbounded), as ``timeout``.
            timeout: Ignored.
        """
        with self.mutex:
            refused = self.closed
            if refused is None:
                self.queue.append(item)
                if self._arrived is not None:
                    self._arrived.notify()
        if refused is not None:  # it passed the sender's is_alive() just before the end
            _refuse(item, refused)
            return
        lazy = self.lazy
        if lazy is not None:
            lazy._wake()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """Take the next message, waiting while the inbox is empty or borrowed.

        Args:
            block: Wait for a message (else raise ``queue.Empty`` at once).
            timeout: Wait at most this long (None: without limit).

        Raises:
            queue.Empty: No message came in time.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.mutex:
            self.busy = False
            while self.borrowed or not self.queue:
                left = None if deadline is None else deadline - time.monotonic()
                if not block or (left is not None and left <= 0):
                    raise queue.Empty
                if self._arrived is None:
                    self._arrived = threading.Condition(self.mutex)
                self._arrived.wait(left)
            self.busy = True
            return self.queue.popleft()

    def close(self, why: str) -> None:
        """The actor has stopped: answer every message waiting, and every later one at
        once, as Pykka answers those it finds when an actor's loop ends (a stop with
        None, an ``ask`` with ``pykka.ActorDeadError``), so no sender waits for nothing.

        Args:
            why: The ``ActorDeadError``'s message.
        """
        with self.mutex:
            self.closed = why
            waiting, self.queue = list(self.queue), deque()
        for envelope in waiting:
            _refuse(envelope, why)

    def empty(self) -> bool:
        """True when no message waits."""
        with self.mutex:
            return not self.queue

    def qsize(self) -> int:
        """How many messages wait."""
        with self.mutex:
            return len(self.queue)

    def borrow(self, *, idle: bool = False) -> bool:
        """Borrow the inbox, unless it is borrowed or a kill or shutdown waits in it.

        Args:
            idle: Borrow only an idle actor: one that handles no message and has none
                waiting, so what the caller runs on it is what the actor would have
                run next.

        Returns:
            True when the caller now holds it.
        """
        with self.mutex:
            queue = self.queue
            if self.borrowed or (idle and self.busy) or (queue and (idle or _control_in(queue))):
                return False
            self.borrowed = True
            return True

    def give_back(self) -> None:
        """End a borrow: the actor takes its messages again."""
        with self.mutex:
            self.borrowed = False
            # a message waits, or the actor's end does; an actor waiting for a message
            # that has none is not woken for nothing (a borrowed call's hot path)
            if self._arrived is not None and (self.queue or self._ending):
                self._arrived.notify()

    def wait_given_back(self) -> None:
        """Wait until no caller holds the inbox: the actor's thread, before it
        terminates, lets the code a caller runs on it in the caller's thread end first."""
        with self.mutex:
            self._ending = True
            try:
                while self.borrowed:
                    if self._arrived is None:
                        self._arrived = threading.Condition(self.mutex)
                    self._arrived.wait()
            finally:
                self._ending = False

    def control_pending(self) -> bool:
        """True when a kill or a shutdown waits in the inbox."""
        if not self.queue:  # the usual answer, without the mutex: a message put just
            return False  # after this look is one that came a moment later
        with self.mutex:
            return _control_in(self.queue)
