"""RecordBook: reading, writing and forgetting memory records on a store, by scope.

The I/O half of `memoryd.memory.records`: each write is one ``memo`` event appended with
``expected_version`` (retried on a conflict), each read folds a scope's events. Which
scopes a conversation sees is decided here and only here: the global records and the
records of its own session, never another session's.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

import structlog

from memoryd import messages as msgs
from memoryd.errors import ConflictError
from memoryd.memory.extract import Fact
from memoryd.memory.records import (
    DEFAULT_IMPORTANCE,
    SESSION,
    MemoryRecord,
    dedupe_key,
    fold,
    merge_provenance,
    records_conversation,
)
from memoryd.store.handle import StoreHandle

__all__ = ["RecordBook"]

log = structlog.get_logger(__name__)

_WRITE_ATTEMPTS = 32
"""Read-and-write attempts of one record write before it gives up (`ConflictError`).

Each failed attempt means another writer's record went in (no one livelocks); in this
process writers take turns (`_WRITE_LOCKS`), so attempts are spent only on writers in
other processes: 3 lost most records of 6 processes writing at once, 32 lost none.
"""

_WRITE_LOCKS = tuple(threading.RLock() for _ in range(64))
"""Striped by (store name, records conversation), a bounded set however many
conversations there are: the writers of one process take turns, so they do not spend
their attempts on each other's conflicts (every conversation writes the global records).
Writers in other processes still meet as conflicts, and are retried. Reentrant because
two records conversations may share a stripe: a thread holding one never blocks itself."""


def _write_lock(store: StoreHandle, target: str) -> threading.RLock:
    return _WRITE_LOCKS[hash((store.name, target)) % len(_WRITE_LOCKS)]


class RecordBook:
    """The records of some scopes on one store.

    Args:
        store: Where the records live.
        scopes: The scopes read and written (validated by the caller).
        clock: Epoch-seconds clock for record timestamps.
    """

    def __init__(
        self,
        store: StoreHandle,
        scopes: Sequence[str],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.scopes = tuple(scopes)
        self._clock = clock

    def conversation(self, scope: str, cid: str) -> str:
        """The records conversation of ``scope`` as seen from conversation ``cid``."""
        return records_conversation(scope, cid if scope == SESSION else None)

    def _visible(self, cid: str) -> Iterator[tuple[str, str, dict[str, MemoryRecord]]]:
        """Each scope ``cid`` sees, with its records conversation and current records."""
        msgs.validate_conversation_id(cid)
        for scope in self.scopes:
            target = self.conversation(scope, cid)
            yield scope, target, fold(self.store.events(target))

    def read(self, cid: str) -> list[MemoryRecord]:
        """The records ``cid`` may see: global ones, then its own session's (reads the store).

        Args:
            cid: The conversation id.

        Returns:
            The current records.
        """
        return [record for _, _, records in self._visible(cid) for record in records.values()]

    def remember(
        self, cid: str, fact: Fact, *, versions: Sequence[int] = ()
    ) -> MemoryRecord | None:
        """Store ``fact``: update the record it restates, or add a new one.

        A restatement replaces the record's kind and body, adds its tags and provenance,
        and keeps the record's importance unless the fact gives one. The writers of one
        process take turns on a records conversation; a write from another process in
        between is a conflict, and the read and write are tried again.

        Args:
            cid: The conversation the fact came from (its provenance).
            fact: A validated fact.
            versions: The versions of ``cid`` that stated it.

        Returns:
            The record written, or None when nothing changed (or its scope is off).

        Raises:
            ConflictError: The records changed under every attempt.
            ValueError: The record holds a value the store cannot hold (NaN, a body past
                its ``max_message_bytes``, ...); nothing is written.
        """
        if fact.scope not in self.scopes:
            log.info(
                "memory_fact_skipped", conversation=cid, reason="scope_disabled", scope=fact.scope
            )
            return None
        target = self.conversation(fact.scope, cid)
        with _write_lock(self.store, target):
            return self._write(cid, target, fact, versions)

    def _write(
        self, cid: str, target: str, fact: Fact, versions: Sequence[int]
    ) -> MemoryRecord | None:
        """`remember`'s read, fold and compare-and-set write, retried on a conflict."""
        conflict = ConflictError("no write attempted", expected=None, actual=0)
        for attempt in range(_WRITE_ATTEMPTS):
            events = self.store.events(target)
            current = fold(events)
            base = events[-1].version if events else 0
            wanted = dedupe_key(fact.kind, fact.body)
            old = next((r for r in current.values() if dedupe_key(r.kind, r.body) == wanted), None)
            now = float(self._clock())
            op: Literal["add", "update"]
            if old is None:
                record = MemoryRecord(
                    id=uuid.uuid4().hex,
                    scope=fact.scope,
                    kind=fact.kind,
                    body=fact.body,
                    tags=fact.tags,
                    importance=(DEFAULT_IMPORTANCE if fact.importance is None else fact.importance),
                    provenance=merge_provenance((), cid, versions),
                    created_at=now,
                    updated_at=now,
                )
                op = "add"
            else:
                record = dataclasses.replace(
                    old,
                    kind=fact.kind,
                    body=fact.body,
                    tags=tuple(dict.fromkeys((*old.tags, *fact.tags))),
                    importance=old.importance if fact.importance is None else fact.importance,
                    provenance=merge_provenance(old.provenance, cid, versions),
                    updated_at=now,
                )
                if dataclasses.replace(record, updated_at=old.updated_at) == old:
                    return None
                op = "update"
            try:
                written = self.store.record(
                    target, "memo", data=record.to_data(op), expected_version=base
                )
            except ConflictError as exc:
                log.info("memory_write_retried", conversation=cid, attempt=attempt + 1)
                conflict = exc
                continue
            log.info(
                "memory_record_written",
                conversation=cid,
                op=op,
                id=record.id,
                scope=record.scope,
                kind=record.kind,
            )
            return dataclasses.replace(record, version=int(written))
        raise conflict

    def forget(self, cid: str) -> list[str]:
        """Delete ``cid``'s session records and the global records only it provided.

        Each deletion is a ``delete`` event; the log keeps the history.

        Args:
            cid: The conversation id.

        Returns:
            The ids deleted.
        """
        deleted: list[str] = []
        for scope, target, records in self._visible(cid):
            for record in records.values():
                if scope == SESSION or record.conversations == {cid}:
                    self.store.record(target, "memo", data={"op": "delete", "id": record.id})
                    deleted.append(record.id)
        log.info("memory_forgotten", conversation=cid, deleted=len(deleted))
        return deleted
