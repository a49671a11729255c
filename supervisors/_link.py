"""The link between a supervisor and the child it starts, and the ready handshake.

A supervisor wraps a child's start function in `linked`; the first
``SupervisedActor.start()`` inside it takes the link (told of the child's exit) and a
`Starting` handshake that ``start()`` waits on until the child's ``init()`` finished.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervisors._exit import Exit

__all__ = [
    "AMBIENT_KEYS",
    "ExitListener",
    "Link",
    "Starting",
    "ambient",
    "linked",
    "wait_arg",
]

ExitListener = Callable[[str, "Exit", "threading.Thread | None"], None]


def wait_arg(timeout_s: float) -> float | None:
    """The ``timeout`` to give a wait of ``timeout_s`` seconds: None (no limit) for
    ``math.inf``, which the standard library's waits refuse (``OverflowError``).

    Args:
        timeout_s: Seconds, or ``math.inf``.

    Returns:
        ``timeout_s``, or None for ``math.inf``.
    """
    return None if math.isinf(timeout_s) else timeout_s


_links_lock = threading.Lock()
"""Guards every link's ``_finished`` and ``_waiter`` (held for a few instructions)."""


class Link:
    """A parent's hold on the one child started while the link is ambient."""

    __slots__ = ("_finished", "_waiter", "child_urn", "on_exit")

    def __init__(self, on_exit: ExitListener) -> None:
        self.on_exit = on_exit
        self.child_urn: str | None = None
        self._finished = False
        self._waiter: threading.Event | None = None  # made only for a parent that waits

    def finished(self) -> None:
        """The linked child has finished terminating (called once, on every exit path)."""
        with _links_lock:
            self._finished = True
            waiter = self._waiter
        if waiter is not None:
            waiter.set()

    def wait_finished(self, timeout_s: float) -> bool:
        """Wait until the linked child has finished terminating.

        Args:
            timeout_s: How long to wait (``math.inf``: without limit).

        Returns:
            True once it has; False if it had not within ``timeout_s``.
        """
        with _links_lock:
            if self._finished:
                return True
            if self._waiter is None:
                self._waiter = threading.Event()
            waiter = self._waiter
        return waiter.wait(wait_arg(timeout_s))


class Starting:
    """The ready handshake between ``start()`` and the new actor's ``init()``."""

    __slots__ = ("abandoned", "error", "link", "lock", "ready", "timeout_s", "urn")

    def __init__(self, link: Link | None, timeout_s: float = 0.0) -> None:
        self.link = link
        self.timeout_s = timeout_s
        self.urn: str | None = None
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.abandoned = False
        self.lock = threading.Lock()


ambient = threading.local()
"""What a start in this thread takes: its ``link``, its ``starting`` handshake and the
``start_timeout_s`` of the supervisor starting it."""
AMBIENT_KEYS = ("link", "starting", "start_timeout_s")


@contextmanager
def linked(on_exit: ExitListener, start_timeout_s: float | None = None) -> Iterator[Link]:
    """Link the next ``SupervisedActor`` started in this thread to ``on_exit``.

    Supervisors wrap a child's start function in this; the first
    ``SupervisedActor.start()`` inside it is the linked child.

    Args:
        on_exit: called as ``on_exit(actor_urn, exit, thread)`` from the child's
            thread once the child has finished terminating.
        start_timeout_s: how long ``start()`` waits for the child's ``init()``
            (default: the actor class's ``start_timeout_s``).

    Yields:
        The link; ``link.child_urn`` names the child that took it.
    """
    link = Link(on_exit)
    previous = getattr(ambient, "link", None), getattr(ambient, "start_timeout_s", None)
    ambient.link, ambient.start_timeout_s = link, start_timeout_s
    try:
        yield link
    finally:
        ambient.link, ambient.start_timeout_s = previous
