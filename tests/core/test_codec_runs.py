"""`_codec_runs.unseal_kinds_and_messages` and `_codec_runs.unseal_kinds_and_packed_messages` read a
run of sealed records as the one-record functions read each, and refuse what they refuse."""

from __future__ import annotations

from typing import Any

import pytest

from memoryd import _codec_runs, codec
from memoryd._codec_msgpack import pack_bounded
from memoryd.errors import CorruptRecord
from memoryd.events import Event
from memoryd.messages import assistant, tool, tool_call, user


def _key(version: int) -> bytes:
    return (7).to_bytes(8, "big") + version.to_bytes(8, "big")


def _events() -> list[Event]:
    big = tuple(user(f"m{i}") for i in range(17))
    call = assistant(tool_calls=[tool_call("c1", "lookup", {"q": "x"})])
    return [
        Event(version=1, kind="appended", messages=(user("hi"),), timestamp=1.5),
        Event(version=2, kind="appended", messages=big, timestamp=2.0, idempotency_key="k"),
        Event(version=3, kind="appended", messages=(call, tool("c1", "ok")), timestamp=3.0),
        Event(version=4, kind="popped", messages=(), timestamp=4.0),
        Event(version=5, kind="memo", messages=(), timestamp=5.0, data={"memo": "x"}),
        Event(version=6, kind="appended", messages=(user("ü" * 300),), timestamp=6.0),
    ]


def _sealed(records: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    keys = [_key(v) for v in range(len(records), 0, -1)]
    return keys, [codec.seal(k, r) for k, r in zip(keys, records, strict=True)]


def _records() -> tuple[list[bytes], list[bytes], range]:
    events = sorted(_events(), key=lambda e: -e.version)
    keys, values = _sealed([codec.pack_event(e) for e in events])
    return keys, values, range(len(events), 0, -1)


def test_a_run_decodes_as_each_record_alone() -> None:
    """Kinds and messages of a run equal `unpack_kind_and_messages` of each record."""
    keys, values, versions = _records()
    kinds, messages = _codec_runs.unseal_kinds_and_messages(keys, values, versions)
    alone = [
        codec.unpack_kind_and_messages(codec.unseal(k, v))
        for k, v in zip(keys, values, strict=True)
    ]
    assert list(zip(kinds, messages, strict=True)) == alone


def test_a_packed_run_reads_as_each_record_alone() -> None:
    """Kinds, counts and encoded messages of a run equal each record read alone, for
    records with and without idempotency keys and data, and of 16 messages or more."""
    keys, values, _ = _records()
    run = _codec_runs.unseal_kinds_and_packed_messages(keys, values)
    alone = [
        codec.unpack_kind_and_packed_messages(codec.unseal(k, v))
        for k, v in zip(keys, values, strict=True)
    ]
    assert list(zip(*run, strict=True)) == alone


def test_a_message_holding_the_tail_bytes_is_still_cut_right() -> None:
    """Message text that looks like the record's last field does not move the cut."""
    text = "\xa1t\xcb" + "x" * 8
    event = Event(version=1, kind="appended", messages=(user(text), user(text)), timestamp=1.0)
    keys, values = _sealed([codec.pack_event(event)] * 2)
    _, counts, packed = _codec_runs.unseal_kinds_and_packed_messages(keys[:1], values[:1])
    assert counts == [2]
    assert codec.unpack_wire(b"\x92" + packed[0]) == [user(text), user(text)]


def _record(**fields: Any) -> bytes:
    return pack_bounded(fields, allow_bytes=False, max_bytes=1 << 20, what="event")


_GOOD = {"s": 1, "v": 1, "k": "appended", "m": [user("x")], "t": 1.0}


@pytest.mark.parametrize(
    "bad",
    [
        {**_GOOD, "s": True},
        {**_GOOD, "s": 2},
        {**_GOOD, "v": 9},
        {**_GOOD, "k": "shouted"},
        {**_GOOD, "k": ["appended"]},
        {**_GOOD, "m": "text"},
        {**_GOOD, "m": ["text"]},
        {key: value for key, value in _GOOD.items() if key != "s"},
        {key: value for key, value in _GOOD.items() if key != "m"},
    ],
)
def test_a_run_refuses_a_bad_record(bad: dict[str, Any]) -> None:
    """A record of a wrong schema, version, kind or messages fails the whole run."""
    good = dict(_GOOD, v=2)
    keys, values = _sealed([_record(**good), _record(**bad)])
    with pytest.raises(CorruptRecord):
        _codec_runs.unseal_kinds_and_messages(keys, values, range(2, 0, -1))


@pytest.mark.parametrize(
    "raw",
    [b"", _record(**_GOOD) + b"\x01", _record(**_GOOD)[:-3], [1, 2]],
)
def test_a_run_refuses_a_record_that_is_not_one_map(raw: Any) -> None:
    """An empty, truncated, two-value or non-map record fails the run."""
    body = (
        raw
        if isinstance(raw, bytes)
        else pack_bounded(raw, allow_bytes=False, max_bytes=99, what="x")
    )
    keys, values = _sealed([_record(**dict(_GOOD, v=2)), body])
    with pytest.raises(CorruptRecord):
        _codec_runs.unseal_kinds_and_messages(keys, values, range(2, 0, -1))


def test_a_run_refuses_a_record_under_another_key() -> None:
    """Every record's checksum is checked under the key it is read for."""
    keys, values = _sealed([_record(**dict(_GOOD, v=2)), _record(**_GOOD)])
    swapped = [keys[1], keys[0]]
    with pytest.raises(CorruptRecord):
        _codec_runs.unseal_kinds_and_messages(swapped, values, range(2, 0, -1))
    with pytest.raises(CorruptRecord):
        _codec_runs.unseal_kinds_and_packed_messages(swapped, values)
    with pytest.raises(CorruptRecord):
        _codec_runs.unseal_all(keys, [values[0], values[1][:3]])
