"""An agent with durable memory and a tool.

Runs offline with a scripted model by default. Set ``OPENAI_BASE_URL`` (and
``OPENAI_API_KEY``, ``OPENAI_MODEL`` as needed) to talk to any OpenAI-compatible
server instead, for example ``OPENAI_BASE_URL=http://localhost:11434/v1
OPENAI_MODEL=llama3.1`` for Ollama.

    python examples/agent_with_memory.py [DATA_DIR]
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel
from memoryd.logging import configure


@memoryd.tool
def order_status(order_id: str) -> dict[str, Any]:
    """Look up an order.

    Args:
        order_id: The order number, like A-100.
    """
    return {"order_id": order_id, "status": "shipped", "eta_days": 2}


def scripted() -> ScriptedModel:
    """A model that answers like a real one would, for the two turns below."""
    return ScriptedModel(
        [
            "Noted: your order is A-100.",
            messages.assistant(
                tool_calls=[messages.tool_call("call_1", "order_status", {"order_id": "A-100"})]
            ),
            lambda sent: "Order A-100 has shipped and arrives in about 2 days.",
        ]
    )


def main(data_dir: str) -> None:
    """Run two turns of one conversation, then show what the store holds."""
    configure(level="warning")
    if os.environ.get("OPENAI_BASE_URL"):
        from memoryd.llm import OpenAIChat  # noqa: PLC0415 - only when a server is configured

        llm: Any = OpenAIChat(os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    else:
        llm = scripted()
    store = memoryd.LmdbStore.start(data_dir, name="example")
    try:
        agent = memoryd.Agent(
            llm=llm,
            memory=memoryd.DefaultProvider(store, window=20),
            tools=[order_status],
            system_prompt="You are a support agent. Use tools to check orders.",
        )
        agent.activate_session("support-demo")
        for text in ("My order number is A-100.", "Where is my order?"):
            reply = agent.run(text)
            print(f"user: {text}\nagent: {reply.text}\n")
        print("stored history:")
        for message in store.get("support-demo"):
            print(f"  {message['role']:9} {message.get('content') or message.get('tool_calls')}")
    finally:
        memoryd.shutdown()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:  # a directory of its own, removed afterwards
        with tempfile.TemporaryDirectory(prefix="memoryd-example-") as scratch:
            main(scratch)
