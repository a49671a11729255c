"""The bounded msgpack rules and the network-body encoding (memoryd._codec_msgpack)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given

from memoryd import _codec_msgpack, codec
from memoryd.errors import CorruptRecord

from .test_messages import json_values


@given(json_values)
def test_wire_bodies_round_trip(value: Any) -> None:
    """A JSON-compatible value comes back from `unpack_wire(pack_wire(v))` unchanged."""
    assert codec.unpack_wire(codec.pack_wire(value)) == value


def test_wire_tuples_come_back_as_lists() -> None:
    """Tuples are packed as arrays and decoded as lists."""
    assert codec.unpack_wire(codec.pack_wire({"a": (1, (2, 3))})) == {"a": [1, [2, 3]]}


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (b"raw", "bytes cannot be stored"),
        ({b"k": 1}, "not a str"),
        ({1: "x"}, "not a str"),
        ({"s": {1, 2}}, "set cannot be stored"),
    ],
)
def test_pack_wire_refuses_what_json_cannot_carry(value: Any, needle: str) -> None:
    """A body holding bytes, a non-str key or another type is refused before encoding."""
    with pytest.raises(ValueError, match=needle):
        codec.pack_wire(value)


def test_pack_wire_refuses_a_body_over_its_limit() -> None:
    """`pack_wire` names the size and the limit of a body that is too large."""
    with pytest.raises(ValueError, match="the limit is 8"):
        codec.pack_wire("x" * 20, max_bytes=8)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (msgpack.packb({"a": b"bin"}, use_bin_type=True), "binary data"),
        (msgpack.packb(1) + msgpack.packb(2), "trailing bytes"),
        (msgpack.packb([1, 2, 3])[:-1], "truncated"),
        (b"", "empty"),
        (msgpack.packb(msgpack.ExtType(5, b"x")), "ext type"),
    ],
)
def test_unpack_wire_refuses_bad_bodies(data: bytes, needle: str) -> None:
    """Binary data, trailing bytes, truncation, emptiness and ext types are CorruptRecord."""
    with pytest.raises(CorruptRecord, match=needle):
        codec.unpack_wire(data)


def test_unpack_wire_refuses_a_body_over_its_limit() -> None:
    """`unpack_wire` refuses input longer than ``max_bytes`` before decoding it."""
    with pytest.raises(CorruptRecord, match="the limit is 4"):
        codec.unpack_wire(msgpack.packb("x" * 10), max_bytes=4)


def test_unpack_bounded_names_what_it_decodes() -> None:
    """Errors name the kind of bytes given as ``what``."""
    with pytest.raises(CorruptRecord, match=r"^index entry is empty"):
        _codec_msgpack.unpack_bounded(b"", allow_bytes=True, max_bytes=10, what="index entry")


def test_codec_reexports_the_same_functions() -> None:
    """`memoryd.codec` offers the value and body encodings as the very same objects."""
    shared = set(codec.__all__) & set(_codec_msgpack.__all__)
    assert shared == {
        "MAX_VALUE_BYTES",
        "MAX_WIRE_BYTES",
        "pack_value",
        "pack_wire",
        "unpack_value",
        "unpack_wire",
    }
    for name in shared:
        assert getattr(codec, name) is getattr(_codec_msgpack, name)
