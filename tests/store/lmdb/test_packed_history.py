"""`reads.history_packed` is `history` with the messages left encoded.

The daemon answers a last-N read with the stored bytes of its messages; that walk
must apply pops, clears and forks exactly as the decoding walk does, and refuse a
damaged record the same way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memoryd
from memoryd import codec
from memoryd.messages import user
from memoryd.store import lookup
from memoryd.store.lmdb import reads
from memoryd.store.lmdb.layout import meta_of
from tests.store.lmdb._damage import flip_event_bit


def _packed(store: Any, cid: str, limit: int | None) -> list[dict[str, Any]]:
    engine = lookup.engine(store.name)

    def read(txn: Any, dbs: Any) -> tuple[int, list[bytes]]:
        return reads.history_packed(txn, dbs, meta_of(txn, dbs, cid), limit)

    count, chunks = engine.read(read)
    body = codec.pack_packed_array_map("messages", count, chunks)
    messages: list[dict[str, Any]] = codec.unpack_wire(body)["messages"]
    assert len(messages) == count
    return messages


_names = itertools.count()


@pytest.fixture
def store() -> Iterator[Any]:
    handle = memoryd.EphemeralStore.start(name="packed-history")
    yield handle
    handle.stop()


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(min_value=1, max_value=4)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("fork"), st.just(0)),
    ),
    max_size=25,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops, limits=st.lists(st.integers(min_value=0, max_value=30), max_size=4))
def test_the_packed_walk_gives_the_history(
    store: Any, ops: list[tuple[str, int]], limits: list[int]
) -> None:
    """After any adds, pops, clears and forks, every limit reads the same messages."""
    cid = f"c{next(_names)}"
    n = 0
    for op, size in ops:
        if op == "add":
            store.add(cid, [user(f"m{n + i}") for i in range(size)])
            n += size
        elif op == "pop":
            store.pop(cid)
        elif op == "clear":
            store.clear(cid)
        else:
            source = f"{cid}-src"
            store.add(source, [user(f"s{n}")])
            target = f"c{next(_names)}"
            store.fork(source, target)
            cid = target
    for limit in [*limits, None]:
        assert _packed(store, cid, limit) == store.get(cid, limit=limit), (ops, limit)


def test_a_conversation_never_written_has_no_messages(store: Any) -> None:
    """No metadata: nothing, with no record read."""
    assert _packed(store, "never-written", 50) == []


def test_a_damaged_record_is_refused_naming_its_version(tmp_path: Path) -> None:
    """A flipped bit in an event record fails its checksum in the packed walk too."""
    path = tmp_path / "data"
    handle = memoryd.LmdbStore.start(str(path), name="packed-damaged")
    handle.add("a", [user("one")])
    handle.add("a", [user("two")])
    handle.stop()
    flip_event_bit(path, "a", 2)
    handle = memoryd.LmdbStore.start(str(path), name="packed-damaged")
    try:
        with pytest.raises(memoryd.CorruptRecord, match="event 2 of conversation 'a'"):
            _packed(handle, "a", 1)
        with pytest.raises(memoryd.CorruptRecord, match="event 2 of conversation 'a'"):
            handle.get("a", limit=1)
    finally:
        handle.stop()
