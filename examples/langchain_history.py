"""A LangChain chat model whose history lives in memoryd.

The one-line switch: ``SQLChatMessageHistory(session_id, connection=...)`` becomes
``MemorydChatMessageHistory(store, session_id)``. Runs offline with LangChain's own
``GenericFakeChatModel``; the history survives a restart of the store.

    python examples/langchain_history.py [DATA_DIR]
"""

from __future__ import annotations

import sys
import tempfile
import warnings

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory

import memoryd
from memoryd.integrations.langchain import MemorydChatMessageHistory

warnings.filterwarnings("ignore", message="RunnableWithMessageHistory is deprecated")


def main(data: str) -> None:
    model = GenericFakeChatModel(
        messages=iter([AIMessage("Nice to meet you, Alice."), AIMessage("You are Alice.")])
    )
    store = memoryd.LmdbStore.start(data, name="langchain-example")
    chain = RunnableWithMessageHistory(
        model,
        # was: lambda session_id: SQLChatMessageHistory(session_id, connection="sqlite:///chat.db")
        lambda session_id: MemorydChatMessageHistory(store, session_id),
    )
    config: RunnableConfig = {"configurable": {"session_id": "user-1"}}
    print("assistant:", chain.invoke([HumanMessage("I am Alice.")], config=config).content)

    # Tool calls round-trip too.
    history = MemorydChatMessageHistory(store, "user-1")
    history.add_messages(
        [
            AIMessage("", tool_calls=[{"name": "clock", "args": {}, "id": "call_1"}]),
            ToolMessage("09:00", tool_call_id="call_1"),
        ]
    )
    store.stop()

    store = memoryd.LmdbStore.start(data, name="langchain-example")  # a restart
    print("assistant:", chain.invoke([HumanMessage("Who am I?")], config=config).content)
    for message in MemorydChatMessageHistory(store, "user-1").messages:
        calls = getattr(message, "tool_calls", "")
        print(f"  stored: {message.type:<5} {message.content!r} {calls}")
    memoryd.shutdown()  # stops the stores and their supervisor


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:  # a directory of its own, removed afterwards
        with tempfile.TemporaryDirectory(prefix="md-langchain-") as scratch:
            main(scratch)
