"""LangChain chat message history backed by a memoryd store.

Swap ``SQLChatMessageHistory(session_id, connection=...)`` for
``MemorydChatMessageHistory(store, session_id)``::

    from langchain_core.runnables.history import RunnableWithMessageHistory
    from memoryd.integrations.langchain import MemorydChatMessageHistory

    store = memoryd.LmdbStore.start("data/chat")
    chain = RunnableWithMessageHistory(
        model, lambda session_id: MemorydChatMessageHistory(store, session_id)
    )

Messages are stored as OpenAI-format dicts (`to_openai`), so memoryd's own agent,
providers and exports read them. When the plain dict cannot carry everything a
LangChain message holds (an ``id``, ``response_metadata``, ``usage_metadata``,
``invalid_tool_calls``, an ``artifact``, ...), the full LangChain serialisation rides
under the `LANGCHAIN_KEY` key, so `from_openai` gives back an equal message.

The ``a``-prefixed methods run their store call in a worker thread
(`asyncio.to_thread`) and never block the event loop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from memoryd import messages as msgs
from memoryd._json_values import loads
from memoryd.integrations._langchain_makers import DEVELOPER, PLAIN_MAKERS, TOOL, build_history
from memoryd.integrations._stores import check_adapter_store
from memoryd.store.handle import StoreHandle

__all__ = ["LANGCHAIN_KEY", "MemorydChatMessageHistory", "from_openai", "to_openai"]

LANGCHAIN_KEY = "langchain_message"
"""The message key holding LangChain's own serialisation when the plain dict loses data."""

_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_ROLE_OF_CLASS = (
    (AIMessage, "assistant"),
    (HumanMessage, "user"),
    (SystemMessage, "system"),
    (ToolMessage, "tool"),
)
"""The role of a subclass (``AIMessageChunk``, ``ToolMessageChunk``, ...) whose ``type`` differs."""
_CHAT_ROLES = frozenset({"assistant", "developer", "system", "user"})
"""The roles a ``ChatMessage`` keeps: a ``tool`` message needs a ``tool_call_id`` it lacks."""


def _role(message: BaseMessage) -> str:
    """The OpenAI role ``message`` is stored under (``user`` for any other kind)."""
    if isinstance(message, ChatMessage):
        return message.role if message.role in _CHAT_ROLES else "user"
    role = _ROLE_OF_TYPE.get(message.type)
    if role is not None:
        return role
    return next((role for cls, role in _ROLE_OF_CLASS if isinstance(message, cls)), "user")


def _content(value: Any) -> str | list[dict[str, Any]]:
    """OpenAI content: a str, or content parts (bare strs become text parts)."""
    if isinstance(value, str):
        return value
    parts: list[dict[str, Any]] = []
    for part in value:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif isinstance(part, Mapping) and isinstance(part.get("type"), str):
            parts.append(dict(part))
    return parts or ""


def _plain(message: BaseMessage) -> dict[str, Any]:
    """The OpenAI-format dict for ``message``, without the LangChain extras."""
    if isinstance(message, SystemMessage) and message.additional_kwargs.get(DEVELOPER) == (
        "developer"
    ):
        role = "developer"
    else:
        role = _role(message)
    out: dict[str, Any] = {"role": role, "content": _content(message.content)}
    if isinstance(message, AIMessage) and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.get("id") or f"call_{index}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
            }
            for index, call in enumerate(message.tool_calls)
        ]
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None and role in ("user", "assistant", "system", "developer"):
        out["name"] = message.name
    return out


def _fast(message: Mapping[str, Any], role: Any, text: Any, name: Any) -> BaseMessage | None:
    """The message a maker builds when its shape is a plain one, else None."""
    if type(text) is not str or (name is not None and type(name) is not str):
        return None
    if role == "tool":
        call_id = message.get("tool_call_id")
        return TOOL(text, call_id) if type(call_id) is str else None
    if role == "assistant" and message.get("tool_calls"):
        return None
    maker = PLAIN_MAKERS.get(role)
    return None if maker is None else maker(text, name)


def _from_stored(store: object, stored: list[dict[str, Any]]) -> list[BaseMessage]:
    """The LangChain messages of messages ``store`` returned, in order (as `from_openai`).

    A memoryd store handle returns a fresh list, which becomes the result; the list of
    any other store (one a user wrote may hand out its own) is copied first.
    """
    return build_history(stored if isinstance(store, StoreHandle) else list(stored), from_openai)


def _from_plain(message: Mapping[str, Any]) -> BaseMessage:
    """The LangChain message for a plain OpenAI-format dict."""
    role = message.get("role")
    content = message.get("content")
    text: Any = "" if content is None else content
    name = message.get("name")
    fast = _fast(message, role, text, name)
    if fast is not None:
        return fast
    if role == "user":
        return HumanMessage(content=text, name=name)
    if role == "system":
        return SystemMessage(content=text, name=name)
    if role == "developer":
        return SystemMessage(content=text, name=name, additional_kwargs={DEVELOPER: "developer"})
    if role == "tool":
        return ToolMessage(content=text, tool_call_id=message["tool_call_id"])
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in message.get("tool_calls") or ():
        function = call["function"]
        try:
            args = loads(function["arguments"])
        except ValueError as exc:
            invalid.append(
                {
                    "name": function["name"],
                    "args": function["arguments"],
                    "id": call["id"],
                    "error": str(exc),
                    "type": "invalid_tool_call",
                }
            )
        else:
            calls.append({"name": function["name"], "args": args, "id": call["id"]})
    return AIMessage(content=text, name=name, tool_calls=calls, invalid_tool_calls=invalid)


def to_openai(message: BaseMessage) -> dict[str, Any]:
    """The OpenAI-format dict that stores ``message`` without loss.

    Human, AI (with ``tool_calls``), tool, system and chat messages map to the
    matching roles; anything the plain dict cannot carry is kept under `LANGCHAIN_KEY`.

    Raises:
        TypeError: ``message`` is not a LangChain ``BaseMessage``.
    """
    if not isinstance(message, BaseMessage):
        raise TypeError(f"expected a LangChain BaseMessage, got {type(message).__name__}")
    out = _plain(message)
    if _from_plain(out) != message:
        out[LANGCHAIN_KEY] = message_to_dict(message)
    return out


def _encoded(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """``messages`` as stored dicts.

    Raises:
        TypeError: ``messages`` is one message (or text) where a sequence belongs, or
            holds something that is no LangChain message.
    """
    if isinstance(messages, BaseMessage | str | bytes | Mapping):
        raise TypeError(
            "add_messages takes a sequence of LangChain messages, not one "
            f"{type(messages).__name__}; wrap it in a list"
        )
    return [to_openai(m) for m in messages]


def from_openai(message: Mapping[str, Any]) -> BaseMessage:
    """The LangChain message a stored OpenAI-format dict holds (inverse of `to_openai`)."""
    extra = message.get(LANGCHAIN_KEY)
    if extra is not None and isinstance(extra, Mapping):  # the ABC check is slow: skip it
        return messages_from_dict([dict(extra)])[0]
    return _from_plain(message)


class MemorydChatMessageHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` stored in a memoryd conversation.

    Args:
        store: any store handle (`LmdbStore`, `EphemeralStore`, `RemoteStore`, ...).
        conversation_id: the memoryd conversation id (LangChain's session id).

    Raises:
        InvalidConversationId: a bad ``conversation_id``.
        TypeError: ``store`` is not a store (a database URL, say), or the two arguments
            are swapped (``SQLChatMessageHistory`` takes the session id first).
    """

    def __init__(self, store: StoreHandle, conversation_id: str) -> None:
        needs = ("get",)  # a read-only store of the user's own is enough to read
        signature = "(store, conversation_id)"
        if not isinstance(conversation_id, str):
            check_adapter_store(
                store,
                user="MemorydChatMessageHistory",
                needs=needs,
                signature=signature,
                other=conversation_id,
            )
        self.conversation_id = msgs.validate_conversation_id(conversation_id)
        check_adapter_store(
            store, user="MemorydChatMessageHistory", needs=needs, signature=signature
        )
        self.store = store

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The whole history, oldest first (one store read)."""
        store = self.store
        return _from_stored(store, store.get(self.conversation_id))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` as one atomic store event (nothing for an empty list).

        Raises:
            TypeError: one message given where a sequence belongs, or not a message.
            InvalidMessage: a message holds a value that is not JSON-compatible or is
                too large; nothing is written.
        """
        encoded = _encoded(messages)
        if encoded:
            self.store.add(self.conversation_id, encoded)

    def clear(self) -> None:
        """Remove every message (the store's log keeps a ``cleared`` marker)."""
        self.store.clear(self.conversation_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """`messages`, read in a worker thread."""
        store = self.store
        return _from_stored(store, await asyncio.to_thread(store.get, self.conversation_id))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """`add_messages`, written in a worker thread."""
        encoded = _encoded(messages)
        if encoded:
            await asyncio.to_thread(self.store.add, self.conversation_id, encoded)

    async def aclear(self) -> None:
        """`clear`, in a worker thread."""
        await asyncio.to_thread(self.store.clear, self.conversation_id)

    def __repr__(self) -> str:
        return f"<MemorydChatMessageHistory {self.conversation_id!r} on {self.store!r}>"
