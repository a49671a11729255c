"""Message builders and validation (DESIGN §3.1)."""

from __future__ import annotations

import copy
import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd import messages
from memoryd.errors import InvalidConversationId, InvalidMessage
from memoryd.messages import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_CONVERSATION_ID_BYTES,
    encoded_size,
    validate,
    validate_conversation_id,
    validate_many,
)

from ._support import any_message, json_values

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


# --------------------------------------------------------------------------- validate: refused


@pytest.mark.parametrize("message", ["hi", None, [("role", "user")]])
def test_validate_refuses_a_message_that_is_not_a_dict(message: Any) -> None:
    """A message must be a dict; anything else is refused before its fields are read."""
    with pytest.raises(InvalidMessage, match="must be a dict"):
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


# --------------------------------------------------------------------------- check


def test_check_returns_checked_copies_with_their_sizes() -> None:
    """A plain list is checked into a CheckedMessages of copies, sizes recorded."""
    original = [{"role": "user", "content": "hi", "tags": ("a",)}, messages.assistant("yo")]
    checked = messages.check(original)
    assert isinstance(checked, messages.CheckedMessages)
    assert list(checked) == [validate(m) for m in original]
    assert checked.sizes == tuple(encoded_size(m) for m in checked)
    original[0]["content"] = "changed"
    assert checked[0]["content"] == "hi"


def test_check_takes_a_checked_batch_as_it_is() -> None:
    """A CheckedMessages is returned itself: no copy, no second check."""
    checked = messages.check([messages.user("hi")])
    assert messages.check(checked) is checked
    assert messages.check(checked, max_bytes=None) is checked


def test_check_applies_the_size_limit_to_a_checked_batch() -> None:
    """The recorded sizes still meet a stricter limit of a later receiver."""
    checked = messages.check([messages.user("a"), messages.user("x" * 100)], max_bytes=None)
    with pytest.raises(InvalidMessage, match=r"messages\[1\]: message is \d+ bytes"):
        messages.check(checked, max_bytes=50)


@pytest.mark.parametrize("bad", [[], (), "text", None, [{"role": "robot", "content": "x"}]])
def test_check_refuses_what_validate_many_refuses(bad: Any) -> None:
    """Empty batches, non-lists and bad messages are refused."""
    with pytest.raises(InvalidMessage):
        messages.check(bad)


def test_checked_messages_are_made_only_by_check() -> None:
    """A CheckedMessages cannot be built around unchecked messages, nor changed."""
    with pytest.raises(TypeError, match=r"made by memoryd\.messages\.check"):
        messages.CheckedMessages([{"role": "robot"}], [1])
    checked = messages.check([messages.user("hi")])
    with pytest.raises(AttributeError, match="immutable"):
        checked.sizes = (0,)  # type: ignore[misc]


def test_joined_checked_batches_stay_checked() -> None:
    """join keeps the messages and sizes of both, in order."""
    first = messages.check([messages.user("a")])
    second = messages.check([messages.assistant("b")])
    joined = first.join(second)
    assert isinstance(joined, messages.CheckedMessages)
    assert list(joined) == [*first, *second]
    assert joined.sizes == first.sizes + second.sizes
    with pytest.raises(TypeError):
        first.join([messages.user("c")])  # type: ignore[arg-type]


def test_a_copied_checked_batch_is_a_checked_batch_of_copies() -> None:
    """deepcopy keeps the type and the sizes, with fresh message dicts."""
    checked = messages.check([messages.user("a")])
    copied = copy.deepcopy(checked)
    assert isinstance(copied, messages.CheckedMessages)
    assert copied == checked and copied.sizes == checked.sizes
    assert copied[0] is not checked[0]


# --------------------------------------------------------------------------- the text shortcut


def _outcome(message: Any, max_bytes: int | None) -> tuple[Any, ...]:
    """What `check_message` answers: the copy (with its key order) and size, or the error."""
    from memoryd._message_batch import check_message

    try:
        copy_, size = check_message(message, max_bytes)
    except InvalidMessage as exc:
        return ("error", str(exc))
    return ("ok", list(copy_.items()), size)


@given(
    st.sampled_from(["user", "assistant", "system", "developer", "tool", "bot"]),
    st.text(alphabet=st.characters(blacklist_categories=()), max_size=40),
    st.booleans(),
    st.none() | st.integers(min_value=0, max_value=200),
)
def test_a_text_message_is_checked_as_the_general_check_does(
    role: str, content: str, content_first: bool, max_bytes: int | None
) -> None:
    """A dict of a role and a str content takes a shortcut; it answers what the whole
    check answers for the same message as another Mapping: the copy in the same key
    order, the same size, or the same error (lone surrogates and sizes included)."""
    from types import MappingProxyType

    pairs = (
        [("content", content), ("role", role)]
        if content_first
        else [("role", role), ("content", content)]
    )
    message = dict(pairs)
    shortcut = _outcome(message, max_bytes)
    assert shortcut == _outcome(MappingProxyType(message), max_bytes)
    if shortcut[0] == "ok":
        assert (
            len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())
            == shortcut[2]
        )


def test_a_text_message_copy_is_not_the_callers_dict() -> None:
    """The shortcut's copy is a new dict: changing the caller's dict changes nothing checked."""
    original = {"role": "user", "content": "hi"}
    checked = messages.check([original])
    original["content"] = "changed"
    assert checked[0] == {"role": "user", "content": "hi"}


def test_turns_are_never_written_to_memoryds_own_conversations() -> None:
    """`validate_turn_conversation_id` refuses ids in ``memoryd.run/`` (run journals and
    leases) by name, and passes every other valid id; the store hides the same prefix."""
    from memoryd.store.requests import HIDDEN_PREFIX

    assert messages.BOOKKEEPING_PREFIX == HIDDEN_PREFIX
    for cid in ("memoryd.run/abc", "memoryd.run/lease#/x"):
        with pytest.raises(InvalidConversationId, match="memoryd's own space"):
            messages.validate_turn_conversation_id(cid)
    assert messages.validate_turn_conversation_id("memoryd.runs") == "memoryd.runs"
    with pytest.raises(InvalidConversationId, match="empty"):
        messages.validate_turn_conversation_id("")
