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
and ships no guard; the store's idempotency keys make the guard free here; a store
without idempotency keys, a `memoryd.ChatStore` alone, has no such guard).

An invoke without a conversation id (beamai's one-off) keeps its history in memory
only, in a scratch list the filter holds for that invoke: nothing reaches the store,
so no conversation, change or export shows it.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from memoryd.kernel.filters import ChatNext, ChatRequest, Filter, Message
from memoryd.provider.chat_store import (
    ChatStore,
    StoreFeatures,
    check_store,
    store_add,
    store_features,
    store_get,
)

__all__ = ["MemoryFilter", "memory_filter"]

EPHEMERAL_PREFIX = "memoryd.ephemeral/"
"""Conversation ids the kernel makes up for an invoke without one (kept in memory only)."""


def _key(invoke_id: str, step: int, direction: str) -> str | None:
    return f"memoryd.kernel/{invoke_id}/{step}/{direction}" if invoke_id else None


class MemoryFilter(Filter):
    """The memory layer of a kernel; build it with `memory_filter`.

    Args:
        store: The store holding the conversations: a store handle or any
            `memoryd.ChatStore`.

    Raises:
        TypeError: ``store`` is not a store (the message names what it lacks).
    """

    def __init__(self, store: ChatStore | Any) -> None:
        self.store = check_store(store, user="memory_filter")
        self._features: StoreFeatures = store_features(self.store)
        self._scratch: dict[str, list[Message]] = {}
        self._scratch_keys: dict[str, set[str]] = {}
        self._scratch_lock = threading.Lock()

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
        scratch = self._scratch.get(cid)
        if scratch is not None:
            reply = next(request.with_messages(copy.deepcopy(scratch)))
            if self._first_in_scratch(cid, _key(request.invoke_id, request.step, "out")):
                scratch.append(copy.deepcopy(reply))
            return reply
        history = store_get(self.store, self._features, cid)
        reply = next(request.with_messages(history))
        key = _key(request.invoke_id, request.step, "out")
        store_add(self.store, self._features, cid, [reply], idempotency_key=key)
        return reply

    def store_delta(self, cid: str, messages: list[Message], *, invoke_id: str, step: int) -> None:
        """Store the new messages of one step (nothing when there are none).

        Args:
            cid: The conversation id.
            messages: The delta.
            invoke_id: The invoke's id (part of the idempotency key).
            step: The step (part of the idempotency key).
        """
        if not messages:
            return
        key = _key(invoke_id, step, "in")
        scratch = self._scratch.get(cid)
        if scratch is not None:
            if self._first_in_scratch(cid, key):
                scratch.extend(copy.deepcopy(messages))
            return
        store_add(self.store, self._features, cid, messages, idempotency_key=key)

    def begin_one_off(self, cid: str) -> None:
        """Keep conversation ``cid`` in memory only, until `forget` (an invoke without id).

        Args:
            cid: The made-up conversation id.
        """
        with self._scratch_lock:
            self._scratch[cid] = []
            self._scratch_keys[cid] = set()

    def _first_in_scratch(self, cid: str, key: str | None) -> bool:
        """True the first time a one-off conversation's write ``key`` is seen.

        The scratch list honours the idempotency keys a store would: a retry filter
        outside the memory filter re-runs a step with the same delta, which must not
        reach the model twice.
        """
        if key is None:
            return True
        with self._scratch_lock:
            seen = self._scratch_keys.setdefault(cid, set())
            if key in seen:
                return False
            seen.add(key)
            return True

    def forget(self, cid: str) -> None:
        """Drop a one-off conversation's history kept in memory.

        Args:
            cid: The conversation id.
        """
        with self._scratch_lock:
            self._scratch.pop(cid, None)
            self._scratch_keys.pop(cid, None)

    def __repr__(self) -> str:
        return f"memory_filter({self.store!r})"


def memory_filter(store: Any) -> MemoryFilter:
    """The kernel memory layer on ``store`` (put it first in the filter list).

    ```python
    kernel = memoryd.Kernel(llm=model, filters=[memoryd.memory_filter(store)])
    ```

    Args:
        store: The store holding the conversations: a store handle or any
            `memoryd.ChatStore`.

    Returns:
        The filter.

    Raises:
        TypeError: ``store`` is not a store (the message names what it lacks).
    """
    return MemoryFilter(store)
