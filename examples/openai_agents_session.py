"""An OpenAI Agents SDK agent whose session lives in memoryd.

The one-line switch: ``SQLiteSession("user-1", "chat.db")`` becomes
``MemorydSession("user-1", store)``. Runs offline with a scripted model (an Agents SDK
``Model`` of its own); the history survives a restart of the store.

    python examples/openai_agents_session.py [DATA_DIR]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseOutputItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import memoryd
from memoryd.integrations.openai_agents import MemorydSession


def _say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_example",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


class ScriptedModel(Model):
    """Answers from a script; swap in a real model (the default) to go online."""

    def __init__(self, turns: list[list[TResponseOutputItem]]) -> None:
        self.turns = turns

    async def get_response(  # the SDK's keyword arguments are accepted and ignored
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> ModelResponse:
        print(f"  (model sees {len(input)} items of history)")
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


@function_tool
def order_status(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id: The order number, like A-100.
    """
    return f"{order_id} shipped yesterday"


async def main(data: str) -> None:
    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            [
                ResponseFunctionToolCall(
                    arguments='{"order_id": "A-100"}',
                    call_id="call_1",
                    name="order_status",
                    type="function_call",
                )
            ],
            [_say("Order A-100 shipped yesterday.")],
            [_say("You asked about order A-100.")],
        ]
    )
    agent = Agent(name="support", instructions="Be brief.", model=model, tools=[order_status])

    store = memoryd.LmdbStore.start(data, name="agents-example")
    session = MemorydSession("user-1", store)  # was: SQLiteSession("user-1", "chat.db")
    result = await Runner.run(agent, "Where is order A-100?", session=session)
    print("assistant:", result.final_output)
    store.stop()

    store = memoryd.LmdbStore.start(data, name="agents-example")  # a restart: history is durable
    session = MemorydSession("user-1", store)
    result = await Runner.run(agent, "What did I ask about?", session=session)
    print("assistant:", result.final_output)
    for item in await session.get_items():
        print("  stored:", item.get("type", "message"), item.get("role", ""))
    memoryd.shutdown()  # stops the stores and their supervisor


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:  # a directory of its own, removed afterwards
        with tempfile.TemporaryDirectory(prefix="md-agents-") as scratch:
            asyncio.run(main(scratch))
