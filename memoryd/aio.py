"""An asyncio face for every store: `AsyncStore` never blocks the event loop.

Writes go through `StoreHandle.submit`: a store served by a store actor (LMDB,
ephemeral, Redis) answers the event loop directly, with no worker thread; reads
and the other stores run the matching `StoreHandle` call in a worker thread with
`asyncio.to_thread`. Either way a slow fsync, a full group commit or a daemon round
trip waits off the loop while other tasks run::

    store = memoryd.AsyncStore(memoryd.LmdbStore.start("data/chat"))
    await store.add("session-1", [messages.user("hi")])
    await store.get("session-1", limit=50)

The handle's own deadlines still apply (every call into a store actor has one), so
an awaited call ends with `WriteTimeout` or `StoreUnavailable` rather than hanging.
Cancelling the awaiting task does not cancel a write that was already handed to
the store: it may still commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.events import Change, Event
from memoryd.store import requests
from memoryd.store.handle import StoreHandle

__all__ = ["AsyncStore"]


class AsyncStore:
    """Awaitable versions of every `StoreHandle` method; none blocks the event loop.

    Args:
        handle: any store handle (`LmdbStore`, `EphemeralStore`, `RedisStore`,
            `RemoteStore`). Arguments, results and errors are exactly the handle's.
    """

    __slots__ = ("handle",)

    def __init__(self, handle: StoreHandle) -> None:
        if not isinstance(handle, StoreHandle):
            raise TypeError(
                f"AsyncStore wraps a StoreHandle (LmdbStore, EphemeralStore, RemoteStore, ...), "
                f"not {type(handle).__name__}"
            )
        self.handle = handle

    @property
    def name(self) -> str:
        """The wrapped store's registered name."""
        return self.handle.name

    async def add(
        self,
        cid: str,
        messages: Sequence[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
        then_clear: str | None = None,
    ) -> int:
        """`StoreHandle.add`, awaited; returns the new version."""
        return await self.handle.submit(
            requests.add(
                cid,
                messages,
                idempotency_key=idempotency_key,
                expected_version=expected_version,
                then_clear=then_clear,
                max_bytes=self.handle.max_message_bytes,
            )
        )

    async def record(
        self,
        cid: str,
        kind: str,
        *,
        messages: Sequence[dict[str, Any]] = (),
        data: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
        supersede: bool = False,
    ) -> int:
        """`StoreHandle.record`, awaited; returns the new version."""
        return await self.handle.submit(
            requests.record(
                cid,
                kind,
                messages=messages,
                data=data,
                idempotency_key=idempotency_key,
                expected_version=expected_version,
                max_bytes=self.handle.max_message_bytes,
                supersede=supersede,
            )
        )

    async def import_events(self, cid: str, events: Sequence[Event]) -> int:
        """`StoreHandle.import_events`, awaited; returns the conversation's version."""
        return await self.handle.submit(
            requests.import_events(cid, events, max_bytes=self.handle.max_message_bytes)
        )

    async def clear(self, cid: str) -> None:
        """`StoreHandle.clear`, awaited."""
        await self.handle.submit(requests.clear(cid))

    async def pop(self, cid: str) -> dict[str, Any] | None:
        """`StoreHandle.pop`, awaited: the removed last message, or None."""
        return await self.handle.submit(requests.pop(cid))

    async def fork(self, source: str, target: str, *, at_version: int | None = None) -> int:
        """`StoreHandle.fork`, awaited; returns ``target``'s new version."""
        return await self.handle.submit(requests.fork(source, target, at_version=at_version))

    async def get(
        self,
        cid: str,
        *,
        limit: int | None = None,
        at_version: int | None = None,
        system: bool = False,
    ) -> list[dict[str, Any]]:
        """`StoreHandle.get` off the event loop: the history, chronological (with
        ``system``, the system messages before the last ``limit`` too)."""
        return await asyncio.to_thread(
            self.handle.get, cid, limit=limit, at_version=at_version, system=system
        )

    async def version(self, cid: str) -> int:
        """`StoreHandle.version` off the event loop."""
        return await asyncio.to_thread(self.handle.version, cid)

    async def events(self, cid: str, *, after: int = 0, limit: int | None = None) -> list[Event]:
        """`StoreHandle.events` off the event loop."""
        return await asyncio.to_thread(self.handle.events, cid, after=after, limit=limit)

    async def conversations(
        self,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int | None = None,
        include_empty: bool = False,
    ) -> list[str]:
        """`StoreHandle.conversations` off the event loop."""
        return await asyncio.to_thread(
            self.handle.conversations,
            prefix=prefix,
            after=after,
            limit=limit,
            include_empty=include_empty,
        )

    async def tail(
        self, *, after: int = 0, limit: int = 1000, timeout: float = 0.0
    ) -> list[Change]:
        """`StoreHandle.tail` off the event loop.

        A ``timeout`` waits in a thread of its own, never in one of the loop's worker
        threads (many long-polls would hold them all, and every other call waiting for
        one, for up to ``timeout``). It waits in slices of `TAIL_SLICE_S`: a cancelled
        call's thread ends within one, and, a daemon thread, never holds up the end of
        ``asyncio.run``.
        """
        if requests.check_timeout(timeout) == 0:  # a bad timeout: the handle's ValueError
            return await asyncio.to_thread(self.handle.tail, after=after, limit=limit)
        return await _long_poll(self.handle, after, limit, timeout)

    async def stats(self) -> dict[str, Any]:
        """`StoreHandle.stats` off the event loop."""
        return await asyncio.to_thread(self.handle.stats)

    async def stop(self) -> None:
        """`StoreHandle.stop` off the event loop."""
        await asyncio.to_thread(self.handle.stop)

    def __repr__(self) -> str:
        return f"<AsyncStore {self.handle!r}>"


TAIL_SLICE_S = 5.0
"""The longest a long-polling `AsyncStore.tail` waits before it looks whether its caller
was cancelled. The thread is a daemon thread, so a cancelled call never holds up the end
of ``asyncio.run``; the slice only bounds how long its thread lingers, and is long enough
that a `RemoteStore`'s long poll is a request every 5 s, not one a few times a second."""


async def _long_poll(handle: StoreHandle, after: int, limit: int, timeout: float) -> list[Change]:
    """``handle.tail(timeout=timeout)`` in a thread of its own, in slices; the thread
    stops at the end of its slice once the awaiting task is cancelled."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[list[Change]] = loop.create_future()
    cancelled = threading.Event()

    def deliver(changes: list[Change] | None, error: BaseException | None) -> None:
        """Runs on the loop."""
        if answer.done():
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(changes or [])

    def poll() -> None:
        """Runs in the long-poll's thread; never raises into it."""
        changes: list[Change] | None = None
        error: BaseException | None = None
        deadline = time.monotonic() + timeout
        try:
            while not cancelled.is_set():
                remaining = deadline - time.monotonic()
                changes = handle.tail(
                    after=after, limit=limit, timeout=max(0.0, min(remaining, TAIL_SLICE_S))
                )
                if changes or remaining <= TAIL_SLICE_S:
                    break
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        if cancelled.is_set():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits it
            loop.call_soon_threadsafe(deliver, changes, error)

    context = contextvars.copy_context()  # as asyncio.to_thread does: logs keep their binds
    threading.Thread(target=context.run, args=(poll,), name="memoryd-aio-tail", daemon=True).start()
    try:
        return await answer
    finally:
        cancelled.set()
