"""Planning Redis writes: what each write of a batch sends, from the writer's view.

The actor plans a write from its view of the conversation (version, first live
version, message count, last token): it encodes the event with the version it
will get and builds the `scripts.WRITE` call that appends it only if that
view is still current. Several writes to one conversation in one batch are
chained, each following the token of the one before. A pop, fork, clear or import
reads what it needs first (the last message, the source's history, the fresh
state, the stored events an import overlaps). A write that needs no script (a
pop of an empty conversation, a refused fork, an import already stored) is
answered here. `batch.Batch` sends the plans and reads the replies.

The planner is given what it uses, never the engine: the store's `Connections`
(to read views), its `Reads` (history and import state), and the `WriterState`
(prefix, Cluster flag, the views and script keys it caches, the token source).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from memoryd import codec
from memoryd._ids import IdSource
from memoryd.errors import ConflictError, CorruptRecord, UnknownConversation
from memoryd.events import Event, EventKind
from memoryd.store import importing
from memoryd.store import requests as req
from memoryd.store.redis import scripts as lua
from memoryd.store.redis.connections import Connections
from memoryd.store.redis.scripts import ScriptKeys
from memoryd.store.requests import Add, Clear, Fork, Import, Pop, Record, WriteRequest
from memoryd.store.systems import Fold

__all__ = ["Plan", "Planner", "Reads", "Result", "View", "Views", "WriterState"]

_POPPED = EventKind.POPPED.value
_CLEARED = EventKind.CLEARED.value
_WRITE_SHA = hashlib.sha1(lua.WRITE.encode("utf-8"), usedforsecurity=False).hexdigest()
_VIEWS_CACHED = 1 << 16

Result = tuple[bool, Any]


@dataclass(slots=True)
class View:
    """What the writer knows of one conversation; exact when its version is current,
    since a version is never reused (but by memoryd's bookkeeping once erased, whose
    writes are all compare-and-set: see `Planner._plan_erase`)."""

    version: int
    first: int
    count: int
    token: str = ""
    indexed: bool = True
    """The conversation's system-message index is complete (false for one written
    before the index existed: its next write rebuilds it)."""


class Views:
    """The writer's views of recently written conversations, by id.

    Bounded: each planning round first makes room for every view it may add
    (`make_room`), emptying the cache when it would overfill, so the cache holds at
    most ``size`` views plus those of one round, and no view a round reads is dropped
    while it plans. A conversation without a view is read afresh.
    """

    def __init__(self, size: int = _VIEWS_CACHED) -> None:
        self._size = size
        self._views: dict[str, View] = {}

    def __contains__(self, cid: object) -> bool:
        return cid in self._views

    def __getitem__(self, cid: str) -> View:
        return self._views[cid]

    def __len__(self) -> int:
        return len(self._views)

    def make_room(self, n: int) -> None:
        """Empty the cache if ``n`` more views would overfill it."""
        if len(self._views) + n > self._size:
            self._views.clear()

    def remember(self, cid: str, view: View) -> None:
        """Keep ``view`` as the writer's view of ``cid``."""
        self._views[cid] = view

    def forget(self, cid: str) -> None:
        """Drop the view of ``cid`` (it is out of date, or its write's outcome unknown)."""
        self._views.pop(cid, None)

    def clear(self) -> None:
        """Drop every view."""
        self._views.clear()


@dataclass(frozen=True, kw_only=True, slots=True)
class Reads:
    """The reads a plan needs before it writes.

    Attributes:
        history: ``history(cid, limit, at_version) -> (version, messages)``; raises
            ``ValueError`` for a version past the end or before the last clear.
        import_state: ``import_state(cid, low, high) -> (version, first, count,
            events by version)``, read atomically.
    """

    history: Callable[[str, int | None, int | None], tuple[int, list[dict[str, Any]]]]
    import_state: Callable[[str, int, int], tuple[int, int, int, dict[int, Event]]]


class WriterState:
    """What the batch writer keeps from batch to batch: its views of the conversations,
    the script keys it built, and the source of fresh write tokens. The owner's thread only.

    Args:
        prefix: the store's key prefix.
        cluster: the store is on a Redis Cluster.
    """

    def __init__(self, prefix: str, *, cluster: bool) -> None:
        self.prefix = prefix
        self.cluster = cluster
        self.views = Views()
        self.keys = ScriptKeys(prefix, cluster=cluster)
        self._tokens = IdSource(nonce_bytes=8)
        self.losses_seen = 0
        """The store's data losses (`identity`) the views were dropped for: views taken
        before a loss describe data that is gone."""

    def drop_views_after(self, losses: int) -> None:
        """Drop every view if the store's data was found lost since they were taken."""
        if losses != self.losses_seen:
            self.views.clear()
            self.losses_seen = losses

    def token(self) -> str:
        """A write token never handed out before: a random nonce and a serial."""
        return self._tokens.next()


@dataclass(slots=True)
class Plan:
    """One write as it will be sent: the script's keys and arguments."""

    index: int
    cid: str
    kind: str
    """The kind of the event written, or ``"import"``."""
    command: tuple[Any, ...]
    """``EVALSHA`` of `scripts.WRITE` (``EVAL`` of ``IMPORT``) with its keys and arguments."""
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


class Planner:
    """Plans the writes of one batch. Runs in the actor's thread.

    Args:
        requests: the batch's writes.
        tokens: each write's fresh token.
        results: each write's answer, filled in here for writes that need no script.
        resent: the writes an earlier send of which may have been applied; their
            scripts look their token up whatever the view (the set is the batch's,
            and grows as the batch goes).
        now: the commit timestamp of every event of the batch.
        connections: the store's connections (the writer's views are read through them).
        writer: the writer's state (views, script keys).
        reads: the history and import-state reads.
    """

    def __init__(
        self,
        requests: Sequence[WriteRequest],
        tokens: list[str],
        results: list[Result | None],
        now: float,
        *,
        connections: Connections,
        writer: WriterState,
        reads: Reads,
        resent: set[int],
    ) -> None:
        self.connections = connections
        self.resent = resent
        self.writer = writer
        self.reads = reads
        self.requests = requests
        self.tokens = tokens
        self.results = results
        self.now = now

    def _fresh_views(self, cids: list[str]) -> None:
        prefix = self.writer.prefix
        views = self.writer.views
        pipe = self.connections.pipeline()
        for cid in cids:
            pipe.hmget(lua.conv_keys(prefix, cid).meta, "v", "f", "n", "t", "y")
        for cid, (v, f, n, t, y) in zip(cids, pipe.execute(), strict=True):
            views.remember(
                cid,
                View(
                    0 if v is None else int(v),
                    1 if f is None else int(f),
                    0 if n is None else int(n),
                    "" if t is None else _text(t),
                    v is None or y is not None,
                ),
            )

    def plan(self, todo: list[int]) -> list[Plan]:
        """Build the script calls for ``todo``; answer at once what needs no write."""
        views = self.writer.views
        views.make_room(len(todo))  # a round adds at most one view per write
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
                views.remember(plan.cid, plan.after)
                plans.append(plan)
        return plans

    def _plan_one(self, index: int, chained: dict[str, str]) -> Plan | None:
        request = self.requests[index]
        if isinstance(request, Add):
            view = self.writer.views[request.cid]
            event = _Event(
                EventKind.APPENDED.value,
                request.messages,
                view.count + len(request.messages),
                idem=request.idempotency_key,
                expected=request.expected_version,
            )
            return self._make(index, request.cid, view, chained, event)
        if isinstance(request, Record):
            if request.supersede:  # refused on a current view, not a cached one
                self._fresh_views([request.cid])
            view = self.writer.views[request.cid]
            if request.supersede and view.count:
                self.results[index] = (False, req.supersede_refused(request.cid, view.count))
                return None
            event = _Event(
                request.kind,
                request.messages,
                view.count,
                data=request.data,
                idem=request.idempotency_key,
                expected=request.expected_version,
                clear=request.supersede,  # the stream is emptied first: the memo alone is left
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
        view = self.writer.views[request.cid]
        if isinstance(request, Clear) and req.hidden(request.cid) and view.version:
            return self._plan_erase(index, request.cid)
        if view.count == 0:
            self.results[index] = (True, None)
            return None
        if isinstance(request, Clear):
            event = _Event(EventKind.CLEARED.value, (), 0, clear=True)
            return self._make(index, request.cid, view, chained, event)
        _, last = self.reads.history(request.cid, 1, view.version)
        if not last:
            raise CorruptRecord(f"{request.cid!r} counts {view.count} messages but has none")
        event = _Event(_POPPED, last, view.count - 1)
        plan = self._make(index, request.cid, view, chained, event)
        plan.popped = last[0]
        return plan

    def _plan_erase(self, index: int, cid: str) -> Plan:
        """A clear of memoryd's own bookkeeping (a finished run's journal): `scripts.ERASE`
        deletes every key of it, so a run leaves nothing behind; its id reads as never
        written. Erased with or without messages, as LMDB erases it."""
        keys = lua.erase_keys(self.writer.prefix, cid)
        command = ("EVAL", lua.ERASE, len(keys), *keys)
        return Plan(index=index, cid=cid, kind=_CLEARED, command=command, after=View(0, 1, 0))

    def _plan_fork(self, index: int, request: Fork, chained: dict[str, str]) -> Plan | None:
        source_meta = lua.conv_keys(self.writer.prefix, request.source).meta
        if self.connections.call(lambda c: c.hget(source_meta, "v")) is None:
            unknown = UnknownConversation(
                f"cannot fork {request.source!r}: it was never written; nothing was "
                f"written to {request.target!r}"
            )
            self.results[index] = (False, unknown)
            return None
        try:
            source_version, copied = self.reads.history(request.source, None, request.at_version)
        except ValueError as exc:
            self.results[index] = (False, exc)
            return None
        if request.at_version is not None:
            source_version = request.at_version
        self._fresh_views([request.target])
        view = self.writer.views[request.target]
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
        """One `scripts.IMPORT` of the events not stored yet, after checking them all
        against one atomic read (`importing.to_write`); nothing to write: answered now."""
        writer = self.writer
        cid, events = request.cid, request.events
        current, first, count, stored = self.reads.import_state(
            cid, events[0].version, events[-1].version
        )
        writer.views.forget(cid)
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
        fold = self._fold(cid, current, count, self._indexed(cid))
        for event in new:
            fold.apply(event.kind, event.messages)
        index_words = _fold_words(fold)
        first, count = importing.state_after(new, first=first, count=count)
        words: list[Any] = []
        for event, record in zip(new, records, strict=True):
            kind = str(event.kind)
            words += (event.version, kind, len(event.messages), record, event.idempotency_key or "")
        keys = lua.import_keys(writer.prefix, cid, cluster=writer.cluster)
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
            "0" if writer.cluster or req.hidden(cid) else "1",
            cid.encode("utf-8").hex(),
            lua.MAX_TOKENS,
            index_words[0],
            (len(index_words) - 1) // 2,
            *index_words[1:],
            *words,
        )
        after = View(new[-1].version, first, count, token)
        return Plan(
            index=index, cid=cid, kind="import", command=command, after=after, feed_from=first
        )

    def _indexed(self, cid: str) -> bool:
        """Whether ``cid``'s system index is complete (a conversation never written: yes).

        Read apart from the import's state: an index, once complete, stays so, and a
        stale "no" only costs a rebuild."""
        meta = lua.conv_keys(self.writer.prefix, cid).meta
        v, y = self.connections.call(lambda c: c.hmget(meta, "v", "y"))
        return v is None or y is not None

    def _make(
        self, index: int, cid: str, view: View, chained: dict[str, str], event: _Event
    ) -> Plan:
        writer = self.writer
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
        keys, hexid = writer.keys(cid)
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
            "0" if writer.cluster or req.hidden(cid) else "1",
            hexid,
            lua.MAX_TOKENS,
            "1" if index in self.resent else "0",
            *self._index_words(cid, view, event.kind, event.messages),
        )
        first = view.version + 1 if event.clear else view.first
        after = View(view.version + 1, first, event.left, token)
        return Plan(index=index, cid=cid, kind=event.kind, command=command, after=after)

    def _fold(self, cid: str, version: int, count: int, indexed: bool) -> Fold:
        """The system-index change a write starts from; a conversation without a complete
        index is rebuilt from its history at ``version`` (the script's base check makes
        a write planned from an out-of-date read answer stale)."""
        if indexed:
            return Fold(count)
        try:
            _, history = self.reads.history(cid, None, version)
        except ValueError:
            history = []  # cleared since the view was read: the write comes back stale
        return Fold.rebuilt(history)

    def _index_words(
        self, cid: str, view: View, kind: str, messages: Sequence[dict[str, Any]]
    ) -> list[Any]:
        """The `scripts.WRITE` arguments that update the system index with one event."""
        replaces = kind in (EventKind.CLEARED.value, EventKind.FORKED.value)
        fold = self._fold(cid, view.version, view.count, view.indexed or replaces)
        fold.apply(kind, messages)
        return _fold_words(fold)


def _fold_words(fold: Fold) -> list[Any]:
    """A fold as script arguments: the ordinal to drop from ('' for none), then the
    (ordinal, entry) pairs to add."""
    words: list[Any] = ["" if not (fold.reset or fold.floor < fold.start) else fold.floor]
    for ordinal, message in fold.added:
        words += (ordinal, codec.pack_value([ordinal, message]))
    return words


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
