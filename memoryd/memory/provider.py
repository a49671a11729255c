"""LongTermMemory: a MemoryProvider that extracts, stores and recalls long-term records.

It wraps another provider (or a store, wrapped in a `DefaultProvider`) and adds:

* after each `append`, an LLM extraction of reusable facts into memory records (see
  `memoryd.memory.records`); a reply that is not valid JSON is logged
  (``memory_extraction_invalid``) and skipped, an LLM failure is logged
  (``memory_extraction_failed``): neither ever reaches the caller;
* in `history`, a snapshot of the records the conversation may see (global ones and its
  own session's), kept in memory, so that
* `prepare` stays pure: it ranks the snapshot with BM25 against the newest user message
  (no I/O) and injects the best records as ONE system message within ``max_chars``.

LLM rerank is I/O, so it never runs inside `prepare`: call `recall` (which reads the
store and reranks) before `prepare`, and `prepare` uses that cached result for the same
query; in an `Agent`, pass ``filters=[memory.rerank_filter()]`` to do it per run.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import structlog

from memoryd import messages as msgs
from memoryd.errors import ConflictError
from memoryd.llm.base import ChatModel
from memoryd.memory._cache import Lru
from memoryd.memory.extract import (
    DEFAULT_EXTRACTION_INSTRUCTION,
    ExtractionError,
    Fact,
    extraction_request,
    parse_facts,
    reply_text,
)
from memoryd.memory.filter import RecallFilter, query_of
from memoryd.memory.records import (
    GLOBAL,
    SCOPES,
    SESSION,
    MemoryRecord,
    dedupe_key,
    fold,
    merge_provenance,
    records_conversation,
)
from memoryd.memory.retrieve import (
    DEFAULT_RERANK_INSTRUCTION,
    Recall,
    inject,
    rank,
    rerank,
)
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA, check_schema
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider
from memoryd.store.handle import StoreHandle

__all__ = ["LongTermMemory"]

log = structlog.get_logger(__name__)

Message = dict[str, Any]
_WRITE_ATTEMPTS = 3
_CACHE_SIZE = 1024


def _is_provider(value: Any) -> bool:
    return all(callable(getattr(value, n, None)) for n in ("history", "append", "prepare", "clear"))


class LongTermMemory:
    """A `MemoryProvider` adding scoped long-term memory records to another provider.

    Args:
        provider_or_store: The provider whose history this wraps, or a store handle
            (wrapped in a `DefaultProvider`).
        llm: The `ChatModel` that extracts facts (and reranks, with ``rerank=True``).
        scopes: The scopes read and written: ``"global"`` (shared by every
            conversation of the store) and/or ``"session"`` (one conversation's own).
        store: Where records live; default the wrapped provider's ``.store``.
        extraction_instruction: The system prompt of the extraction call.
        body_schema: The JSON schema subset every record body must match.
        top_k: At most this many records are injected.
        candidates: How many BM25 candidates `recall` hands to the rerank.
        max_chars: The character budget of the injected system message.
        rerank: Let `recall` ask the LLM to order the candidates.
        rerank_instruction: The system prompt of the rerank call.
        rerank_min_candidates: Below this many candidates the rerank is skipped.
        rerank_retries: Extra rerank attempts after a failed or malformed reply.
        keep_candidates_on_empty_rerank: When the rerank keeps nothing, inject the
            deterministic candidates (True) or nothing (False).
        clock: Epoch-seconds clock for record timestamps.

    Raises:
        TypeError: ``provider_or_store`` is neither a provider nor a store, no store can
            be found, or ``llm`` has no ``complete``.
        ValueError: An unknown scope, a malformed schema, or a number out of range.
    """

    def __init__(
        self,
        provider_or_store: MemoryProvider | StoreHandle,
        *,
        llm: ChatModel,
        scopes: Sequence[str] = (GLOBAL, SESSION),
        store: StoreHandle | None = None,
        extraction_instruction: str = DEFAULT_EXTRACTION_INSTRUCTION,
        body_schema: Mapping[str, Any] = DEFAULT_BODY_SCHEMA,
        top_k: int = 5,
        candidates: int = 20,
        max_chars: int = 2000,
        rerank: bool = False,
        rerank_instruction: str = DEFAULT_RERANK_INSTRUCTION,
        rerank_min_candidates: int = 2,
        rerank_retries: int = 1,
        keep_candidates_on_empty_rerank: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        inner: Any = provider_or_store
        if isinstance(provider_or_store, StoreHandle):
            inner = DefaultProvider(provider_or_store)
        elif not _is_provider(provider_or_store):
            raise TypeError(
                f"provider_or_store must be a MemoryProvider or a store handle, "
                f"got {provider_or_store!r:.80}"
            )
        self.inner: MemoryProvider = inner
        found = store if store is not None else getattr(inner, "store", None)
        if not isinstance(found, StoreHandle):
            raise TypeError("no store for the records: pass store=<store handle>")
        self._store: StoreHandle = found
        if not callable(getattr(llm, "complete", None)):
            raise TypeError(f"llm must be a ChatModel with a complete() method, got {llm!r:.80}")
        self.llm = llm
        scopes = tuple(scopes)
        if not scopes or any(s not in SCOPES for s in scopes) or len(set(scopes)) != len(scopes):
            raise ValueError(f"scopes must be distinct names among {SCOPES}, got {scopes!r}")
        self.scopes = scopes
        if not isinstance(extraction_instruction, str) or not extraction_instruction.strip():
            raise ValueError("extraction_instruction must be a non-empty str")
        self.extraction_instruction = extraction_instruction
        self.body_schema = check_schema(body_schema, "body_schema")
        for name, value, low in (
            ("top_k", top_k, 1),
            ("candidates", candidates, 1),
            ("max_chars", max_chars, 1),
            ("rerank_min_candidates", rerank_min_candidates, 0),
            ("rerank_retries", rerank_retries, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        self.top_k, self.candidates, self.max_chars = top_k, max(candidates, top_k), max_chars
        self.rerank = bool(rerank)
        self.rerank_instruction = rerank_instruction
        self.rerank_min_candidates = rerank_min_candidates
        self.rerank_retries = rerank_retries
        self.keep_candidates_on_empty_rerank = bool(keep_candidates_on_empty_rerank)
        self._clock = clock
        self._snapshots = Lru(_CACHE_SIZE)  # cid -> tuple[MemoryRecord, ...]
        self._recalls = Lru(_CACHE_SIZE)  # (cid, query) -> Recall

    @property
    def store(self) -> StoreHandle:
        """The store holding the records (and, usually, the conversations)."""
        return self._store

    # -- records ------------------------------------------------------------------------

    def _scope_cid(self, scope: str, cid: str) -> str:
        return records_conversation(scope, cid if scope == SESSION else None)

    def records(self, cid: str) -> list[MemoryRecord]:
        """The records conversation ``cid`` may see: global ones, then its session's.

        Args:
            cid: The conversation id.

        Returns:
            The current records (reads the store).
        """
        msgs.validate_conversation_id(cid)
        found: list[MemoryRecord] = []
        for scope in self.scopes:
            found.extend(fold(self._store.events(self._scope_cid(scope, cid))).values())
        self._snapshots.put(cid, tuple(found))
        return found

    def remember(
        self, cid: str, fact: Fact, *, versions: Sequence[int] = ()
    ) -> MemoryRecord | None:
        """Store ``fact``: update the record it restates, or add a new one.

        Args:
            cid: The conversation the fact came from (its provenance).
            fact: A validated fact.
            versions: The versions of ``cid`` that stated it.

        Returns:
            The record written, or None when nothing changed (or its scope is off).

        Raises:
            ConflictError: The records changed under every attempt.
        """
        if fact.scope not in self.scopes:
            log.info(
                "memory_fact_skipped", conversation=cid, reason="scope_disabled", scope=fact.scope
            )
            return None
        target = self._scope_cid(fact.scope, cid)
        conflict = ConflictError("no write attempted", expected=None, actual=0)
        for attempt in range(_WRITE_ATTEMPTS):
            events = self._store.events(target)
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
                    importance=fact.importance,
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
                    importance=fact.importance,
                    provenance=merge_provenance(old.provenance, cid, versions),
                    updated_at=now,
                )
                if dataclasses.replace(record, updated_at=old.updated_at) == old:
                    return None
                op = "update"
            try:
                self._store.record(target, "memo", data=record.to_data(op), expected_version=base)
            except ConflictError as exc:
                log.info("memory_write_retried", conversation=cid, attempt=attempt + 1)
                conflict = exc
                continue
            self._recalls.clear()
            log.info(
                "memory_record_written",
                conversation=cid,
                op=op,
                id=record.id,
                scope=record.scope,
                kind=record.kind,
            )
            return record
        raise conflict

    def forget(self, cid: str) -> list[str]:
        """Delete ``cid``'s session records and the global records only it provided.

        Each deletion is a ``delete`` event; the log keeps the history.

        Args:
            cid: The conversation id.

        Returns:
            The ids deleted.
        """
        msgs.validate_conversation_id(cid)
        deleted: list[str] = []
        for scope in self.scopes:
            target = self._scope_cid(scope, cid)
            for record in fold(self._store.events(target)).values():
                if scope == SESSION or record.conversations == {cid}:
                    self._store.record(target, "memo", data={"op": "delete", "id": record.id})
                    deleted.append(record.id)
        self._snapshots.clear()
        self._recalls.clear()
        log.info("memory_forgotten", conversation=cid, deleted=len(deleted))
        return deleted

    # -- extraction ---------------------------------------------------------------------

    def extract(
        self, cid: str, messages: Sequence[Message], *, versions: Sequence[int] = ()
    ) -> list[MemoryRecord]:
        """Ask the LLM for facts in ``messages`` and store them. Never raises for the LLM.

        Args:
            cid: The conversation id.
            messages: The new messages.
            versions: The versions that hold them (the provenance).

        Returns:
            The records added or updated.
        """
        known = self.records(cid)
        request = extraction_request(self.extraction_instruction, messages, known)
        try:
            reply = self.llm.complete(request)
        except Exception as exc:  # any model or transport failure: skip this extraction
            log.warning(
                "memory_extraction_failed",
                conversation=cid,
                error=f"{type(exc).__name__}: {exc}"[:300],
            )
            return []
        default = SESSION if SESSION in self.scopes else GLOBAL
        try:
            facts, problems = parse_facts(
                reply_text(reply), self.body_schema, default_scope=default
            )
        except ExtractionError as exc:
            log.warning("memory_extraction_invalid", conversation=cid, error=str(exc)[:300])
            return []
        for problem in problems:
            log.warning("memory_extraction_invalid", conversation=cid, error=problem[:300])
        written = [r for f in facts if (r := self.remember(cid, f, versions=versions))]
        self.records(cid)
        return written

    # -- retrieval ----------------------------------------------------------------------

    def recall(self, cid: str, query: str) -> Recall:
        """Retrieve the records for ``query``: BM25, then the LLM rerank if enabled.

        The result is cached: a later `prepare` whose newest user message is ``query``
        injects it.

        Args:
            cid: The conversation id.
            query: The question.

        Returns:
            The records chosen, best first, with the fallbacks taken.
        """
        query = query.strip()
        candidates = rank(
            query, self.records(cid), k=self.candidates if self.rerank else self.top_k
        )
        if self.rerank and candidates:
            result = rerank(
                self.llm,
                query,
                candidates,
                instruction=self.rerank_instruction,
                min_candidates=self.rerank_min_candidates,
                retries=self.rerank_retries,
                keep_candidates_on_empty=self.keep_candidates_on_empty_rerank,
                conversation=cid,
            )
            result = dataclasses.replace(result, records=result.records[: self.top_k])
        else:
            result = Recall(query=query, records=tuple(candidates[: self.top_k]))
        self._recalls.put((cid, query), result)
        return result

    def cached_recall(self, cid: str, query: str) -> Recall | None:
        """The result of the latest `recall` of ``query`` in ``cid``, if still valid.

        A record written through this instance invalidates every cached recall.

        Args:
            cid: The conversation id.
            query: The question.

        Returns:
            The cached recall, or None.
        """
        found: Recall | None = self._recalls.get((cid, query.strip()))
        return found

    def rerank_filter(self) -> RecallFilter:
        """A kernel filter that runs `recall` (with the LLM rerank) before each request.

        Pass it to ``memoryd.Agent(filters=[...])`` so agent runs get reranked memory:
        at the first LLM call of a run it recalls for the newest user message (I/O is
        allowed in filters, unlike in `prepare`) and replaces the memory block
        `prepare` injected; later calls of the run reuse that recall.

        Returns:
            The filter.
        """
        return RecallFilter(self)

    # -- MemoryProvider -----------------------------------------------------------------

    def history(self, cid: str) -> list[Message]:
        """The wrapped provider's history; also loads the records ``cid`` may see.

        Args:
            cid: The conversation id.

        Returns:
            The wrapped provider's history.
        """
        history = self.inner.history(cid)
        self.records(cid)
        return history

    def append(
        self, cid: str, messages: list[Message], *, idempotency_key: str | None = None
    ) -> int:
        """Append through the wrapped provider, then extract facts from ``messages``.

        Args:
            cid: The conversation id.
            messages: The messages to add.
            idempotency_key: As in the wrapped provider's ``append``.

        Returns:
            The version of the append.
        """
        version = int(self.inner.append(cid, messages, idempotency_key=idempotency_key))
        try:
            self.extract(cid, messages, versions=[version])
        except Exception as exc:  # a store failure writing records must not fail the turn
            log.warning(
                "memory_extraction_failed",
                conversation=cid,
                error=f"{type(exc).__name__}: {exc}"[:300],
            )
        return version

    def prepare(self, cid: str, messages: list[Message]) -> list[Message]:
        """The wrapped provider's messages plus ONE system message of relevant records.

        Pure: no I/O. The records come from the `recall` cached for the newest user
        message, else from a BM25 ranking of the snapshot the last `history` (or
        `records`) loaded; with neither, nothing is injected. The memory message goes
        after the leading system messages.

        Args:
            cid: The conversation id.
            messages: History and the current turn.

        Returns:
            The messages to send.
        """
        prepared = self.inner.prepare(cid, messages)
        query = query_of(messages)
        if not query:
            return prepared
        cached = self.cached_recall(cid, query)
        if cached is not None:
            chosen: Sequence[MemoryRecord] = cached.records
        else:
            snapshot: tuple[MemoryRecord, ...] | None = self._snapshots.get(cid)
            chosen = rank(query, snapshot, k=self.top_k) if snapshot else ()
        return inject(prepared, chosen, self.max_chars)

    def clear(self, cid: str, *, forget: bool = False) -> None:
        """Clear the conversation; with ``forget``, also its records (see `forget`).

        Args:
            cid: The conversation id.
            forget: Delete the session's records and the global ones only it provided.
        """
        self.inner.clear(cid)
        if forget:
            self.forget(cid)

    def __repr__(self) -> str:
        return f"LongTermMemory({self.inner!r}, scopes={self.scopes!r})"
