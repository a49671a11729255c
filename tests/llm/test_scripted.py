"""ScriptedModel: the deterministic LLM boundary used by every test."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd import InvalidMessage, messages
from memoryd.llm import ChatModel, LLMError, ScriptedModel, ScriptExhausted


def test_str_response_becomes_an_assistant_message() -> None:
    """A str is the assistant's text."""
    model = ScriptedModel(["hello"])
    assert model.complete([messages.user("hi")]) == {"role": "assistant", "content": "hello"}
    assert isinstance(model, ChatModel)


def test_dict_response_with_tool_calls_is_returned_as_a_copy() -> None:
    """An assistant dict is returned as given (a fresh copy each time)."""
    reply = messages.assistant(tool_calls=[messages.tool_call("c1", "lookup", {"q": "x"})])
    model = ScriptedModel([reply])
    out = model.complete([messages.user("hi")])
    assert out == reply
    out["content"] = "mutated"
    assert reply["content"] is None


def test_callable_response_sees_the_messages() -> None:
    """A callable gets the messages and its result is the reply."""
    model = ScriptedModel([lambda sent: f"you sent {len(sent)}"])
    assert model.complete([messages.user("a"), messages.user("b")])["content"] == "you sent 2"


def test_exception_response_is_raised_when_reached() -> None:
    """An exception instance is raised at its turn; the script then continues."""
    model = ScriptedModel([LLMError("rate limited"), "ok"])
    with pytest.raises(LLMError, match="rate limited"):
        model.complete([messages.user("a")])
    assert model.complete([messages.user("a")])["content"] == "ok"


def test_calls_record_deep_copies() -> None:
    """Mutating the sent list afterwards does not change what was recorded."""
    model = ScriptedModel(["a"])
    sent = [messages.user("original")]
    model.complete(sent, tools=[{"type": "function", "function": {"name": "f"}}])
    sent[0]["content"] = "changed"
    assert model.calls == [[{"role": "user", "content": "original"}]]
    assert model.tools == [[{"type": "function", "function": {"name": "f"}}]]


def test_running_out_of_responses_raises_a_clear_error() -> None:
    """The call past the script's end raises ScriptExhausted naming the counts."""
    model = ScriptedModel(["only one"])
    model.complete([messages.user("a")])
    assert model.remaining == 0
    with pytest.raises(ScriptExhausted, match="call 2 but its script has only 1"):
        model.complete([messages.user("b")])


@pytest.mark.parametrize(
    ("responses", "error"),
    [
        ([42], TypeError),
        ([ValueError], TypeError),
        ([{"role": "user", "content": "x"}], InvalidMessage),
        ([{"role": "assistant", "content": None}], InvalidMessage),
        ("a str, not a list", TypeError),
    ],
)
def test_bad_scripts_are_refused_at_construction(responses: Any, error: type[Exception]) -> None:
    """Bad responses are refused up front with an error naming the index."""
    with pytest.raises(error):
        ScriptedModel(responses)


def test_callable_returning_garbage_raises() -> None:
    """A callable must return a str or an assistant message."""
    model = ScriptedModel([lambda sent: 42])
    with pytest.raises(TypeError, match="responses\\[0\\]"):
        model.complete([messages.user("a")])
