"""Query planning: an LLM rewrites the user's turn into search queries before retrieval.

`plan` asks for ``{"queries": [...]}`` and never raises for the LLM: when the call fails,
or its reply is not that JSON, the raw turn is searched instead and the fallback is
recorded (``memory_plan_failed``). Planning is I/O, so it runs in `LongTermMemory.recall`
(and the `RecallFilter`), never in ``prepare``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from memoryd.errors import ExtractionError
from memoryd.llm.base import ChatModel
from memoryd.memory.extract import loads_json, reply_text
from memoryd.memory.retrieve import Diagnostic

__all__ = ["DEFAULT_PLAN_INSTRUCTION", "MAX_QUERY_CHARS", "parse_queries", "plan", "plan_request"]

log = structlog.get_logger(__name__)

DEFAULT_PLAN_INSTRUCTION = (
    "You write search queries for an assistant's long-term memory of facts about the user "
    "and their projects. Given the user's message, reply with JSON only: "
    '{"queries": ["...", ...]} holding one to three short keyword queries that would find '
    "the facts needed to answer it (names, topics, attributes; no filler words)."
)
MAX_QUERY_CHARS = 500


def plan_request(instruction: str, turn: str) -> list[dict[str, Any]]:
    """The messages of the planning call.

    Args:
        instruction: The system instruction.
        turn: The user's message.

    Returns:
        A system and a user message.
    """
    return [
        {"role": "system", "content": instruction},
        {"role": "user", "content": f"User message: {turn}"},
    ]


def parse_queries(text: str, *, max_queries: int) -> list[str]:
    """The queries in a planning reply. Pure.

    Accepts ``{"queries": [str, ...]}`` (or a bare list); blank and repeated queries are
    dropped, each is cut to `MAX_QUERY_CHARS`, at most ``max_queries`` are kept.

    Args:
        text: The reply text.
        max_queries: At most this many.

    Returns:
        One or more queries.

    Raises:
        ExtractionError: Not that JSON, or no usable query.
    """
    value = loads_json(text)
    queries = value.get("queries") if isinstance(value, Mapping) else value
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ExtractionError('the planning reply must be {"queries": [str, ...]}')
    kept = list(dict.fromkeys(q.strip()[:MAX_QUERY_CHARS] for q in queries if q.strip()))
    if not kept:
        raise ExtractionError("the planning reply holds no query")
    return kept[:max_queries]


def plan(
    llm: ChatModel,
    turn: str,
    *,
    instruction: str = DEFAULT_PLAN_INSTRUCTION,
    max_queries: int = 3,
    conversation: str = "",
) -> tuple[tuple[str, ...], tuple[Diagnostic, ...]]:
    """Ask ``llm`` for the search queries of ``turn``; fall back to ``turn`` itself.

    Args:
        llm: The chat model.
        turn: The user's message (not blank).
        instruction: The planning system instruction.
        max_queries: At most this many queries.
        conversation: The conversation id, for the diagnostics.

    Returns:
        ``(queries, diagnostics)``: the planned queries and no diagnostic, or ``(turn,)``
        and one ``memory_plan_failed``.
    """
    try:
        queries = parse_queries(
            reply_text(llm.complete(plan_request(instruction, turn))), max_queries=max_queries
        )
    except Exception as exc:  # the LLM's, the transport's or the parser's: fall back
        fields = {
            "conversation": conversation,
            "error": f"{type(exc).__name__}: {exc}"[:300],
            "fallback": "raw_query",
        }
        log.warning("memory_plan_failed", **fields)
        return (turn,), (Diagnostic(event="memory_plan_failed", fields=fields),)
    return tuple(queries), ()
