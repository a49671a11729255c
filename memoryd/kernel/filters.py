"""Filters: onion layers around each LLM call and each tool call.

A filter has ``around_chat(request, next)`` and/or ``around_tool(call, next)``; the
first filter in the kernel's list is the outermost layer. A layer may change what it
passes on, call ``next`` more than once (a retry), or not at all (a cache)::

    class Retry(Filter):
        def around_chat(self, request, next):
            try:
                return next(request)
            except LLMError:
                return next(request)

The values passed through the layers (`ChatRequest`, `ToolCall`, `ToolResult`) are
frozen; build changed ones with their ``with_...`` helpers. Composing the chains is pure.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from memoryd import messages as msgs
from memoryd.kernel.context import Context

__all__ = [
    "ChatNext",
    "ChatRequest",
    "Filter",
    "SystemPromptFilter",
    "ToolCall",
    "ToolNext",
    "ToolResult",
    "chat_chain",
    "check_filters",
    "tool_chain",
]

Message: TypeAlias = dict[str, Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatRequest:
    """One LLM call as it passes through the ``around_chat`` layers.

    Attributes:
        messages: What will be sent (in delta mode, the new messages until the memory
            filter replaces them with the stored history).
        tools: The OpenAI ``tools`` definitions offered to the model.
        context: The invoke's context (conversation id, metadata).
        step: 0 for the first LLM call of an invoke, 1 for the next, ...
        invoke_id: Unique per invoke (or agent run); stable across retries of a step.
    """

    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()
    context: Context = dataclasses.field(default_factory=Context)
    step: int = 0
    invoke_id: str = ""

    def with_messages(self, messages: Sequence[Message]) -> ChatRequest:
        """A copy sending ``messages`` instead.

        Args:
            messages: The messages.

        Returns:
            The new request.
        """
        return dataclasses.replace(self, messages=tuple(messages))

    def with_context(self, context: Context) -> ChatRequest:
        """A copy with another context.

        Args:
            context: The context.

        Returns:
            The new request.
        """
        return dataclasses.replace(self, context=context)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One tool call the model asked for, as it passes through the ``around_tool`` layers.

    Attributes:
        id: The call id (echoed by the tool message that answers it).
        name: The tool name.
        arguments: The raw JSON-encoded arguments the model sent.
        context: The invoke's context.
    """

    id: str
    name: str
    arguments: str
    context: Context = dataclasses.field(default_factory=Context)

    @classmethod
    def from_message(cls, call: Message, context: Context) -> ToolCall:
        """Build from one entry of an assistant message's ``tool_calls``.

        Args:
            call: ``{"id", "type": "function", "function": {"name", "arguments"}}``.
            context: The invoke's context.

        Returns:
            The call.
        """
        function = call["function"]
        return cls(
            id=call["id"], name=function["name"], arguments=function["arguments"], context=context
        )

    def with_arguments(self, arguments: dict[str, Any]) -> ToolCall:
        """A copy with other (decoded) arguments.

        Args:
            arguments: The arguments as a dict.

        Returns:
            The new call.
        """
        return dataclasses.replace(self, arguments=json.dumps(arguments, ensure_ascii=False))


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """What a tool call produced, as text the model can read.

    Attributes:
        call_id: The id of the call it answers.
        name: The tool name.
        content: The result (or the error) as text.
        is_error: True when the tool failed or its arguments were refused.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False

    @property
    def message(self) -> Message:
        """The tool message answering the call."""
        return msgs.tool(self.call_id, self.content)


ChatNext: TypeAlias = Callable[[ChatRequest], Message]
"""The rest of the chat chain: request in, assistant message out."""
ToolNext: TypeAlias = Callable[[ToolCall], ToolResult]
"""The rest of the tool chain: call in, result out."""


class Filter:
    """A base class whose layers pass everything through; override one or both."""

    def around_chat(self, request: ChatRequest, next: ChatNext) -> Message:
        """Wrap one LLM call.

        Args:
            request: The request.
            next: The inner layers and the LLM.

        Returns:
            The assistant message.
        """
        return next(request)

    def around_tool(self, call: ToolCall, next: ToolNext) -> ToolResult:
        """Wrap one tool call.

        Args:
            call: The call.
            next: The inner layers and the tool.

        Returns:
            The result.
        """
        return next(call)


class SystemPromptFilter(Filter):
    """The kernel's innermost, transient layer: prepends the system prompt to each call.

    It runs inside every other filter (after a memory filter expanded the history), so
    the prompt reaches the LLM but is never stored.

    Args:
        prompt: The system prompt text.
    """

    def __init__(self, prompt: str) -> None:
        self.message = msgs.system(prompt)

    def around_chat(self, request: ChatRequest, next: ChatNext) -> Message:
        """Prepend the system message and call the LLM.

        Args:
            request: The request.
            next: The LLM.

        Returns:
            The assistant message.
        """
        return next(request.with_messages([dict(self.message), *request.messages]))


def check_filters(filters: Any) -> tuple[Any, ...]:
    """Check a filter list: each item has a callable ``around_chat`` or ``around_tool``.

    Args:
        filters: A list or tuple of filters.

    Returns:
        The filters as a tuple.

    Raises:
        TypeError: ``filters`` is not a list or tuple, or an item has neither layer.
    """
    if not isinstance(filters, list | tuple):
        raise TypeError(f"filters must be a list of filters, not {filters!r:.80}")
    for index, item in enumerate(filters):
        if not any(callable(getattr(item, n, None)) for n in ("around_chat", "around_tool")):
            raise TypeError(
                f"filters[{index}] is {item!r:.60}; a filter needs an around_chat(request, "
                "next) or around_tool(call, next) method (subclass memoryd.Filter)"
            )
    return tuple(filters)


def _layer(method: Callable[[Any, Any], Any], inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: method(value, inner)


def _chain(filters: Sequence[Any], terminal: Callable[[Any], Any], hook: str) -> Any:
    chain: Callable[[Any], Any] = terminal
    for item in reversed(filters):
        method = getattr(item, hook, None)
        if callable(method):
            chain = _layer(method, chain)
    return chain


def chat_chain(filters: Sequence[Any], terminal: ChatNext) -> ChatNext:
    """Compose the ``around_chat`` layers around ``terminal``; the first is outermost.

    Args:
        filters: Checked filters (items without ``around_chat`` are skipped).
        terminal: The innermost step (the LLM call).

    Returns:
        The composed chain.
    """
    chat: ChatNext = _chain(filters, terminal, "around_chat")
    return chat


def tool_chain(filters: Sequence[Any], terminal: ToolNext) -> ToolNext:
    """Compose the ``around_tool`` layers around ``terminal``; the first is outermost.

    Args:
        filters: Checked filters (items without ``around_tool`` are skipped).
        terminal: The innermost step (running the tool).

    Returns:
        The composed chain.
    """
    tool: ToolNext = _chain(filters, terminal, "around_tool")
    return tool
