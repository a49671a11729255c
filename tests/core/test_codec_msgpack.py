"""The bounded msgpack rules, and the internal-value and network-body encodings built on
them (memoryd._codec_msgpack, through `memoryd.codec`)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given

from memoryd import _codec_msgpack, codec
from memoryd.codec import pack_value, unpack_value
from memoryd.errors import CorruptRecord

from ._support import json_values, packb

# --------------------------------------------------------------------------- internal values


@given(json_values)
def test_values_round_trip(value: Any) -> None:
    """pack_value/unpack_value round-trip JSON-compatible values."""
    assert unpack_value(pack_value(value)) == value


def test_values_may_hold_bytes_and_tuples_become_lists() -> None:
    """Internal values may hold bytes (and bytes keys); tuples decode as lists."""
    value = {"cid": "a", "key": b"\x00\x01", b"raw": (1, (2, 3))}
    assert unpack_value(pack_value(value)) == {"cid": "a", "key": b"\x00\x01", b"raw": [1, [2, 3]]}


def test_pack_value_refuses_unstorable_values() -> None:
    """Sets, objects and oversized values are refused."""
    with pytest.raises(ValueError, match="value cannot be encoded"):
        pack_value({1, 2})
    with pytest.raises(ValueError, match="value cannot be encoded"):
        pack_value({"a": object()})
    with pytest.raises(ValueError, match="the limit is 10"):
        pack_value("x" * 20, max_bytes=10)


def test_a_refused_pack_leaves_the_next_packs_exact() -> None:
    """A value the packer fails on mid-way (unchecked, as a trusted one is) leaves no
    bytes behind: the packs after it, large and small, are exactly msgpack's."""
    with pytest.raises(ValueError, match="cannot be encoded"):
        _codec_msgpack.pack_bounded(
            {"a": "x" * 100, "b": object()},
            allow_bytes=False,
            max_bytes=1 << 20,
            what="event",
            trusted=True,
        )
    big = {"m": "y" * (2 << 20)}  # over the size a pooled packer may keep
    for value in ({"a": 1}, big, [1, "two"], {"a": 1}):
        packed = _codec_msgpack.pack_bounded(value, allow_bytes=False, max_bytes=1 << 30, what="v")
        assert packed == msgpack.packb(value, use_bin_type=True)


def test_huge_announced_lengths_are_refused_without_allocating() -> None:
    """A header announcing a 4 GiB str/array/map in a few bytes is refused."""
    for header in (
        b"\xdb\xff\xff\xff\xff",
        b"\xdd\xff\xff\xff\xff",
        b"\xdf\xff\xff\xff\xff",
        b"\xc6\xff\xff\xff\xff",
    ):
        with pytest.raises(CorruptRecord):
            unpack_value(header + b"\x00" * 16)


def test_unpack_value_refuses_ext_types_and_timestamps() -> None:
    """Internal values refuse ext types too, including msgpack timestamps."""
    with pytest.raises(CorruptRecord, match="ext type"):
        unpack_value(packb(msgpack.ExtType(1, b"x")))
    with pytest.raises(CorruptRecord, match="ext type"):
        unpack_value(packb({"t": msgpack.Timestamp(5, 0)}))


def test_unpack_value_refuses_non_str_map_keys() -> None:
    """Integer map keys are refused (strict_map_key)."""
    with pytest.raises(CorruptRecord):
        unpack_value(packb({1: "a"}))


# --------------------------------------------------------------------------- network bodies


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


# --------------------------------------------------------------------------- the shared rules


def test_unpack_bounded_names_what_it_decodes() -> None:
    """Errors name the kind of bytes given as ``what``."""
    with pytest.raises(CorruptRecord, match=r"^index entry is empty"):
        _codec_msgpack.unpack_bounded(b"", allow_bytes=True, max_bytes=10, what="index entry")


def test_codec_reexports_the_same_functions() -> None:
    """`memoryd.codec` offers the value and body encodings as the very same objects."""
    shared = set(codec.__all__) & set(_codec_msgpack.__all__)
    assert shared == {
        "Buffer",
        "MAX_VALUE_BYTES",
        "MAX_WIRE_BYTES",
        "pack_packed_array_map",
        "pack_value",
        "pack_wire",
        "split_packed",
        "unpack_value",
        "unpack_wire",
    }
    for name in shared:
        assert getattr(codec, name) is getattr(_codec_msgpack, name)
