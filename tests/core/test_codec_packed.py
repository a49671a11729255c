"""Still-encoded arrays: a record's messages copied into an answer without decoding.

`codec.unpack_kind_and_packed_messages` decodes an event record but its messages,
which it returns as the bytes they are stored as; `codec.split_packed` cuts them
one by one; `codec.pack_packed_array_map` builds ``{field: [...]}`` from them. The
result must decode to exactly what the decoding path gives, and every malformed
input must be a `CorruptRecord`, never a msgpack exception.
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd import codec
from memoryd.errors import CorruptRecord

_text = st.text(max_size=40)
_messages = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": _text}),
    min_size=1,
    max_size=40,
)


def _record(messages: list[dict[str, Any]], kind: str = "appended") -> bytes:
    return codec.pack_event_fields(
        version=3, kind=kind, messages=messages, timestamp=1.5, idempotency_key="k"
    )


@settings(max_examples=200, deadline=None)
@given(messages=_messages)
def test_packed_messages_decode_to_the_decoded_messages(messages: list[dict[str, Any]]) -> None:
    """Kind, count and the copied bytes agree with `unpack_kind_and_messages`."""
    record = _record(messages)
    kind, count, packed = codec.unpack_kind_and_packed_messages(record)
    assert (kind, count) == ("appended", len(messages))
    assert codec.split_packed(packed, count, what="t") == [msgpack.packb(m) for m in messages]
    body = codec.pack_packed_array_map("messages", count, [packed])
    assert codec.unpack_wire(body) == {"messages": codec.unpack_kind_and_messages(record)[1]}


@pytest.mark.parametrize("count", [0, 15, 16, 65535, 65536])
def test_the_answer_array_has_the_right_header_for_every_size(count: int) -> None:
    """fixarray, array16 and array32 headers all decode to the count given."""
    one = msgpack.packb(1)
    body = codec.pack_packed_array_map("xs", count, [one * count])
    assert codec.unpack_wire(body) == {"xs": [1] * count}


def test_a_record_of_one_kind_without_messages_has_none() -> None:
    """A ``cleared`` record carries an empty array: count 0."""
    assert codec.unpack_kind_and_packed_messages(_record([], "cleared")) == ("cleared", 0, b"")


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "truncated"),
        (b"\xc1", "cannot be decoded"),
        (msgpack.packb([1, 2]), "cannot be decoded"),
        (msgpack.packb({"s": 1, "k": "appended", "m": 5}), "not an array"),
        (msgpack.packb({"s": 1, "k": "appended", "m": []}) + b"\x00", "trailing"),
        (
            msgpack.packb({"s": 1, "k": "appended", "m": [], "t": b"bin"}, use_bin_type=True),
            "cannot be decoded",
        ),
        (msgpack.packb({"s": 1, "k": "appended", "m": [], "x": msgpack.ExtType(1, b"")}), "ext"),
        (msgpack.packb({1: 1, "k": "appended", "m": []}), "cannot be decoded"),
        (msgpack.packb({"s": 99, "k": "appended", "m": []}), "schema version"),
        (msgpack.packb({"s": 1, "k": "other", "m": []}), "kind"),
        (msgpack.packb({"s": 1, "k": "appended", "m": [1, 2]})[:-1], "truncated"),
    ],
)
def test_a_malformed_record_is_a_corrupt_record(data: bytes, needle: str) -> None:
    """Garbage, a wrong shape, a refused value: `CorruptRecord` naming the problem."""
    with pytest.raises(CorruptRecord, match=needle):
        codec.unpack_kind_and_packed_messages(data)


def test_split_refuses_elements_that_do_not_match_their_count() -> None:
    """Fewer values than the count (truncated) or more (left over) are both refused."""
    two = msgpack.packb("a") + msgpack.packb("b")
    assert codec.split_packed(two, 2, what="t") == [msgpack.packb("a"), msgpack.packb("b")]
    with pytest.raises(CorruptRecord, match="truncated"):
        codec.split_packed(two, 3, what="t")
    with pytest.raises(CorruptRecord, match="more values"):
        codec.split_packed(two, 1, what="t")
