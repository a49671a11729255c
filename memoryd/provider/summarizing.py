"""SummarizingProvider: older messages become one summary, stored as a ``compacted`` event.

When a conversation passes its threshold (``max_messages`` non-system messages, or
``max_tokens``), the messages before the last ``keep_last`` are summarised by the LLM
into one system message. The summary is recorded as a ``compacted`` event whose data
names the versions it replaces; the original events stay in the log, readable with
``store.events`` and ``store.get``. `history` returns the latest summary followed by the
messages after it. A tool call and its results are never split between the summary and
the kept messages. Stored system messages (a persona) are never summarised: they stay
verbatim at the head, before the summary, as a window keeps them. If the LLM fails,
nothing is recorded, the failure is logged, and `prepare` falls back to the safe window
(or the token budget).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from memoryd import messages as msgs
from memoryd.errors import ConflictError, LLMError
from memoryd.events import Event, EventKind
from memoryd.llm.base import ChatModel
from memoryd.messages import is_system
from memoryd.provider.budget import Counter, default_counter, fit
from memoryd.provider.chat_store import check_store
from memoryd.provider.safe_window import check_messages, check_window, safe_window
from memoryd.store.handle import StoreHandle

__all__ = ["DEFAULT_PROMPT", "SUMMARY_PREFIX", "SummarizingProvider"]

log = structlog.get_logger(__name__)

Message = dict[str, Any]

DEFAULT_PROMPT = (
    "You compress conversations. Summarise the conversation below in a few sentences: "
    "keep names, facts, decisions, open questions and tool results the assistant still "
    "needs. Reply with the summary only."
)
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


@dataclass(frozen=True, slots=True)
class _State:
    """A conversation folded from its log: messages tagged with their event version."""

    tagged: list[tuple[int, Message]]
    compaction: Event | None
    version: int

    def effective(self) -> tuple[list[Message], list[tuple[int, Message]]]:
        if self.compaction is None:
            return [], self.tagged
        replaced = int((self.compaction.data or {}).get("replaced_messages", 0))
        return [dict(m) for m in self.compaction.messages], self.tagged[replaced:]


def _fold(events: Sequence[Event]) -> _State:
    tagged: list[tuple[int, Message]] = []
    compaction: Event | None = None
    for event in events:
        kind = event.kind
        if kind == EventKind.APPENDED:
            tagged.extend((event.version, m) for m in event.messages)
        elif kind == EventKind.CLEARED:
            tagged, compaction = [], None
        elif kind == EventKind.POPPED:
            if tagged:
                tagged.pop()
        elif kind == EventKind.FORKED:
            tagged = [(event.version, m) for m in event.messages]
            compaction = None
        elif kind == EventKind.COMPACTED:
            compaction = event
    return _State(tagged, compaction, events[-1].version if events else 0)


def _render(message: Mapping[str, Any]) -> str:
    role = message.get("role")
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(
            str(part.get("text", f"[{part.get('type')}]"))
            for part in content
            if isinstance(part, Mapping)
        )
    lines = [f"{role}: {content}"] if content else []
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        lines.append(f"{role} called {function.get('name')}({function.get('arguments')})")
    if role == "tool":
        lines = [f"tool result [{message.get('tool_call_id')}]: {content}"]
    return "\n".join(lines)


class SummarizingProvider:
    """A provider that summarises older messages with an LLM once a threshold is passed.

    Args:
        store: The store handle.
        llm: A `memoryd.llm.ChatModel` that writes the summaries.
        max_messages: Summarise when the history (after the latest summary) holds more
            non-system messages than this.
        max_tokens: Summarise when the history's tokens pass this (give one of the two).
        keep_last: How many of the newest non-system messages stay verbatim.
        counter: Token counter for ``max_tokens`` (default `budget.default_counter()`).
        prompt: The system prompt of the summarising call.

    Raises:
        TypeError: ``store`` is not a store handle or ``llm`` has no ``complete``.
        ValueError: Neither or both thresholds are given, or a number is out of range.
    """

    def __init__(
        self,
        store: StoreHandle,
        llm: ChatModel,
        *,
        max_messages: int | None = None,
        max_tokens: int | None = None,
        keep_last: int = 10,
        counter: Counter | None = None,
        prompt: str = DEFAULT_PROMPT,
    ) -> None:
        self._store = check_store(
            store, user="SummarizingProvider", needs=("version", "events", "record")
        )
        if not callable(getattr(llm, "complete", None)):
            raise TypeError(f"llm must be a ChatModel with a complete() method, got {llm!r:.80}")
        self.llm = llm
        if (max_messages is None) == (max_tokens is None):
            raise ValueError("give exactly one of max_messages and max_tokens")
        self.max_messages = (
            None if max_messages is None else check_window(max_messages, "max_messages")
        )
        self.max_tokens = None if max_tokens is None else check_window(max_tokens, "max_tokens")
        self.keep_last = check_window(keep_last, "keep_last")
        if self.max_messages is not None and self.keep_last >= self.max_messages:
            raise ValueError(
                f"keep_last ({keep_last}) must be below max_messages ({max_messages}), "
                "or nothing would ever be summarised"
            )
        if counter is not None and not callable(counter):
            raise TypeError(f"counter must be a callable message -> int, not {counter!r:.80}")
        self.counter: Counter = counter or default_counter()
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("prompt must be a non-empty str")
        self.prompt = prompt

    @property
    def store(self) -> StoreHandle:
        """The store handle."""
        store: StoreHandle = self._store
        return store

    def _over(self, messages: Sequence[Message]) -> bool:
        if self.max_messages is not None:
            return sum(1 for m in messages if not is_system(m)) > self.max_messages
        assert self.max_tokens is not None
        return sum(self.counter(m) for m in messages) > self.max_tokens

    def _state(self, cid: str) -> _State:
        return _fold(self._store.events(cid))

    # -- MemoryProvider -----------------------------------------------------------------

    def history(self, cid: str) -> list[Message]:
        """The latest summary (a system message) followed by the messages after it.

        Args:
            cid: The conversation id.

        Returns:
            Fresh copies, oldest first.
        """
        summary, rest = self._state(cid).effective()
        return summary + [dict(m) for _, m in rest]

    def append(
        self, cid: str, messages: list[Message], *, idempotency_key: str | None = None
    ) -> int:
        """Store ``messages`` as one event, then summarise if the threshold is passed.

        A failing summary does not fail the append: it is logged (``summary_failed``)
        and `prepare` falls back to the safe window.

        Args:
            cid: The conversation id.
            messages: The messages to add.
            idempotency_key: As in the store's ``add``.

        Returns:
            The version of the append.
        """
        version = self._store.add(cid, messages, idempotency_key=idempotency_key)
        try:
            self.compact(cid)
        except Exception as exc:  # the LLM's or the transport's: any failure falls back
            log.warning(
                "summary_failed",
                conversation=cid,
                error=f"{type(exc).__name__}: {exc}",
                fallback="safe_window" if self.max_messages is not None else "token_budget",
            )
        return int(version)

    def prepare(self, cid: str, messages: list[Message]) -> list[Message]:
        """The messages unchanged while under the threshold, else the safe fallback. Pure.

        Args:
            cid: The conversation id.
            messages: History and the current turn.

        Returns:
            ``messages`` as they are, or `safe_window` of ``max_messages`` (token budget
            of ``max_tokens``) when a summary is missing or failed.
        """
        msgs.validate_conversation_id(cid)
        items = check_messages(messages)
        if not self._over(items):
            return items
        if self.max_messages is not None:
            return safe_window(items, self.max_messages)
        assert self.max_tokens is not None
        return fit(items, self.max_tokens, self.counter)

    def clear(self, cid: str) -> None:
        """Clear the conversation (summaries included).

        Args:
            cid: The conversation id.
        """
        self._store.clear(cid)

    # -- summaries ----------------------------------------------------------------------

    def compaction(self, cid: str) -> dict[str, Any] | None:
        """The data of the summary in effect (which versions it replaces), or None.

        Args:
            cid: The conversation id.

        Returns:
            ``{"replaces": {"from_version", "to_version"}, "replaced_messages",
            "summarised", "version"}`` or None.
        """
        compaction = self._state(cid).compaction
        if compaction is None:
            return None
        return {**dict(compaction.data or {}), "version": compaction.version}

    def compact(self, cid: str, *, force: bool = False) -> bool:
        """Summarise the older messages now if the threshold is passed (or ``force``).

        Args:
            cid: The conversation id.
            force: Summarise even under the threshold.

        Returns:
            True if a summary was recorded; False if there was nothing to summarise or
            the conversation changed meanwhile.

        Raises:
            LLMError: The LLM failed or gave no text (also any error the model raises).
        """
        state = self._state(cid)
        summary, rest = state.effective()
        if not force and not self._over(summary + [m for _, m in rest]):
            return False
        boundary = self._boundary([m for _, m in rest])
        if boundary == 0:
            return False
        old = rest[:boundary]
        # System messages (a persona) stay verbatim, ahead of the summary; a summary
        # in effect is the last message of its event, after the ones it kept.
        kept = [*summary[:-1], *(m for _, m in old if is_system(m))]
        told = [m for _, m in old if not is_system(m)]
        if not told:
            return False
        text = self._summarise(summary[-1:], told)
        replaced = len(state.tagged) - len(rest) + boundary
        data: dict[str, Any] = {
            "replaces": {"from_version": old[0][0], "to_version": old[-1][0]},
            "replaced_messages": replaced,
            "summarised": len(told),
        }
        try:
            self._store.record(
                cid,
                "compacted",
                messages=[*kept, msgs.system(SUMMARY_PREFIX + text)],
                data=data,
                expected_version=state.version,
            )
        except ConflictError:
            log.info("summary_skipped", conversation=cid, reason="conversation changed")
            return False
        log.info("summary_recorded", conversation=cid, summarised=boundary, **data["replaces"])
        return True

    def _boundary(self, rest: list[Message]) -> int:
        """Index splitting summarised from kept: keep_last non-system kept, no pair split."""
        kept = 0
        boundary = len(rest)
        while boundary > 0 and kept < self.keep_last:
            boundary -= 1
            if not is_system(rest[boundary]):
                kept += 1
        while 0 < boundary < len(rest) and rest[boundary].get("role") == "tool":
            boundary -= 1  # keep the call with its results
        return boundary

    def _summarise(self, summary: list[Message], old: list[Message]) -> str:
        parts = []
        if summary:
            parts.append("Earlier summary:\n" + "\n".join(str(m.get("content")) for m in summary))
        parts.append("Conversation:\n" + "\n".join(filter(None, map(_render, old))))
        request = [msgs.system(self.prompt), msgs.user("\n\n".join(parts))]
        reply = self.llm.complete(request)
        content = reply.get("content") if isinstance(reply, Mapping) else None
        if not isinstance(content, str) or not content.strip():
            raise LLMError(
                f"the summary reply holds no text: {json.dumps(reply, default=str):.200}"
            )
        return content.strip()

    def stages(self) -> list[tuple[str, Any]]:
        """The steps of `prepare`, named (what `memoryd.explain` reports).

        Returns:
            ``(name, step)`` pairs.
        """
        limit = self.max_messages if self.max_messages is not None else self.max_tokens
        unit = "messages" if self.max_messages is not None else "tokens"
        return [
            (
                f"summary fallback: over {limit} {unit} without a fresh summary, "
                "keep the newest that fit",
                lambda messages: self.prepare("explain", messages),
            )
        ]

    def __repr__(self) -> str:
        return f"SummarizingProvider({self._store.name!r}, keep_last={self.keep_last})"
