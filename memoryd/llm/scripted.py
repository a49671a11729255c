"""ScriptedModel: a deterministic chat model for tests and examples.

It answers from a script, in order, and records what it was sent::

    model = ScriptedModel([
        messages.assistant(tool_calls=[messages.tool_call("c1", "lookup", {"q": "x"})]),
        "The answer is 42.",
        lambda sent: f"You sent {len(sent)} messages",
        LLMError("rate limited"),
    ])
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from memoryd import messages as msgs
from memoryd.errors import InvalidMessage, ScriptExhausted

__all__ = ["Response", "ScriptedModel"]

Message: TypeAlias = dict[str, Any]

Response: TypeAlias = str | Message | Callable[[list[Message]], "str | Message"] | BaseException
"""One scripted answer: text, an assistant message, a function of the messages, or an error."""


def _assistant(value: Any, where: str) -> Message:
    """Turn a str or an assistant message dict into a validated assistant message."""
    if isinstance(value, str):
        return msgs.assistant(value)
    if isinstance(value, dict):
        if value.get("role") != "assistant":
            raise InvalidMessage(
                f"{where} must be an assistant message, got role {value.get('role')!r}"
            )
        return msgs.validate(value, max_bytes=None)
    raise TypeError(
        f"{where} must be a str or an assistant message dict, got {type(value).__name__}"
    )


class ScriptedModel:
    """A `ChatModel` that answers from a script and records every call.

    Args:
        responses: The answers, in order. Each is a str (assistant text), an assistant
            message dict (for example with ``tool_calls``), a callable taking a copy of
            the messages and returning a str or an assistant message, or an exception
            instance, raised when its turn comes.

    Attributes:
        calls: A deep copy of the messages each call was sent, in call order.
        tools: A deep copy of the ``tools`` each call was given (None when none).

    Raises:
        TypeError: A response is of another type (an exception class instead of an
            instance, for example).
        InvalidMessage: A response dict is not a valid assistant message.
    """

    def __init__(self, responses: Sequence[Response]) -> None:
        if isinstance(responses, str | dict) or not isinstance(responses, Sequence):
            raise TypeError(
                "responses must be a list of responses (str, assistant dict, callable or "
                f"exception instance), got {type(responses).__name__}"
            )
        script: list[Response] = []
        for index, response in enumerate(responses):
            where = f"responses[{index}]"
            if isinstance(response, type) and issubclass(response, BaseException):
                raise TypeError(f"{where} is the class {response.__name__}; pass an instance")
            if isinstance(response, str | dict):
                script.append(_assistant(response, where))
            elif isinstance(response, BaseException):
                script.append(response)
            elif callable(response):
                script.append(response)  # type: ignore[arg-type]
            else:
                raise TypeError(
                    f"{where} must be a str, an assistant message dict, a callable or an "
                    f"exception instance, got {type(response).__name__}"
                )
        self._script = script
        self._next = 0
        self._lock = threading.Lock()
        self.calls: list[list[Message]] = []
        self.tools: list[list[dict[str, Any]] | None] = []

    @property
    def remaining(self) -> int:
        """How many responses are left."""
        with self._lock:
            return len(self._script) - self._next

    def complete(
        self, messages: list[Message], *, tools: list[dict[str, Any]] | None = None
    ) -> Message:
        """Record the call and give the next scripted response.

        Args:
            messages: The conversation sent to the model.
            tools: Tool definitions sent with it.

        Returns:
            A fresh copy of the scripted assistant message.

        Raises:
            ScriptExhausted: Every response was used already.
            BaseException: The scripted exception, when its turn comes.
            InvalidMessage: A callable returned something that is not an assistant message.
        """
        if not isinstance(messages, list):
            raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
        sent = copy.deepcopy(messages)
        with self._lock:
            index = self._next
            self.calls.append(sent)
            self.tools.append(copy.deepcopy(tools))
            if index >= len(self._script):
                raise ScriptExhausted(
                    f"ScriptedModel got call {index + 1} but its script has only "
                    f"{len(self._script)} responses; add more responses"
                )
            self._next += 1
            response = self._script[index]
        if isinstance(response, BaseException):
            raise response
        if isinstance(response, dict):
            return copy.deepcopy(response)
        result = response(copy.deepcopy(sent))  # type: ignore[operator]
        return _assistant(result, f"the result of responses[{index}]")

    async def acomplete(
        self, messages: list[Message], *, tools: list[dict[str, Any]] | None = None
    ) -> Message:
        """`complete`, awaited: `Agent.arun` calls the model on its event loop this way.

        A scripted answer is there at once; the call is recorded the same way.
        """
        return self.complete(messages, tools=tools)
