"""MemorydChatMessageHistory stores streamed chunks and chat messages under their true roles.

Found by using the adapter as LangChain's own docs do (``RunnableWithMessageHistory`` with
``stream``, which stores the aggregated ``AIMessageChunk``). Every test runs against
LmdbStore, EphemeralStore and the daemon through RemoteStore.
"""

from __future__ import annotations

from langchain_core.messages import (
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessageChunk,
    SystemMessageChunk,
    ToolMessageChunk,
)

from memoryd.integrations.langchain import MemorydChatMessageHistory
from memoryd.store.handle import StoreHandle


def _streamed_tool_call() -> AIMessageChunk:
    """What a streaming chat model's chunks add up to when it calls a tool."""
    first = AIMessageChunk(
        content="", tool_call_chunks=[{"name": "weather", "args": "", "id": "call_1", "index": 0}]
    )
    second = AIMessageChunk(
        content="", tool_call_chunks=[{"name": None, "args": '{"city": "Paris"}', "index": 0}]
    )
    joined = first + second
    assert isinstance(joined, AIMessageChunk)
    return joined


def test_a_streamed_tool_call_chunk_is_stored_as_an_assistant_message(
    store: StoreHandle, cid: str
) -> None:
    """An aggregated AIMessageChunk holding tool calls is stored (as ``assistant``, with its
    ``tool_calls``) and read back equal, instead of being refused as a user message."""
    chunk = _streamed_tool_call()
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages([chunk])
    [stored] = store.get(cid)
    assert stored["role"] == "assistant"
    assert stored["tool_calls"][0]["function"]["name"] == "weather"
    assert history.messages == [chunk]


def test_chunks_keep_the_role_of_the_message_they_stream(store: StoreHandle, cid: str) -> None:
    """Each chunk class is stored under its message's role, so memoryd's own readers see
    an assistant reply as the assistant's, not the user's."""
    chunks: list[BaseMessage] = [
        HumanMessageChunk(content="hi"),
        AIMessageChunk(content="hello"),
        SystemMessageChunk(content="be brief"),
        ToolMessageChunk(content="17 C", tool_call_id="call_1"),
    ]
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages(chunks)
    assert [m["role"] for m in store.get(cid)] == ["user", "assistant", "system", "tool"]
    assert history.messages == chunks


def test_a_chat_message_with_the_tool_role_is_stored_not_a_key_error(
    store: StoreHandle, cid: str
) -> None:
    """``ChatMessage(role="tool")`` has no tool call id: it is stored (as a user message
    carrying LangChain's own form) and read back equal, instead of raising KeyError."""
    message = ChatMessage(role="tool", content="output")
    history = MemorydChatMessageHistory(store, cid)
    history.add_messages([message])
    assert store.get(cid)[0]["role"] == "user"
    assert history.messages == [message]
