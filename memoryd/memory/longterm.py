"""LongTermMemory: a MemoryProvider that extracts, stores and recalls long-term records.

It wraps another provider (or a store, wrapped in a `DefaultProvider`) and adds:

* after each `append`, an LLM extraction of reusable facts into memory records (see
  `memoryd.memory.records`, written by a `RecordBook`); a reply that is not valid JSON is
  logged (``memory_extraction_invalid``) and skipped, an LLM failure is logged
  (``memory_extraction_failed``): neither ever reaches the caller;
* in `history`, a snapshot of the records the conversation may see (global ones and its
  own session's), kept in memory; with dense retrieval the model is loaded and the
  snapshot embedded there too, so that
* `prepare` stays pure: it ranks the snapshot (``retrieval``: BM25, dense or hybrid,
  see `memoryd.memory.search`) against the newest user message, with no I/O, and injects
  the best records as ONE system message within ``max_chars``.

LLM query planning and rerank are I/O, so they never run inside `prepare`: call `recall`
(which reads the store, plans, searches and reranks) before `prepare`, and `prepare`
uses that cached result for the same query; in an `Agent`, pass
``filters=[memory.rerank_filter()]`` to do it per run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from memoryd.errors import ConflictError
from memoryd.llm.base import ChatModel
from memoryd.memory._cache import Lru
from memoryd.memory.book import RecordBook
from memoryd.memory.extract import (
    DEFAULT_EXTRACTION_INSTRUCTION,
    DEFAULT_MAX_FACTS,
    Fact,
    ask_facts,
)
from memoryd.memory.filter import RecallFilter, query_of
from memoryd.memory.pipeline import RecallSettings, check_settings, recall_records
from memoryd.memory.plan import DEFAULT_PLAN_INSTRUCTION
from memoryd.memory.records import GLOBAL, SCOPES, SESSION, MemoryRecord
from memoryd.memory.retrieve import DEFAULT_RERANK_INSTRUCTION, Recall, inject
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA, check_schema
from memoryd.memory.search import Searcher
from memoryd.provider.chat_store import check_store, looks_like_store
from memoryd.provider.default import DefaultProvider
from memoryd.provider.protocol import MemoryProvider, append_options, provider_append
from memoryd.store.handle import StoreHandle

__all__ = ["LongTermMemory"]

log = structlog.get_logger(__name__)

Message = dict[str, Any]
_CACHE_SIZE = 1024


class LongTermMemory:
    """A `MemoryProvider` adding scoped long-term memory records to another provider.

    Args:
        provider_or_store: The provider whose history this wraps (beamai's four
            callbacks are enough), or a store handle or any `memoryd.ChatStore`
            (wrapped in a `DefaultProvider`).
        llm: The `ChatModel` that extracts facts (and plans and reranks, when enabled).
        scopes: The scopes read and written: ``"global"`` (shared by every
            conversation of the store) and/or ``"session"`` (one conversation's own).
        store: Where records live: a store handle; default the wrapped provider's
            ``.store`` when that is one (a `memoryd.ChatStore` alone cannot hold records).
        extraction_instruction: The system prompt of the extraction call.
        body_schema: The JSON schema subset every record body must match, or Agently's flat
            form (`{"preference": "string", ...}`), translated by `check_schema`.
        retrieval: ``"bm25"`` (bm25s, the ``memory`` extra), ``"dense"`` (a local
            all-MiniLM-L6-v2, the ``dense`` extra) or ``"hybrid"`` (both, fused).
        min_similarity: Dense and hybrid leave out records below this cosine similarity.
        top_k: At most this many records are injected.
        candidates: How many candidates `recall` hands to the rerank.
        max_chars: The character budget of the injected system message.
        plan_queries: Let `recall` ask the LLM to rewrite the user's turn into search
            queries first (a failure falls back to the turn, ``memory_plan_failed``).
        plan_instruction: The system prompt of the planning call.
        max_queries: At most this many planned queries are searched.
        rerank: Let `recall` ask the LLM to order the candidates.
        rerank_instruction: The system prompt of the rerank call.
        rerank_min_candidates: Below this many candidates the rerank is skipped.
        rerank_retries: Extra rerank attempts after a failed or malformed reply.
        keep_candidates_on_empty_rerank: When the rerank keeps nothing, inject the
            deterministic candidates (True) or nothing (False).
        max_facts: The most facts one extraction stores; the rest of a longer reply is
            dropped and logged (``memory_extraction_invalid``).
        clock: Epoch-seconds clock for record timestamps.

    Raises:
        TypeError: ``provider_or_store`` is neither a provider nor a store (the message
            names what a store lacks), no store handle for the records can be found,
            or ``llm`` has no ``complete``.
        ValueError: An unknown scope or retrieval mode, a malformed schema, or a number
            out of range.
        DenseUnavailable: ``retrieval`` is dense or hybrid and the ``dense`` extra is not
            installed (``pip install 'memoryd[dense]'``).
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
        retrieval: str = "bm25",
        min_similarity: float = 0.2,
        top_k: int = 5,
        candidates: int = 20,
        max_chars: int = 2000,
        plan_queries: bool = False,
        plan_instruction: str = DEFAULT_PLAN_INSTRUCTION,
        max_queries: int = 3,
        rerank: bool = False,
        rerank_instruction: str = DEFAULT_RERANK_INSTRUCTION,
        rerank_min_candidates: int = 2,
        rerank_retries: int = 1,
        keep_candidates_on_empty_rerank: bool = True,
        max_facts: int = DEFAULT_MAX_FACTS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        inner: Any = provider_or_store
        if isinstance(provider_or_store, StoreHandle):
            inner = DefaultProvider(provider_or_store)
        elif not isinstance(provider_or_store, MemoryProvider):
            if not looks_like_store(provider_or_store):
                raise TypeError(
                    "LongTermMemory needs a MemoryProvider (history, append, prepare, clear) "
                    f"or a store (get, add, clear), got {provider_or_store!r:.80}"
                )
            inner = DefaultProvider(check_store(provider_or_store, user="LongTermMemory"))
        self.inner: MemoryProvider = inner
        self.append_options = append_options(inner)
        found = store if store is not None else getattr(inner, "store", None)
        if not isinstance(found, StoreHandle):
            raise TypeError(
                "LongTermMemory keeps its records in a memoryd store handle, and "
                f"{found if found is not None else inner!r:.80} is none (a store with only "
                "get/add/clear cannot hold records): pass store=<store handle>, for "
                "example memoryd.LmdbStore.start(...)"
            )
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
        if isinstance(max_facts, bool) or not isinstance(max_facts, int) or max_facts < 1:
            raise ValueError(f"max_facts must be an int >= 1, not {max_facts!r}")
        self.max_facts = max_facts
        self.body_schema = check_schema(body_schema, "body_schema")
        self.settings = check_settings(
            RecallSettings(
                top_k=top_k,
                candidates=candidates,
                max_chars=max_chars,
                plan_queries=plan_queries,
                plan_instruction=plan_instruction,
                max_queries=max_queries,
                rerank=rerank,
                rerank_instruction=rerank_instruction,
                rerank_min_candidates=rerank_min_candidates,
                rerank_retries=rerank_retries,
                keep_candidates_on_empty_rerank=keep_candidates_on_empty_rerank,
            )
        )
        self._searcher = Searcher(retrieval, min_similarity=min_similarity)
        self.retrieval = self._searcher.retrieval
        self.min_similarity = self._searcher.min_similarity
        self._book = RecordBook(found, scopes, clock=clock)
        self._snapshots = Lru(_CACHE_SIZE)  # cid -> tuple[MemoryRecord, ...]
        self._recalls = Lru(_CACHE_SIZE)  # (cid, query) -> Recall

    @property
    def searcher(self) -> Searcher:
        """The retrieval mode in use, with its embedding cache."""
        return self._searcher

    @property
    def max_chars(self) -> int:
        """The character budget of the injected memory message."""
        return self.settings.max_chars

    @property
    def store(self) -> StoreHandle:
        """The store holding the records (and, usually, the conversations)."""
        return self._book.store

    # -- records ------------------------------------------------------------------------

    def records(self, cid: str) -> list[MemoryRecord]:
        """The records conversation ``cid`` may see: global ones, then its session's.

        Also refreshes the snapshot `prepare` ranks (and, with dense retrieval, loads
        the model and embeds the records not embedded yet).

        Args:
            cid: The conversation id.

        Returns:
            The current records (reads the store).
        """
        found = self._book.read(cid)
        self._searcher.warm(found)
        self._snapshots.put(cid, tuple(found))
        return found

    def remember(
        self, cid: str, fact: Fact, *, versions: Sequence[int] = ()
    ) -> MemoryRecord | None:
        """Store ``fact`` as `RecordBook.remember` does, and forget the cached recall."""
        record = self._book.remember(cid, fact, versions=versions)
        if record is not None:
            self._recalls.clear()
        return record

    def forget(self, cid: str) -> list[str]:
        """Forget ``cid``'s records as `RecordBook.forget` does; returns the ids deleted."""
        deleted = self._book.forget(cid)
        self._snapshots.clear()
        self._recalls.clear()
        return deleted

    # -- extraction ---------------------------------------------------------------------

    def extract(
        self, cid: str, messages: Sequence[Message], *, versions: Sequence[int] = ()
    ) -> list[MemoryRecord]:
        """Ask the LLM for facts in ``messages`` and store them. Never raises for the LLM.

        Each fact is stored on its own: one the store refuses (a NaN, a body past the
        store's ``max_message_bytes``, ...) is logged as ``memory_extraction_invalid``,
        one that writers in other processes outran on every attempt as
        ``memory_extraction_failed``; either way the facts after it are still stored.

        Args:
            cid: The conversation id.
            messages: The new messages.
            versions: The versions that hold them (the provenance).

        Returns:
            The records added or updated.
        """
        facts = ask_facts(
            self.llm,
            self.extraction_instruction,
            self.body_schema,
            messages,
            self._book.read(cid),
            default_scope=SESSION if SESSION in self.scopes else GLOBAL,
            conversation=cid,
            max_facts=self.max_facts,
        )
        written: list[MemoryRecord] = []
        for index, fact in enumerate(facts):
            try:
                record = self.remember(cid, fact, versions=versions)
            except ValueError as exc:  # a value the store cannot hold (NaN, too large, ...)
                log.warning(
                    "memory_extraction_invalid",
                    conversation=cid,
                    error=f"facts[{index}] cannot be stored: {exc}"[:300],
                )
                continue
            except ConflictError as exc:  # other writers won every attempt: skip this fact
                log.warning(
                    "memory_extraction_failed",
                    conversation=cid,
                    error=f"facts[{index}]: {type(exc).__name__}: {exc}"[:300],
                )
                continue
            if record is not None:
                written.append(record)
        self.records(cid)
        return written

    # -- retrieval ----------------------------------------------------------------------

    def recall(self, cid: str, query: str) -> Recall:
        """Retrieve the records for ``query``: plan, search, then rerank, as enabled.

        The LLM calls (planning, rerank) never raise: each fallback is logged and listed
        in the result's diagnostics. A blank query recalls nothing and calls no LLM. The
        result is cached: a later `prepare` whose newest user message is ``query``
        injects it.

        Args:
            cid: The conversation id.
            query: The question (the user's turn).

        Returns:
            The records chosen, best first, with the fallbacks taken.
        """
        query = query.strip()
        result = recall_records(
            self.llm,
            self._searcher,
            self.settings,
            conversation=cid,
            query=query,
            records=self.records(cid),
        )
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
        """A kernel filter that runs `recall` (planning, rerank) before each request.

        Pass it to ``memoryd.Agent(filters=[...])`` so agent runs get planned and
        reranked memory: at the first LLM call of a run it recalls for the newest user
        message (I/O is allowed in filters, unlike in `prepare`) and replaces the memory
        block `prepare` injected; later calls of the run reuse that recall.

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
    ) -> int | None:
        """Append through the wrapped provider, then extract facts from ``messages``.

        ``idempotency_key`` is passed on only when the wrapped provider honours it
        (``append_options`` says whether this instance does).

        Args:
            cid: The conversation id.
            messages: The messages to add.
            idempotency_key: As in the wrapped provider's ``append``.

        Returns:
            The version of the append (None when the wrapped provider keeps none).
        """
        version = provider_append(
            self.inner, self.append_options, cid, messages, idempotency_key=idempotency_key
        )
        try:
            self.extract(cid, messages, versions=[] if version is None else [version])
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
        message, else from a ranking (``retrieval``) of the snapshot the last `history`
        (or `records`) loaded; with neither, nothing is injected. Should the dense model
        not be loaded yet, BM25 ranks instead (``memory_dense_not_ready``). The memory
        message goes after the leading system messages.

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
            chosen = self._rank_snapshot(cid, query, snapshot) if snapshot else ()
        return inject(prepared, chosen, self.max_chars)

    def _rank_snapshot(
        self, cid: str, query: str, snapshot: Sequence[MemoryRecord]
    ) -> list[MemoryRecord]:
        searcher = self._searcher
        if not searcher.ready:
            log.warning("memory_dense_not_ready", conversation=cid, fallback="bm25")
            searcher = _BM25
        return searcher.search((query,), snapshot, k=self.settings.top_k)

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
        return (
            f"LongTermMemory({self.inner!r}, scopes={self.scopes!r}, retrieval={self.retrieval!r})"
        )


_BM25 = Searcher("bm25")
