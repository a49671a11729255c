"""The MemoryProvider protocol: the policy layer between an agent and a store (beamai).

A provider is beamai's four callbacks: ``history(cid)``, ``append(cid, messages)``,
``prepare(cid, messages)`` and ``clear(cid)``. Two keywords of ``append`` are optional
capabilities a provider may offer:

* ``idempotency_key``: a repeated key writes nothing (a retried or resumed commit is
  stored once);
* ``expected_version``: the write is refused with `ConflictError` unless the
  conversation is at that version (an atomic check, also across processes).

A provider offers one by naming it as a parameter of its ``append`` (read once, with
`inspect.signature`, by `append_options`; ``**kwargs`` does not count). A provider that
wraps another and offers what the other offers says so with an ``append_options``
attribute instead (`LongTermMemory` does). What the Agent promises without them is in
`memoryd.agent.memory.commit_turn`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from memoryd.provider.chat_store import call_options

__all__ = ["APPEND_OPTIONS", "MemoryProvider", "append_options", "provider_append"]

APPEND_OPTIONS = ("idempotency_key", "expected_version")
"""The optional keywords of ``append``."""


@runtime_checkable
class MemoryProvider(Protocol):
    """Cross-run history, persistence and the pre-send transform of one memory policy.

    Contract (beamai's): once `append` returned, every later `history` of that
    conversation, from any thread, includes what it appended (read-your-writes).
    `prepare` is pure: it does no I/O and does not mutate its input; the whole policy
    of what an LLM call sees (windows, budgets, summaries) lives there or in `history`.
    ``append`` may also take ``idempotency_key=`` and ``expected_version=`` (see the
    module docstring).
    """

    def history(self, cid: str) -> list[dict[str, Any]]:
        """The conversation's history as this policy loads it, oldest first.

        Args:
            cid: The conversation id.

        Returns:
            The messages (fresh copies).
        """
        ...

    def append(self, cid: str, messages: list[dict[str, Any]]) -> Any:
        """Persist ``messages`` at the end of the conversation, as one write.

        Args:
            cid: The conversation id.
            messages: The messages to add.

        Returns:
            The conversation's version after the write (an int) when the provider keeps
            versions; anything else is ignored.
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


def append_options(provider: Any) -> frozenset[str]:
    """The optional ``append`` keywords ``provider`` honours (`APPEND_OPTIONS`).

    Args:
        provider: The provider.

    Returns:
        Its ``append_options`` attribute when it has one, else the keywords its
        ``append`` names as parameters.
    """
    declared = getattr(provider, "append_options", None)
    if declared is not None:
        return frozenset(declared) & frozenset(APPEND_OPTIONS)
    return call_options(provider.append, APPEND_OPTIONS)


def provider_append(
    provider: Any,
    options: frozenset[str],
    cid: str,
    messages: Sequence[dict[str, Any]],
    **wanted: Any,
) -> int | None:
    """``provider.append`` with those of ``wanted`` (non-None) that it honours.

    Args:
        provider: The provider.
        options: Its `append_options`.
        cid: The conversation id.
        messages: The messages.
        wanted: ``idempotency_key=`` / ``expected_version=`` values, None for unset.

    Returns:
        The version it answered, or None when it answered no int.
    """
    passed = {k: v for k, v in wanted.items() if v is not None and k in options}
    result = provider.append(cid, list(messages), **passed)
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return None
