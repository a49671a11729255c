"""Extraction: the prompt that asks an LLM for facts, the pure parser of its reply, the call."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from memoryd._json_values import loads
from memoryd.errors import ExtractionError, SchemaError
from memoryd.llm.base import ChatModel
from memoryd.memory.records import SCOPES, MemoryRecord
from memoryd.memory.schema import DEFAULT_BODY_SCHEMA, validate_body

__all__ = [
    "DEFAULT_EXTRACTION_INSTRUCTION",
    "Fact",
    "ask_facts",
    "extraction_request",
    "loads_json",
    "parse_facts",
    "reply_text",
]

DEFAULT_EXTRACTION_INSTRUCTION = (
    "You maintain an assistant's long-term memory. From the new messages, extract the "
    "reusable facts and preferences worth remembering in later conversations. Reply with "
    'JSON only: {"facts": [{"scope": "global" or "session", "kind": "fact" or '
    '"preference" or another short label, "body": {"key": "a stable snake_case name", '
    '"text": "the fact in one sentence"}, "tags": ["..."], "importance": 0.0 to 1.0}]}. '
    "Use scope global for what holds about the user or project everywhere, session for "
    "what matters only in this conversation. Restate a known record with the same kind "
    'and key to update it. Reply {"facts": []} when nothing is worth keeping.'
)

Message = dict[str, Any]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fact:
    """One fact the LLM extracted, validated, not yet stored.

    Attributes:
        scope: ``"global"`` or ``"session"``.
        kind: What sort of fact.
        body: The content, valid against the body schema.
        tags: Free labels.
        importance: 0.0 to 1.0, or None when the extraction gave none: a new record then
            gets `memoryd.memory.records.DEFAULT_IMPORTANCE`, a restated one keeps its own.
    """

    scope: str
    kind: str
    body: dict[str, Any]
    tags: tuple[str, ...] = ()
    importance: float | None = None


def _render(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping)
        )
    return f"{message.get('role')}: {content}" if content else ""


def extraction_request(
    instruction: str,
    messages: Sequence[Mapping[str, Any]],
    known: Sequence[MemoryRecord],
    *,
    schema: Mapping[str, Any] | None = None,
) -> list[Message]:
    """The messages of the extraction call.

    Args:
        instruction: The system instruction.
        messages: The new messages to extract from.
        known: Records already stored (so the LLM can restate rather than invent keys).
        schema: The body schema, stated to the LLM; None (or the default schema, which
            the default instruction describes) states none.

    Returns:
        A system and a user message.
    """
    lines = [
        json.dumps({"scope": r.scope, "kind": r.kind, "body": r.body}, ensure_ascii=False)
        for r in known
    ]
    parts = []
    if schema is not None and schema != DEFAULT_BODY_SCHEMA:
        stated = json.dumps(schema, ensure_ascii=False, sort_keys=True)
        parts.append(f"Each fact's body must match this JSON schema:\n{stated}")
    parts.append("Known records:\n" + ("\n".join(lines) if lines else "(none)"))
    parts.append("New messages:\n" + "\n".join(filter(None, map(_render, messages))))
    return [
        {"role": "system", "content": instruction},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def reply_text(reply: Any) -> str:
    """The text content of an assistant reply.

    Args:
        reply: The assistant message.

    Returns:
        Its ``content`` text.

    Raises:
        ExtractionError: The reply holds no text.
    """
    content = reply.get("content") if isinstance(reply, Mapping) else None
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    if not isinstance(content, str) or not content.strip():
        raise ExtractionError("the reply holds no text")
    return content


_FENCE = r"```[\w-]*\s*(.*?)\s*```"
"""A Markdown code fence (its language tag, if any, dropped); group 1 is its text."""


def loads_json(text: str) -> Any:
    """Parse JSON, tolerating a Markdown code fence around it, or prose around the fence.

    A model not held to JSON often answers "Here are the facts:" and then a fenced
    block; the first fenced block is read when the text as a whole is not JSON.

    Args:
        text: The reply text.

    Returns:
        The parsed value.

    Raises:
        ExtractionError: The text is not JSON (nor is its first fenced block).
    """
    stripped = text.strip()
    fenced = re.fullmatch(_FENCE, stripped, flags=re.DOTALL)
    if fenced:
        stripped = fenced.group(1)
    try:
        return loads(stripped)
    except ValueError as exc:
        problem = exc
    inner = None if fenced else re.search(_FENCE, stripped, flags=re.DOTALL)
    if inner is not None:
        try:
            return loads(inner.group(1))
        except ValueError as exc:
            problem = exc
    raise ExtractionError(f"the reply is not JSON: {problem}") from None


def _fact(item: Any, where: str, schema: Mapping[str, Any], default_scope: str) -> Fact:
    if not isinstance(item, Mapping):
        raise ExtractionError(f"{where} must be an object, not {type(item).__name__}")
    scope = item.get("scope", default_scope)
    if scope not in SCOPES:
        raise ExtractionError(f"{where}.scope must be one of {SCOPES}, not {scope!r}")
    kind = item.get("kind", "fact")
    if not isinstance(kind, str) or not kind.strip():
        raise ExtractionError(f"{where}.kind must be a non-empty str, not {kind!r}")
    body = item.get("body")
    try:
        validate_body(body, schema, f"{where}.body")
    except SchemaError as exc:
        raise ExtractionError(str(exc)) from None
    if not isinstance(body, dict):
        raise ExtractionError(f"{where}.body must be an object")
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ExtractionError(f"{where}.tags must be a list of str, not {tags!r}")
    importance = item.get("importance")
    if importance is not None and (
        isinstance(importance, bool) or not isinstance(importance, int | float)
    ):
        raise ExtractionError(f"{where}.importance must be a number, not {importance!r}")
    return Fact(
        scope=scope,
        kind=kind.strip(),
        body=dict(body),
        tags=tuple(tags),
        importance=None if importance is None else min(1.0, max(0.0, float(importance))),
    )


DEFAULT_MAX_FACTS = 20
"""The most facts one extraction keeps (`LongTermMemory(max_facts=...)`)."""

MAX_PROBLEMS_LOGGED = 5
"""The most invalid facts of one reply logged one by one; the rest are counted."""


def parse_facts(
    text: str,
    schema: Mapping[str, Any],
    *,
    default_scope: str = "session",
    max_facts: int = DEFAULT_MAX_FACTS,
) -> tuple[list[Fact], list[str]]:
    """Read the facts of an extraction reply. Pure.

    A reply that is not ``{"facts": [...]}`` (or a bare list) is an error; within a
    valid reply, each invalid fact is reported and skipped, the others kept, up to
    ``max_facts`` (a reply may hold any number: a model asked, or talked into, listing
    thousands would otherwise write thousands of records in one turn). The facts past
    it are not read, and one problem says how many were dropped.

    Args:
        text: The reply text.
        schema: The body schema.
        default_scope: The scope of a fact that names none.
        max_facts: The most facts kept.

    Returns:
        The valid facts, and one message per invalid fact (and one for those dropped).

    Raises:
        ExtractionError: The reply as a whole is malformed.
    """
    value = loads_json(text)
    items = value.get("facts") if isinstance(value, Mapping) else value
    if not isinstance(items, list):
        raise ExtractionError('the reply must be {"facts": [...]} or a list of facts')
    facts: list[Fact] = []
    problems: list[str] = []
    for index, item in enumerate(items):
        if len(facts) == max_facts:
            problems.append(
                f"facts[{index}:] dropped: {len(items) - index} more past max_facts={max_facts}"
            )
            break
        try:
            facts.append(_fact(item, f"facts[{index}]", schema, default_scope))
        except ExtractionError as exc:
            problems.append(str(exc))
    return facts, problems


def ask_facts(
    llm: ChatModel,
    instruction: str,
    schema: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    known: Sequence[MemoryRecord],
    *,
    default_scope: str,
    conversation: str = "",
    max_facts: int = DEFAULT_MAX_FACTS,
) -> list[Fact]:
    """Ask ``llm`` for the facts in ``messages``. Never raises for the LLM.

    An LLM failure is logged (``memory_extraction_failed``), a malformed reply or fact
    too (``memory_extraction_invalid``); what is valid is returned.

    Args:
        llm: The chat model.
        instruction: The extraction instruction.
        schema: The body schema.
        messages: The new messages.
        known: The records already stored.
        default_scope: The scope of a fact that names none.
        conversation: The conversation id, for the log events.
        max_facts: The most facts kept (`parse_facts`).

    Returns:
        The valid facts.
    """
    try:
        reply = llm.complete(extraction_request(instruction, messages, known, schema=schema))
    except Exception as exc:  # any model or transport failure: skip this extraction
        log.warning(
            "memory_extraction_failed",
            conversation=conversation,
            error=f"{type(exc).__name__}: {exc}"[:300],
        )
        return []
    try:
        facts, problems = parse_facts(
            reply_text(reply), schema, default_scope=default_scope, max_facts=max_facts
        )
    except ExtractionError as exc:
        log.warning("memory_extraction_invalid", conversation=conversation, error=str(exc)[:300])
        return []
    for problem in problems[:MAX_PROBLEMS_LOGGED]:
        log.warning("memory_extraction_invalid", conversation=conversation, error=problem[:300])
    if len(problems) > MAX_PROBLEMS_LOGGED:
        log.warning(
            "memory_extraction_invalid",
            conversation=conversation,
            error=f"{len(problems) - MAX_PROBLEMS_LOGGED} more problems in this reply",
        )
    return facts
