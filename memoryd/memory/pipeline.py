"""The recall pipeline: plan the queries, search, rerank; and the settings it runs with.

`recall_records` is what `LongTermMemory.recall` runs, in the caller's thread, with I/O
(the LLM calls). Each LLM step is optional and never raises: planning falls back to the
raw turn (``memory_plan_failed``), the rerank to the deterministic order (see
`memoryd.memory.retrieve.rerank`); the diagnostics of both are in the `Recall`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from memoryd.llm.base import ChatModel
from memoryd.memory.plan import DEFAULT_PLAN_INSTRUCTION, plan
from memoryd.memory.records import MemoryRecord
from memoryd.memory.retrieve import DEFAULT_RERANK_INSTRUCTION, Diagnostic, Recall, rerank
from memoryd.memory.search import Searcher

__all__ = ["RecallSettings", "check_settings", "recall_records"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallSettings:
    """How records are recalled and injected; see `LongTermMemory` for each field."""

    top_k: int = 5
    candidates: int = 20
    max_chars: int = 2000
    plan_queries: bool = False
    plan_instruction: str = DEFAULT_PLAN_INSTRUCTION
    max_queries: int = 3
    rerank: bool = False
    rerank_instruction: str = DEFAULT_RERANK_INSTRUCTION
    rerank_min_candidates: int = 2
    rerank_retries: int = 1
    keep_candidates_on_empty_rerank: bool = True


def check_settings(settings: RecallSettings) -> RecallSettings:
    """Validate ``settings``; ``candidates`` is raised to ``top_k`` at least.

    Args:
        settings: The settings.

    Returns:
        The settings to use.

    Raises:
        ValueError: A number out of range, or a blank instruction.
    """
    for name, low in (
        ("top_k", 1),
        ("candidates", 1),
        ("max_chars", 1),
        ("max_queries", 1),
        ("rerank_min_candidates", 0),
        ("rerank_retries", 0),
    ):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    for name in ("plan_instruction", "rerank_instruction"):
        text = getattr(settings, name)
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{name} must be a non-empty str")
    return dataclasses.replace(
        settings,
        candidates=max(settings.candidates, settings.top_k),
        plan_queries=bool(settings.plan_queries),
        rerank=bool(settings.rerank),
        keep_candidates_on_empty_rerank=bool(settings.keep_candidates_on_empty_rerank),
    )


def recall_records(
    llm: ChatModel,
    searcher: Searcher,
    settings: RecallSettings,
    *,
    conversation: str,
    query: str,
    records: Sequence[MemoryRecord],
) -> Recall:
    """Plan (if enabled), search ``records``, rerank (if enabled). Never raises for the LLM.

    A blank query, or no records, recalls nothing and calls no LLM.

    Args:
        llm: The chat model of the planning and rerank calls.
        searcher: The retrieval mode.
        settings: The settings.
        conversation: The conversation id (for the diagnostics).
        query: The user's turn, stripped.
        records: The records the conversation may see.

    Returns:
        The records chosen, best first, with the fallbacks taken.
    """
    diagnostics: tuple[Diagnostic, ...] = ()
    queries: tuple[str, ...] = (query,)
    if settings.plan_queries and query and records:
        queries, diagnostics = plan(
            llm,
            query,
            instruction=settings.plan_instruction,
            max_queries=settings.max_queries,
            conversation=conversation,
        )
    depth = settings.candidates if settings.rerank else settings.top_k
    candidates = searcher.search(queries, records, k=depth)
    if not settings.rerank or not candidates:
        return Recall(
            query=query, records=tuple(candidates[: settings.top_k]), diagnostics=diagnostics
        )
    reranked = rerank(
        llm,
        query,
        candidates,
        instruction=settings.rerank_instruction,
        min_candidates=settings.rerank_min_candidates,
        retries=settings.rerank_retries,
        keep_candidates_on_empty=settings.keep_candidates_on_empty_rerank,
        conversation=conversation,
    )
    return Recall(
        query=query,
        records=reranked.records[: settings.top_k],
        diagnostics=(*diagnostics, *reranked.diagnostics),
    )
