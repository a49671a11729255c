"""Event records in the codec: exact round trips, bounded and plain unpacking, history
reads (memoryd.codec; DESIGN §4, §8)."""

from __future__ import annotations

import contextlib
import pickle
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd import codec, messages
from memoryd.codec import (
    MAX_RECORD_BYTES,
    SUPPORTED_SCHEMA_VERSIONS,
    pack_event,
    pack_value,
    unpack_event,
    unpack_value,
)
from memoryd.errors import CorruptRecord, StorageError
from memoryd.events import KINDS, SCHEMA_VERSION, Event

from ._support import any_message, json_values, packb


def event(**overrides: Any) -> Event:
    fields: dict[str, Any] = {
        "version": 3,
        "kind": "appended",
        "messages": (messages.user("héllo 😀"),),
        "timestamp": 1717000000.25,
    }
    fields.update(overrides)
    return Event(**fields)


def raw_record(**overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"s": 1, "v": 1, "k": "appended", "m": [messages.user("x")], "t": 1.0}
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not ...}


# --------------------------------------------------------------------------- round trips


def test_event_round_trips_exactly() -> None:
    """Every field comes back equal, with messages as dicts and lists."""
    call = messages.tool_call("call_1", "lookup", {"q": "Zürich", "n": [1, 2.5, None, True]})
    original = event(
        messages=(
            messages.system("sys"),
            messages.user(
                [
                    {"type": "text", "text": "日本語"},
                    {"type": "image_url", "image_url": {"url": "u"}},
                ]
            ),
            messages.assistant(tool_calls=[call]),
            messages.tool("call_1", "ok"),
        ),
        idempotency_key="idem-1",
        data={"source": "a", "source_version": 2, "nested": {"x": [1, 2]}},
    )
    back = unpack_event(pack_event(original))
    assert back == original
    assert type(back.messages) is tuple
    assert type(back.messages[1]["content"]) is list
    assert back.messages[2]["content"] is None
    assert type(back.timestamp) is float


def test_optional_fields_are_omitted_and_come_back_none() -> None:
    """idempotency_key and data are omitted from the record when None."""
    packed = pack_event(event())
    record = msgpack.unpackb(packed)
    assert set(record) == {"s", "v", "k", "m", "t"}
    assert record["s"] == SCHEMA_VERSION
    back = unpack_event(packed)
    assert back.idempotency_key is None and back.data is None


@given(any_message, st.lists(any_message, max_size=3), st.none() | st.text(max_size=10))
def test_any_valid_messages_round_trip(
    first: dict[str, Any], rest: list[dict[str, Any]], key: str | None
) -> None:
    """Any batch of builder-made messages round-trips exactly."""
    original = event(messages=(first, *rest), idempotency_key=key)
    assert unpack_event(pack_event(original)) == original


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_event_data_round_trips(data: dict[str, Any]) -> None:
    """JSON-compatible data round-trips exactly."""
    original = event(kind="memo", messages=(), data=data)
    assert unpack_event(pack_event(original)).data == data


@pytest.mark.parametrize("kind", ["appended", "cleared", "popped", "forked", "compacted", "memo"])
def test_every_kind_round_trips(kind: str) -> None:
    """Each kind survives encoding."""
    msgs = () if kind in ("cleared", "memo") else (messages.user("a"),)
    original = event(kind=kind, messages=msgs)
    assert unpack_event(pack_event(original)) == original


def test_unpack_accepts_bytearray_and_memoryview() -> None:
    """LMDB may hand out buffers; they decode like bytes."""
    packed = pack_event(event())
    assert unpack_event(bytearray(packed)) == event()
    assert unpack_event(memoryview(packed)) == event()


def test_unpack_returns_fresh_messages() -> None:
    """Two reads of the same bytes share nothing."""
    packed = pack_event(event())
    one, two = unpack_event(packed), unpack_event(packed)
    one.messages[0]["content"] = "changed"
    assert two.messages[0]["content"] == "héllo 😀"


# --------------------------------------------------------------------------- packing refusals


@pytest.mark.parametrize(
    "bad_message",
    [
        {"role": "user", "content": b"bytes"},
        {"role": "user", "content": "x", "s": {1}},
        {"role": "user", "content": "x", "n": 2**64},
        {"role": "user", "content": "x", 1: "int key"},
        {"role": "user", "content": "\ud800"},
    ],
)
def test_pack_event_refuses_what_could_not_be_read_back(bad_message: dict[Any, Any]) -> None:
    """An event holding unstorable values raises ValueError instead of writing a bad record."""
    with pytest.raises(ValueError, match="event cannot be encoded"):
        pack_event(event(messages=(bad_message,)))


def test_pack_event_refuses_an_oversized_record() -> None:
    """A record over max_bytes is refused with its size and the limit."""
    with pytest.raises(ValueError, match=r"event is \d+ bytes encoded; the limit is 100"):
        pack_event(event(messages=(messages.user("x" * 200),)), max_bytes=100)


# --------------------------------------------------------------------------- unpacking refusals


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "empty"),
        (b"\xc1", "not valid msgpack"),
        (b"\x92\x01", "truncated"),
        (b"\xdd\xff\xff\xff\xff", "cannot be decoded"),
        (b"\xa2\xff\xfe", "not valid UTF-8"),
        (b"\x81\x01\x02", "cannot be decoded"),
        (b"\x91" * 5000 + b"\x01", "nests too deeply"),
        (packb([1, 2]), "is a list, not a map"),
        (packb("text"), "is a str, not a map"),
        (packb(raw_record(s=...)), "has no schema version"),
        (packb(raw_record(s=2)), "schema version 2; this memoryd reads version 1"),
        (packb(raw_record(s=0)), "schema version 0"),
        (packb(raw_record(s="1")), "schema version '1'"),
        (packb(raw_record(s=True)), "schema version True"),
        (packb(raw_record(x=1)), r"unknown fields \['x'\]"),
        (packb(raw_record(v=...)), r"lacks the fields \['v'\]"),
        (packb(raw_record(m=..., t=...)), r"lacks the fields \['m', 't'\]"),
        (packb(raw_record(m={"role": "user"})), "messages are a dict, not an array"),
        (packb(raw_record(m=["x"])), "invalid: event messages must all be dicts"),
        (packb(raw_record(m=[])), "invalid: an appended event needs at least one message"),
        (packb(raw_record(v=0)), "invalid: event version must be an int >= 1"),
        (packb(raw_record(k="exploded")), "invalid: event kind must be one of"),
        (packb(raw_record(t="yesterday")), "invalid: event timestamp"),
        (packb(raw_record(i=7)), "invalid: event idempotency_key"),
        (packb(raw_record(d=[1])), "data is a list, not a map"),
        (packb(raw_record(m=[{"role": "user", "content": b"bin"}])), "binary data"),
        (
            packb(
                raw_record(m=[{"role": "user", "content": "x", "e": msgpack.ExtType(5, b"abc")}])
            ),
            "ext type",
        ),
        (packb(raw_record(t=msgpack.Timestamp(1, 0))), "ext type"),
        (
            packb(raw_record(m=[{"role": "user", "content": "x", "e": msgpack.ExtType(7, b"")}])),
            "ext type 7",
        ),
    ],
)
def test_unpack_event_refuses_bad_bytes(data: bytes, needle: str) -> None:
    """Garbage, truncated, ext-typed, binary, malformed or unknown-schema records are refused."""
    with pytest.raises(CorruptRecord, match=needle) as info:
        unpack_event(data)
    assert isinstance(info.value, StorageError)


def test_unpack_event_refuses_trailing_bytes() -> None:
    """Bytes after a valid record mean the record is damaged."""
    with pytest.raises(CorruptRecord, match="trailing bytes"):
        unpack_event(pack_event(event()) + b"\x00")


def test_every_truncation_of_a_record_is_refused() -> None:
    """No prefix of a valid record decodes as an event."""
    packed = pack_event(event(idempotency_key="k", data={"a": [1, 2, 3]}))
    for end in range(len(packed)):
        with pytest.raises(CorruptRecord):
            unpack_event(packed[:end])


def test_unpack_refuses_oversized_input_before_decoding() -> None:
    """Input over max_bytes is refused with its size and the limit."""
    packed = pack_event(event())
    with pytest.raises(
        CorruptRecord, match=rf"event record is {len(packed)} bytes; the limit is 10"
    ):
        unpack_event(packed, max_bytes=10)
    with pytest.raises(CorruptRecord, match="the limit is 3"):
        unpack_value(pack_value("long string"), max_bytes=3)
    assert MAX_RECORD_BYTES >= 1 << 20


def test_pickle_is_never_used() -> None:
    """A pickle payload is just garbage to the codec."""
    with pytest.raises(CorruptRecord):
        unpack_event(pickle.dumps(event()))


def test_unpack_refuses_non_bytes() -> None:
    """Passing something that is not bytes is a programming error (TypeError)."""
    with pytest.raises(TypeError):
        unpack_event("not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        unpack_value(None)  # type: ignore[arg-type]


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_corrupt_record(data: bytes) -> None:
    """Any bytes either decode or raise CorruptRecord; never a raw msgpack error."""
    with contextlib.suppress(CorruptRecord):
        unpack_event(data)
    with contextlib.suppress(CorruptRecord):
        unpack_value(data)


@given(st.binary(min_size=1, max_size=8), st.integers(min_value=0))
def test_corrupting_a_record_raises_only_corrupt_record(noise: bytes, where: int) -> None:
    """Overwriting bytes inside a valid record either still decodes or raises CorruptRecord."""
    packed = bytearray(pack_event(event(data={"k": "v"})))
    at = where % len(packed)
    packed[at : at + len(noise)] = noise
    with contextlib.suppress(CorruptRecord):
        unpack_event(bytes(packed))


def test_supported_schema_versions() -> None:
    """This code reads the schema version it writes."""
    assert SCHEMA_VERSION in SUPPORTED_SCHEMA_VERSIONS


# --------------------------------------------------------------------------- history reads


@pytest.mark.parametrize("kind", ["appended", "popped", "cleared", "forked", "memo"])
def test_kind_and_messages_agree_with_the_full_decode(kind: str) -> None:
    """The history read's decode returns the full decode's kind and (fresh) messages."""
    msgs = () if kind == "cleared" else (messages.user("héllo 😀"),)
    packed = pack_event(event(kind=kind, messages=msgs, idempotency_key="k", data={"a": 1}))
    got_kind, got = codec.unpack_kind_and_messages(packed)
    full = unpack_event(packed)
    assert (got_kind, tuple(got)) == (full.kind, full.messages)
    got[0:0] = [messages.user("mutated")]
    assert codec.unpack_kind_and_messages(packed)[1] == list(full.messages)


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        (raw_record(s=99), "schema version 99"),
        (raw_record(s=...), "no schema version"),
        (raw_record(k="renamed"), "kind 'renamed'"),
        (raw_record(k=...), "kind None"),
        (raw_record(m="text"), "messages are not an array of maps"),
        (raw_record(m=[1, 2]), "messages are not an array of maps"),
        ([1, 2, 3], "not a map"),
    ],
)
def test_kind_and_messages_refuse_what_history_cannot_use(record: Any, needle: str) -> None:
    """A damaged record fails the history read with CorruptRecord naming the problem."""
    with pytest.raises(CorruptRecord, match=needle):
        codec.unpack_kind_and_messages(packb(record))


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "s": st.sampled_from([SCHEMA_VERSION, 0, 99, "1", None]),
            "k": st.sampled_from(["appended", "memo", "renamed", None, 3]),
            "m": st.one_of(
                st.lists(st.dictionaries(st.text(max_size=3), st.text(max_size=3)), max_size=3),
                st.lists(st.integers(-1000, 1000), max_size=2),
                st.text(max_size=3),
            ),
            "t": st.floats(allow_nan=False),
        },
    )
)
def test_kind_and_messages_answer_exactly_the_sound_records(record: dict[str, Any]) -> None:
    """The history decode returns a record's kind and messages when its schema, kind and
    messages are sound, and raises CorruptRecord for every other record."""
    data = packb(record)
    try:
        got: tuple[str, list[Any]] | None = codec.unpack_kind_and_messages(data)
    except CorruptRecord:
        got = None
    kind, msgs = record.get("k"), record.get("m")
    sound = (
        record.get("s") == SCHEMA_VERSION
        and isinstance(kind, str)
        and kind in KINDS
        and isinstance(msgs, list)
        and all(isinstance(m, dict) for m in msgs)
    )
    assert got == ((kind, msgs) if sound else None)


@given(st.binary(max_size=200))
def test_kind_and_messages_raise_only_corrupt_record(data: bytes) -> None:
    """Any bytes either decode or raise CorruptRecord."""
    with contextlib.suppress(CorruptRecord):
        codec.unpack_kind_and_messages(data)


# --------------------------------------------------------------------------- sealed values


def test_a_sealed_value_unseals_to_itself() -> None:
    """`unseal` under the same key gives back exactly the value `seal` framed."""
    record = pack_event(event())
    framed = codec.seal(b"key-1", record)
    assert len(framed) == len(record) + codec.SEAL_BYTES
    assert codec.unseal(b"key-1", framed) == record
    assert bytes(codec.unseal(b"key-1", memoryview(framed))) == record


def test_every_single_bit_flip_of_a_sealed_value_is_caught() -> None:
    """Each of the frame's bits flipped in turn raises CorruptRecord."""
    framed = codec.seal(b"k", pack_event(event()))
    for bit in range(len(framed) * 8):
        damaged = bytearray(framed)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptRecord, match="fails its checksum"):
            codec.unseal(b"k", bytes(damaged))


def test_a_sealed_value_read_under_another_key_is_caught() -> None:
    """The checksum covers the key: a value found under another key is refused."""
    framed = codec.seal(b"\x00" * 15 + b"\x01", b"value")
    with pytest.raises(CorruptRecord):
        codec.unseal(b"\x00" * 15 + b"\x02", framed)


@pytest.mark.parametrize("framed", [b"", b"\x00", b"abc"])
def test_a_value_shorter_than_its_checksum_is_caught(framed: bytes) -> None:
    """Truncated frames (shorter than the checksum) raise CorruptRecord."""
    with pytest.raises(CorruptRecord):
        codec.unseal(b"k", framed)


@settings(max_examples=300, deadline=None)
@given(
    value=st.binary(min_size=1, max_size=300),
    data=st.data(),
)
def test_every_burst_of_up_to_32_flipped_bits_is_caught(value: bytes, data: st.DataObject) -> None:
    """Any burst of 1 to 32 bits (first and last flipped, any pattern between) anywhere in
    a sealed value, checksum included, makes `unseal` raise `CorruptRecord`."""
    framed = codec.seal(b"k", value)
    bits = len(framed) * 8
    length = data.draw(st.integers(1, min(32, bits)))
    start = data.draw(st.integers(0, bits - length))
    middle = data.draw(st.integers(0, (1 << max(length - 2, 0)) - 1))
    pattern = 1 if length == 1 else (1 << (length - 1)) | (middle << 1) | 1
    as_int = int.from_bytes(framed, "big") ^ (pattern << (bits - start - length))
    damaged = as_int.to_bytes(len(framed), "big")
    with pytest.raises(CorruptRecord):
        codec.unseal(b"k", damaged)
