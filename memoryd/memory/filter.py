"""RecallFilter: the kernel filter that recalls (plans, reranks) memory before LLM calls.

`LongTermMemory.prepare` must stay pure, so the LLM query planning and rerank cannot run
there; a kernel ``around_chat`` filter may do I/O. Build it with
`LongTermMemory.rerank_filter`. The filter needs only a `Recaller`: what it asks of a
long-term memory (recall, the cached recall, the block's character budget).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from memoryd.kernel.filters import ChatNext, ChatRequest, Filter
from memoryd.memory.retrieve import Recall, inject

__all__ = ["RecallFilter", "Recaller", "query_of"]

Message = dict[str, Any]


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def query_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """The retrieval query: the text of the newest user message (empty when none).

    Args:
        messages: The messages, oldest first.

    Returns:
        The query text.
    """
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text(message).strip()
    return ""


class Recaller(Protocol):
    """What `RecallFilter` needs of a long-term memory (`LongTermMemory` is one)."""

    @property
    def max_chars(self) -> int:
        """The character budget of the injected memory block."""
        ...

    def recall(self, cid: str, query: str) -> Recall:
        """Retrieve the records for ``query`` (planning and rerank may call an LLM).

        Args:
            cid: The conversation id.
            query: The question (the user's turn).

        Returns:
            The records chosen, best first.
        """
        ...

    def cached_recall(self, cid: str, query: str) -> Recall | None:
        """The result of the last `recall` of ``query`` in ``cid``, if still cached.

        Args:
            cid: The conversation id.
            query: The question.

        Returns:
            The cached result, or None.
        """
        ...


class RecallFilter(Filter):
    """Recalls (plans, reranks) long-term memory around each LLM call; see `rerank_filter`.

    Args:
        memory: The long-term memory (any `Recaller`).
    """

    def __init__(self, memory: Recaller) -> None:
        self.memory = memory

    def around_chat(self, request: ChatRequest, next: ChatNext) -> Message:
        """Replace the request's memory block with a fresh recall, then call the LLM.

        Args:
            request: The request.
            next: The inner layers and the LLM.

        Returns:
            The LLM's reply.
        """
        cid = request.context.conversation_id
        query = query_of(request.messages)
        if not cid or not query:
            return next(request)
        recall = self.memory.cached_recall(cid, query) if request.step > 0 else None
        if recall is None:
            recall = self.memory.recall(cid, query)
        messages = inject(request.messages, recall.records, self.memory.max_chars)
        return next(request.with_messages(messages))
