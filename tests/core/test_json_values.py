"""JSON values in messages: the checked deep copy and its compact encoding
(memoryd._json_values, through `messages.validate`)."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest

from memoryd.errors import InvalidMessage
from memoryd.messages import MAX_NESTING_DEPTH, validate


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
