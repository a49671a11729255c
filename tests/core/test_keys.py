"""The LMDB key layout (DESIGN §4): fixed-width, ordered, unambiguous keys."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.errors import InvalidConversationId
from memoryd.store.lmdb.keys import (
    EVENT_KEY_SIZE,
    MAX_U64,
    SUB_DATABASES,
    conv_num_bytes,
    conversation_bounds,
    decode_conv_num,
    decode_event_key,
    decode_idempotency_key,
    decode_name_key,
    decode_position_key,
    event_key,
    idempotency_key,
    name_key,
    position_key,
)

u64 = st.integers(min_value=0, max_value=MAX_U64)
small = st.integers(min_value=0, max_value=5)
# Numbers near the edges of the byte boundaries matter most for ordering.
edgy = st.one_of(
    u64, small, st.sampled_from([255, 256, 2**32 - 1, 2**32, 2**56, MAX_U64 - 1, MAX_U64])
)


def test_event_key_layout() -> None:
    """An event key is conv_num then version, 8 bytes big-endian each."""
    assert event_key(1, 2) == b"\x00" * 7 + b"\x01" + b"\x00" * 7 + b"\x02"
    assert len(event_key(MAX_U64, MAX_U64)) == EVENT_KEY_SIZE == 16
    assert event_key(0x0102030405060708, 0) == bytes(range(1, 9)) + bytes(8)


@given(edgy, edgy)
def test_event_key_round_trips(conv: int, version: int) -> None:
    """decode_event_key inverts event_key."""
    assert decode_event_key(event_key(conv, version)) == (conv, version)
    assert decode_event_key(memoryview(event_key(conv, version))) == (conv, version)


@given(edgy, edgy, edgy, edgy)
def test_event_keys_sort_like_their_numbers(a: int, va: int, b: int, vb: int) -> None:
    """For any (a, va) < (b, vb), the key bytes sort the same way."""
    assert ((a, va) < (b, vb)) == (event_key(a, va) < event_key(b, vb))
    assert ((a, va) == (b, vb)) == (event_key(a, va) == event_key(b, vb))


@given(edgy, edgy, edgy)
def test_bounds_contain_exactly_one_conversations_keys(conv: int, other: int, version: int) -> None:
    """The bounds of conversation n contain every key of n and no key of any other conversation."""
    first, last = conversation_bounds(conv)
    assert first <= event_key(conv, version) <= last
    inside = first <= event_key(other, version) <= last
    assert inside == (other == conv)


def test_bounds_are_the_extreme_versions() -> None:
    """The bounds are version 0 and version 2**64-1 of the conversation."""
    assert conversation_bounds(7) == (event_key(7, 0), event_key(7, MAX_U64))
    assert conversation_bounds(6)[1] < conversation_bounds(7)[0]


def test_conversation_ids_that_are_prefixes_cannot_leak_into_each_other() -> None:
    """Ids "a" and "a\\x00b" get numbers; their event ranges are disjoint whatever the text."""
    # With naive "cid + NUL + version" keys, "a"'s range would contain "a\x00b"'s keys.
    conv_a, conv_ab = 1, 2
    first, last = conversation_bounds(conv_a)
    for version in (0, 1, 2**32, MAX_U64):
        assert not first <= event_key(conv_ab, version) <= last
    # The names are separate keys in their own sub-database, never concatenated.
    assert name_key("a") == b"a"
    assert name_key("ab") == b"ab"


@given(st.lists(st.tuples(small, edgy), min_size=2, max_size=20, unique=True))
def test_sorted_keys_group_by_conversation_then_version(pairs: list[tuple[int, int]]) -> None:
    """Sorting keys is sorting (conv, version) pairs: each conversation is one contiguous run."""
    by_key = sorted(pairs, key=lambda p: event_key(*p))
    assert by_key == sorted(pairs)


@pytest.mark.parametrize(
    "func", [lambda n: event_key(n, 0), lambda n: event_key(0, n), conv_num_bytes, position_key]
)
@pytest.mark.parametrize("bad", [-1, 2**64, 1.0, True, "1", None])
def test_numbers_out_of_range_or_not_int_are_refused(func: Any, bad: Any) -> None:
    """Negative, too large, bool, float or str numbers raise ValueError."""
    with pytest.raises(ValueError, match="must be"):
        func(bad)


def test_conversation_bounds_validates_its_argument() -> None:
    """A bad conv_num raises ValueError."""
    with pytest.raises(ValueError):
        conversation_bounds(-1)


@pytest.mark.parametrize("bad", [b"", b"\x00" * 15, b"\x00" * 17, b"\x00" * 8])
def test_decode_event_key_refuses_wrong_lengths(bad: bytes) -> None:
    """Only 16-byte keys decode."""
    with pytest.raises(ValueError, match="must be 16 bytes"):
        decode_event_key(bad)


@given(edgy, edgy)
def test_position_keys_round_trip_and_sort_numerically(a: int, b: int) -> None:
    """Position keys are 8 big-endian bytes that sort like the positions."""
    assert decode_position_key(position_key(a)) == a
    assert len(position_key(a)) == 8
    assert (a < b) == (position_key(a) < position_key(b))


@given(edgy)
def test_conv_num_bytes_round_trip(n: int) -> None:
    """conv_num_bytes and decode_conv_num are inverses."""
    assert decode_conv_num(conv_num_bytes(n)) == n


@pytest.mark.parametrize("bad", [b"", b"\x01" * 7, b"\x01" * 9])
def test_eight_byte_decoders_refuse_wrong_lengths(bad: bytes) -> None:
    """Position and conv_num decoders need exactly 8 bytes."""
    with pytest.raises(ValueError, match="must be 8 bytes"):
        decode_position_key(bad)
    with pytest.raises(ValueError, match="must be 8 bytes"):
        decode_conv_num(bad)


def test_name_key_is_utf8_and_round_trips() -> None:
    """The names sub-database key is the id in UTF-8."""
    assert name_key("café") == "café".encode()
    assert decode_name_key(name_key("café 😀")) == "café 😀"
    assert len(name_key("é" * 128)) == 256


@pytest.mark.parametrize("bad", ["", "a" * 257, "a\nb", "x\ud800", 5, None])
def test_name_key_validates_the_conversation_id(bad: Any) -> None:
    """A bad id raises InvalidConversationId, which is a ValueError."""
    with pytest.raises(InvalidConversationId):
        name_key(bad)
    with pytest.raises(ValueError):
        name_key(bad)


def test_idempotency_keys_are_scoped_to_their_conversation() -> None:
    """The same idempotency key in two conversations gives two different entries."""
    assert idempotency_key(1, "k") != idempotency_key(2, "k")
    assert idempotency_key(1, "k") == conv_num_bytes(1) + b"k"
    assert decode_idempotency_key(idempotency_key(5, "κλειδί")) == (5, "κλειδί")


@given(small, st.text(min_size=1, max_size=20), small, st.text(min_size=1, max_size=20))
def test_idempotency_keys_are_unambiguous(c1: int, k1: str, c2: int, k2: str) -> None:
    """Two entries are equal only for the same conversation and the same key."""
    assert (idempotency_key(c1, k1) == idempotency_key(c2, k2)) == ((c1, k1) == (c2, k2))


@pytest.mark.parametrize(
    ("key", "needle"),
    [
        ("", "non-empty str"),
        (None, "non-empty str"),
        (b"k", "non-empty str"),
        ("x" * 257, "idempotency key is 257 bytes; the limit is 256"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_idempotency_key_refuses_bad_keys(key: Any, needle: str) -> None:
    """Idempotency keys must be non-empty str of at most 256 UTF-8 bytes."""
    with pytest.raises(ValueError, match=needle):
        idempotency_key(1, key)


def test_decode_idempotency_key_refuses_short_input() -> None:
    """An entry must hold the 8-byte number and at least one byte of key."""
    with pytest.raises(ValueError):
        decode_idempotency_key(b"\x00" * 8)


def test_every_key_fits_lmdb_default_key_limit() -> None:
    """The longest keys stay under LMDB's 511-byte key limit."""
    assert len(name_key("é" * 128)) <= 511
    assert len(idempotency_key(MAX_U64, "x" * 256)) <= 511


def test_sub_database_names() -> None:
    """The five sub-databases have distinct bytes names."""
    assert SUB_DATABASES == (b"names", b"events", b"positions", b"meta", b"idempotency")
    assert len(set(SUB_DATABASES)) == 5
