"""A handle's last-N reads: the target made once per conversation and limit, the checks
kept for every call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memoryd.errors import InvalidConversationId, StoreUnavailable
from memoryd.messages import user
from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the module."""
    running = Daemon().start()
    yield running
    running.close()


def test_a_bad_id_or_limit_is_refused_on_every_call(daemon: Daemon) -> None:
    """A refused id or limit is refused again (nothing is kept of it), before anything is
    sent; the same read with good arguments is served."""
    store = daemon.connect()
    try:
        store.add("rr-ok", [user("one"), user("two")])
        for _ in range(2):
            with pytest.raises(InvalidConversationId):
                store.get("rr\x00bad", limit=1)
            with pytest.raises(InvalidConversationId):
                store.get("", limit=1)
            with pytest.raises(ValueError, match="limit"):
                store.get("rr-ok", limit=-1)
            with pytest.raises(ValueError, match="limit"):
                store.get("rr-ok", limit=True)  # type: ignore[arg-type]
            assert store.get("rr-ok", limit=1) == [user("two")]
    finally:
        store.close()


def test_more_conversations_than_targets_kept_are_each_read_right(daemon: Daemon) -> None:
    """Past the targets a handle keeps, every read still reaches its own conversation,
    and a fresh list of fresh dicts comes back each time."""
    store = daemon.connect()
    try:
        for i in range(300):
            store.add(f"rr-many/{i} é", [user(f"m{i}")])
        for round_ in range(2):
            for i in range(300):
                got = store.get(f"rr-many/{i} é", limit=5)
                assert got == [user(f"m{i}")], (round_, i)
                got[0]["content"] = "changed"
        assert store.get("rr-many/0 é", limit=5) == [user("m0")]
    finally:
        store.close()


def test_a_closed_handle_reads_nothing(daemon: Daemon) -> None:
    """A read on a closed handle raises `StoreUnavailable`, also for a target kept ready."""
    store = daemon.connect()
    store.add("rr-closed", [user("x")])
    assert store.get("rr-closed", limit=1) == [user("x")]
    store.close()
    with pytest.raises(StoreUnavailable):
        store.get("rr-closed", limit=1)
