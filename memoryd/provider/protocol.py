"""The MemoryProvider protocol: the policy layer between an agent and a store (beamai)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["MemoryProvider"]


@runtime_checkable
class MemoryProvider(Protocol):
    """Cross-run history, persistence and the pre-send transform of one memory policy.

    Contract (beamai's): once `append` returned, every later `history` of that
    conversation, from any thread, includes what it appended (read-your-writes).
    `prepare` is pure: it does no I/O and does not mutate its input; the whole policy
    of what an LLM call sees (windows, budgets, summaries) lives there or in `history`.
    """

    def history(self, cid: str) -> list[dict[str, Any]]:
        """The conversation's history as this policy loads it, oldest first.

        Args:
            cid: The conversation id.

        Returns:
            The messages (fresh copies).
        """
        ...

    def append(
        self, cid: str, messages: list[dict[str, Any]], *, idempotency_key: str | None = None
    ) -> int:
        """Persist ``messages`` at the end of the conversation, as one write.

        Args:
            cid: The conversation id.
            messages: The messages to add.
            idempotency_key: Makes a retry safe: a repeated key writes nothing.

        Returns:
            The conversation's version after the write.
        """
        ...

    def prepare(self, cid: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What the LLM is sent, given everything the caller has (history + this turn).

        Args:
            cid: The conversation id.
            messages: History and the current turn's messages, oldest first.

        Returns:
            The messages to send.
        """
        ...

    def clear(self, cid: str) -> None:
        """Forget the conversation's history.

        Args:
            cid: The conversation id.
        """
        ...
