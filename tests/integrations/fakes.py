"""An offline Agents SDK model for the tests: it answers from a script and keeps its inputs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents.items import ModelResponse, TResponseOutputItem
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


def say(text: str, item_id: str = "msg_1") -> ResponseOutputMessage:
    """An assistant message output item."""
    return ResponseOutputMessage(
        id=item_id,
        content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        role="assistant",
        status="completed",
        type="message",
    )


def call(name: str, arguments: str, call_id: str) -> ResponseFunctionToolCall:
    """A function-call output item."""
    return ResponseFunctionToolCall(
        arguments=arguments, call_id=call_id, name=name, type="function_call", status="completed"
    )


class ScriptedModel(Model):
    """Returns the scripted turns in order and records the input of every call."""

    def __init__(self, turns: list[list[TResponseOutputItem]]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []

    async def get_response(  # the SDK's keyword arguments are accepted and ignored
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> ModelResponse:
        self.inputs.append(input)
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> AsyncIterator[Any]:
        # The adapter tests drive Runner.run only; a streamed run is refused loudly.
        raise TypeError("ScriptedAgentsModel answers Runner.run only; it has no streaming mode")
