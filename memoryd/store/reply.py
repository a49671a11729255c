"""Reply: the one-shot answer slot a writer hands to its store actor with each write.

A write's caller blocks until the actor answers; with many writers that wait is
on the hot path of every append. ``pykka.ThreadingFuture`` builds on
``queue.Queue`` (a condition variable and a fresh waiter lock per wait); a reply
is answered exactly once, so one pre-acquired lock that the actor releases does
the same job with one lock operation on each side.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

__all__ = ["Reply", "answering", "at_end_of_answers"]

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


_answers = threading.local()


@contextlib.contextmanager
def answering() -> Iterator[None]:
    """Answer a batch's writers inside this block: the wake-ups their answers ask for
    with `at_end_of_answers` run once each, when the block ends (the actor's thread).

    An event loop waiting for twenty answers of one batch is then woken once for all
    of them, not once for each of the answers that happened to land before it ran.
    """
    if getattr(_answers, "pending", None) is not None:
        yield  # nested: the outer block runs them
        return
    pending: dict[int, Callable[[], object]] = {}
    _answers.pending = pending
    try:
        yield
    finally:
        _answers.pending = None
        for wake in pending.values():
            with contextlib.suppress(Exception):  # the waiter's side; never the actor's
                wake()


def at_end_of_answers(key: object, wake: Callable[[], object]) -> bool:
    """Inside `answering`, run ``wake`` once (per ``key``) at the block's end.

    Returns:
        True if it was put off; False outside `answering` (the caller wakes now).
    """
    pending: dict[int, Callable[[], object]] | None = getattr(_answers, "pending", None)
    if pending is None:
        return False
    pending.setdefault(id(key), wake)
    return True


class Reply:
    """Set once by the actor (`set` or `set_exception`); waited for by the caller.

    Args:
        notify: called once in the answering thread right after the answer, e.g. to
            wake an event loop with ``loop.call_soon_threadsafe``; whatever it raises
            is swallowed (the waiter is gone), so the actor is never disturbed.
    """

    __slots__ = ("_answered", "_error", "_notify", "_ready", "_value")

    def __init__(self, notify: Callable[[], object] | None = None) -> None:
        self._ready = threading.Lock()
        self._ready.acquire()
        self._answered = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._notify = notify

    def set(self, value: Any = None) -> None:
        """Answer with ``value``. Only the first answer counts (answers come from one thread)."""
        if not self._answered:
            self._answered = True
            self._value = value
            self._ready.release()
            self._wake()

    def set_exception(self, exc_info: ExcInfo | BaseException) -> None:
        """Answer with an error (an exception or a ``sys.exc_info()``-style tuple)."""
        if not self._answered:
            self._answered = True
            self._error = exc_info[1] if isinstance(exc_info, tuple) else exc_info
            self._ready.release()
            self._wake()

    def _wake(self) -> None:
        if self._notify is not None:
            with contextlib.suppress(Exception):  # e.g. a closed event loop: nobody waits
                self._notify()

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the answer; True once it is there."""
        if self._ready.acquire(timeout=max(timeout, 0.0)):
            self._ready.release()  # later waits return at once
            return True
        return False

    @property
    def answered(self) -> bool:
        """True once the actor answered."""
        return self._answered

    def result(self) -> Any:
        """The answer: the value, or the error raised. Call after `wait` returned True."""
        if self._error is not None:
            raise self._error
        return self._value
