"""The run journal: every step of an agent run, checkpointed in the store as it happens.

Koog's Persistence, done as events on the public store API only:

* each run has a companion conversation ``memoryd.run/<run id>`` whose log holds
  ``memo`` events: ``start`` (the conversation, its version, the input messages), one
  ``step`` per message the run produced (the assistant message or the tool result, in
  the event's ``messages``), and ``end`` (committed or failed);
* each conversation has an index conversation ``memoryd.runs/<sha256 of its id>``
  whose newest ``memo`` event holds the ids of its unfinished runs; it is updated with
  ``expected_version`` (compare-and-set), so concurrent runs never lose an entry.

Why ``memo`` events in companion conversations: a memo event leaves ``get()``'s
history unchanged, so the journal never shows up in what a provider loads, and a
conversation holding no messages is not listed by ``conversations()``; the user's
conversation itself is not touched until the turn commits (its version stays the
base the commit's ``expected_version`` checks, and a session's memo, which is the
newest memo event *of that conversation*, is not disturbed). The index is a snapshot
rather than a log of start/end records so `pending` reads one event, whatever the
number of runs the conversation ever had. Ids stay within the 256-byte limit: a run
id is 32 hex digits and the index hashes the conversation id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.errors import ConflictError, UnknownRun
from memoryd.messages import CheckedMessages
from memoryd.store.handle import StoreHandle

__all__ = ["RunJournal", "RunRecord", "index_id", "journal_id"]

Message = dict[str, Any]
_MAX_CAS_ATTEMPTS = 100


def journal_id(run_id: str) -> str:
    """The companion conversation holding one run's journal.

    Args:
        run_id: The run id.

    Returns:
        ``memoryd.run/<run id>``.
    """
    return f"memoryd.run/{run_id}"


def index_id(cid: str) -> str:
    """The conversation holding the ids of a conversation's unfinished runs.

    Args:
        cid: The user's conversation id.

    Returns:
        ``memoryd.runs/<sha256 hex of the id>``.
    """
    return f"memoryd.runs/{hashlib.sha256(cid.encode('utf-8')).hexdigest()}"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord:
    """A run as its journal records it.

    Attributes:
        run_id: The run id.
        conversation_id: The conversation it runs on.
        base_version: The conversation's version when the run started.
        messages: The turn so far: the input, then every recorded step.
        inputs: How many of ``messages`` are the run's input.
        status: None while unfinished, else ``"committed"`` or ``"failed"``.
        version: The committed version (for ``"committed"``).
        error: What failed (for ``"failed"``).
    """

    run_id: str
    conversation_id: str
    base_version: int
    messages: tuple[Message, ...]
    inputs: int
    status: str | None = None
    version: int | None = None
    error: str | None = None


class RunJournal:
    """Reads and writes run journals in one store.

    Args:
        store: The store, or a function returning it (resolved on every call, so a
            journal on the default store survives ``memoryd.shutdown()``).
    """

    def __init__(self, store: StoreHandle | Callable[[], StoreHandle]) -> None:
        self._store = store

    @property
    def store(self) -> StoreHandle:
        """The store the journal lives in."""
        return self._store if isinstance(self._store, StoreHandle) else self._store()

    # -- writes ---------------------------------------------------------------------------

    def start(self, run_id: str, cid: str, base_version: int, messages: Sequence[Message]) -> None:
        """Record a run's start and list it as unfinished.

        Args:
            run_id: The run id.
            cid: The conversation.
            base_version: The conversation's version when the run started.
            messages: The input messages (a `CheckedMessages` is recorded as it is,
                without a second check).
        """
        data = {"type": "start", "conversation_id": cid, "base_version": base_version}
        batch = messages if isinstance(messages, CheckedMessages) else list(messages)
        self.store.record(
            journal_id(run_id), "memo", messages=batch, data=data, idempotency_key="start"
        )
        self._update_index(cid, add=run_id)

    def step(self, run_id: str, index: int, message: Message | CheckedMessages) -> None:
        """Record one message the run produced.

        Args:
            run_id: The run id.
            index: The message's position in the turn (part of the idempotency key).
            message: The assistant message or tool result, or a `CheckedMessages`
                holding just it (recorded as it is, without a second check).
        """
        self.store.record(
            journal_id(run_id),
            "memo",
            messages=message if isinstance(message, CheckedMessages) else [message],
            data={"type": "step", "index": index},
            idempotency_key=f"step/{index}",
        )

    def finish(
        self,
        run_id: str,
        cid: str,
        *,
        status: str,
        version: int | None = None,
        error: str | None = None,
    ) -> None:
        """Record how a run ended and drop it from the unfinished list.

        Args:
            run_id: The run id.
            cid: The conversation.
            status: ``"committed"`` or ``"failed"``.
            version: The committed version.
            error: What failed.
        """
        data = {"type": "end", "status": status, "version": version, "error": error}
        self.store.record(journal_id(run_id), "memo", data=data, idempotency_key=f"end/{status}")
        self._update_index(cid, remove=run_id)

    def _update_index(self, cid: str, *, add: str | None = None, remove: str | None = None) -> None:
        store = self.store
        target = index_id(cid)
        for _ in range(_MAX_CAS_ATTEMPTS):
            version, pending = self._snapshot(store, target)
            wanted = [r for r in pending if r != remove]
            if add is not None and add not in wanted:
                wanted.append(add)
            if wanted == pending:
                return
            try:
                store.record(target, "memo", data={"pending": wanted}, expected_version=version)
                return
            except ConflictError:
                continue
        raise ConflictError(  # pragma: no cover - needs 100 concurrent writers in a row
            f"the run index of {cid!r} kept changing; try again",
            expected=None,
            actual=store.version(target),
        )

    @staticmethod
    def _snapshot(store: StoreHandle, target: str) -> tuple[int, list[str]]:
        version = store.version(target)
        events = store.events(target, after=max(0, version - 1))
        if not events:
            return version, []
        last = events[-1]
        return last.version, list((last.data or {}).get("pending", []))

    # -- reads ----------------------------------------------------------------------------

    def pending(self, cid: str) -> list[str]:
        """The ids of the conversation's unfinished runs, oldest first.

        Args:
            cid: The conversation.

        Returns:
            Run ids.
        """
        return self._snapshot(self.store, index_id(cid))[1]

    def load(self, run_id: str) -> RunRecord:
        """Replay one run's journal.

        Args:
            run_id: The run id.

        Returns:
            The record.

        Raises:
            UnknownRun: No journal for ``run_id``.
        """
        events = self.store.events(journal_id(run_id))
        if not events or (events[0].data or {}).get("type") != "start":
            raise UnknownRun(
                f"no run {run_id!r} is recorded in the journal of store {self.store.name!r}; "
                "check the id (agent.pending_runs(conversation_id) lists them)"
            )
        start = events[0].data or {}
        messages: list[Message] = list(events[0].messages)
        status = version = error = None
        for event in events[1:]:
            data = event.data or {}
            if data.get("type") == "step":
                messages.extend(event.messages)
            elif data.get("type") == "end":
                status, version, error = data.get("status"), data.get("version"), data.get("error")
        return RunRecord(
            run_id=run_id,
            conversation_id=str(start["conversation_id"]),
            base_version=int(start["base_version"]),
            messages=tuple(messages),
            inputs=len(events[0].messages),
            status=status,
            version=version,
            error=error,
        )
