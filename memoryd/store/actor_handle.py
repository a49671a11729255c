"""ActorStoreHandle: the write path shared by every backend served by a store actor.

Writes are put into the store actor's inbox as a `Submission` with a `Reply`, so
concurrent writers share one commit; the handle waits for the answer with a
deadline, finds a restarted actor by its registered name, and sends again only a
write that was surely never attempted. Reads are each backend's own.

An event loop writes in batches: the writes its tasks submit during one loop
iteration reach the actor as one submission at the start of the next, and the
answers to a committed batch wake the loop once (`_LoopLink`).

A handle is built from its store's `StoreSpec` (``spec.handle()``); a backend's
``start`` builds the config and calls `memoryd.store.lookup.start` with its
`Backend` record, and ``stop`` goes through the same table.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
import weakref
from typing import Any, ClassVar

import pykka

from memoryd.errors import NotWritten, StoreUnavailable, WriteTimeout
from memoryd.store import lookup
from memoryd.store.actor import Submission, submit
from memoryd.store.config import StoreConfig
from memoryd.store.handle import StoreHandle
from memoryd.store.reply import Reply, Turn, at_end_of_answers
from memoryd.store.requests import WriteRequest
from memoryd.store.spec import StoreSpec
from supervisors import whereis

__all__ = ["ActorStoreHandle"]

_POLL_S = 0.05


class _LoopReply(Reply):
    """A write of an event loop: its answer completes ``future`` on the loop.

    It carries what the loop's watchdog needs to judge it unanswered (`_LoopLink`).
    No thread waits on it: the answering thread hands it to its link, which wakes the
    loop once per burst of answers.
    """

    __slots__ = ("deadline", "future", "handle", "link", "ref")

    _in_turn = False  # answered at once: its link wakes the loop (in turn with others)

    def __init__(
        self,
        link: _LoopLink,
        handle: ActorStoreHandle,
        ref: pykka.ActorRef[Any],
        future: asyncio.Future[None],
        deadline: float,
    ) -> None:
        # No lock and no turn: the answer is handed over by `_wake`, never waited for.
        self._answered = False
        self._value = None
        self._error = None
        self.link, self.handle, self.ref = link, handle, ref
        self.future: asyncio.Future[None] | None = future
        self.deadline = deadline

    def _wake(self) -> None:
        """Runs in the answering thread; never raises into it."""
        self.link.answered(self)

    def wait(self, timeout: float) -> bool:
        """An event loop's reply is awaited through ``future``, never waited for."""
        raise TypeError("an event loop's write is awaited through its future")

    def abandon(self) -> None:
        """Nothing to pass on: no thread waits for an event loop's reply."""


class _LoopLink:
    """An event loop's link to the store actors: hand-offs, wake-ups and one watchdog.

    A write goes into its actor's inbox at once when nothing else is ready to run
    in this loop iteration (no other callback could submit a write to share the
    hand-off). Otherwise writes submitted during the iteration are queued per actor
    and put into its inbox as one `Submission` by a callback the first of them
    scheduled with ``call_soon``, at the end of the iteration.

    Answers are collected by the answering thread and delivered by one
    ``call_soon_threadsafe`` per burst of answers, not one per write; the loops
    that one batch answered are woken in turn (`memoryd.store.reply.answering`).

    One timer per loop, armed while any write is in flight, watches their deadlines
    and their actors (`ActorStoreHandle._after_slice`): a write answered within a
    slice costs the watchdog nothing but a set entry.

    The link holds its loop weakly (its timer is not kept either), so a dropped loop
    leaves the link registry.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        # The callbacks still to run in this iteration (asyncio's own loops keep
        # them in ``_ready``); a loop without it always batches through ``call_soon``.
        ready = getattr(loop, "_ready", None)
        self._ready: collections.deque[Any] | None = (
            ready if isinstance(ready, collections.deque) else None
        )
        self._outbox: dict[pykka.ActorRef[Any], list[tuple[WriteRequest, Reply]]] = {}
        self._answered: collections.deque[_LoopReply] = collections.deque()
        self._waking = False
        self._turn: Turn | None = None
        self._in_flight: set[_LoopReply] = set()
        self._timer_at: float | None = None
        """When the watchdog's timer fires; None while none is armed."""

    def send(
        self, loop: asyncio.AbstractEventLoop, request: WriteRequest, reply: _LoopReply
    ) -> bool:
        """Hand ``request`` to its actor now, or at the end of this iteration.

        Returns:
            False if it was to go now and the actor is dead: nothing was sent.
        """
        ref = reply.ref
        if not self._outbox and self._ready is not None and not self._ready:
            if not submit(ref, Submission(((request, reply),))):
                return False
        else:
            if not self._outbox:
                loop.call_soon(self._drain)
            batch = self._outbox.get(ref)
            if batch is None:
                self._outbox[ref] = [(request, reply)]
            else:
                batch.append((request, reply))
        self._in_flight.add(reply)
        if self._timer_at is None or reply.deadline < self._timer_at:
            self._arm(loop, reply.deadline)
        return True

    def done(self, reply: _LoopReply) -> None:
        """The awaiting task is done with ``reply`` (answered, failed, or cancelled)."""
        self._in_flight.discard(reply)
        reply.future = None  # a reply the actor still remembers keeps no loop alive

    def _drain(self) -> None:
        outbox, self._outbox = self._outbox, {}
        for ref, batch in outbox.items():
            if not submit(ref, Submission(batch)):
                gone = NotWritten("the store actor stopped before the write")
                for _, reply in batch:
                    reply.set_exception(gone)  # sent again by the thread path

    def _arm(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        """Look at ``deadline``, or after a slice if sooner. An earlier timer still armed
        fires too, and finds it is not the current one."""
        now = time.monotonic()
        at = self._timer_at = min(deadline, now + _POLL_S)
        loop.call_later(max(at - now, 0.0), self._look, at)

    def _look(self, at: float) -> None:
        """The watchdog: fail each write whose answer can no longer come in time.

        An answer still undelivered here (its wake-up waits for a turn that another
        loop holds and does not pass on, e.g. a loop busy in a long callback) is
        delivered now.
        """
        if at != self._timer_at:
            return  # superseded by a timer armed for an earlier deadline
        self._timer_at = None
        in_flight = self._in_flight
        if any(r._answered and r.future is not None and not r.future.done() for r in in_flight):
            self._wake()
        waiting = [r for r in in_flight if not r._answered and r.future and not r.future.done()]
        if not waiting:
            return
        soonest: float | None = None
        for reply in waiting:
            try:
                reply.handle._after_slice(reply.ref, reply.deadline)
            except (NotWritten, WriteTimeout) as exc:
                reply.future.set_exception(exc)  # type: ignore[union-attr]
                continue
            if soonest is None or reply.deadline < soonest:
                soonest = reply.deadline
        loop = self._loop()
        if soonest is not None and loop is not None:
            self._arm(loop, soonest)

    def answered(self, reply: _LoopReply) -> None:
        """Note that ``reply`` was answered. Runs in the answering thread.

        Inside the actor's `answering` block the wake-up waits for the block's end, so a
        batch's answers cost one ``call_soon_threadsafe`` however they interleave with
        the loop, and the loops a batch answered are woken in turn.
        """
        self._answered.append(reply)
        if not self._waking and not at_end_of_answers(self, self._wake_in_turn):
            self._wake_soon(None)

    def _wake_in_turn(self, turn: Turn) -> bool:
        """Wake the loop with ``turn``; True if it will pass the turn on as it wakes."""
        return self._wake_soon(turn)

    def _wake_soon(self, turn: Turn | None) -> bool:
        """Schedule `_wake` on the loop; True if it was, holding ``turn`` (if any).

        A loop that is not running takes no turn (it may not run again soon): it is
        woken, and the next loop too.
        """
        # The answer is queued before ``_waking`` is read, and the loop clears
        # ``_waking`` before it takes the queue: an answer that finds a wake-up on its
        # way is taken by it.
        if self._waking or not self._answered:
            return False
        loop = self._loop()
        if loop is None:
            return False
        running = loop.is_running()
        self._turn = turn if running else None
        self._waking = True
        try:
            loop.call_soon_threadsafe(self._wake)
        except Exception:  # a closed loop: nobody waits (never raised into the actor)
            self._waking = False
            self._turn = None
            return False
        return running and turn is not None

    def _wake(self) -> None:
        """Deliver the answers to their tasks, then pass the turn to the next loop."""
        turn, self._turn = self._turn, None  # taken before ``_waking`` is cleared: no
        self._waking = False  # answer can hand this loop a second turn meanwhile
        answered = self._answered
        while answered:
            future = answered.popleft().future
            if future is not None and not future.done():
                future.set_result(None)
        if turn is not None:
            turn.pass_on()


_LINKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopLink] = (
    weakref.WeakKeyDictionary()
)


def _link(loop: asyncio.AbstractEventLoop) -> _LoopLink:
    link = _LINKS.get(loop)
    if link is None:
        link = _LINKS[loop] = _LoopLink(loop)
    return link


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
            lookup.wait_for_engine(self.name, min(remaining, _POLL_S))

    def _refuse(self, request: WriteRequest) -> None:
        """Raise if this backend cannot perform ``request`` (nothing is sent then)."""

    def _write(self, request: WriteRequest) -> Any:
        self._refuse(request)
        return self._write_until(request, time.monotonic() + self.call_timeout_s)

    def _write_until(self, request: WriteRequest, deadline: float) -> Any:
        while True:
            ref = whereis(self.name)
            if ref is None:
                self._engine(deadline)  # waits for the restart, or raises
                continue
            reply = Reply()
            if not submit(ref, Submission(((request, reply),), threading.get_ident())):
                continue  # nothing was sent
            try:
                return self._await(ref, reply, deadline)
            except (pykka.ActorDeadError, NotWritten):
                if time.monotonic() >= deadline:
                    raise self._unavailable("stopped before the write") from None
                continue  # never attempted: safe to send again

    def _await(self, ref: pykka.ActorRef[Any], reply: Reply, deadline: float) -> Any:
        """Wait for the write's answer.

        A submission that an actor never handled is dropped silently when the
        actor dies, so the wait is sliced: an unanswered reply whose actor is
        dead was never attempted (processed writes are answered or handed back
        before the actor stops), and the caller may send it again.
        """
        try:
            while not reply.wait(min(deadline - time.monotonic(), _POLL_S)):
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
        that completes a future on the loop when answered (`_LoopLink`). Anything
        unusual (the store restarting, or its actor dying before the write was
        attempted) goes to the thread path, which waits for the restart and sends
        again, within the same deadline. Each request is its own writer for the
        group-commit policy (one loop thread serves many clients).
        """
        self._refuse(request)
        deadline = time.monotonic() + self.call_timeout_s
        ref = whereis(self.name)
        if ref is not None:
            loop = asyncio.get_running_loop()
            link = _LINKS.get(loop) or _link(loop)
            future = loop.create_future()
            reply = _LoopReply(link, self, ref, future, deadline)
            if link.send(loop, request, reply):
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
