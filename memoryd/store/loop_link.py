"""An event loop's write path to the store actors: hand-offs, wake-ups, one watchdog.

`memoryd.store.actor_handle.ActorStoreHandle` writes from an event loop through the
loop's `LoopLink` (one per loop, `link_of`):

* a write goes into its actor's inbox at once when nothing else is ready to run in
  this loop iteration; otherwise the writes of one iteration reach each actor as
  one `Submission` at its end;
* the answers of a committed batch wake each waiting loop once, and the loops one
  batch answered are woken in turn (`memoryd.store.reply.answering`);
* one timer per loop watches the deadlines and actors of its writes in flight.

A loop is woken through an eventfd it watches (one write by the answering thread,
one read by the loop) where the platform and the loop allow it, else with
``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import pykka

from memoryd.errors import NotWritten, WriteTimeout
from memoryd.store.actor import Submission, submit
from memoryd.store.reply import Reply, Turn, at_end_of_answers
from memoryd.store.requests import WriteRequest

__all__ = ["POLL_S", "LoopLink", "LoopReply", "Watched", "link_of"]

POLL_S = 0.05
"""How often an unanswered write is looked at (its actor alive, its deadline)."""


class Watched(Protocol):
    """What the watchdog asks of the handle that made a write."""

    def _after_slice(self, ref: pykka.ActorRef[Any], deadline: float) -> None:
        """Raise `NotWritten` or `WriteTimeout` if no answer can come in time."""


class LoopReply(Reply):
    """A write of an event loop: its answer completes ``future`` on the loop.

    It carries what the loop's watchdog needs to judge it unanswered (`LoopLink`).
    No thread waits on it: the answering thread hands it to its link, which wakes the
    loop once per burst of answers.
    """

    __slots__ = ("deadline", "future", "handle", "link", "ref")

    _in_turn = False  # answered at once: its link wakes the loop (in turn with others)

    def __init__(
        self,
        link: LoopLink,
        handle: Watched,
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


class LoopLink:
    """An event loop's link to the store actors: hand-offs, wake-ups and one watchdog.

    A write goes into its actor's inbox at once when nothing else is ready to run
    in this loop iteration (no other callback could submit a write to share the
    hand-off). Otherwise writes submitted during the iteration are queued per actor
    and put into its inbox as one `Submission` by a callback the first of them
    scheduled with ``call_soon``, at the end of the iteration.

    Answers are collected by the answering thread and delivered by one wake-up of
    the loop per burst of answers, not one per write; the loops that one batch
    answered are woken in turn (`memoryd.store.reply.answering`).

    One timer per loop, armed while any write is in flight, watches their deadlines
    and their actors (the handle's ``_after_slice``): a write answered within a
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
        self._answered: collections.deque[LoopReply] = collections.deque()
        self._waking = False
        self._turn: Turn | None = None
        self._in_flight: set[LoopReply] = set()
        self._timer_at: float | None = None
        """When the watchdog's timer fires; None while none is armed."""
        self._wake_fd = _watched_eventfd(loop, self._on_wake_fd)
        """Written to wake the loop, which then runs `_wake`; -1: ``call_soon_threadsafe``."""

    def send(
        self, loop: asyncio.AbstractEventLoop, request: WriteRequest, reply: LoopReply
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

    def done(self, reply: LoopReply) -> None:
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
        at = self._timer_at = min(deadline, now + POLL_S)
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

    def answered(self, reply: LoopReply) -> None:
        """Note that ``reply`` was answered. Runs in the answering thread.

        Inside the actor's `answering` block the wake-up waits for the block's end, so a
        batch's answers cost one wake-up however they interleave with the loop, and the
        loops a batch answered are woken in turn.
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
            if self._wake_fd >= 0:
                os.eventfd_write(self._wake_fd, 1)
            else:
                loop.call_soon_threadsafe(self._wake)
        except Exception:  # a closed loop: nobody waits (never raised into the actor)
            self._waking = False
            self._turn = None
            return False
        return running and turn is not None

    def _on_wake_fd(self) -> None:
        """The loop saw its eventfd written: reset it, deliver the answers."""
        try:  # noqa: SIM105 (suppress() would cost a context manager per wake-up)
            os.eventfd_read(self._wake_fd)
        except BlockingIOError:  # already reset
            pass
        self._wake()

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


def _watched_eventfd(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> int:
    """An eventfd that ``loop`` watches, calling ``callback`` when it is written.

    A wake-up through it costs the waking thread one write and the loop one read,
    where ``call_soon_threadsafe`` costs a handle, a socket write, and two reads.
    The descriptor is closed when the loop is freed. Returns -1, and the loop is woken
    with ``call_soon_threadsafe``, where no eventfd can be had: the platform has none
    (only Linux does), the process is out of descriptors (``EMFILE``), or the loop
    watches no descriptors (Windows' proactor loop refuses ``add_reader``). Each case
    has its test in ``tests/store/test_submit.py``.
    """
    make = getattr(os, "eventfd", None)
    if make is None:
        return -1
    try:
        fd: int = make(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    except OSError:
        return -1
    try:
        loop.add_reader(fd, callback)
    except (NotImplementedError, OSError):  # a proactor loop; tests/store/test_submit.py
        os.close(fd)  # the fallback, not a stub: woken by call_soon_threadsafe instead
        return -1
    weakref.finalize(loop, os.close, fd)
    return fd


_LINKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLink] = weakref.WeakKeyDictionary()


def link_of(loop: asyncio.AbstractEventLoop) -> LoopLink:
    """The loop's link, made on first use. Runs in the loop's thread."""
    link = _LINKS.get(loop)
    if link is None:
        link = _LINKS[loop] = LoopLink(loop)
    return link
