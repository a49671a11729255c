"""ActorStoreHandle: the write path shared by every backend served by a store actor.

Writes are put into the store actor's inbox as a `Submission` with a `Reply`, so
concurrent writers share one commit; the handle waits for the answer with a
deadline, finds a restarted actor by its registered name, and sends again only a
write that was surely never attempted. Reads are each backend's own.

An event loop's writes go through its `memoryd.store.loop_link.LoopLink`: no
thread in between, the answers to a committed batch wake the loop once.

A handle is built from its store's `StoreSpec` (``spec.handle()``); a backend's
``start`` builds the config and calls `memoryd.store.lookup.start` with its
`Backend` record, and ``stop`` goes through the same table.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Generator
from typing import Any, ClassVar

import pykka

from memoryd._deadline import until
from memoryd.errors import NotWritten, StoreUnavailable, WriteTimeout
from memoryd.store import lookup, requests
from memoryd.store.actor import Submission, submit
from memoryd.store.config import StoreConfig
from memoryd.store.handle import PendingWrite, StoreHandle
from memoryd.store.loop_link import POLL_S, LoopReply, link_of
from memoryd.store.reply import Reply
from memoryd.store.requests import WriteRequest
from memoryd.store.spec import StoreSpec
from supervisors import whereis

__all__ = ["ActorStoreHandle"]


class ActorStoreHandle(StoreHandle):
    """A handle on a store served by a supervised store actor, addressed by name.

    Args:
        spec: the store's spec (its backend, name, limits and deadline).

    Raises:
        TypeError: the spec's config is not the backend's (``config_type``).
    """

    config_type: ClassVar[type[StoreConfig]] = StoreConfig
    """The config class this handle's backend needs; a subclass names its own."""

    def __init__(self, spec: StoreSpec[Any]) -> None:
        if not isinstance(spec.config, self.config_type):
            raise TypeError(
                f"{type(self).__name__} needs a {self.config_type.__name__}, "
                f"not {type(spec.config).__name__}"
            )
        self.spec = spec
        self.name = spec.config.name
        self.max_message_bytes = spec.config.max_message_bytes
        self.call_timeout_s = spec.config.call_timeout_s

    @property
    def config(self) -> StoreConfig:
        """The store's configuration."""
        return self.spec.config

    @property
    def kind(self) -> str:
        """The store's backend kind (``stats()["kind"]``): ``"lmdb"``, ``"redis"``, ..."""
        return self.spec.backend.kind

    # -- plumbing -------------------------------------------------------------------

    def refuses_writes(self) -> bool:
        """The engine's own hint (`StoreHandle.refuses_writes`), read without a round
        trip; False while the store is not running."""
        engine = lookup.engine(self.name)
        return engine is not None and engine.refuses_writes()

    def _unavailable(self, what: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"store {self.name!r} {what}; start it with {type(self).__name__}.start(...)"
        )

    def _check_started(self) -> None:
        if lookup.spec(self.name) is None:
            raise self._unavailable("is not running")

    def _engine(self, deadline: float) -> Any:
        """The store's current engine; waits while the store restarts.

        Raises:
            StoreUnavailable: the store is not running, or did not come back in time.
        """
        while True:
            engine = lookup.engine(self.name)
            if engine is not None and not engine.closed:
                return engine
            self._check_started()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._unavailable(
                    f"did not come back within {self.call_timeout_s:g} s (restarting?)"
                )
            lookup.wait_for_engine(self.name, min(remaining, POLL_S))

    def _refuse(self, request: WriteRequest) -> None:
        """Raise if this backend cannot perform ``request`` (nothing is sent then)."""

    def _write(self, request: WriteRequest) -> Any:
        self._refuse(request)
        return self._write_until(request, until(self.call_timeout_s))

    def _write_until(
        self,
        request: WriteRequest,
        deadline: float,
        posted: tuple[pykka.ActorRef[Any], Reply] | None = None,
    ) -> Any:
        """Send the write (unless it is ``posted`` already) and wait for its answer,
        sending it again while it surely was never attempted.

        ``deadline`` bounds reaching the store (a caller's deadline may make it sooner
        than the store's: nothing is sent past it). A write once sent is waited for up
        to the store's own deadline: cut sooner, a healthy write would end with its
        outcome unknown."""
        answer_by: float | None = None  # from the first send: one store deadline in all
        while True:
            ref, reply = posted or self._post(request, deadline, Reply())
            posted = None
            if answer_by is None:
                answer_by = time.monotonic() + self.call_timeout_s
            try:
                return self._await(ref, reply, answer_by)
            except (pykka.ActorDeadError, NotWritten):
                if time.monotonic() >= deadline:
                    raise self._unavailable("stopped before the write") from None
                continue  # never attempted: safe to send again

    def _post(
        self, request: WriteRequest, deadline: float, reply: Reply
    ) -> tuple[pykka.ActorRef[Any], Reply]:
        """Put the write into the store actor's inbox; waits while the store restarts.

        Raises:
            StoreUnavailable: the store is not running, or did not come back in time.
        """
        while True:
            ref = whereis(self.name)
            if ref is None:
                self._engine(deadline)  # waits for the restart, or raises
                continue
            if submit(ref, Submission(((request, reply),), threading.get_ident())):
                return ref, reply
            # nothing was sent: look the actor up again

    def begin(self, request: WriteRequest) -> PendingWrite:
        """Put the write into the store actor's inbox and return; see `StoreHandle.begin`.

        Its reply joins its batch's wake-ups in turn (`answer_in_turn`) only once
        ``result()`` waits: a writer still busy elsewhere must not hold up the
        waiters woken after it. The call's deadline counts from that wait: the
        caller's own work in between (an LLM call) does not eat into it.
        """
        try:
            self._refuse(request)
            posted = self._post(request, until(self.call_timeout_s), Reply(in_turn=False))
        except Exception as exc:  # nothing was sent: result() raises it
            return PendingWrite.failed(request, exc)

        def wait() -> Any:
            posted[1].join_turns()
            return self._write_until(request, until(self.call_timeout_s), posted)

        return PendingWrite(request, wait)

    def _await(self, ref: pykka.ActorRef[Any], reply: Reply, deadline: float) -> Any:
        """Wait for the write's answer.

        A submission that an actor never handled is dropped silently when the
        actor dies, so the wait is sliced: an unanswered reply whose actor is
        dead was never attempted (processed writes are answered or handed back
        before the actor stops), and the caller may send it again.
        """
        try:
            while not reply.wait(min(deadline - time.monotonic(), POLL_S)):
                try:
                    self._after_slice(ref, deadline)
                except (NotWritten, WriteTimeout):
                    if reply.wait(0.0):
                        break  # answered meanwhile: the answer counts
                    raise
        except BaseException:
            reply.abandon()  # the waiters answered after this one are still woken
            raise
        return reply.result()

    def _after_slice(self, ref: pykka.ActorRef[Any], deadline: float) -> None:
        """A slice passed without an answer: raise if none can come in time."""
        if not ref.is_alive():
            raise NotWritten(f"store {self.name!r} stopped before the write")
        if time.monotonic() >= deadline:
            raise WriteTimeout(
                f"store {self.name!r} did not confirm the write within "
                f"{self.call_timeout_s:g} s; its outcome is unknown: retry with the "
                "same idempotency_key"
            )

    async def _write_async(self, request: WriteRequest) -> Any:
        """The write path of an event loop: the actor's answer wakes the loop itself.

        The common case costs no thread: the request goes to the actor with a reply
        that completes a future on the loop when answered (`LoopLink`). Anything
        unusual (the store restarting, or its actor dying before the write was
        attempted) goes to the thread path, which waits for the restart and sends
        again, within the same deadline. Each request is its own writer for the
        group-commit policy (one loop thread serves many clients).
        """
        return await self._answer_on_loop(request, *self._send_from_loop(request))

    def begin_on_loop(self, request: WriteRequest) -> Awaitable[Any]:
        """`StoreHandle.begin_on_loop`: the write is handed to the loop's link at once
        (into the actor's inbox, or the loop's batch of this iteration), and the
        returned `_LoopWrite` awaits its answer: no task in between."""
        try:
            reply, deadline = self._send_from_loop(request)
        except Exception as exc:  # raised when awaited, as every backend's errors are
            return _raise(exc)
        return _LoopWrite(self, request, reply, deadline)

    async def _result_on_loop(
        self, request: WriteRequest, reply: LoopReply, deadline: float
    ) -> Any:
        return requests.result(request, await self._answer_on_loop(request, reply, deadline))

    def _send_from_loop(self, request: WriteRequest) -> tuple[LoopReply | None, float]:
        """Hand ``request`` to the running loop's link; the reply (None when nothing was
        sent: no live actor) and the write's deadline."""
        self._refuse(request)
        deadline = time.monotonic() + self.call_timeout_s  # a write sent: see _write_until
        ref = whereis(self.name)
        if ref is not None:
            loop = asyncio.get_running_loop()
            link = link_of(loop)
            reply = LoopReply(link, self, ref, loop.create_future(), deadline)
            if link.send(loop, request, reply):
                return reply, deadline
        return None, deadline

    async def _answer_on_loop(
        self, request: WriteRequest, reply: LoopReply | None, deadline: float
    ) -> Any:
        """The answer to a write sent by `_send_from_loop`; one never attempted is sent
        again from a worker thread, within the same deadline."""
        if reply is not None:
            future, link = reply.future, reply.link
            assert future is not None
            try:
                await future
                return reply.result()
            except (pykka.ActorDeadError, NotWritten):
                pass  # never attempted: safe to send again
            finally:
                link.done(reply)
        return await asyncio.to_thread(self._write_until, request, deadline)

    def stop(self) -> None:
        """Stop the store: commit what it accepted, close its storage."""
        lookup.stop(self.name)


class _LoopWrite:
    """The answer to a write an event loop sent (`ActorStoreHandle.begin_on_loop`).

    The first await is the plain path (`_answer_on_loop`: no task, no extra loop
    iteration). It may be awaited again, after a cancelled await (a run stopped with its
    step's write in flight waits for it so): the write went on, and its reply holds the
    answer once the actor gives it, so a later await waits for that (checking a few
    times a millisecond, a rare path) up to the write's deadline. A write never
    attempted (its actor died first) is sent again from a worker thread, once.
    """

    __slots__ = ("_again", "_awaited", "_deadline", "_handle", "_reply", "_request")

    def __init__(
        self,
        handle: ActorStoreHandle,
        request: WriteRequest,
        reply: LoopReply | None,
        deadline: float,
    ) -> None:
        self._handle, self._request, self._deadline = handle, request, deadline
        self._reply = reply
        self._awaited = False
        self._again: asyncio.Future[Any] | None = None

    def __await__(self) -> Generator[Any, None, Any]:
        if not self._awaited and self._reply is not None:
            self._awaited = True
            return self._handle._result_on_loop(
                self._request, self._reply, self._deadline
            ).__await__()
        self._awaited = True
        return self._later().__await__()

    async def _later(self) -> Any:
        reply, request = self._reply, self._request
        if reply is not None:
            while not reply.answered and reply.ref.is_alive():
                if time.monotonic() >= self._deadline:
                    raise WriteTimeout(
                        f"store {self._handle.name!r} did not confirm the write within "
                        f"{self._handle.call_timeout_s:g} s; its outcome is unknown: retry "
                        "with the same idempotency_key"
                    )
                await asyncio.sleep(0.002)
            if reply.answered:
                try:
                    return requests.result(request, reply.result())
                except (pykka.ActorDeadError, NotWritten):
                    pass  # never attempted: safe to send again
            self._reply = None
        if self._again is None:
            self._again = asyncio.ensure_future(
                asyncio.to_thread(self._handle._write_until, request, self._deadline)
            )
        return requests.result(request, await asyncio.shield(self._again))


async def _raise(exc: Exception) -> Any:
    """An awaitable raising ``exc`` (a write refused before it was sent)."""
    raise exc
