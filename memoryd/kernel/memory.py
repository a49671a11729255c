"""memory_filter(store): the kernel's memory, beamai's delta mode.

In delta mode the kernel hands the chat chain only what is new each round (the user's
messages first, then the tool results). The memory filter, around each LLM call:

1. stores that delta in the conversation (one write),
2. replaces the request's messages with the stored history,
3. calls the inner layers (the system prompt filter, then the LLM),
4. stores the assistant reply.

Every write carries an idempotency key made of the invoke id, the step and the
direction, so a retry filter placed *outside* the memory filter, which re-runs the
inner chain with the same delta, cannot store it twice (beamai documents that hazard
and ships no guard; the store's idempotency keys make the guard free here).
"""

from __future__ import annotations

from typing import Any

from memoryd.kernel.filters import ChatNext, ChatRequest, Filter, Message

__all__ = ["MemoryFilter", "memory_filter"]

EPHEMERAL_PREFIX = "memoryd.ephemeral/"
"""Conversation ids the kernel makes up for an invoke without one (cleared at its end)."""


def _key(invoke_id: str, step: int, direction: str) -> str | None:
    return f"memoryd.kernel/{invoke_id}/{step}/{direction}" if invoke_id else None


class MemoryFilter(Filter):
    """The memory layer of a kernel; build it with `memory_filter`.

    Args:
        store: The store handle holding the conversations.

    Raises:
        TypeError: ``store`` has no ``add``, ``get`` and ``clear``.
    """

    def __init__(self, store: Any) -> None:
        missing = [n for n in ("add", "get", "clear") if not callable(getattr(store, n, None))]
        if missing:
            raise TypeError(
                f"memory_filter needs a store handle (memoryd.LmdbStore.start(...), "
                f"memoryd.default_store(), ...), got {store!r:.80}"
            )
        self.store = store

    def around_chat(self, request: ChatRequest, next: ChatNext) -> Message:
        """Store the delta, send the stored history, store the reply.

        Args:
            request: The request; its messages are the delta.
            next: The inner layers and the LLM.

        Returns:
            The assistant message.

        Raises:
            ValueError: The request's context has no conversation id (``Kernel.invoke``
                always gives one; a direct ``Kernel.chat`` call must).
        """
        cid = request.context.conversation_id
        if cid is None:
            raise ValueError(
                "memory_filter needs a conversation id in the context; pass "
                "context=memoryd.Context(conversation_id=...)"
            )
        delta = list(request.messages)
        self.store_delta(cid, delta, invoke_id=request.invoke_id, step=request.step)
        history = self.store.get(cid)
        reply = next(request.with_messages(history))
        self.store.add(cid, [reply], idempotency_key=_key(request.invoke_id, request.step, "out"))
        return reply

    def store_delta(self, cid: str, messages: list[Message], *, invoke_id: str, step: int) -> None:
        """Store the new messages of one step (nothing when there are none).

        Args:
            cid: The conversation id.
            messages: The delta.
            invoke_id: The invoke's id (part of the idempotency key).
            step: The step (part of the idempotency key).
        """
        if messages:
            self.store.add(cid, messages, idempotency_key=_key(invoke_id, step, "in"))

    def forget(self, cid: str) -> None:
        """Clear an ephemeral conversation.

        Args:
            cid: The conversation id.
        """
        self.store.clear(cid)

    def __repr__(self) -> str:
        return f"memory_filter({self.store!r})"


def memory_filter(store: Any) -> MemoryFilter:
    """The kernel memory layer on ``store`` (put it first in the filter list).

    ```python
    kernel = memoryd.Kernel(llm=model, filters=[memoryd.memory_filter(store)])
    ```

    Args:
        store: The store handle holding the conversations.

    Returns:
        The filter.

    Raises:
        TypeError: ``store`` is not a store handle.
    """
    return MemoryFilter(store)
