"""Await a write to its outcome even when the awaiting task is cancelled meanwhile.

`memoryd.integrations.openai_agents` awaits every store write through `Outlasting`, as
the SDK's own sessions do with a task of their own per write. Pure asyncio: no I/O.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Generator
from typing import Any, Generic, TypeVar, cast

__all__ = ["Outlasting"]

_T = TypeVar("_T")


def _settle(proxy: asyncio.Future[None], _awaited: object) -> None:
    if not proxy.done():
        proxy.set_result(None)


class Outlasting(Generic[_T]):
    """Await a store write to its outcome even if the awaiting task is cancelled meanwhile.

    A write handed to its store commits whether or not its awaiter is still there;
    like the SDK's own sessions, the caller learns of its cancellation only once the
    write has ended, so a cancelled ``add_items`` never leaves a write running behind
    the next call. The write's coroutine runs in the awaiting task itself (a task of
    its own per call, and ``asyncio.wait`` on it, cost more than the rest of the
    adapter's work): each future the write awaits is awaited through a proxy, so a
    cancellation cancels the proxy, never the write's own future, and is raised once
    the write returned or failed.
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
            while not future.done():
                proxy: asyncio.Future[None] = future.get_loop().create_future()
                future.add_done_callback(functools.partial(_settle, proxy))
                try:
                    yield from proxy
                except asyncio.CancelledError as exc:
                    cancelled = cancelled or exc
