"""A write whose reply was lost after Redis applied it is never applied twice.

A `LossyProxy` between the store and a real redis-server passes the write script on,
drops Redis's reply, then empties the script cache (``SCRIPT FLUSH``) or kills and
restarts the server, and closes the connection. The store resends, gets ``NOSCRIPT``,
loads the script and plans the write again from a fresh read, which already holds the
write: its token must be recognised, and the caller gets the original answer.
No idempotency key anywhere.

Every test runs twice: on a single redis-server (``server``) and on a three-master
Redis Cluster (``cluster``) whose third master sits behind the proxy. That master
announces the proxy's port as its own (``cluster-announce-port``), so the store's
Cluster client learns the proxy from ``CLUSTER SLOTS`` and every connection to that
master, the batch writer's included, passes through it; the test writes to
conversations whose slot that master serves. The reply is lost at the proxy, after
the master ran the script, so the loss is exact and needs no timing. A restart there
kills the master (``appendfsync always``) and starts it on the same port and data
directory, with its ``nodes.conf``: it rejoins the cluster and refuses writes with
``CLUSTERDOWN`` for its first two seconds, which the store rides out like a lost
connection before it resends.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import memoryd
from memoryd.events import Event
from memoryd.store.redis import scripts as redis_scripts
from memoryd.store.redis.handle import RedisStore
from tests.helpers import Worker
from tests.redis_servers import LossyProxy, RedisCluster, RedisServer

WRITE = b"EVALSHA"
"""Every write but an import is sent as EVALSHA of the write script."""
IMPORT = b"for i = entries_end + 1, #ARGV, 5"
"""A line of the import script (sent as EVAL)."""


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@dataclass(frozen=True, kw_only=True, slots=True)
class Rig:
    """A store whose writes to `node` pass through `proxy`."""

    store: RedisStore
    proxy: LossyProxy
    node: RedisServer
    """The redis-server behind the proxy (the Cluster's lossy master)."""
    cid: Callable[[str], str]
    """A conversation id made from a name, whose keys `node` holds."""


@pytest.fixture(scope="module")
def lossy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """Three masters; the third is reached through a `LossyProxy` (see the module)."""
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-lossy"), lossy=True).start()
    yield cluster
    cluster.stop()


def _on_node(cluster: RedisCluster, prefix: str) -> Callable[[str], str]:
    """Names mapped to conversation ids whose slot the lossy master serves."""
    chosen: dict[str, str] = {}

    def cid(name: str) -> str:
        if name not in chosen:
            for i in range(1000):
                candidate = f"{name}-{i}"
                key = redis_scripts.conv_keys(prefix, candidate).stream
                if cluster.shard_of(key)[0] is cluster.lossy_node:
                    chosen[name] = candidate
                    break
            else:
                raise AssertionError(f"no id made from {name!r} lands on the lossy master")
        return chosen[name]

    return cid


@pytest.fixture(params=["server", "cluster"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    """The store, the proxy and the server behind it, on a single server or a Cluster."""
    if request.param == "server":
        server = RedisServer(tmp_path / "redis").start()
        proxy = LossyProxy(server.port)
        store = RedisStore.start(proxy.url, cluster=False, call_timeout_s=10.0)
        try:
            yield Rig(store=store, proxy=proxy, node=server, cid=lambda name: name)
        finally:
            proxy.close()
            memoryd.shutdown()
            server.stop()
        return
    cluster: RedisCluster = request.getfixturevalue("lossy_cluster")
    assert cluster.proxy is not None
    prefix = f"lossy-{uuid.uuid4().hex[:8]}"
    store = RedisStore.start(cluster.url, prefix=prefix, cluster=True, call_timeout_s=10.0)
    try:
        yield Rig(
            store=store, proxy=cluster.proxy, node=cluster.lossy_node, cid=_on_node(cluster, prefix)
        )
    finally:
        cluster.proxy.disarm()
        memoryd.shutdown()


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


LOSSES = {"flush": flush_scripts, "restart": restart}
"""What happens after the reply is dropped: the script cache is emptied, or the server
is SIGKILLed and started again on its data (its script cache empty too)."""


def lose(rig: Rig, then: str, marker: bytes = WRITE) -> None:
    rig.proxy.lose_reply_to(marker, LOSSES[then](rig.node))


def test_an_unkeyed_add_whose_reply_was_lost_is_stored_once(rig: Rig) -> None:
    """add, reply lost, script cache flushed, resent: one event, the original version."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("a")])
    lose(rig, "flush")
    assert store.add(c, [user("b")]) == 2
    assert rig.proxy.lost.is_set()
    assert kinds(store, c) == ["appended", "appended"]
    assert store.get(c) == [user("a"), user("b")]
    assert store.add(c, [user("c")]) == 3


def test_an_add_whose_server_was_killed_after_it_ran_is_stored_once(rig: Rig) -> None:
    """add applied and fsynced, then redis-server SIGKILLed before its reply left and
    restarted on the same data: the resend finds the add, nothing is appended twice."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("a")])
    lose(rig, "restart")
    assert store.add(c, [user("b")]) == 2
    assert rig.proxy.lost.is_set()
    assert store.get(c) == [user("a"), user("b")]
    assert len(store.events(c)) == 2


@pytest.mark.parametrize("then", ["flush", "restart"])
def test_a_pop_whose_reply_was_lost_removes_one_message_and_returns_it(rig: Rig, then: str) -> None:
    """pop, reply lost, resent after a flush or a restart: one popped event; the popped
    message is the one the first send removed, not the one before it."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("a"), user("b"), user("c")])
    lose(rig, then)
    assert store.pop(c) == user("c")
    assert rig.proxy.lost.is_set()
    assert store.get(c) == [user("a"), user("b")]
    assert kinds(store, c) == ["appended", "popped"]


def test_a_pop_of_the_last_message_whose_reply_was_lost_returns_it(rig: Rig) -> None:
    """The resend finds the conversation empty: still the message popped, not None."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("only")])
    lose(rig, "flush")
    assert store.pop(c) == user("only")
    assert rig.proxy.lost.is_set()
    assert store.get(c) == []
    assert kinds(store, c) == ["appended", "popped"]


@pytest.mark.parametrize("then", ["flush", "restart"])
def test_a_clear_whose_reply_was_lost_is_written_once(rig: Rig, then: str) -> None:
    """clear, reply lost, resent after a flush or a restart: one cleared marker."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("a")])
    lose(rig, then)
    store.clear(c)
    assert rig.proxy.lost.is_set()
    assert store.version(c) == 2
    assert store.get(c) == []
    assert store.add(c, [user("after")]) == 3


@pytest.mark.parametrize("then", ["flush", "restart"])
def test_a_fork_whose_reply_was_lost_returns_its_version(rig: Rig, then: str) -> None:
    """fork, reply lost, resent: the target's fork is recognised, not refused as a
    target that already holds messages. (On a Cluster the source may sit on another
    master: only the target's is behind the proxy.)"""
    store, target = rig.store, rig.cid("target")
    store.add("source", [user("a"), user("b")])
    lose(rig, then)
    assert store.fork("source", target) == 1
    assert rig.proxy.lost.is_set()
    assert kinds(store, target) == ["forked"]
    assert store.get(target) == [user("a"), user("b")]


@pytest.mark.parametrize("then", ["flush", "restart"])
def test_a_record_whose_reply_was_lost_is_written_once(rig: Rig, then: str) -> None:
    """record (a memo), reply lost, resent after a flush or a restart: one memo event."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("a")])
    lose(rig, then)
    assert store.record(c, "memo", data={"n": 1}) == 2
    assert rig.proxy.lost.is_set()
    assert kinds(store, c) == ["appended", "memo"]


def test_an_import_whose_reply_was_lost_is_written_once(rig: Rig) -> None:
    """import, reply lost, server restarted: the events are there once, and the import
    answers the version it wrote (the change feed too: on a Cluster it is written after
    the commit, in the feed's own slot)."""
    store, c = rig.store, rig.cid("c")
    events = [
        Event(version=v, kind="appended", messages=(user(f"m{v}"),), timestamp=1.0 + v)
        for v in (1, 2, 3)
    ]
    lose(rig, "restart", IMPORT)
    assert store.import_events(c, events) == 3
    assert rig.proxy.lost.is_set()
    assert [e.version for e in store.events(c)] == [1, 2, 3]
    assert [(ch.conversation_id, ch.version) for ch in store.tail()] == [(c, 1), (c, 2), (c, 3)]


def test_writes_chained_in_one_batch_whose_replies_were_lost_are_stored_once(rig: Rig) -> None:
    """Many concurrent adds to one conversation (one pipeline, chained), replies lost
    mid-run and the cache flushed: every add is stored exactly once."""
    store, c = rig.store, rig.cid("c")
    store.add(c, [user("start")])
    lose(rig, "flush")
    workers = [Worker(lambda i=i: store.add(c, [user(f"m{i}")])) for i in range(16)]
    for w in workers:
        w.start()
    versions = sorted(w.outcome(timeout=60) for w in workers)
    assert versions == list(range(2, 18))
    assert rig.proxy.lost.is_set()
    stored = [m["content"] for m in store.get(c)]
    assert sorted(stored) == sorted(["start", *(f"m{i}" for i in range(16))])
    assert store.version(c) == 17
