"""What memoryd needs from a chat model: one call, messages in, an assistant message out."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatModel"]


@runtime_checkable
class ChatModel(Protocol):
    """A chat-completions model (OpenAI Chat Completions message format).

    A model may also have ``async def acomplete(messages, *, tools=None)``, answering
    the same way: `memoryd.Agent.arun` awaits it on its event loop, and calls
    ``complete`` in a worker thread otherwise.
    """

    def complete(
        self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Answer a conversation.

        Args:
            messages: The conversation, OpenAI-format message dicts, oldest first.
            tools: Tool definitions (OpenAI ``tools`` format) the model may call.

        Returns:
            One assistant message dict (``content`` and/or ``tool_calls``).

        Raises:
            LLMError: The model could not answer.
        """
        ...
