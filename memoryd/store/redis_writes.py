"""One batch of writes to Redis: planned from the writer's view, sent as one pipeline.

Every write is one `redis_scripts.WRITE` call. The actor plans it from its view of
the conversation (version, first live version, message count), encodes the event
with the version it will get, and the script appends it only if that view is
still current; otherwise it answers ``stale`` with the current state and the
write is planned again. Several writes to one conversation in one pipeline are
chained: each must follow the token of the one before it, so a write never
lands on a state it was not planned for, whichever daemon wrote meanwhile.

Adds and records are planned together; a pop, fork, clear or import reads what it
needs first (the last message, the source's history, the fresh state, the stored
events an import overlaps) and goes alone. An import is one `redis_scripts.IMPORT`
call that writes all its events or none.
Each write carries a fresh token that the script remembers, so a pipeline resent
after a lost connection writes nothing twice, even without an idempotency key.

The scripts go out grouped by the primary holding their keys (one group on a single
server), each group on one connection (`redis_wire`); with ``wait_replicas`` each
group ends with ``WAIT`` on that connection, so every primary that took a write of
the batch is asked for its own replicas' acknowledgements. A write whose primary's
replicas came short is committed there but answered with `WriteTimeout`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import redis
import structlog

from memoryd import codec
from memoryd.errors import ConflictError, CorruptRecord, StorageError, WriteTimeout
from memoryd.events import EventKind
from memoryd.store import importing, redis_wire
from memoryd.store import redis_scripts as lua
from memoryd.store.requests import Add, Clear, Fork, Import, Pop, Record, WriteRequest

if TYPE_CHECKING:
    from memoryd.store.redis_engine import RedisEngine

__all__ = ["CONNECTION_ERRORS", "Batch", "Plan", "View"]

log = structlog.get_logger(__name__)

T = TypeVar("T")
A = TypeVar("A")

CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)
"""The errors that mean "Redis is not reachable now", not "the request is wrong"."""

_POPPED = EventKind.POPPED.value
_WRITE_SHA = hashlib.sha1(lua.WRITE.encode("utf-8"), usedforsecurity=False).hexdigest()
_MAX_ROUNDS = 1000
_CACHE_SIZE = 1 << 16
_RETRY_PAUSE_S = 0.05

Result = tuple[bool, Any]


@dataclass(slots=True)
class View:
    """What the writer knows of one conversation; exact when its version is current,
    since a version is never reused."""

    version: int
    first: int
    count: int
    token: str = ""


@dataclass(slots=True)
class Plan:
    """One write as it will be sent: the script's keys and arguments."""

    index: int
    cid: str
    kind: str
    """The kind of the event written, or ``"import"``."""
    command: tuple[Any, ...]
    """``EVALSHA`` of `redis_scripts.WRITE` (``EVAL`` of ``IMPORT``) with its keys and arguments."""
    after: View
    popped: dict[str, Any] | None = None
    feed_from: int = 1
    """The lowest version the change feed needs (on a Cluster, fed after the commit)."""


class _Event(NamedTuple):
    """What a plan writes: kind, messages, the messages left in the conversation after it."""

    kind: str
    messages: Sequence[dict[str, Any]]
    left: int
    data: dict[str, Any] | None = None
    idem: str | None = None
    expected: int | None = None
    clear: bool = False


class _Unreachable(Exception):
    """Redis stayed unreachable until the batch's deadline."""


_REDIRECTS = (redis.exceptions.NoScriptError, redis.exceptions.AskError, *CONNECTION_ERRORS)
"""Error replies that mean the script did not run there and should be sent again:
the script is not in that node's cache, or its slot is moving or unserved now."""


class Batch:
    """Commits one batch of write requests through ``engine``. Runs in the actor's thread.

    Args:
        engine: the store's engine (client, prefix, the writer's views).
        requests: the writes, in arrival order.
        now: the commit timestamp of every event of the batch.
    """

    def __init__(self, engine: RedisEngine, requests: Sequence[WriteRequest], now: float) -> None:
        self.engine = engine
        self.requests = requests
        self.now = now
        self.tokens = [engine.token() for _ in requests]
        self.results: list[Result | None] = [None] * len(requests)
        self.deadline = time.monotonic() + engine.call_timeout_s
        self.refused: Exception | None = None
        """Set when a node refused a script for now (moved slot, cluster down, ...)."""

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
            self.engine.views.clear()
            error = WriteTimeout(
                f"Redis at {lua.redact(self.engine.url)} was unreachable for "
                f"{self.engine.call_timeout_s:g} s ({exc.__cause__!r}); the write's outcome "
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
            plans = self._retrying(self._plan, todo)
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
        views = self.engine.views
        fed: list[tuple[str, int, int]] = []
        again: list[int] = []
        self.refused = None
        for i, (plan, reply) in enumerate(zip(plans, replies, strict=True)):
            if isinstance(reply, Exception):
                if not isinstance(reply, _REDIRECTS):
                    raise reply
                if not isinstance(reply, redis.exceptions.NoScriptError):
                    self.refused = reply
                views.pop(plan.cid, None)
                again.append(plan.index)
                continue
            status = reply[0]
            if status == b"ok":
                self._remember(plan.cid, plan.after)
                fed.append((plan.cid, int(reply[1]), plan.feed_from))
                if i in short:
                    self.results[plan.index] = (False, self._unreplicated(short[i]))
                else:
                    self.results[plan.index] = (True, self._value(plan, int(reply[1])))
            elif status == b"dup":
                views.pop(plan.cid, None)
                self.results[plan.index] = (True, self._value(plan, int(reply[1])))
            elif status == b"conflict":
                views.pop(plan.cid, None)
                expected = getattr(self.requests[plan.index], "expected_version", None)
                error = ConflictError(expected=expected, actual=int(reply[1]))
                self.results[plan.index] = (False, error)
            else:  # stale: nothing written; plan again from the state Redis sent
                self._remember(plan.cid, View(int(reply[1]), int(reply[2]), int(reply[3])))
                again.append(plan.index)
        self.engine.commits += 1
        self.engine.writes += len(fed)
        if fed and self.engine.cluster:
            self._feed(fed)
        return again

    def _unreplicated(self, acked: int) -> WriteTimeout:
        return WriteTimeout(
            f"the write reached its Redis primary but only {acked} of "
            f"{self.engine.wait_replicas} replicas acknowledged it within "
            f"{self.engine.wait_timeout_ms} ms; its durability is unknown: retry with the "
            "same idempotency_key"
        )

    @staticmethod
    def _value(plan: Plan, version: int) -> Any:
        return plan.popped if plan.kind == _POPPED else version

    def _remember(self, cid: str, view: View) -> None:
        views = self.engine.views
        if len(views) > _CACHE_SIZE:
            views.clear()
        views[cid] = view

    def _retrying(self, fn: Callable[[A], T], arg: A) -> T:
        """Call ``fn(arg)`` until it does not fail for a lost connection, or the deadline."""
        while True:
            try:
                return fn(arg)
            except CONNECTION_ERRORS as exc:
                self.engine.reconnects += 1
                log.warning("redis_unreachable", url=lua.redact(self.engine.url), error=repr(exc))
                self._pause(exc)
                self.engine.refresh_topology()

    def _pause(self, cause: Exception) -> None:
        """Wait a moment before trying again, or give up at the deadline."""
        if time.monotonic() + _RETRY_PAUSE_S >= self.deadline:
            raise _Unreachable() from cause
        time.sleep(_RETRY_PAUSE_S)

    # -- planning -------------------------------------------------------------------------

    def _fresh_views(self, cids: list[str]) -> None:
        pipe = self.engine.pipeline()
        for cid in cids:
            pipe.hmget(lua.conv_keys(self.engine.prefix, cid).meta, "v", "f", "n", "t")
        for cid, (v, f, n, t) in zip(cids, pipe.execute(), strict=True):
            self._remember(
                cid,
                View(
                    0 if v is None else int(v),
                    1 if f is None else int(f),
                    0 if n is None else int(n),
                    "" if t is None else _text(t),
                ),
            )

    def _plan(self, todo: list[int]) -> list[Plan]:
        """Build the script calls for ``todo``; answer at once what needs no write."""
        views = self.engine.views
        missing = {
            request.cid
            for request in (self.requests[i] for i in todo)
            if isinstance(request, Add | Record) and request.cid not in views
        }
        if missing:
            self._fresh_views(sorted(missing))
        chained: dict[str, str] = {}
        plans: list[Plan] = []
        for index in todo:
            plan = self._plan_one(index, chained)
            if plan is not None:
                chained[plan.cid] = self.tokens[index]
                views[plan.cid] = plan.after
                plans.append(plan)
        return plans

    def _plan_one(self, index: int, chained: dict[str, str]) -> Plan | None:
        request = self.requests[index]
        if isinstance(request, Add):
            view = self.engine.views[request.cid]
            event = _Event(
                EventKind.APPENDED.value,
                request.messages,
                view.count + len(request.messages),
                idem=request.idempotency_key,
                expected=request.expected_version,
            )
            return self._make(index, request.cid, view, chained, event)
        if isinstance(request, Record):
            view = self.engine.views[request.cid]
            event = _Event(
                request.kind,
                request.messages,
                view.count,
                data=request.data,
                idem=request.idempotency_key,
                expected=request.expected_version,
            )
            return self._make(index, request.cid, view, chained, event)
        if isinstance(request, Clear | Pop):
            return self._plan_removal(index, request, chained)
        if isinstance(request, Fork):
            return self._plan_fork(index, request, chained)
        if isinstance(request, Import):
            return self._plan_import(index, request)
        raise TypeError(f"unknown write request {request!r}")

    def _plan_removal(
        self, index: int, request: Clear | Pop, chained: dict[str, str]
    ) -> Plan | None:
        self._fresh_views([request.cid])
        view = self.engine.views[request.cid]
        if view.count == 0:
            self.results[index] = (True, None)
            return None
        if isinstance(request, Clear):
            event = _Event(EventKind.CLEARED.value, (), 0, clear=True)
            return self._make(index, request.cid, view, chained, event)
        _, last = self.engine.history(request.cid, 1, view.version)
        if not last:
            raise CorruptRecord(f"{request.cid!r} counts {view.count} messages but has none")
        event = _Event(_POPPED, last, view.count - 1)
        plan = self._make(index, request.cid, view, chained, event)
        plan.popped = last[0]
        return plan

    def _plan_fork(self, index: int, request: Fork, chained: dict[str, str]) -> Plan | None:
        try:
            source_version, copied = self.engine.history(request.source, None, request.at_version)
        except ValueError as exc:
            self.results[index] = (False, exc)
            return None
        if request.at_version is not None:
            source_version = request.at_version
        self._fresh_views([request.target])
        view = self.engine.views[request.target]
        if view.count > 0:
            error = ConflictError(
                f"fork target {request.target!r} already holds {view.count} messages "
                f"(version {view.version}); clear it or fork into a new conversation id",
                expected=None,
                actual=view.version,
            )
            self.results[index] = (False, error)
            return None
        data = {"source": request.source, "source_version": source_version}
        event = _Event(EventKind.FORKED.value, copied, len(copied), data=data)
        return self._make(index, request.target, view, chained, event)

    def _plan_import(self, index: int, request: Import) -> Plan | None:
        """One `redis_scripts.IMPORT` of the events not stored yet, after checking them all
        against one atomic read (`importing.to_write`); nothing to write: answered now."""
        engine = self.engine
        cid, events = request.cid, request.events
        current, first, count, stored = engine.import_state(
            cid, events[0].version, events[-1].version
        )
        engine.views.pop(cid, None)
        try:
            new = importing.to_write(
                cid,
                events,
                current=current,
                first=first,
                count=count,
                stored=lambda low, high: stored,
            )
            records = [codec.pack_event(event, trusted=True) for event in new]
        except (ConflictError, ValueError) as exc:
            self.results[index] = (False, exc)
            return None
        if not new:
            self.results[index] = (True, current)
            return None
        first, count = importing.state_after(new, first=first, count=count)
        words: list[Any] = []
        for event, record in zip(new, records, strict=True):
            kind = str(event.kind)
            words += (event.version, kind, len(event.messages), record, event.idempotency_key or "")
        keys = lua.import_keys(engine.prefix, cid, cluster=engine.cluster)
        token = self.tokens[index]
        command = (
            "EVAL",
            lua.IMPORT,
            len(keys),
            *keys,
            token,
            current,
            first,
            count,
            "0" if engine.cluster else "1",
            cid.encode("utf-8").hex(),
            *words,
        )
        after = View(new[-1].version, first, count, token)
        return Plan(
            index=index, cid=cid, kind="import", command=command, after=after, feed_from=first
        )

    def _make(
        self, index: int, cid: str, view: View, chained: dict[str, str], event: _Event
    ) -> Plan:
        engine = self.engine
        token = self.tokens[index]
        payload = codec.pack_event_fields(
            version=view.version + 1,
            kind=event.kind,
            messages=event.messages,
            timestamp=self.now,
            idempotency_key=event.idem,
            data=event.data,
            trusted=True,
        )
        keys, hexid = engine.script_keys(cid)
        command = (
            "EVALSHA",
            _WRITE_SHA,
            len(keys),
            *keys,
            token,
            event.idem or "",
            "" if event.expected is None else event.expected,
            view.version,
            chained.get(cid, ""),
            event.left,
            "1" if event.clear else "0",
            event.kind,
            len(event.messages),
            payload,
            "0" if engine.cluster else "1",
            hexid,
            lua.MAX_TOKENS,
        )
        first = view.version + 1 if event.clear else view.first
        after = View(view.version + 1, first, event.left, token)
        return Plan(index=index, cid=cid, kind=event.kind, command=command, after=after)

    # -- sending --------------------------------------------------------------------------

    def _send(self, plans: list[Plan]) -> tuple[list[Any], dict[int, int]]:
        return redis_wire.send(self.engine, [plan.command for plan in plans])

    def _feed(self, fed: list[tuple[str, int, int]]) -> None:
        """Add committed writes to the change feed (Redis Cluster: after the commit).

        Args:
            fed: per write, the conversation, its version and the lowest version to feed.
        """
        engine = self.engine
        try:
            pipe = engine.pipeline()
            for cid, version, low in fed:
                hexid = cid.encode("utf-8").hex()
                pipe.execute_command(
                    "EVAL", lua.FEED, 2, engine.feed_stream, engine.feed_state, hexid, version, low
                )
            pipe.execute()
        except CONNECTION_ERRORS as exc:  # the conversation's next write feeds them
            log.warning("redis_feed_deferred", url=lua.redact(engine.url), error=repr(exc))


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
