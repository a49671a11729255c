"""JSON values: the checked deep copy and its compact encoding (memoryd._json_values),
through `messages.validate`, and the one rule set shared by messages, event data and
imports."""

from __future__ import annotations

import enum
import json
import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd._json_values import compact_json_bytes, copy_json
from memoryd.errors import InvalidMessage
from memoryd.events import Event
from memoryd.messages import MAX_NESTING_DEPTH, validate
from memoryd.store import requests

from ._support import json_scalars, json_values


def user_with(**extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": "hi", **extra}


# --------------------------------------------------------------------------- accepted


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


def test_validate_turns_str_subclass_keys_into_plain_str() -> None:
    """A key that is a str subclass is stored as a plain str."""

    class Key(enum.StrEnum):
        NOTE = "note"

    result = validate(user_with(extra={Key.NOTE: "x"}))
    assert result["extra"] == {"note": "x"}
    assert [type(k) for k in result["extra"]] == [str]


@given(json_values)
def test_the_compact_encoding_is_what_json_dumps_writes(value: Any) -> None:
    """The encoding whose length size limits compare is compact JSON in UTF-8, byte
    for byte what ``json.dumps`` writes with the same options."""
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert compact_json_bytes(copy_json(value, 1)) == expected


def test_the_compact_encoding_escapes_and_counts_utf8_bytes() -> None:
    """Quotes, backslashes and control characters are escaped; non-ASCII text is kept
    as UTF-8, so the size counts its bytes."""
    value = {'q"k': ["tab\there", "\u00e9\u4e2d\U0001f600", 1.5, -(2**63), None, True, {}, []]}
    expected = (
        '{"q\\"k":["tab\\there","\u00e9\u4e2d\U0001f600",1.5,-9223372036854775808,null,true,{},[]]}'
    )
    assert compact_json_bytes(copy_json(value, 1)) == expected.encode()
    assert len(expected.encode()) == len(expected) + 1 + 2 + 3  # é: 2 bytes, 中: 3, 😀: 4


def test_validate_keeps_bools_as_bools() -> None:
    """True stays True (not 1), so it round-trips exactly."""
    result = validate(user_with(flag=True, n=1))
    assert result["flag"] is True
    assert type(result["n"]) is int


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


# --------------------------------------------------------------------------- refused


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


# --------------------------------------------------------------------------- one rule set


class _Tag(enum.StrEnum):
    A = "a"


class _Rank(enum.IntEnum):
    ONE = 1


not_json_scalars = st.one_of(
    st.just(float("nan")),
    st.just(float("inf")),
    st.integers(min_value=2**64, max_value=2**80),
    st.integers(min_value=-(2**80), max_value=-(2**63) - 1),
    st.binary(max_size=4),
    st.frozensets(st.integers(), max_size=2),
    st.builds(complex, st.integers(), st.integers()),
    st.just("lone \ud800 surrogate"),
)
"""Values no JSON-value rule accepts."""

mixed_values = st.recursive(
    json_scalars | not_json_scalars | st.sampled_from([_Tag.A, _Rank.ONE]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        | st.dictionaries(st.integers(), inner, min_size=1, max_size=2)
    ),
    max_leaves=10,
)
"""JSON values, values that are not, and values that normalise (tuples, enums)."""


def _outcome(check: Any) -> tuple[str, Any]:
    """``("ok", copy)`` or ``("refused", (path below x, reason))`` for one check."""
    try:
        return "ok", check()
    except ValueError as exc:
        found = re.search(r"\.x(\S*) (.*)$", str(exc))
        assert found is not None, f"the error does not name the path: {exc}"
        return "refused", found.groups()


def _as_message_extra(value: Any) -> tuple[str, Any]:
    return _outcome(lambda: validate(user_with(x=value), max_bytes=None)["x"])


def _as_record_data(value: Any) -> tuple[str, Any]:
    def check() -> Any:
        record = requests.record(
            "c",
            "memo",
            messages=(),
            data={"x": value},
            idempotency_key=None,
            expected_version=None,
            max_bytes=1 << 30,
        )
        assert record.data is not None
        return record.data["x"]

    return _outcome(check)


def _as_imported_data(value: Any) -> tuple[str, Any]:
    def check() -> Any:
        event = Event(version=1, kind="memo", messages=(), timestamp=0.0, data={"x": value})
        imported = requests.import_events("c", [event], max_bytes=1 << 30).events[0]
        assert imported.data is not None
        return imported.data["x"]

    return _outcome(check)


def _as_imported_message_extra(value: Any) -> tuple[str, Any]:
    def check() -> Any:
        message = user_with(x=value)
        event = Event(version=1, kind="appended", messages=(message,), timestamp=0.0)
        return requests.import_events("c", [event], max_bytes=1 << 30).events[0].messages[0]["x"]

    return _outcome(check)


@given(mixed_values)
def test_messages_event_data_and_imports_follow_one_json_rule_set(value: Any) -> None:
    """The same value is accepted (as the same plain copy) or refused (for the same
    reason) as a message's extra key, as ``record`` data and as imported data."""
    outcomes = [
        _as_message_extra(value),
        _as_record_data(value),
        _as_imported_data(value),
        _as_imported_message_extra(value),
    ]
    verdicts = {verdict for verdict, _ in outcomes}
    assert len(verdicts) == 1, outcomes
    if verdicts == {"ok"}:
        assert all(copy == outcomes[0][1] for _, copy in outcomes), outcomes
        assert all(type(copy) is type(outcomes[0][1]) for _, copy in outcomes)
    else:  # the same path below x and the same reason, whatever the root is called
        assert len({reason for _, reason in outcomes}) == 1, outcomes


@given(json_values)
def test_every_json_value_is_accepted_everywhere_unchanged(value: Any) -> None:
    """A JSON value round-trips unchanged through every check."""
    for outcome in (_as_message_extra(value), _as_record_data(value), _as_imported_data(value)):
        assert outcome == ("ok", value)


@given(not_json_scalars, st.text(min_size=1, max_size=6).filter(str.isidentifier))
def test_a_refused_value_is_named_by_its_path_in_event_data(bad: Any, key: str) -> None:
    """Event data that is not JSON is refused with a ValueError naming the path."""
    with pytest.raises(ValueError, match=rf"^data\.outer\.{key}\[0\] "):
        requests.record(
            "c",
            "memo",
            messages=(),
            data={"outer": {key: [bad]}},
            idempotency_key=None,
            expected_version=None,
            max_bytes=1 << 30,
        )
