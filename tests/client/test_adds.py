"""The busiest add: each message checked once and encoded straight to the wire.

`memoryd.client._adds.encode_add` must take a batch only when the general check
(`memoryd.messages.check`) would take it unchanged, and then send exactly what the
general path sends; everything else goes the general way, with its errors. The daemon
tests add to a conversation once first, so every later add is one the handle may send
straight.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest

from memoryd import codec
from memoryd import messages as msgs
from memoryd.client._adds import JSON_PER_MSGPACK_BYTE, encode_add, is_plain_message
from memoryd.errors import InvalidConversationId, InvalidMessage, StoreUnavailable
from memoryd.messages import assistant, tool, tool_call, user
from tests.server.daemon import Daemon

_LIMIT = 1 << 20


class _Role(StrEnum):
    USER = "user"


_PLAIN: list[dict[str, Any]] = [
    user("hi"),
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}]},
    assistant(None, tool_calls=[tool_call("c1", "lookup", {"q": 1})]),
    tool("c1", "42"),
    {"role": "user", "content": "x", "meta": {"n": -(2**63), "f": 1.5, "ok": True, "no": None}},
    {"role": "user", "content": "t", "list": (1, 2, [3, (4,)])},
    {"role": "assistant", "content": 'é ☃ 𝄞 \x00\n"\\'},
]

_NOT_PLAIN: list[Any] = [
    # the general check refuses these
    {"content": "no role"},
    {"role": "robot", "content": "x"},
    {"role": "user"},
    {"role": "user", "content": 5},
    {"role": "user", "content": []},
    {"role": "user", "content": "x", "tool_calls": [tool_call("c", "f", {})]},
    {"role": "tool", "content": "x"},
    {"role": "user", "content": "x", "tool_call_id": "c"},
    {"role": "user", "content": "x", "n": 2**64},
    {"role": "user", "content": "x", "f": float("nan")},
    {"role": "user", "content": "x", 1: "int key"},
    {"role": "user", "content": "x", "b": b"bytes"},
    {"role": "user", "content": "x", "s": {1, 2}},
    "not a dict",
    None,
    # ... or changes these (normalises, or copies into plain values)
    {"role": "user", "content": "x", "tool_calls": None},
    {"role": "user", "content": "x", "tool_calls": []},
    {"role": "assistant", "tool_calls": [tool_call("c", "f", {})]},
    {"role": _Role.USER, "content": "x"},
    OrderedDict(role="user", content="x"),
]


def _deep(levels: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(levels - 1):
        value = [value]
    return {"role": "user", "content": "x", "deep": value}


@pytest.mark.parametrize("message", _PLAIN)
def test_a_plain_message_is_sent_as_the_general_path_sends_it(message: dict[str, Any]) -> None:
    """A message the general check takes unchanged is encoded from the caller's object,
    byte for byte as the general path encodes its checked copy."""
    assert is_plain_message(message)
    sent = encode_add([message, message], "k", _LIMIT)
    assert sent is not None
    general = {"messages": msgs.check([message, message]), "idempotency_key": "k"}
    general["expected_version"] = None
    assert sent == codec.pack_wire(general, trusted=True)


@pytest.mark.parametrize("message", _NOT_PLAIN)
def test_a_message_to_refuse_or_change_goes_the_general_way(message: Any) -> None:
    """Anything the general check refuses or changes is not sent straight."""
    assert not is_plain_message(message)
    assert encode_add([user("ok"), message], "k", _LIMIT) is None


def test_nesting_is_plain_up_to_the_limit_only() -> None:
    """A message nested to the JSON-value limit is plain; one level more is not."""
    assert is_plain_message(_deep(64))  # the message is level 1: 64 levels in all
    msgs.check([_deep(64)])
    assert not is_plain_message(_deep(65))
    with pytest.raises(InvalidMessage, match="deeper"):
        msgs.check([_deep(65)])


def test_a_lone_surrogate_or_an_empty_batch_goes_the_general_way() -> None:
    """A str that cannot be encoded, and an empty batch, are left to the general check."""
    assert encode_add([{"role": "user", "content": "bad \ud800"}], "k", _LIMIT) is None
    assert encode_add([{"role": "user", "content": "x", "\udc00": 1}], "k", _LIMIT) is None
    assert encode_add([], "k", _LIMIT) is None


def test_a_body_that_may_hold_a_message_over_the_limit_goes_the_general_way() -> None:
    """Only a body short enough to prove every message within the limit is sent straight."""
    message = user("x" * 1000)
    sent = encode_add([message], "k", _LIMIT)
    assert sent is not None
    assert encode_add([message], "k", len(sent) * JSON_PER_MSGPACK_BYTE) == sent
    assert encode_add([message], "k", len(sent) * JSON_PER_MSGPACK_BYTE - 1) is None


@pytest.mark.parametrize(
    "value",
    [
        False,
        True,
        None,
        0,
        -32,
        127,
        -33,
        -128,
        255,
        -(2**63),
        2**64 - 1,
        -2.2250738585072014e-308,
        "",
        "\x01",
        "\x01" * 40,
        '"',
        [],
        {},
        [False] * 20,
        {"": False},
        {"\x01": [False, {"\x02": None}]},
        [[[]]],
    ],
)
def test_compact_json_stays_under_the_bound_per_msgpack_byte(value: Any) -> None:
    """The worst values for JSON per msgpack byte (escaped control characters, ``false``,
    small ints, long floats, empty containers) stay within `JSON_PER_MSGPACK_BYTE`,
    a separator included."""
    packed = codec.pack_wire(value)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert len(text) + 1 <= JSON_PER_MSGPACK_BYTE * len(packed)


# --------------------------------------------------------------------------- through a daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the module."""
    running = Daemon().start()
    yield running
    running.close()


def test_a_bad_message_is_refused_as_before_and_nothing_is_written(daemon: Daemon) -> None:
    """An add the handle may send straight still refuses a bad message with the general
    check's error, naming its index, before anything is sent."""
    store = daemon.connect()
    try:
        assert store.add("ad-bad", [user("one")]) == 1
        with pytest.raises(InvalidMessage, match=r"messages\[1\].*role"):
            store.add("ad-bad", [user("ok"), {"role": "robot", "content": "x"}])
        with pytest.raises(InvalidMessage, match=r"messages\[0\].*surrogate"):
            store.add("ad-bad", [{"role": "user", "content": "bad \ud800"}])
        with pytest.raises(InvalidMessage, match=r"messages\[0\].*compact JSON"):
            store.add("ad-bad", [{"role": "user", "content": "y" * store.max_message_bytes}])
        with pytest.raises(InvalidMessage, match="empty"):
            store.add("ad-bad", [])
        with pytest.raises(InvalidConversationId):
            store.add("ad\x00bad", [user("x")])
        assert store.version("ad-bad") == 1
    finally:
        store.close()


def test_the_body_is_the_snapshot(daemon: Daemon) -> None:
    """Changing the messages after the add returns changes nothing stored."""
    store = daemon.connect()
    try:
        store.add("ad-snap", [user("first")])
        batch = [user("second"), {"role": "user", "content": [{"type": "text", "text": "t"}]}]
        assert store.add("ad-snap", batch) == 2
        batch[0]["content"] = "changed"
        batch[1]["content"][0]["text"] = "changed"
        batch.append(user("more"))
        assert store.get("ad-snap") == [
            user("first"),
            user("second"),
            {"role": "user", "content": [{"type": "text", "text": "t"}]},
        ]
    finally:
        store.close()


def test_a_message_to_normalise_is_stored_normalised(daemon: Daemon) -> None:
    """A message the check normalises goes the general way and is stored normalised."""
    store = daemon.connect()
    try:
        store.add("ad-norm", [user("first")])
        call = tool_call("c1", "f", {})
        store.add(
            "ad-norm",
            [
                {"role": "assistant", "tool_calls": [call]},
                {"role": "user", "content": "x", "tool_calls": None},
                {"role": _Role.USER, "content": "enum role"},
            ],
        )
        assert store.get("ad-norm")[1:] == [
            {"role": "assistant", "tool_calls": [call], "content": None},
            {"role": "user", "content": "x"},
            {"role": "user", "content": "enum role"},
        ]
    finally:
        store.close()


def test_every_add_to_a_conversation_gets_its_own_version(daemon: Daemon) -> None:
    """Adds sent straight carry keys of their own: none is taken for a repeat."""
    store = daemon.connect()
    try:
        versions = [store.add("ad-many", [user(f"m{i}")]) for i in range(20)]
        assert versions == list(range(1, 21))
        assert [m["content"] for m in store.get("ad-many")] == [f"m{i}" for i in range(20)]
    finally:
        store.close()


def test_a_closed_handle_sends_no_add(daemon: Daemon) -> None:
    """An add on a closed handle raises `StoreUnavailable`, also to a conversation added
    to before, and writes nothing."""
    store = daemon.connect()
    store.add("ad-closed", [user("x")])
    store.close()
    with pytest.raises(StoreUnavailable):
        store.add("ad-closed", [user("y")])
    other = daemon.connect()
    try:
        assert other.version("ad-closed") == 1
    finally:
        other.close()


@pytest.mark.parametrize(
    "message",
    [
        {"role": ["user"], "content": "x"},
        {"role": "tool", "content": "x"},
        {"role": "user", "other": "x"},
        {"role": "nobody", "content": "x"},
    ],
)
def test_a_role_and_a_text_are_plain_only_for_a_known_role_that_needs_nothing_else(
    message: dict[str, Any],
) -> None:
    """A two-field message is plain only with a str role other than ``tool``."""
    assert not is_plain_message(message)
    assert encode_add([message], "k", _LIMIT) is None
