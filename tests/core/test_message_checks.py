"""The structure checks of a message: role, content parts and tool fields
(memoryd._message_checks, through `messages.validate`)."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd import _message_checks, messages
from memoryd.errors import InvalidMessage
from memoryd.messages import validate

# --------------------------------------------------------------------------- normalising


def test_validate_drops_empty_tool_calls() -> None:
    """tool_calls None or [] (as SDK dumps produce) is dropped; the input keeps it."""
    original = {"role": "assistant", "content": "hi", "tool_calls": None, "refusal": None}
    assert validate(original) == {"role": "assistant", "content": "hi", "refusal": None}
    assert "tool_calls" in original
    assert "tool_calls" not in validate({"role": "assistant", "content": "x", "tool_calls": []})


def test_validate_sets_missing_content_of_a_tool_calling_assistant_to_none() -> None:
    """An assistant with tool_calls and no content key gets content None."""
    call = messages.tool_call("c", "f", {})
    assert validate({"role": "assistant", "tool_calls": [call]})["content"] is None


# --------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ({"content": "hi"}, "has no 'role'"),
        ({"role": "bot", "content": "hi"}, "'bot' is not one of"),
        ({"role": "USER", "content": "hi"}, "'USER' is not one of"),
        ({"role": True, "content": "hi"}, "role must be a str, got bool"),
        ({"role": None, "content": "hi"}, "role must be a str"),
        ({"role": "user"}, "needs 'content'"),
        ({"role": "system", "content": None}, "content is None"),
        ({"role": "user", "content": 5}, "content must be a str"),
        (
            {"role": "user", "content": True},
            "content must be a str, a list of content parts or None, got bool",
        ),
        ({"role": "user", "content": {"type": "text"}}, "content must be a str"),
        ({"role": "user", "content": []}, "empty list"),
        ({"role": "user", "content": ["hi"]}, r"content\[0\] must be a content-part dict"),
        (
            {"role": "user", "content": [{"text": "x"}]},
            r"content\[0\]\.type must be a non-empty str",
        ),
        ({"role": "user", "content": [{"type": ""}]}, r"\.type must be a non-empty str"),
        ({"role": "user", "content": [{"type": 1}]}, r"\.type must be a non-empty str"),
        ({"role": "user", "content": [{"type": "text"}]}, "needs a str 'text'"),
        ({"role": "user", "content": [{"type": "text", "text": 3}]}, "needs a str 'text'"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "tool", "content": "x", "tool_call_id": ""}, "tool_call_id"),
        ({"role": "tool", "content": "x", "tool_call_id": 12}, "tool_call_id"),
        ({"role": "tool", "tool_call_id": "c"}, "needs 'content'"),
        ({"role": "user", "content": "x", "tool_call_id": "c"}, "only tool messages"),
        ({"role": "assistant", "content": None}, "content is None"),
        ({"role": "assistant"}, "needs 'content'"),
    ],
)
def test_validate_refuses_bad_structure(message: Any, needle: str) -> None:
    """Bad roles, content and tool fields are refused with a message naming the problem."""
    with pytest.raises(InvalidMessage, match=needle):
        validate(message)


def good_call(**overrides: Any) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    call.update(overrides)
    return call


@pytest.mark.parametrize(
    ("calls", "needle"),
    [
        ({"id": "c1"}, "tool_calls must be a list"),
        ("c1", "tool_calls must be a list"),
        (["c1"], r"tool_calls\[0\] must be a tool-call dict"),
        ([good_call(id="")], r"tool_calls\[0\]\.id must be a non-empty str"),
        ([good_call(id=None)], r"\.id must be a non-empty str"),
        ([{k: v for k, v in good_call().items() if k != "id"}], r"\.id must be"),
        ([good_call(type="tool")], r"\.type must be 'function'"),
        ([{k: v for k, v in good_call().items() if k != "type"}], r"\.type must be 'function'"),
        ([good_call(function="f")], r"\.function must be a dict"),
        ([good_call(function={"arguments": "{}"})], r"function\.name must be a non-empty str"),
        ([good_call(function={"name": "", "arguments": "{}"})], r"function\.name"),
        ([good_call(function={"name": "f"})], r"function\.arguments must be a JSON-encoded str"),
        (
            [good_call(function={"name": "f", "arguments": {"a": 1}})],
            r"arguments must be a JSON-encoded str, got dict",
        ),
        ([good_call(), good_call()], "appears twice"),
    ],
)
def test_validate_refuses_bad_tool_calls(calls: Any, needle: str) -> None:
    """Each tool call needs an id, type function, and a function with str name and arguments."""
    with pytest.raises(InvalidMessage, match=needle):
        validate({"role": "assistant", "content": None, "tool_calls": calls})


@pytest.mark.parametrize("role", ["user", "system", "developer", "tool"])
def test_only_assistants_may_have_tool_calls(role: str) -> None:
    """tool_calls on another role is refused."""
    message = {"role": role, "content": "x", "tool_call_id": "c", "tool_calls": [good_call()]}
    if role != "tool":
        del message["tool_call_id"]
    with pytest.raises(InvalidMessage, match="only assistant messages may have tool_calls"):
        validate(message)


# --------------------------------------------------------------------------- roles


def test_roles_are_the_ones_the_checks_use() -> None:
    """`messages.ROLES` is the set the structure checks accept."""
    assert messages.ROLES is _message_checks.ROLES
    for role in sorted(messages.ROLES):
        content = None if role == "assistant" else "x"
        message: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant":
            message["tool_calls"] = [messages.tool_call("c1", "f", {})]
        if role == "tool":
            message["tool_call_id"] = "c1"
        assert messages.validate(message)["role"] == role
