"""Message builders and validation (DESIGN §3.1)."""

from __future__ import annotations

import copy
import enum
import json
import math
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd import _message_checks, messages
from memoryd.errors import InvalidConversationId, InvalidMessage
from memoryd.messages import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_CONVERSATION_ID_BYTES,
    MAX_NESTING_DEPTH,
    encoded_size,
    validate,
    validate_conversation_id,
    validate_many,
)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=15,
)
content_parts = st.lists(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=30))
    | st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, st.text(max_size=30)),
    min_size=1,
    max_size=3,
)
contents = st.text(max_size=60) | content_parts
call_ids = st.text(min_size=1, max_size=12)
tool_calls = st.lists(
    st.builds(
        messages.tool_call,
        call_ids,
        st.text(min_size=1, max_size=12),
        st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda call: call["id"],
)
any_message = st.one_of(
    st.builds(messages.system, contents),
    st.builds(messages.developer, contents),
    st.builds(messages.user, contents),
    st.builds(messages.assistant, contents),
    st.builds(lambda calls: messages.assistant(tool_calls=calls), tool_calls),
    st.builds(lambda text, calls: messages.assistant(text, tool_calls=calls), contents, tool_calls),
    st.builds(messages.tool, call_ids, contents),
)


def user_with(**extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": "hi", **extra}


# --------------------------------------------------------------------------- builders


def test_builders_produce_openai_shaped_messages() -> None:
    """Each builder returns exactly the OpenAI Chat Completions dict."""
    call = messages.tool_call("call_1", "lookup", {"city": "Zürich", "days": 3})
    assert messages.system("Be brief.") == {"role": "system", "content": "Be brief."}
    assert messages.developer("Use tools.") == {"role": "developer", "content": "Use tools."}
    assert messages.user("Hi") == {"role": "user", "content": "Hi"}
    assert messages.assistant("Hello") == {"role": "assistant", "content": "Hello"}
    assert call == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"city":"Zürich","days":3}'},
    }
    assert messages.assistant(tool_calls=[call]) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [call],
    }
    assert messages.tool("call_1", "sunny") == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny",
    }


def test_tool_call_arguments_are_compact_json_in_key_order() -> None:
    """Arguments are compact JSON, non-ASCII kept, tuples as arrays, order preserved."""
    call = messages.tool_call("c", "f", {"b": 1, "a": ("x", "ü")})
    assert call["function"]["arguments"] == '{"b":1,"a":["x","ü"]}'
    assert json.loads(call["function"]["arguments"]) == {"b": 1, "a": ["x", "ü"]}


def test_tool_call_keeps_an_encoded_argument_string_verbatim() -> None:
    """A str of arguments (as a model produced it) is kept as is, even if not valid JSON."""
    assert messages.tool_call("c", "f", '{"a": 1')["function"]["arguments"] == '{"a": 1'


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"s": {1, 2}}, "arguments.s is of type set"),
        ({"x": float("nan")}, "arguments.x is nan"),
        ({1: "a"}, "has the key 1 of type int"),
        ([1, 2], "must be a dict or a JSON str"),
        (None, "must be a dict or a JSON str"),
    ],
)
def test_tool_call_refuses_bad_arguments(args: Any, needle: str) -> None:
    """Arguments must be a dict of JSON values or a str."""
    with pytest.raises(InvalidMessage, match=needle):
        messages.tool_call("c", "f", args)


@pytest.mark.parametrize(("call_id", "name"), [("", "f"), ("c", ""), (1, "f"), ("c", None)])
def test_tool_call_refuses_bad_id_or_name(call_id: Any, name: Any) -> None:
    """The id and the function name must be non-empty str."""
    with pytest.raises(InvalidMessage):
        messages.tool_call(call_id, name, {})


def test_assistant_needs_text_or_tool_calls() -> None:
    """An assistant message with neither text nor tool calls is refused."""
    with pytest.raises(InvalidMessage, match="content is None"):
        messages.assistant()
    with pytest.raises(InvalidMessage, match="content is None"):
        messages.assistant(None, tool_calls=[])


def test_assistant_with_text_and_tool_calls() -> None:
    """Text and tool calls may come together."""
    call = messages.tool_call("c1", "f", {})
    message = messages.assistant("Let me check.", tool_calls=[call])
    assert message["content"] == "Let me check."
    assert messages.tool_call_ids(message) == ["c1"]


def test_user_accepts_content_parts() -> None:
    """A user message may carry content parts such as text and images."""
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "u"}},
    ]
    assert messages.user(parts) == {"role": "user", "content": parts}


@pytest.mark.parametrize("builder", [messages.system, messages.developer, messages.user])
@pytest.mark.parametrize("bad", [None, 3, b"bytes", [], ["text"], [{"text": "no type"}]])
def test_text_builders_refuse_bad_content(builder: Any, bad: Any) -> None:
    """Builders validate their content."""
    with pytest.raises(InvalidMessage):
        builder(bad)


@pytest.mark.parametrize("bad_id", ["", None, 7])
def test_tool_builder_needs_a_call_id(bad_id: Any) -> None:
    """tool() refuses an empty or non-str tool_call_id."""
    with pytest.raises(InvalidMessage, match="tool_call_id"):
        messages.tool(bad_id, "result")


def test_builders_do_not_apply_the_size_limit() -> None:
    """The size limit belongs to the store, so a builder accepts a big message."""
    big = "x" * (DEFAULT_MAX_MESSAGE_BYTES + 10)
    assert messages.user(big)["content"] == big


@given(any_message)
def test_built_messages_validate_to_themselves(message: dict[str, Any]) -> None:
    """Whatever a builder returns validates, unchanged."""
    assert validate(message, max_bytes=None) == message


# --------------------------------------------------------------------------- validate: accepted


@given(any_message, st.dictionaries(st.sampled_from(["name", "metadata", "x-extra"]), json_values))
def test_validate_keeps_other_json_keys(message: dict[str, Any], extra: dict[str, Any]) -> None:
    """Keys beyond role and content are kept when JSON-compatible."""
    message = {**message, **extra}
    result = validate(message, max_bytes=None)
    assert result == message
    assert json.loads(json.dumps(result)) == result


def test_validate_returns_a_deep_copy() -> None:
    """Mutating the result changes nothing the caller holds, and vice versa."""
    original: dict[str, Any] = {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "metadata": {"tags": ["a"]},
    }
    snapshot = copy.deepcopy(original)
    result = validate(original)
    result["content"][0]["text"] = "changed"
    result["metadata"]["tags"].append("b")
    assert original == snapshot
    original["metadata"]["tags"].append("c")
    assert result["metadata"]["tags"] == ["a", "b"]
    assert result["content"] is not original["content"]


def test_validate_normalises_containers_and_scalar_subclasses() -> None:
    """Tuples become lists; str/int/float subclasses become plain values."""

    class Color(enum.StrEnum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    class Money(float):
        pass

    result = validate(
        user_with(tags=("a", ("b",)), color=Color.RED, level=Level.HIGH, cost=Money(1.5))
    )
    assert result["tags"] == ["a", ["b"]]
    assert type(result["color"]) is str
    assert type(result["level"]) is int and result["level"] == 3
    assert type(result["cost"]) is float
    assert type(result["tags"]) is list


def test_validate_keeps_bools_as_bools() -> None:
    """True stays True (not 1), so it round-trips exactly."""
    result = validate(user_with(flag=True, n=1))
    assert result["flag"] is True
    assert type(result["n"]) is int


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


def test_validate_accepts_large_and_negative_64_bit_integers() -> None:
    """Integers across the whole stored range are accepted."""
    assert validate(user_with(a=2**64 - 1, b=-(2**63)))["a"] == 2**64 - 1


def test_validate_accepts_nesting_up_to_the_limit() -> None:
    """A message nesting exactly MAX_NESTING_DEPTH levels is fine; one more is not."""

    def nest(levels: int) -> Any:
        value: Any = "leaf"
        for _ in range(levels):
            value = {"a": value}
        return value

    # The message is level 1, so its value may add MAX_NESTING_DEPTH - 1 levels.
    validate(user_with(deep=nest(MAX_NESTING_DEPTH - 1)))
    with pytest.raises(InvalidMessage, match=f"deeper than {MAX_NESTING_DEPTH} levels"):
        validate(user_with(deep=nest(MAX_NESTING_DEPTH)))


def test_validate_refuses_very_deep_nesting_without_recursion_error() -> None:
    """Even absurdly deep input is refused with InvalidMessage, not RecursionError."""
    value: Any = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(InvalidMessage, match="deeper than"):
        validate(user_with(deep=value))


def test_validate_refuses_a_cycle() -> None:
    """A self-referencing structure is refused, not looped over forever."""
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(InvalidMessage, match="deeper than"):
        validate(user_with(loop=loop))


# --------------------------------------------------------------------------- validate: refused


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        ("hi", "must be a dict"),
        (None, "must be a dict"),
        ([("role", "user")], "must be a dict"),
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


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({1, 2}, "message.extra is of type set"),
        (frozenset(), "is of type frozenset"),
        (b"raw", "is of type bytes"),
        (bytearray(b"raw"), "is of type bytearray"),
        (object(), "is of type object"),
        (1 + 2j, "is of type complex"),
        (float("nan"), "is nan"),
        (float("inf"), "is inf"),
        (-math.inf, "is -inf"),
        (2**64, "outside the stored range"),
        (-(2**63) - 1, "outside the stored range"),
        ({"k": [1, {"deep": b"x"}]}, r"message\.extra\.k\[1\]\.deep is of type bytes"),
        ({"a b": {1}}, r"message\.extra\['a b'\] is of type set"),
        ({1: "x"}, "has the key 1 of type int; keys must be str"),
        ({None: "x"}, "has the key None"),
        ({("a",): "x"}, "keys must be str"),
    ],
)
def test_validate_refuses_values_that_are_not_json(value: Any, needle: str) -> None:
    """Non-JSON values anywhere are refused, naming where they are."""
    with pytest.raises(InvalidMessage, match=needle):
        validate(user_with(extra=value))


def test_validate_refuses_non_json_values_inside_content_parts() -> None:
    """Content parts are checked for JSON values too."""
    with pytest.raises(InvalidMessage, match=r"message\.content\[0\]\.meta is of type set"):
        validate({"role": "user", "content": [{"type": "text", "text": "x", "meta": {1}}]})


@pytest.mark.parametrize(
    ("message", "needle"),
    [
        (user_with(content="ok \ud800 no"), r"message\.content contains a lone surrogate"),
        (user_with(meta={"k": ["\udfff"]}), r"message\.meta\.k\[0\] contains a lone surrogate"),
        (user_with(meta={"\ud800": 1}), "contains a lone surrogate"),
    ],
)
def test_validate_refuses_text_that_cannot_be_utf8(message: dict[str, Any], needle: str) -> None:
    """A lone surrogate cannot be stored as UTF-8, so it is refused with its path."""
    with pytest.raises(InvalidMessage, match=needle):
        validate(message)


# --------------------------------------------------------------------------- size


def test_size_is_compact_json_in_utf8_bytes() -> None:
    """The size counts compact JSON, with non-ASCII characters as their UTF-8 bytes."""
    message = {"role": "user", "content": "é€😀"}
    expected = len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    assert encoded_size(message) == expected
    assert encoded_size(message) == len('{"role":"user","content":""}') + 2 + 3 + 4


def test_validate_accepts_exactly_the_limit_and_refuses_one_byte_more() -> None:
    """max_bytes is inclusive, and the error gives the size and the limit."""
    message = {"role": "user", "content": "ü" * 100}
    size = encoded_size(message)
    assert validate(message, max_bytes=size) == message
    with pytest.raises(
        InvalidMessage, match=f"message is {size} bytes as compact JSON; the limit is {size - 1}"
    ):
        validate(message, max_bytes=size - 1)


def test_default_limit_is_one_mebibyte() -> None:
    """A message just over 1 MiB is refused by default; max_bytes=None lifts the limit."""
    assert DEFAULT_MAX_MESSAGE_BYTES == 1024 * 1024
    message = {"role": "user", "content": "x" * DEFAULT_MAX_MESSAGE_BYTES}
    with pytest.raises(InvalidMessage, match="the limit is 1048576"):
        validate(message)
    assert validate(message, max_bytes=None)["content"] == message["content"]


# --------------------------------------------------------------------------- validate_many


def test_validate_many_returns_copies_in_order() -> None:
    """A list or tuple of valid messages comes back as a list of copies."""
    batch = (messages.user("a"), messages.assistant("b"))
    result = validate_many(batch)
    assert result == list(batch)
    assert result[0] is not batch[0]


@pytest.mark.parametrize("bad", [[], (), None, "hi", {"role": "user", "content": "x"}, iter([])])
def test_validate_many_needs_a_non_empty_list(bad: Any) -> None:
    """The batch must be a non-empty list or tuple."""
    with pytest.raises(InvalidMessage, match="messages"):
        validate_many(bad)


def test_validate_many_names_the_index_of_the_bad_message() -> None:
    """The error says which message is wrong and why."""
    batch = [messages.user("a"), messages.user("b"), {"role": "tool", "content": "x"}]
    with pytest.raises(InvalidMessage, match=r"^messages\[2\]: .*tool_call_id"):
        validate_many(batch)


def test_validate_many_applies_the_size_limit_per_message() -> None:
    """max_bytes is passed on to each message."""
    with pytest.raises(InvalidMessage, match=r"messages\[1\]: message is \d+ bytes"):
        validate_many([messages.user("a"), messages.user("x" * 100)], max_bytes=50)


# --------------------------------------------------------------------------- purity


@given(any_message)
def test_validate_does_not_mutate_its_input(message: dict[str, Any]) -> None:
    """validate never changes the message it is given."""
    snapshot = copy.deepcopy(message)
    validate(message)
    assert message == snapshot


# --------------------------------------------------------------------------- conversation ids


@pytest.mark.parametrize(
    "cid",
    [
        "a",
        "session-1",
        "user/42:chat",
        "ü" * 128,
        "a" * MAX_CONVERSATION_ID_BYTES,
        "😀 spaces ok",
        "zero\u200bwidth",
    ],
)
def test_valid_conversation_ids_pass(cid: str) -> None:
    """Non-empty str ids up to 256 UTF-8 bytes without control characters are accepted."""
    assert validate_conversation_id(cid) == cid


@pytest.mark.parametrize(
    ("cid", "message"),
    [
        ("", "conversation id is empty; give a non-empty str"),
        ("a" * 257, "conversation id is 257 bytes; the limit is 256"),
        ("a" * 300, "conversation id is 300 bytes; the limit is 256"),
        ("é" * 129, "conversation id is 258 bytes; the limit is 256"),
        ("😀" * 65, "conversation id is 260 bytes; the limit is 256"),
        ("a\nb", "conversation id has the control character U+000A at index 1; remove it"),
        ("\x00", "conversation id has the control character U+0000 at index 0; remove it"),
        ("tab\t", "U+0009 at index 3"),
        ("del\x7f", "U+007F"),
        ("nel\x85", "U+0085"),
        ("a\ud800", "lone surrogate U+D800 at index 1"),
        (None, "conversation id must be a str, got None"),
        (42, "conversation id must be a str, got int"),
        (b"bytes", "conversation id must be a str, got bytes"),
        (True, "conversation id must be a str, got bool"),
    ],
)
def test_invalid_conversation_ids_are_refused_precisely(cid: Any, message: str) -> None:
    """Each kind of bad id gets an InvalidConversationId saying exactly what is wrong."""
    with pytest.raises(InvalidConversationId) as info:
        validate_conversation_id(cid)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_conversation_id_str_subclass_becomes_plain_str() -> None:
    """A str subclass is returned as a plain str."""

    class Cid(str):
        pass

    assert type(validate_conversation_id(Cid("x"))) is str


@given(st.text(min_size=1, max_size=300))
def test_conversation_id_rule_matches_its_definition(cid: str) -> None:
    """Accepted exactly when non-empty, at most 256 UTF-8 bytes, and free of Cc/Cs characters."""
    ok = (
        all(unicodedata.category(c) not in ("Cc", "Cs") for c in cid)
        and len(cid.encode("utf-8", "surrogatepass")) <= MAX_CONVERSATION_ID_BYTES
    )
    if ok:
        assert validate_conversation_id(cid) == cid
    else:
        with pytest.raises(InvalidConversationId):
            validate_conversation_id(cid)


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (messages.system("s"), True),
        (messages.developer("d"), True),
        (messages.user("u"), False),
        (messages.assistant("a"), False),
        (messages.tool("c", "t"), False),
    ],
)
def test_is_system_counts_developer_as_system(message: dict[str, Any], expected: bool) -> None:
    """System and developer messages are system messages; others are not."""
    assert messages.is_system(message) is expected


def test_tool_call_ids_lists_ids_in_order() -> None:
    """tool_call_ids gives the ids of an assistant's calls, or nothing."""
    calls = [messages.tool_call("b", "f", {}), messages.tool_call("a", "g", {})]
    assert messages.tool_call_ids(messages.assistant(tool_calls=calls)) == ["b", "a"]
    assert messages.tool_call_ids(messages.assistant("x")) == []
    assert messages.tool_call_ids(messages.tool("a", "r")) == []


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
