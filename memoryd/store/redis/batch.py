"""One batch of writes to Redis: planned from the writer's view, sent as one pipeline.

Every write is one script call, planned by `plan.Planner` from the writer's
view of the conversation; the script appends it only if that view is still
current, otherwise it answers ``stale`` with the current state and the write is
planned again. Adds and records go together; a pop, fork, clear or import goes
alone. Each write carries a fresh token that the script records with the write, so
a resend writes nothing twice, even without an idempotency key: a pipeline resent as
it was finds its writes' views out of date and its tokens stored, and a write whose
send may have been applied but must be planned again (Redis lost its script cache in
a restart, a failover moved its slot) is first looked up by its token (`scripts.RESENT`)
and then sent with a flag that makes the script look for the token whatever the view.

The scripts go out grouped by the primary holding their keys (one group on a single
server), each group on one connection (`connections.Connections.send`); with
``wait_replicas`` each group ends with ``WAIT`` on that connection, so every primary
that took a write of the batch is asked for its own replicas' acknowledgements. A write
whose primary's replicas came short is committed there but answered with `WriteTimeout`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
import structlog

from memoryd import codec
from memoryd.errors import ConflictError, CorruptRecord, StorageError, WriteTimeout
from memoryd.events import EventKind
from memoryd.store.redis import scripts as lua
from memoryd.store.redis.connections import CONNECTION_ERRORS, Connections
from memoryd.store.redis.identity import MARKERS
from memoryd.store.redis.plan import Plan, Planner, Reads, Result, View, Views, WriterState
from memoryd.store.requests import Add, Fork, Pop, Record, WriteRequest, hidden

__all__ = ["Batch", "Counters"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
A = TypeVar("A")


@dataclass(slots=True)
class Counters:
    """What the batch writer has done, for a store's ``stats()``."""

    commits: int = 0
    """Rounds of scripts sent and answered."""
    writes: int = 0
    """Writes committed."""
    out_of_memory_at: float | None = None
    """When Redis last refused a write at its ``maxmemory`` (`time.monotonic`), until a
    write goes through again: `RedisEngine.refuses_writes` reads it."""


_POPPED = EventKind.POPPED.value
_MAX_ROUNDS = 1000
_RETRY_PAUSE_S = 0.05


class _Unreachable(Exception):
    """Redis stayed unreachable until the batch's deadline."""


_REDIRECTS = (redis.exceptions.NoScriptError, redis.exceptions.AskError, *CONNECTION_ERRORS)
"""Error replies that mean the script did not run there and should be sent again:
the script is not in that node's cache, or its slot is moving or unserved now."""


_FEED_LATER: tuple[type[Exception], ...] = (*CONNECTION_ERRORS, redis.exceptions.OutOfMemoryError)
"""Errors that defer a Cluster's feed entries to the conversation's next write."""


class Batch:
    """Commits one batch of write requests. Runs in the actor's thread.

    Args:
        requests: the writes, in arrival order.
        now: the commit timestamp of every event of the batch.
        connections: the store's connections (the batch is sent through them).
        writer: the writer's state (views, script keys, tokens).
        reads: the reads a plan needs (see `plan.Reads`).
        counters: the store's commit counters, advanced here.
    """

    def __init__(
        self,
        requests: Sequence[WriteRequest],
        now: float,
        *,
        connections: Connections,
        writer: WriterState,
        reads: Reads,
        counters: Counters,
    ) -> None:
        self.connections = connections
        self.writer = writer
        self.counters = counters
        self.requests = requests
        self.now = now
        self.tokens = [writer.token() for _ in requests]
        self.results: list[Result | None] = [None] * len(requests)
        self.deadline = time.monotonic() + connections.call_timeout_s
        self.refused: Exception | None = None
        """Set when a node refused a script for now (moved slot, cluster down, ...)."""
        self.resent: set[int] = set()
        """The writes an earlier send of which may have been applied (its reply was lost,
        or it was refused after a lost one): looked up by token before planning again."""
        self.planner = Planner(
            requests,
            self.tokens,
            self.results,
            now,
            connections=connections,
            writer=writer,
            reads=reads,
            resent=self.resent,
        )

    def commit(self) -> list[Result]:
        """Send every write; ``(True, value)`` or ``(False, exception)`` per request.

        While Redis is unreachable the writes are resent until the call timeout;
        then what is left fails with `WriteTimeout`.

        Raises:
            redis.RedisError: anything but a lost connection (the actor crashes).
        """
        group: list[int] = []
        try:
            for index, request in enumerate(self.requests):
                if isinstance(request, Add | Record):
                    group.append(index)
                    continue
                if group:
                    self._run(group)
                    group = []
                self._run([index])
            if group:
                self._run(group)
        except _Unreachable as exc:
            self.writer.views.clear()
            error = WriteTimeout(
                f"Redis at {lua.redact(self.connections.url)} was unreachable for "
                f"{self.connections.call_timeout_s:g} s ({exc.__cause__!r}); the write's outcome "
                "is unknown: retry with the same idempotency_key"
            )
            return [(False, error) if r is None else r for r in self.results]
        return [(False, StorageError("not attempted")) if r is None else r for r in self.results]

    # -- rounds ---------------------------------------------------------------------------

    def _run(self, indices: list[int]) -> None:
        """Plan, send and plan again until each of ``indices`` has an answer."""
        todo = list(indices)
        for _ in range(_MAX_ROUNDS):
            if not todo:
                return
            if self.refused is not None:  # a node refused for now: not at once again
                self._pause(self.refused)
            if not self.resent.isdisjoint(todo):
                todo = self._retrying(self._recognise, todo)
                if not todo:
                    return
            plans = self._retrying(self.planner.plan, todo)
            if not plans:
                return
            replies, short = self._retrying(self._send, plans)
            todo = self._answer(plans, replies, short)
        raise StorageError(f"writes stayed stale for {_MAX_ROUNDS} rounds")

    def _answer(self, plans: list[Plan], replies: list[Any], short: dict[int, int]) -> list[int]:
        """Record each reply; returns the indices to plan again.

        Args:
            plans: the plans sent.
            replies: the reply to each plan (an error reply as its exception).
            short: for a plan whose primary's replicas came short, how many acknowledged.

        Raises:
            redis.ResponseError: a node refused a script for good (the actor crashes).
        """
        self.writer.drop_views_after(self.connections.data_lost)
        views = self.writer.views
        fed: list[tuple[str, int, int]] = []
        again: list[int] = []
        back: list[tuple[str, int, int]] = []
        self.refused = None
        for i, (plan, reply) in enumerate(zip(plans, replies, strict=True)):
            if isinstance(reply, StorageError):  # refused before sending (not durable)
                self.results[plan.index] = (False, reply)
                continue
            if isinstance(reply, redis.exceptions.OutOfMemoryError):
                self.results[plan.index] = (False, self._out_of_memory(reply))
                continue
            if isinstance(reply, Exception):
                if not isinstance(reply, _REDIRECTS):
                    raise reply
                if not isinstance(reply, redis.exceptions.NoScriptError):
                    self.refused = reply
                views.forget(plan.cid)
                self.resent.add(plan.index)  # this send was not run; an earlier may have
                again.append(plan.index)
                continue
            status = reply[0]
            if status == b"ok":
                views.remember(plan.cid, plan.after)
                fed.append((plan.cid, int(reply[1]), plan.feed_from))
                if i in short:
                    self.results[plan.index] = (False, self._unreplicated(short[i]))
                else:
                    self.results[plan.index] = (True, self._value(plan, int(reply[1])))
            elif status == b"dup":
                views.forget(plan.cid)
                self.results[plan.index] = (True, self._original(plan.index, plan.cid, reply))
                fed.append((plan.cid, int(reply[1]), plan.feed_from))
            elif status == b"conflict":
                _went_back(back, views, plan.cid, int(reply[1]))
                views.forget(plan.cid)
                expected = getattr(self.requests[plan.index], "expected_version", None)
                error = ConflictError(expected=expected, actual=int(reply[1]))
                self.results[plan.index] = (False, error)
            else:  # stale: nothing written; plan again from the state Redis sent
                _went_back(back, views, plan.cid, int(reply[1]))
                views.remember(plan.cid, View(int(reply[1]), int(reply[2]), int(reply[3])))
                again.append(plan.index)
        self._count(fed)
        if fed and self.writer.cluster:
            self._feed(fed)
        self._report_went_back(back)
        return again

    def _report_went_back(self, back: list[tuple[str, int, int]]) -> None:
        """Conversations found at a lower version than this writer wrote: check the
        store's marker (a whole store lost is reported once), else report each."""
        if back and not self.connections.suspect():
            url = self.connections.url
            for cid, had, now in back:
                MARKERS.went_back(url, self.writer.prefix, cid, had, now)
        self.writer.drop_views_after(self.connections.data_lost)

    def _count(self, fed: list[tuple[str, int, int]]) -> None:
        """Count a round; a write that went through ends an out-of-memory spell."""
        self.counters.commits += 1
        self.counters.writes += len(fed)
        if fed:
            self.counters.out_of_memory_at = None

    def _out_of_memory(self, reply: Exception) -> StorageError:
        """A write Redis refused at its ``maxmemory`` (``noeviction``): nothing of it was
        written (a script is refused before its first write), and the store keeps
        running, so a client filling Redis cannot crash-loop it. Noted for
        `RedisEngine.refuses_writes`."""
        self.counters.out_of_memory_at = time.monotonic()
        return StorageError(
            f"Redis at {lua.redact(self.connections.url)} is out of memory ({reply}); "
            "nothing was written. Free memory in Redis or raise its maxmemory, and retry"
        )

    def _unreplicated(self, acked: int) -> WriteTimeout:
        return WriteTimeout(
            f"the write reached its Redis primary but only {acked} of "
            f"{self.connections.wait_replicas} replicas acknowledged it within "
            f"{self.connections.wait_timeout_ms} ms; its durability is unknown: retry with the "
            "same idempotency_key"
        )

    @staticmethod
    def _value(plan: Plan, version: int) -> Any:
        return plan.popped if plan.kind == _POPPED else version

    def _original(self, index: int, cid: str, reply: Sequence[Any]) -> Any:
        """What the write answered when it was applied, from a ``dup`` reply: a pop's
        message (from its stored event), any other write's version."""
        if not isinstance(self.requests[index], Pop):
            return int(reply[1])
        if len(reply) < 3:  # the pop's event was deleted by a later clear
            return None
        raw = reply[2]
        if not isinstance(raw, bytes | bytearray):
            raise CorruptRecord(f"the popped event of {cid!r} holds no encoded event")
        messages = codec.unpack_kind_and_messages(raw)[1]
        return messages[0] if messages else None

    def _recognise(self, todo: list[int]) -> list[int]:
        """Answer the writes of ``todo`` whose token is stored (an earlier send of theirs
        was applied) as that send would have been answered; returns the others."""
        looked = [i for i in todo if i in self.resent]
        pipe = self.connections.pipeline()
        for index in looked:
            request = self.requests[index]
            kind = _POPPED if isinstance(request, Pop) else ""
            keys = lua.resent_keys(self.writer.prefix, _written(request))
            # EVAL as a command: a Cluster pipeline has no eval(), but routes EVAL by key.
            pipe.execute_command("EVAL", lua.RESENT, len(keys), *keys, self.tokens[index], kind)
        found: set[int] = set()
        fed: list[tuple[str, int, int]] = []
        for index, reply in zip(looked, pipe.execute(), strict=True):
            if reply:
                cid = _written(self.requests[index])
                self.writer.views.forget(cid)
                self.results[index] = (True, self._original(index, cid, reply))
                fed.append((cid, int(reply[1]), 1))
                found.add(index)
        if fed and self.writer.cluster:
            self._feed(fed)
        return [i for i in todo if i not in found]

    def _retrying(self, fn: Callable[[A], T], arg: A) -> T:
        """Call ``fn(arg)`` until it does not fail for a lost connection, or the deadline."""
        while True:
            try:
                done = fn(arg)
            except CONNECTION_ERRORS as exc:
                self.connections.lost(exc)
                self._pause(exc)
                self.connections.refresh_topology()
            else:
                self.connections.reached()
                return done

    def _pause(self, cause: Exception) -> None:
        """Wait a moment before trying again, or give up at the deadline."""
        if time.monotonic() + _RETRY_PAUSE_S >= self.deadline:
            raise _Unreachable() from cause
        time.sleep(_RETRY_PAUSE_S)

    # -- sending --------------------------------------------------------------------------

    def _send(self, plans: list[Plan]) -> tuple[list[Any], dict[int, int]]:
        try:
            return self.connections.send([plan.command for plan in plans])
        except CONNECTION_ERRORS:
            self.resent.update(plan.index for plan in plans)  # applied or not: unknown
            raise

    def _feed(self, fed: list[tuple[str, int, int]]) -> None:
        """Add committed writes to the change feed (Redis Cluster: after the commit).

        Args:
            fed: per write, the conversation, its version and the lowest version to feed;
                memoryd's own bookkeeping (hidden ids) is never fed.
        """
        fed = [entry for entry in fed if not hidden(entry[0])]
        if not fed:
            return
        keys = self.writer.keys
        try:
            pipe = self.connections.pipeline()
            for cid, version, low in fed:
                hexid = cid.encode("utf-8").hex()
                pipe.execute_command(
                    "EVAL", lua.FEED, 2, keys.feed_stream, keys.feed_state, hexid, version, low
                )
            pipe.execute()
        except _FEED_LATER as exc:  # the conversation's next write feeds them
            url = lua.redact(self.connections.url)
            log.warning("redis_feed_deferred", url=url, error=repr(exc))


def _went_back(back: list[tuple[str, int, int]], views: Views, cid: str, now: int) -> None:
    """Note ``cid`` in ``back`` when Redis holds it at a lower version than the writer's
    view: versions never go back, but by memoryd's bookkeeping once erased (hidden)."""
    if cid in views and not hidden(cid):
        had = views[cid].version
        if now < had:
            back.append((cid, had, now))


def _written(request: WriteRequest) -> str:
    """The conversation ``request`` writes to."""
    return request.target if isinstance(request, Fork) else request.cid
