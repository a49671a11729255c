"""A write whose reply was lost after Redis applied it is never applied twice.

A `LossyProxy` between the store and a real redis-server passes the write script on,
drops Redis's reply, then empties the script cache (``SCRIPT FLUSH``) or kills and
restarts the server, and closes the connection. The store resends, gets ``NOSCRIPT``,
loads the script and plans the write again from a fresh read, which already holds the
write: its token must be recognised, and the caller gets the original answer.
No idempotency key anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd.events import Event
from memoryd.store.redis.handle import RedisStore
from tests.helpers import Worker
from tests.redis_servers import LossyProxy, RedisServer

WRITE = b"EVALSHA"
"""Every write but an import is sent as EVALSHA of the write script."""
IMPORT = b"for i = entries_end + 1, #ARGV, 5"
"""A line of the import script (sent as EVAL)."""


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    started = RedisServer(tmp_path / "redis").start()
    yield started
    started.stop()


@pytest.fixture
def proxy(server: RedisServer) -> Iterator[LossyProxy]:
    lossy = LossyProxy(server.port)
    yield lossy
    lossy.close()
    memoryd.shutdown()


@pytest.fixture
def store(proxy: LossyProxy) -> RedisStore:
    return RedisStore.start(proxy.url, cluster=False, call_timeout_s=10.0)


def flush_scripts(server: RedisServer) -> Callable[[], None]:
    def flush() -> None:
        client = server.client()
        try:
            client.script_flush()
        finally:
            client.close()

    return flush


def restart(server: RedisServer) -> Callable[[], None]:
    def kill_and_start() -> None:
        server.kill()
        server.start()

    return kill_and_start


def kinds(store: RedisStore, cid: str) -> list[str]:
    return [str(e.kind) for e in store.events(cid)]


def lose(proxy: LossyProxy, then: Callable[[], None], marker: bytes = WRITE) -> None:
    proxy.lose_reply_to(marker, then)


def test_an_unkeyed_add_whose_reply_was_lost_is_stored_once(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """add, reply lost, script cache flushed, resent: one event, the original version."""
    store.add("c", [user("a")])
    lose(proxy, flush_scripts(server))
    assert store.add("c", [user("b")]) == 2
    assert proxy.lost.is_set()
    assert kinds(store, "c") == ["appended", "appended"]
    assert store.get("c") == [user("a"), user("b")]
    assert store.add("c", [user("c")]) == 3


def test_an_add_whose_server_was_killed_after_it_ran_is_stored_once(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """add applied and fsynced, then redis-server SIGKILLed before its reply left and
    restarted on the same data: the resend finds the add, nothing is appended twice."""
    store.add("c", [user("a")])
    lose(proxy, restart(server))
    assert store.add("c", [user("b")]) == 2
    assert proxy.lost.is_set()
    assert store.get("c") == [user("a"), user("b")]
    assert len(store.events("c")) == 2


def test_a_pop_whose_reply_was_lost_removes_one_message_and_returns_it(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """pop, reply lost, resent after a flush: one popped event; the popped message is
    the one the first send removed, not the one before it."""
    store.add("c", [user("a"), user("b"), user("c")])
    lose(proxy, flush_scripts(server))
    assert store.pop("c") == user("c")
    assert proxy.lost.is_set()
    assert store.get("c") == [user("a"), user("b")]
    assert kinds(store, "c") == ["appended", "popped"]


def test_a_pop_of_the_last_message_whose_reply_was_lost_returns_it(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """The resend finds the conversation empty: still the message popped, not None."""
    store.add("c", [user("only")])
    lose(proxy, flush_scripts(server))
    assert store.pop("c") == user("only")
    assert proxy.lost.is_set()
    assert store.get("c") == []
    assert kinds(store, "c") == ["appended", "popped"]


def test_a_clear_whose_reply_was_lost_is_written_once(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """clear, reply lost, resent after a flush: one cleared marker."""
    store.add("c", [user("a")])
    lose(proxy, flush_scripts(server))
    store.clear("c")
    assert proxy.lost.is_set()
    assert store.version("c") == 2
    assert store.get("c") == []
    assert store.add("c", [user("after")]) == 3


def test_a_fork_whose_reply_was_lost_returns_its_version(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """fork, reply lost, resent: the target's fork is recognised, not refused as a
    target that already holds messages."""
    store.add("source", [user("a"), user("b")])
    lose(proxy, flush_scripts(server))
    assert store.fork("source", "target") == 1
    assert proxy.lost.is_set()
    assert kinds(store, "target") == ["forked"]
    assert store.get("target") == [user("a"), user("b")]


def test_a_record_whose_reply_was_lost_is_written_once(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """record (a memo), reply lost, resent after a flush: one memo event."""
    store.add("c", [user("a")])
    lose(proxy, flush_scripts(server))
    assert store.record("c", "memo", data={"n": 1}) == 2
    assert proxy.lost.is_set()
    assert kinds(store, "c") == ["appended", "memo"]


def test_an_import_whose_reply_was_lost_is_written_once(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """import, reply lost, server restarted: the events are there once, and the import
    answers the version it wrote."""
    events = [
        Event(version=v, kind="appended", messages=(user(f"m{v}"),), timestamp=1.0 + v)
        for v in (1, 2, 3)
    ]
    lose(proxy, restart(server), IMPORT)
    assert store.import_events("c", events) == 3
    assert proxy.lost.is_set()
    assert [e.version for e in store.events("c")] == [1, 2, 3]
    assert [c.version for c in store.tail()] == [1, 2, 3]


def test_writes_chained_in_one_batch_whose_replies_were_lost_are_stored_once(
    server: RedisServer, proxy: LossyProxy, store: RedisStore
) -> None:
    """Many concurrent adds to one conversation (one pipeline, chained), replies lost
    mid-run and the cache flushed: every add is stored exactly once."""
    store.add("c", [user("start")])
    lose(proxy, flush_scripts(server))
    workers = [Worker(lambda i=i: store.add("c", [user(f"m{i}")])) for i in range(16)]
    for w in workers:
        w.start()
    versions = sorted(w.outcome(timeout=60) for w in workers)
    assert versions == list(range(2, 18))
    assert proxy.lost.is_set()
    stored = [m["content"] for m in store.get("c")]
    assert sorted(stored) == sorted(["start", *(f"m{i}" for i in range(16))])
    assert store.version("c") == 17
