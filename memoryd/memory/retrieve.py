"""Retrieval: BM25 ranking (bm25s, imported on first use), LLM rerank, the memory block.

BM25 matches the terms `memoryd.memory.terms` makes: stemmed English words and
segmented Chinese ones.

`rank` is deterministic: BM25 score, then importance, then recency, then id. `rerank`
asks an LLM to order the candidates and falls back, with a diagnostic event each time:

* fewer than ``min_candidates`` candidates: no LLM call (``memory_rerank_skipped``);
* the LLM fails or its reply is malformed: the deterministic order
  (``memory_rerank_failed``);
* the LLM keeps no candidate: the candidates (``memory_rerank_empty_fallback``), or none
  when ``keep_candidates_on_empty_rerank`` is False (``memory_rerank_empty``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from memoryd.errors import ExtractionError
from memoryd.llm.base import ChatModel
from memoryd.memory.extract import loads_json, reply_text
from memoryd.memory.records import MemoryRecord
from memoryd.memory.terms import terms

__all__ = [
    "DEFAULT_RERANK_INSTRUCTION",
    "MEMORY_HEADER",
    "Diagnostic",
    "Recall",
    "inject",
    "is_memory_message",
    "memory_message",
    "rank",
    "rerank",
]

log = structlog.get_logger(__name__)

DEFAULT_RERANK_INSTRUCTION = (
    "You select long-term memory records for an assistant. Given a question and numbered "
    'records, reply with JSON only: {"ids": [the ids of the records that help answer, '
    'most useful first]}. Reply {"ids": []} when none helps.'
)
MEMORY_HEADER = "Long-term memory (facts from earlier conversations):"


@dataclass(frozen=True, kw_only=True, slots=True)
class Diagnostic:
    """A fallback taken during retrieval: the log event name and its fields."""

    event: str
    fields: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class Recall:
    """The outcome of one retrieval: the records chosen, in order, and the fallbacks."""

    query: str
    records: tuple[MemoryRecord, ...]
    diagnostics: tuple[Diagnostic, ...] = ()


@functools.lru_cache(maxsize=64)
def _index(documents: tuple[str, ...]) -> Any:
    """A BM25 index of ``documents``, cached: a snapshot is ranked once per query."""
    import bm25s  # type: ignore[import-untyped]  # noqa: PLC0415 (optional extra)

    retriever = bm25s.BM25()
    retriever.index(terms(documents), show_progress=False)
    return retriever


def rank(query: str, records: Sequence[MemoryRecord], *, k: int) -> list[MemoryRecord]:
    """The ``k`` records most relevant to ``query`` by BM25 (bm25s), deterministically.

    Records with no term in common with the query are left out.

    Args:
        query: The question.
        records: The candidate records.
        k: At most this many.

    Returns:
        Records, best first (ties: importance, then newest, then id).
    """
    if not records or k <= 0 or not query.strip():
        return []
    documents = tuple(" ".join([r.kind, r.text, *r.tags]) for r in records)
    query_tokens = terms([query])[0]
    if not query_tokens:
        return []
    retriever = _index(documents)
    scores = retriever.get_scores(query_tokens)
    order = sorted(
        (i for i in range(len(records)) if scores[i] > 0),
        key=lambda i: (
            -float(scores[i]),
            -records[i].importance,
            -records[i].updated_at,
            records[i].id,
        ),
    )
    return [records[i] for i in order[:k]]


def _rerank_request(
    instruction: str, query: str, candidates: Sequence[MemoryRecord]
) -> list[dict[str, Any]]:
    lines = [f"[{r.id}] ({r.kind}) {r.text}" for r in candidates]
    return [
        {"role": "system", "content": instruction},
        {"role": "user", "content": f"Question: {query}\n\nRecords:\n" + "\n".join(lines)},
    ]


def _parse_ids(text: str, known: set[str]) -> list[str]:
    value = loads_json(text)
    ids = value.get("ids") if isinstance(value, Mapping) else value
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ExtractionError('the rerank reply must be {"ids": [str, ...]}')
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ExtractionError(f"the rerank reply names unknown ids {unknown[:3]}")
    return list(dict.fromkeys(ids))


def rerank(
    llm: ChatModel,
    query: str,
    candidates: Sequence[MemoryRecord],
    *,
    instruction: str = DEFAULT_RERANK_INSTRUCTION,
    min_candidates: int = 2,
    retries: int = 1,
    keep_candidates_on_empty: bool = True,
    conversation: str = "",
) -> Recall:
    """Order ``candidates`` with an LLM, falling back as the module docstring says.

    Never raises for a failing LLM: every fallback is logged and listed in the result.

    Args:
        llm: The chat model.
        query: The question.
        candidates: The deterministic candidates, best first.
        instruction: The rerank system instruction.
        min_candidates: Below this many candidates, no LLM call.
        retries: Extra attempts after a failed or malformed reply.
        keep_candidates_on_empty: Keep the candidates when the LLM keeps none.
        conversation: The conversation id, for the diagnostics.

    Returns:
        The chosen records and the diagnostics.
    """
    diagnostics: list[Diagnostic] = []

    def note(event: str, **fields: Any) -> None:
        fields = {"conversation": conversation, "candidates": len(candidates), **fields}
        log.info(event, **fields)
        diagnostics.append(Diagnostic(event=event, fields=fields))

    if len(candidates) < min_candidates:
        note("memory_rerank_skipped", min_candidates=min_candidates)
        return Recall(query=query, records=tuple(candidates), diagnostics=tuple(diagnostics))
    by_id = {r.id: r for r in candidates}
    request = _rerank_request(instruction, query, candidates)
    error = ""
    for _ in range(1 + max(0, retries)):
        try:
            ids = _parse_ids(reply_text(llm.complete(request)), set(by_id))
        except Exception as exc:  # the LLM's, the transport's or the parser's: fall back
            error = f"{type(exc).__name__}: {exc}"
            continue
        if ids:
            chosen = tuple(by_id[i] for i in ids)
            return Recall(query=query, records=chosen, diagnostics=tuple(diagnostics))
        if keep_candidates_on_empty:
            note("memory_rerank_empty_fallback")
            return Recall(query=query, records=tuple(candidates), diagnostics=tuple(diagnostics))
        note("memory_rerank_empty")
        return Recall(query=query, records=(), diagnostics=tuple(diagnostics))
    note("memory_rerank_failed", error=error[:300], fallback="deterministic")
    return Recall(query=query, records=tuple(candidates), diagnostics=tuple(diagnostics))


def memory_message(records: Sequence[MemoryRecord], max_chars: int) -> dict[str, Any] | None:
    """ONE system message listing ``records`` in order, at most ``max_chars`` long. Pure.

    Records are added best first while the message fits; a record that does not fit is
    left out whole (a later, shorter one may still fit).

    Args:
        records: The records, best first.
        max_chars: The budget for the message's content.

    Returns:
        The system message, or None when no record fits.
    """
    lines = [MEMORY_HEADER]
    size = len(MEMORY_HEADER)
    for record in records:
        line = f"- ({record.kind}) {record.text}"
        if size + 1 + len(line) <= max_chars:
            lines.append(line)
            size += 1 + len(line)
    if len(lines) == 1:
        return None
    return {"role": "system", "content": "\n".join(lines)}


def is_memory_message(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is a memory block `memory_message` made.

    Args:
        message: A message.

    Returns:
        True for a system message opening with `MEMORY_HEADER`.
    """
    content = message.get("content")
    return (
        message.get("role") == "system"
        and isinstance(content, str)
        and content.startswith(MEMORY_HEADER)
    )


def inject(
    messages: Sequence[Mapping[str, Any]], records: Sequence[MemoryRecord], max_chars: int
) -> list[dict[str, Any]]:
    """``messages`` with ONE memory block of ``records`` after the leading system messages.

    A memory block already present is replaced (or dropped when no record fits). Pure:
    returns a new list, the messages themselves are not copied or changed.

    Args:
        messages: The messages to send.
        records: The records, best first.
        max_chars: The budget of the block.

    Returns:
        The new list.
    """
    rest = [m if isinstance(m, dict) else dict(m) for m in messages if not is_memory_message(m)]
    block = memory_message(records, max_chars)
    if block is None:
        return rest
    at = 0
    while at < len(rest) and rest[at].get("role") in ("system", "developer"):
        at += 1
    return [*rest[:at], block, *rest[at:]]
