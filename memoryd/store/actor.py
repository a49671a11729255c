"""StoreActor: the one owner of a store's engine (a gen_server owning its table).

Writes arrive as `Submission` items put straight into the actor's inbox (`submit`):
one write of a calling thread, or every write an event loop took in one iteration
(each of those its own writer). A submission is its own inbox envelope: no Pykka
proxy call is built or resolved per write. When the actor takes one, it takes
every submission queued behind it too, then commits them all in one batch (one
transaction and one fsync for LMDB, one pipeline for Redis: group commit), or holds
the batch briefly for the writers it expects (`GroupCommit`), and answers them.
Nothing is answered before its batch was written. A reply is a `Reply`, not a Pykka
future: it is answered exactly once, and a bare lock is the cheapest way to hand
the answer over.

This class knows no storage engine. A backend subclasses it and fills two hooks:
`StoreActor._open_engine` (in the actor's thread, at start) and
`StoreActor._write_batch` (one batch, one result per request). Everything else,
the inbox, group commit, answers, hand-back and crashing, is here once.

Let it crash: if the engine fails, every waiting caller gets ``StorageError`` (the
outcome of that batch is unknown), writes not yet attempted are handed back
to their handles for a retry on the next incarnation, the engine is
closed, and the supervisor restarts the store.
"""

from __future__ import annotations

import abc
import queue
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, Protocol, TypeVar, cast

import pykka
import structlog
from pykka.messages import ProxyCall

from memoryd.errors import NotWritten, StorageError
from memoryd.store import lookup
from memoryd.store.config import StoreConfig
from memoryd.store.group_commit import GroupCommit
from memoryd.store.reply import Reply, answer_in_turn, answering
from memoryd.store.requests import WriteRequest
from supervisors import Exit, SupervisedActor

__all__ = ["FAULT_POINTS", "Engine", "Pending", "StoreActor", "Submission", "fault_hook", "submit"]

log = structlog.get_logger(__name__)

_FLUSH = ProxyCall(attr_path=("flush",), args=(), kwargs={})

Pending = tuple[WriteRequest, Reply]
"""A queued write and the reply its caller waits on."""

FAULT_POINTS = ("init", "before_commit", "after_commit")
"""Where ``fault_hook`` is called: ``init`` after the engine is opened and before it
is published; ``before_commit`` before a batch's write transaction begins;
``after_commit`` after the batch committed and before any of its writers is answered."""

fault_hook: Callable[[str, str], None] | None = None
"""Test-only fault injection, None (no cost but one global lookup) outside tests.

When set, it is called as ``fault_hook(point, store_name)`` at each of ``FAULT_POINTS``
in the actor's thread; whatever it raises happens there, as a bug would: at ``init``
the start fails, elsewhere the actor crashes and its supervisor restarts it.
Used by ``tests/reliability`` and ``tools/soak.py``; never set it in production.
"""


class Engine(Protocol):
    """What the actor needs of a backend's engine; readers use the rest of it directly."""

    held_batches: int
    """Batches the group-commit policy held back for expected writers (the actor counts)."""

    @property
    def closed(self) -> bool:
        """True once `close` was called."""

    def close(self) -> None:
        """Release the engine's resources. Runs in the actor's thread."""


C = TypeVar("C", bound=StoreConfig)
E = TypeVar("E", bound=Engine)


class Submission:
    """Writes handed to a store actor in one inbox item, and their replies.

    It is its own Pykka envelope (``message`` is itself, ``reply_to`` is None: a tell),
    so a write costs one inbox put and no proxy call.

    Args:
        pairs: ``(request, reply)`` pairs, in arrival order.
        writer: who wrote them (a thread's id), for the group-commit policy; None when
            each write is its own writer (an event loop serving many clients).
    """

    __slots__ = ("pairs", "writer")

    reply_to = None
    """Pykka's envelope field: nobody waits for the actor loop's return value."""

    def __init__(self, pairs: Sequence[Pending], writer: Hashable = None) -> None:
        self.pairs = pairs
        self.writer = writer

    @property
    def message(self) -> Submission:
        """Pykka's envelope field: the message is the submission itself."""
        return self

    def __repr__(self) -> str:
        return f"<Submission of {len(self.pairs)} write(s)>"


def submit(ref: pykka.ActorRef[Any], submission: Submission) -> bool:
    """Put ``submission`` into the store actor's inbox; False if the actor is dead.

    Nothing was sent when it returns False. A submission put just before the actor
    stopped is answered with `NotWritten` (it is handed back) or never handled; a
    caller tells those apart from a write in progress by the actor being dead.
    """
    if not ref.is_alive():
        return False
    ref.actor_inbox.put(cast(Any, submission))  # a Pykka envelope by its two fields
    return True


class _Inbox(queue.Queue[Any]):
    """The store actor's inbox: a ``queue.Queue`` the actor can wait on for several writes.

    While a batch waits for its expected writers the actor sleeps until that many
    writes are queued (or the linger runs out): a put wakes it only when the
    count is reached, so a batch of eight costs the actor one wake-up, not eight,
    and the actor never takes the GIL from the writers it is waiting for. A
    `Submission` counts as the writes it carries, any other message as one.

    After a commit the actor may `expect` its writers back: its next wait for a
    message then lasts until that many writes are queued (or another message is, or
    the linger runs out), so it is woken once for the next batch, not at its first
    write and again at its last. `gathered_since` says when that wait began.
    """

    def __init__(self) -> None:
        super().__init__()
        self._wanted = 1
        self._writes = 0
        self._others = 0
        self._expect = 1
        self._expect_s = 0.0
        self._hold_s = 0.0
        self.gathered_since: float | None = None
        """When the last wait for expected writes began (a batch held back for its
        writers); None when there was none since the actor last took it."""
        self.last_put = 0.0
        """When the last message was put (``time.monotonic()``)."""

    def expect(self, count: int, linger_s: float, hold_s: float) -> None:
        """Let the actor's next wait for a message last until ``count`` writes are queued,
        another message is, no write came for ``linger_s``, or ``hold_s`` passed."""
        self._expect = count
        self._expect_s = linger_s
        self._hold_s = hold_s

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """Remove and return the next message (``queue.Queue.get``), after the writes
        the actor `expect`-ed have come (or their linger ran out)."""
        count = self._expect
        if count > 1:
            self._expect = 1
            if block and timeout is None:
                self._gather(count, self._expect_s, self._hold_s)
        return super().get(block, timeout)

    def _gather(self, count: int, linger_s: float, hold_s: float) -> None:
        """Wait until ``count`` writes or another message are queued, no write has come
        for ``linger_s``, or ``hold_s`` passed."""
        with self.mutex:
            if self._writes >= count or self._others:
                return  # nothing to wait for
            since = self.gathered_since = time.monotonic()
            self._wanted = count
            try:
                self._wait_quiet(
                    lambda: self._writes >= count or self._others > 0,
                    linger_s,
                    since=since,
                    until=since + hold_s,
                )
            finally:
                self._wanted = 1

    def _wait_quiet(
        self, done: Callable[[], bool], gap_s: float, *, since: float, until: float
    ) -> bool:
        """With the mutex held, wait until ``done()``, until no write has been put for
        ``gap_s`` (counted from ``since`` at the earliest), or until ``until`` (a
        ``time.monotonic()``); returns ``done()``.

        A put short of the count wakes nobody, so the wait checks on its own, when
        each gap runs out, whether a write came meanwhile: writers that arrive one
        after another (threads taking the interpreter lock in turn) all join the
        batch, while a batch whose writers went quiet waits one gap.
        """
        while True:
            now = time.monotonic()
            left = min(gap_s - (now - max(self.last_put, since)), until - now)
            if left <= 0:
                return done()
            if self.not_empty.wait_for(done, timeout=left):
                return True

    def _put(self, item: Any) -> None:
        self.last_put = time.monotonic()
        self.queue.append(item)
        if type(item) is Submission:
            self._writes += len(item.pairs)
        else:
            self._writes += 1
            self._others += 1

    def _get(self) -> Any:
        item = self.queue.popleft()
        if type(item) is Submission:
            self._writes -= len(item.pairs)
        else:
            self._writes -= 1
            self._others -= 1
        return item

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """Queue ``item`` (never blocks: the inbox is unbounded)."""
        with self.mutex:
            self._put(item)
            self.unfinished_tasks += 1
            if self._wanted <= 1 or self._writes >= self._wanted or self._others:
                self.not_empty.notify()

    def writes(self) -> int:
        """The writes queued now (other messages count as one each)."""
        with self.mutex:
            return self._writes

    def take_submissions(self) -> list[Submission]:
        """Remove and return the submissions at the head of the queue, in order.

        Stops at the first other message, which keeps its place (and everything
        after it), so messages are still handled in the order they were sent.
        """
        taken: list[Submission] = []
        with self.mutex:
            items = self.queue
            while items and type(items[0]) is Submission:
                item = items.popleft()
                self._writes -= len(item.pairs)
                taken.append(item)
        return taken

    def wait_for(self, count: int, gap_s: float, *, since: float, until: float) -> bool:
        """Block until ``count`` writes are queued, no write has been put for ``gap_s``
        (counted from ``since`` at the earliest), or until ``until`` (a
        ``time.monotonic()``); True if they are."""
        with self.mutex:
            self._wanted = max(count, 1)
            try:
                return self._wait_quiet(
                    lambda: self._writes >= count, gap_s, since=since, until=until
                )
            finally:
                self._wanted = 1


class StoreActor(SupervisedActor, abc.ABC, Generic[C, E]):
    """Owns one store's engine; the only writer to it. Subclassed once per backend.

    A backend implements the two abstract hooks, `_open_engine` and `_write_batch`;
    a subclass missing either cannot be instantiated (``TypeError`` naming it).

    Args:
        config: how to open the store (restarts reuse it).
    """

    @staticmethod
    def _create_actor_inbox() -> _Inbox:  # Pykka's hook for actor types' inboxes
        return _Inbox()

    def __init__(self, config: C) -> None:
        super().__init__(name=config.name)
        self.config: C = config
        self._engine: E | None = None
        self._pending: list[Pending] = []
        self._writers: set[Hashable] = set()
        self._first_arrival = 0.0
        self._flush_scheduled = False
        self._waiting_at_answer: int | None = None
        self._policy = GroupCommit(max_linger_s=config.max_linger_s)

    # -- the backend's hooks ------------------------------------------------------------

    @abc.abstractmethod
    def _open_engine(self) -> E:
        """Open the store's engine. Runs in the actor's thread.

        Raises:
            Exception: anything raised fails the start (or the restart).
        """

    @abc.abstractmethod
    def _write_batch(
        self, engine: E, requests: list[WriteRequest], now: float
    ) -> list[tuple[bool, Any]]:
        """Write ``requests`` as one batch. Runs in the actor's thread.

        Args:
            engine: the open engine.
            requests: the batch, in arrival order.
            now: the batch's timestamp (``time.time()``).

        Returns:
            One ``(True, value)`` or ``(False, exception)`` per request, in order: a
            refused request (a conflict, a bad version) fails only its own caller.

        Raises:
            Exception: the engine failed; the batch's outcome is unknown and the
                actor crashes after failing its callers.
        """

    def _opened_fields(self) -> dict[str, Any]:
        """What the ``store_opened`` log event says about the engine (no secrets)."""
        return {}

    @classmethod
    def discard(cls, config: C) -> None:
        """Free what a store leaves behind once it has stopped for good (default: nothing).

        Called by the tree after the last incarnation stopped, never while it runs.
        """

    # -- lifecycle ------------------------------------------------------------------------

    def init(self) -> None:
        """Open the engine and publish it to readers. Runs in the actor's thread."""
        name = self.config.name
        self._engine = self._open_engine()
        if fault_hook is not None:
            fault_hook("init", name)
        lookup.publish(name, self._engine)
        log.info("store_opened", store=name, **self._opened_fields())

    def terminate(self, exit: Exit) -> None:
        """Close the engine on every exit path. Runs in the actor's thread."""
        engine, self._engine = self._engine, None
        if engine is not None:
            lookup.withdraw(self.config.name, engine)
            if not exit.abnormal and self._pending:
                self._engine = engine
                self.flush(force=True)  # an orderly stop commits what was already accepted
                self._engine = None
            self._hand_back(NotWritten(f"store {self.config.name!r} stopped before this write"))
            engine.close()
        else:
            self._hand_back(NotWritten(f"store {self.config.name!r} did not start"))
        log.info("store_closed", store=self.config.name, reason=exit.describe())

    def on_receive(self, message: Any) -> Any:
        """Take a `Submission` and every submission queued behind it. Runs in the actor's thread.

        Each write is committed by the next flush; other messages go to Pykka's
        default handling.
        """
        if type(message) is not Submission:
            return super().on_receive(message)
        self._accept(message)
        for queued in self._inbox.take_submissions():
            self._accept(queued)
        self._arrived()
        return None

    def _accept(self, submission: Submission) -> None:
        """Queue a submission's writes for the next flush."""
        if not self._pending:
            since, self._inbox.gathered_since = self._inbox.gathered_since, None
            if since is None:
                self._first_arrival = time.monotonic()
            else:  # the inbox held this batch back for its writers since then
                self._first_arrival = since
                if self._engine is not None:
                    self._engine.held_batches += 1
        self._pending.extend(submission.pairs)
        if submission.writer is None:
            self._writers.update(reply for _, reply in submission.pairs)
        else:
            self._writers.add(submission.writer)

    def _arrived(self) -> None:
        """Flush now, or after the messages already in the inbox."""
        if self._flush_scheduled:
            return
        if self.actor_inbox.empty():
            self.flush()  # commits now, or holds the batch for the writers it expects
        else:
            self._schedule_flush()

    def flush(self, *, force: bool = False) -> None:
        """Commit the queued writes, ``max_batch`` per transaction. Runs in the actor's thread.

        Unless ``force``, a batch still expecting writers from the recent commits is
        held back (briefly, see ``GroupCommit``): the actor sleeps until the missing
        writes are in its inbox or the linger runs out, and takes them into the
        batch; if another message arrived meanwhile, it is handled first (the flush
        goes to the back of the inbox again).
        """
        self._flush_scheduled = False
        while not force and self._pending and not self._ready():
            missing = self._policy.expected() - len(self._writers)
            if self._engine is not None:
                self._engine.held_batches += 1
            policy, since = self._policy, self._first_arrival
            if not self._inbox.wait_for(
                missing, policy.linger(), since=since, until=since + policy.hold_limit()
            ):
                break  # no write came for a linger, or the hold ran out: commit what is here
            for queued in self._inbox.take_submissions():
                self._accept(queued)  # they join this batch
            if not self._inbox.empty():
                self._schedule_flush()  # behind the other messages that arrived
                return
        while self._pending and self._engine is not None:
            size = self.config.max_batch
            batch, self._pending = self._pending[:size], self._pending[size:]
            writers, self._writers = self._writers, set()
            started = time.monotonic()
            self._waiting_at_answer = None
            self._commit(batch)
            waiting = self._waiting_at_answer
            self._policy.committed(
                writers,
                duration_s=time.monotonic() - started,
                waiting=len(self._pending) + self._queued() if waiting is None else waiting,
            )
            if self._pending:
                self._first_arrival = time.monotonic()
            elif (expected := self._policy.expected()) > 1:
                self._inbox.expect(expected, self._policy.linger(), self._policy.hold_limit())

    @property
    def _inbox(self) -> _Inbox:
        inbox = self.actor_inbox
        assert isinstance(inbox, _Inbox)
        return inbox

    def _queued(self) -> int:
        """Writes waiting in the inbox."""
        return self._inbox.writes()

    def _ready(self) -> bool:
        now, since = time.monotonic(), self._first_arrival
        quiet = now - max(since, self._inbox.last_put)
        return self._policy.ready(self._writers, waited_s=quiet, held_s=now - since)

    def _note_waiting(self) -> None:
        """Count the writes queued behind a batch, before its writers are answered.

        Counted after the answers, it would include the answered writers' next
        writes (a fast writer is back within microseconds), and one writer would
        look like two: its next batch would linger for a writer that never comes.
        """
        self._waiting_at_answer = len(self._pending) + self._queued()

    def _schedule_flush(self) -> None:
        self._flush_scheduled = True
        self.actor_ref.tell(_FLUSH)  # handled after the writes queued before it

    def _commit(self, batch: list[Pending]) -> None:
        engine = self._engine
        assert engine is not None
        if fault_hook is not None:
            fault_hook("before_commit", self.config.name)
        try:
            results = self._write_batch(engine, [request for request, _ in batch], time.time())
        except Exception as exc:
            error = (
                exc
                if isinstance(exc, StorageError)
                else StorageError(f"store {self.config.name!r} failed: {type(exc).__name__}: {exc}")
            )
            log.error("store_write_failed", store=self.config.name, error=repr(exc))
            for _, future in batch:
                future.set_exception(error)
            self.crash(error)
            return
        try:
            if fault_hook is not None:
                fault_hook("after_commit", self.config.name)
            self._answer(batch, results)
        except BaseException:
            # Committed: whatever fails now, the writers get what was committed for
            # them, never a silence their handles would take for "not attempted" and
            # send again (a write without an idempotency key would be stored twice).
            for (_, reply), (ok, value) in zip(batch, results, strict=True):
                if ok:
                    reply.set(value)
                else:
                    reply.set_exception(value)
            raise

    def _answer(self, batch: list[Pending], results: list[tuple[bool, Any]]) -> None:
        """Answer a committed batch's writers, each with its result or its refusal."""
        self._note_waiting()
        with answering():  # one wake-up per waiting event loop for the whole batch
            answer_in_turn(
                [(reply, ok, value) for (_, reply), (ok, value) in zip(batch, results, strict=True)]
            )

    def _hand_back(self, error: NotWritten) -> None:
        pending, self._pending = self._pending, []
        for _, future in pending:
            future.set_exception(error)
