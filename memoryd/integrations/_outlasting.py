"""Await a write to its outcome even when the awaiting task is cancelled meanwhile.

`memoryd.integrations.openai_agents` awaits every store write through `Outlasting`, as
the SDK's own sessions do with a task of their own per write. Pure asyncio: no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar, cast

__all__ = ["Outlasting"]

_T = TypeVar("_T")


class _Held:
    """A future a write awaits, as the awaiting task sees it: it refuses to be cancelled.

    A task cancelled while it waits on a future cancels that future, and learns of its
    own cancellation when the future then completes. Handed this stand-in, the task's
    cancellation is refused, so the task remembers it and raises it into the awaiting
    coroutine once the write's own future is done: the write's outcome is never lost,
    and the task wakes from the write's future itself, with no go-between future and
    no loop iteration of its own. It offers what a task asks of a future it awaits
    (``get_loop``, ``add_done_callback``, ``cancel``) and nothing else.
    """

    __slots__ = ("_asyncio_future_blocking", "_future")

    def __init__(self, future: asyncio.Future[Any]) -> None:
        self._future = future
        self._asyncio_future_blocking = True

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The write's future's loop (a task checks it is its own)."""
        return self._future.get_loop()

    def add_done_callback(
        self, fn: Callable[[asyncio.Future[Any]], object], *, context: Any = None
    ) -> None:
        """Call ``fn`` with the write's future once it is done."""
        self._future.add_done_callback(fn, context=context)

    def cancel(self, msg: Any = None) -> bool:
        """Refuse: the write goes on, and its task raises its cancellation afterwards."""
        return False

    def __repr__(self) -> str:
        return f"<held {self._future!r}>"


class Outlasting(Generic[_T]):
    """Await a store write to its outcome even if the awaiting task is cancelled meanwhile.

    A write handed to its store commits whether or not its awaiter is still there;
    like the SDK's own sessions, the caller learns of its cancellation only once the
    write has ended, so a cancelled ``add_items`` never leaves a write running behind
    the next call. The write's coroutine runs in the awaiting task itself (a task of
    its own per call, and ``asyncio.wait`` on it, cost more than the rest of the
    adapter's work): each future the write awaits is handed to the task as a `_Held`
    one, which refuses cancellation, so a cancellation never reaches the write's own
    future and is raised once the write returned or failed.
    """

    __slots__ = ("_write",)

    def __init__(self, write: Awaitable[_T]) -> None:
        self._write = write

    def __await__(self) -> Generator[Any, Any, _T]:
        steps = self._write.__await__()
        cancelled: asyncio.CancelledError | None = None
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                awaited = steps.send(sent) if thrown is None else steps.throw(thrown)
            except StopIteration as done:
                if cancelled is not None:
                    raise cancelled from None
                result: _T = done.value
                return result
            except BaseException:
                if cancelled is not None:
                    raise cancelled from None
                raise
            sent = thrown = None
            if getattr(awaited, "_asyncio_future_blocking", None) is not True:
                try:  # a bare yield (sleep(0)), or anything the task itself must judge
                    sent = yield awaited
                except asyncio.CancelledError as exc:
                    cancelled = cancelled or exc
                except BaseException as exc:  # handed on to the write
                    thrown = exc
                continue
            future = cast("asyncio.Future[Any]", awaited)
            future._asyncio_future_blocking = False  # taken, as a task takes it
            held = _Held(future)
            while not future.done():
                held._asyncio_future_blocking = True
                try:
                    yield held
                except BaseException as exc:
                    if not future.done():
                        raise  # the coroutine is being closed
                    if isinstance(exc, asyncio.CancelledError) and not future.cancelled():
                        cancelled = cancelled or exc  # the task's own, held back till now
                    # else the write's future's error: the write reads it below
