"""StoreHandle: the public store API, validated in the caller's thread.

Every backend (LMDB, ephemeral, Redis, remote) subclasses it and implements the
``_``-prefixed hooks; the checks and the documented behaviour live here once.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from memoryd import messages as msgs
from memoryd.errors import WouldWait
from memoryd.store import requests
from memoryd.store.systems import with_system

if TYPE_CHECKING:
    from memoryd.events import Change, Event
    from memoryd.store.requests import Add, Clear, Fork, Import, Pop, Record, WriteRequest

    _Versioned = Add | Fork | Import | Record
    """The writes a store answers with the conversation's new version."""

__all__ = [
    "INLINE_READ_LIMIT",
    "PendingWrite",
    "StoreHandle",
    "WouldWait",
    "without_waiting",
    "would_wait",
]

INLINE_READ_LIMIT = 200
"""The most records `StoreHandle.reads_inline` lets a caller read on an event loop."""

_NO_WAITING = contextvars.ContextVar("memoryd_no_waiting", default=False)


@contextlib.contextmanager
def without_waiting() -> Iterator[None]:
    """Reads in this block raise `WouldWait` instead of waiting for their store.

    An event loop reading inline (`StoreHandle.reads_inline`) uses it: a store that is
    restarting must not hold the loop for up to the call's deadline.
    """
    token = _NO_WAITING.set(True)
    try:
        yield
    finally:
        _NO_WAITING.reset(token)


def would_wait() -> bool:
    """True inside `without_waiting`: a backend raises `WouldWait` rather than wait."""
    return _NO_WAITING.get()


class PendingWrite:
    """A write handed to its store and not waited for yet (`StoreHandle.begin`).

    Args:
        request: the write.
        wait: blocks until the store answers, and returns its raw answer or raises
            what the write raises; called at most once.
    """

    __slots__ = ("_outcome", "_request", "_wait")

    def __init__(self, request: WriteRequest, wait: Callable[[], Any]) -> None:
        self._request = request
        self._wait: Callable[[], Any] | None = wait
        self._outcome: tuple[bool, Any] = (False, None)

    @classmethod
    def failed(cls, request: WriteRequest, error: Exception) -> PendingWrite:
        """A write that failed before it was sent: ``result()`` raises ``error``."""

        def fail() -> Any:
            raise error

        return cls(request, fail)

    def result(self) -> Any:
        """Wait for the write: what its `StoreHandle` method returns, or what it raises.

        Asked again, it answers the same without waiting.
        """
        wait, self._wait = self._wait, None
        if wait is not None:
            try:
                self._outcome = (True, requests.result(self._request, wait()))
            except BaseException as exc:
                self._outcome = (False, exc)
                raise
        ok, value = self._outcome
        if not ok:
            raise value
        return value


class StoreHandle(abc.ABC):
    """A handle on a store, addressed by its registered name.

    Handles are cheap values: any number may address the same store, and a
    handle keeps working across restarts of the store's actor.
    """

    name: str
    max_message_bytes: int

    # -- writes -----------------------------------------------------------------

    def add(
        self,
        cid: str,
        messages: Sequence[dict[str, Any]],
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
        then_clear: str | None = None,
    ) -> int:
        """Append ``messages`` to conversation ``cid`` as ONE event, atomically.

        Args:
            cid: the conversation id.
            messages: one or more OpenAI-format messages: a list or tuple is checked
                and copied (changing it afterwards changes nothing stored); a
                `memoryd.messages.CheckedMessages` is taken as it is, without a second
                check (only its sizes are compared with ``max_message_bytes``).
            idempotency_key: makes retries safe: a repeated key (per conversation)
                returns the original version and writes nothing.
            expected_version: optimistic concurrency: refuse unless the conversation
                is at exactly this version.
            then_clear: another conversation to clear once the add is written (also
                when the idempotency key was seen before), never when it is refused.
                LMDB stores (and a daemon serving them) write both in one transaction;
                Redis clears right after the add, so a crash may leave it undone.

        Returns:
            The conversation's new version.

        Raises:
            InvalidConversationId: a bad ``cid`` or ``then_clear``.
            InvalidMessage: a bad or oversized message (nothing is written).
            ValueError: ``then_clear`` is ``cid``.
            ConflictError: ``expected_version`` did not match.
            WriteTimeout: no answer in time; retry with the same idempotency key.
            StoreUnavailable: the store is not running.
        """
        return self._send(
            requests.add(
                cid,
                messages,
                idempotency_key=idempotency_key,
                expected_version=expected_version,
                max_bytes=self.max_message_bytes,
                then_clear=then_clear,
            )
        )

    def record(
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
        """Append a ``memo`` or ``compacted`` event; the history `get` returns is unchanged.

        Providers use it: a session's memo is the ``data`` of the newest ``memo``
        event; a summary is a ``compacted`` event whose ``messages`` hold the summary
        and whose ``data`` names the versions it replaces. Read them with `events`.

        A memo written with ``supersede=True`` replaces the conversation's earlier
        events: they leave its log, as a clear's do, and `events` returns the memo
        alone. The version goes on counting, so compare-and-set still works, and a
        state kept as memos (an instance's lease) stays one event however often it is
        written. It is for memoryd's own bookkeeping (ids in
        `memoryd.store.requests.HIDDEN_PREFIX`, which exports skip: an import would
        refuse a log that starts past version 1 without a cleared marker), and only
        for a conversation that holds no messages.

        Args:
            cid: the conversation id.
            kind: ``"memo"`` or ``"compacted"``.
            messages: messages the event carries (may be empty).
            data: a JSON-compatible mapping (str keys) stored with the event.
            idempotency_key: as in `add`.
            expected_version: as in `add`.
            supersede: drop the conversation's earlier events (a ``memo`` to a hidden
                id only).

        Returns:
            The conversation's new version.

        Raises:
            InvalidConversationId: a bad ``cid``.
            InvalidMessage: a bad or oversized message.
            ValueError: an unknown ``kind``, or ``data`` that is not a JSON-compatible
                mapping or is larger than the store's ``max_message_bytes``; a
                superseding event that is not a memo, aimed at an id outside the
                hidden space, or at a conversation holding messages (nothing is written).
            ConflictError: ``expected_version`` did not match.
            WriteTimeout: no answer in time; retry with the same idempotency key.
            StoreUnavailable: the store is not running.
        """
        return self._send(
            requests.record(
                cid,
                kind,
                messages=messages,
                data=data,
                idempotency_key=idempotency_key,
                expected_version=expected_version,
                max_bytes=self.max_message_bytes,
                supersede=supersede,
            )
        )

    def import_events(self, cid: str, events: Sequence[Event]) -> int:
        """Write ``events`` to ``cid`` exactly as they are: the exact-import path.

        Every field is kept: version, kind, messages, timestamp, idempotency key and
        data (a ``forked``, ``memo`` or ``compacted`` event stays one). Events whose
        version is at most the conversation's current version must already be in its
        log, identical in kind, version, messages and data; they are skipped, so
        importing the same events twice changes nothing. Events older than the
        conversation's last clear cannot be compared and are skipped too. The other
        events must continue the log at the current version + 1; a conversation
        holding no messages may instead continue with a ``cleared`` marker at any
        later version (an export of a cleared conversation starts with one). A
        ``cleared`` event deletes the messages before it, as `clear` does. All of it
        is one atomic write: on any error nothing is written.

        Args:
            cid: the conversation id.
            events: one or more events, versions increasing by one, oldest first
                (a chunk of a log: import a long log in several calls, in order).

        Returns:
            The conversation's version after the import.

        Raises:
            InvalidConversationId: a bad ``cid``.
            InvalidMessage: a bad or oversized message in an event.
            ValueError: no events, versions that do not increase by one, or an event
                whose idempotency key or ``data`` is invalid.
            ConflictError: an event at or below the current version differs from the
                stored one, or the events do not continue the log.
            WriteTimeout: no answer in time; importing again is safe.
            StoreUnavailable: the store is not running.
        """
        return self._send(requests.import_events(cid, events, max_bytes=self.max_message_bytes))

    def clear(self, cid: str) -> None:
        """Delete the conversation's messages durably; the log keeps a ``cleared`` marker.

        A conversation holding no messages is left as it is (no event).
        """
        self._send(requests.clear(cid))

    def pop(self, cid: str) -> dict[str, Any] | None:
        """Remove and return the last message (a ``popped`` event), or None if there is none."""
        return self._send(requests.pop(cid))

    def fork(self, source: str, target: str, *, at_version: int | None = None) -> int:
        """Start ``target`` as a copy of ``source``'s history (as of ``at_version``).

        Returns:
            ``target``'s new version.

        Raises:
            UnknownConversation: ``source`` was never written (nothing is written).
            ValueError: ``source == target``, or ``at_version`` out of range.
            ConflictError: ``target`` holds messages.
        """
        return self._send(requests.fork(source, target, at_version=at_version))

    @overload
    def _send(self, request: _Versioned) -> int: ...
    @overload
    def _send(self, request: Pop) -> dict[str, Any] | None: ...
    @overload
    def _send(self, request: Clear) -> None: ...
    def _send(self, request: WriteRequest) -> Any:
        """The sync write path: send ``request``, answer what `submit` answers."""
        return requests.result(request, self._write(request))

    @overload
    async def submit(self, request: _Versioned) -> int: ...
    @overload
    async def submit(self, request: Pop) -> dict[str, Any] | None: ...
    @overload
    async def submit(self, request: Clear) -> None: ...
    async def submit(self, request: WriteRequest) -> Any:
        """Send a write built by `memoryd.store.requests` and await its result off the loop.

        The awaitable write path (`AsyncStore` and the daemon use it): it returns
        what the matching method (`add`, `clear`, ...) returns and raises what it
        raises. A store served by a store actor answers the event loop directly,
        with no worker thread in between; other stores run the call in a worker
        thread. Cancelling the awaiting task does not cancel a write already handed
        to the store: it may still commit (retry with its idempotency key).
        """
        return requests.result(request, await self._write_async(request))

    def begin(self, request: WriteRequest) -> PendingWrite:
        """Send a write built by `memoryd.store.requests`; wait for it later.

        The caller goes on with other work while the store commits (a run's journal
        write overlaps its next LLM call), then calls ``result()`` on the answer,
        which returns what the matching method (`add`, `record`, ...) returns and
        raises what it raises, ``StoreUnavailable`` included. A store served by a
        store actor has the write in its inbox when this returns; a store without one
        (`RemoteStore`) writes it here and now.
        """
        try:
            answer = self._write(request)
        except Exception as exc:  # raised by result(), as every backend's errors are
            return PendingWrite.failed(request, exc)
        return PendingWrite(request, lambda: answer)

    def begin_on_loop(self, request: WriteRequest) -> Awaitable[Any]:
        """`begin` from a running event loop: send a write now, await its result later.

        Awaiting the returned awaitable gives what `submit` returns and raises what it
        raises. It may be awaited again: a cancelled await leaves the write going, and
        the next await gets its outcome. A store served by a store actor has the write
        in its inbox (or in the loop's batch of this iteration) when this returns, and
        writes begun one after another reach it in that order; other stores send each
        from a worker thread as soon as the loop runs its next callbacks, in no set
        order among themselves (await a write before beginning one that depends on it).
        Must be called from the loop's thread.
        """
        import asyncio  # noqa: PLC0415 (a program that never awaits a write skips loading asyncio)

        sending = asyncio.ensure_future(self.submit(request))
        sending.add_done_callback(_retrieve)  # an owner that stops first never awaits it
        return Shielded(sending)

    async def _write_async(self, request: WriteRequest) -> Any:
        import asyncio  # noqa: PLC0415 (a program that never awaits a write skips loading asyncio)

        return await asyncio.to_thread(self._write, request)

    def refuses_writes(self) -> bool:
        """A hint, read without a round trip: True while the store is known to refuse
        every write (a local store on a full disk; a Redis store for a second after Redis
        refused a write at its ``maxmemory``), so a caller may stop before work whose
        outcome it could not record (an agent run, before a tool step). False when that
        is not known, as it never is through a daemon: the write says so."""
        return False

    def reads_inline(self, records: int | None) -> bool:
        """True when reading ``records`` records is cheap enough to run on an event loop.

        Only a local store whose reads walk a memory map says yes, and only for at most
        `INLINE_READ_LIMIT` records (the last-50 read row of `make bench`): less than a
        hand-off to a worker thread and back. None (all records) is never inline. Read inside
        `without_waiting`: the store may start restarting after this answer.
        """
        return False

    # -- reads ------------------------------------------------------------------

    def get(
        self,
        cid: str,
        *,
        limit: int | None = None,
        at_version: int | None = None,
        system: bool = False,
    ) -> list[dict[str, Any]]:
        """The conversation's history, chronological: fresh copies.

        With ``system=True`` and a ``limit``, the last ``limit`` messages come after
        every system (and developer) message stored before them, in their order: all
        a window needs (`memoryd.safe_window` keeps every system message), read in
        O(limit + system messages) from the conversation's system-message index. It is
        a flag of `get`, not a method of its own, so that the system messages and the
        tail are one read of one state: no write can fall between them (on LMDB one
        read transaction, on Redis one script, on the daemon one request).

        Args:
            cid: the conversation id.
            limit: only the last ``limit`` messages (read in O(limit)).
            at_version: the history as it was right after that version (with
                ``system``, read whole and cut: the index holds the current state).
            system: also return the system messages before the last ``limit``.

        Raises:
            ValueError: a bad ``limit`` or ``system``, or ``at_version`` past the end or
                before a clear.
        """
        cid = msgs.validate_conversation_id(cid)
        limit = requests.check_optional_count(limit, "limit")
        at_version = requests.check_optional_version(at_version, "at_version")
        if not isinstance(system, bool):
            raise ValueError(f"system must be True or False, not {system!r}")
        if not system or limit is None:
            return self._get(cid, limit, at_version)
        if at_version is not None:
            return with_system(self._get(cid, None, at_version), limit)
        return self._get_system(cid, limit)

    def version(self, cid: str) -> int:
        """The conversation's version: 0 if it was never written."""
        return self._version(msgs.validate_conversation_id(cid))

    def events(self, cid: str, *, after: int = 0, limit: int | None = None) -> list[Event]:
        """The conversation's event log (versions above ``after``), oldest first.

        Args:
            cid: the conversation.
            after: only events with a version above this one.
            limit: at most this many events (the oldest); None for all. Page a long log
                with ``after`` set to the last version of the previous page: a clear
                between two pages removes the events before it from later pages, and
                the clear event itself comes in order, as in the change feed.
        """
        return self._events(
            msgs.validate_conversation_id(cid),
            requests.check_after(after),
            requests.check_optional_count(limit, "limit"),
        )

    def conversations(
        self,
        *,
        prefix: str = "",
        after: str | None = None,
        limit: int | None = None,
        include_empty: bool = False,
    ) -> list[str]:
        """Ids of conversations that hold messages now, sorted; page with ``after``.

        Args:
            prefix: only ids starting with this.
            after: only ids sorting after this one (the last id of the previous page).
            limit: at most this many ids.
            include_empty: also list every conversation with events but no messages
                now: cleared ones, and logs of ``memo`` or ``compacted`` events only
                (long-term memory records live in such logs). Export uses it.

        memoryd's own bookkeeping (ids starting with `requests.HIDDEN_PREFIX`, the run
        journals) is listed only when ``prefix`` starts with that prefix.
        """
        prefix = requests.check_prefix(prefix, "prefix")
        if after is not None:
            after = requests.check_prefix(after, "after")
        if not isinstance(include_empty, bool):
            raise ValueError(f"include_empty must be True or False, not {include_empty!r}")
        count = requests.check_optional_count(limit, "limit")
        found: list[str] = []
        while True:
            page = self._conversations(prefix, after, count, include_empty)
            found.extend(cid for cid in page if not requests.hidden(cid, prefix))
            if count is None or len(page) < count or len(found) >= count:
                return found[:count] if count is not None else found
            after = page[-1]  # a page cut short by hidden ids: fill it

    def tail(self, *, after: int = 0, limit: int = 1000, timeout: float = 0.0) -> list[Change]:
        """The global change feed in commit order, from position ``after + 1``.

        Blocks up to ``timeout`` seconds while there is nothing new. Changes to
        memoryd's own bookkeeping (`requests.HIDDEN_PREFIX`) are skipped: positions
        may have gaps.
        """
        after = requests.check_after(after)
        count = requests.check_optional_count(limit, "limit")
        wait = requests.check_timeout(timeout)
        deadline = time.monotonic() + wait
        while True:
            changes = self._tail(after, 1000 if count is None else count, wait)
            shown = [c for c in changes if not requests.hidden(c.conversation_id)]
            if shown or not changes:
                return shown
            after = changes[-1].position  # only hidden changes: look past them
            wait = max(0.0, deadline - time.monotonic())

    @abc.abstractmethod
    def stats(self) -> dict[str, Any]:
        """Counts and sizes of the store."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the store (commit what it accepted, close its storage)."""

    # -- backend hooks ------------------------------------------------------------

    @abc.abstractmethod
    def _write(self, request: WriteRequest) -> Any: ...

    @abc.abstractmethod
    def _get(self, cid: str, limit: int | None, at_version: int | None) -> list[dict[str, Any]]: ...

    def _get_system(self, cid: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` messages after the system messages before them, as one read.

        This default reads the whole history; a backend with a system-message index
        overrides it.
        """
        return with_system(self._get(cid, None, None), limit)

    @abc.abstractmethod
    def _version(self, cid: str) -> int: ...

    @abc.abstractmethod
    def _events(self, cid: str, after: int, limit: int | None) -> list[Event]: ...

    @abc.abstractmethod
    def _conversations(
        self, prefix: str, after: str | None, limit: int | None, include_empty: bool
    ) -> list[str]: ...

    @abc.abstractmethod
    def _tail(self, after: int, limit: int, timeout: float) -> list[Change]: ...

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and getattr(other, "name", None) == self.name

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))


class Shielded:
    """A future awaited through `asyncio.shield`: a cancelled await leaves it going, and
    it can be awaited again for its outcome (`StoreHandle.begin_on_loop`)."""

    __slots__ = ("future",)

    def __init__(self, future: Any) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, Any]:
        import asyncio  # noqa: PLC0415 (loaded already by whoever made the future)

        return asyncio.shield(self.future).__await__()


def _retrieve(sending: Any) -> None:
    """Take a write's outcome, so that one nobody awaited is not reported as lost."""
    if not sending.cancelled():
        sending.exception()
