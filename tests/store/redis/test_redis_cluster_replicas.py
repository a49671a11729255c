"""``wait_replicas`` on a Redis Cluster: every primary a batch wrote to WAITs for its replicas.

One local Cluster for the module: three masters with one replica each (six
redis-servers, ``appendfsync always``). A hung replica is a SIGSTOPped process: it
keeps its connections but acknowledges nothing until SIGCONT. The last test SIGKILLs
a master to show the batch writer following a failover to the promoted replica.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memoryd
from memoryd.store.redis import scripts as redis_scripts
from memoryd.store.redis.engine import RedisEngine
from memoryd.store.requests import Add
from tests.helpers import wait_until
from tests.redis_servers import RedisCluster, RedisServer


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """Three masters, one replica each; a silent master is failed over after 2 s."""
    directory = tmp_path_factory.mktemp("redis-replicas")
    started = RedisCluster(directory, replicas=1, node_timeout_ms=2000).start()
    yield started
    started.stop()


@pytest.fixture
def prefix(cluster: RedisCluster) -> Iterator[str]:
    yield f"r-{uuid.uuid4().hex[:8]}"
    memoryd.shutdown()


def _shard(cluster: RedisCluster, prefix: str, cid: str) -> tuple[RedisServer, RedisServer]:
    """The master of ``cid``'s slot and its one replica. Right after the cluster formed
    (or a failover), a replica's own INFO may still name another master for a moment, so
    the topology is read until each replica names one master (10 s at most)."""
    key = redis_scripts.conv_keys(prefix, cid).stream
    seen: list[tuple[RedisServer, list[RedisServer]]] = []

    def one_replica() -> bool:
        seen.append(cluster.shard_of(key))
        return len(seen[-1][1]) == 1

    wait_until(
        one_replica,
        timeout=10.0,
        interval=0.05,
        message=f"the master of {key!r} never had exactly one replica: {cluster.topology()}",
    )
    master, (replica,) = seen[-1]
    return master, replica


def _one_per_master(cluster: RedisCluster, prefix: str) -> dict[int, str]:
    """A conversation id on each master, by the master's port."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < 3:
        cid = f"c{i}"
        found.setdefault(_shard(cluster, prefix, cid)[0].port, cid)
        i += 1
    return found


@pytest.fixture
def hung_replica(cluster: RedisCluster, prefix: str) -> Iterator[tuple[str, list[str]]]:
    """A conversation on each master (mapped first: a hung node answers no INFO), and
    the one whose master's replica is SIGSTOPped for the test."""
    cids = list(_one_per_master(cluster, prefix).values())
    _, replica = _shard(cluster, prefix, cids[0])
    replica.pause()
    try:
        yield cids[0], cids
    finally:
        replica.resume()
        wait_until(cluster.replicas_in_sync, timeout=30, message="replica did not catch up")


def test_every_primary_written_waits_for_its_replica(cluster: RedisCluster, prefix: str) -> None:
    """A batch over all three masters returns once each master's replica holds its writes."""
    cids = list(_one_per_master(cluster, prefix).values())
    engine = RedisEngine(
        cluster.url, prefix=prefix, cluster=True, call_timeout_s=5.0, wait_replicas=1
    )
    try:
        batch = [Add(cid=cid, messages=(user(cid),)) for cid in cids]
        assert engine.write_batch(batch, 1.0) == [(True, 1)] * 3
    finally:
        engine.close()
    for cid in cids:  # WAIT returned: each replica already has the stream
        _, replica = _shard(cluster, prefix, cid)
        client = replica.client()
        try:
            client.execute_command("READONLY")  # a replica serves its master's slots
            assert client.exists(redis_scripts.conv_keys(prefix, cid).stream) == 1
        finally:
            client.close()


def test_store_add_with_wait_replicas_on_a_cluster(cluster: RedisCluster, prefix: str) -> None:
    """RedisStore.start accepts wait_replicas on a Cluster; adds, pops and tail work."""
    store = memoryd.RedisStore.start(cluster.url, prefix=prefix, wait_replicas=1)
    assert store.stats()["cluster"] is True
    for cid in _one_per_master(cluster, prefix).values():
        assert store.add(cid, [user("a"), user("b")]) == 1
        assert store.pop(cid) == user("b")
    assert len(store.tail()) == 6


def test_hung_replica_fails_the_write_with_write_timeout(
    cluster: RedisCluster, prefix: str, hung_replica: tuple[str, list[str]]
) -> None:
    """Its master's replica acknowledges nothing: WriteTimeout (from WAIT, not the deadline);
    the write is on the primary, and a retry with the same key writes nothing twice."""
    cid, _ = hung_replica
    store = memoryd.RedisStore.start(
        cluster.url, prefix=prefix, wait_replicas=1, call_timeout_s=4.0
    )
    with pytest.raises(memoryd.WriteTimeout, match="0 of 1 replicas acknowledged"):
        store.add(cid, [user("a")], idempotency_key="k")
    assert store.version(cid) == 1
    assert (
        store.add(cid, [user("a")], idempotency_key="k") == 1
    )  # the retry finds its key: not written again
    assert store.version(cid) == 1


def test_hung_replica_fails_only_the_writes_on_its_master(
    cluster: RedisCluster, prefix: str, hung_replica: tuple[str, list[str]]
) -> None:
    """One batch over three masters: only the writes whose master's replica hangs fail."""
    cid, cids = hung_replica
    engine = RedisEngine(
        cluster.url, prefix=prefix, cluster=True, call_timeout_s=2.0, wait_replicas=1
    )
    try:
        results = engine.write_batch([Add(cid=c, messages=(user(c),)) for c in cids], 1.0)
        for c, (ok, value) in zip(cids, results, strict=True):
            if c == cid:
                assert not ok and isinstance(value, memoryd.WriteTimeout)
            else:
                assert (ok, value) == (True, 1)
        assert [engine.version(c) for c in cids] == [1, 1, 1]
    finally:
        engine.close()


def test_writes_ride_through_a_failover(cluster: RedisCluster, prefix: str) -> None:
    """A master is SIGKILLed: its replica takes over and a write sent meanwhile lands
    there, once, within the call timeout; the old master rejoins as a replica.

    Runs last in the module: it changes which node is the master.
    """
    cid = next(
        c for c in _one_per_master(cluster, prefix).values()
        if _shard(cluster, prefix, c)[0] is not cluster.nodes[0]
    )  # fmt: skip
    master, _ = _shard(cluster, prefix, cid)
    store = memoryd.RedisStore.start(cluster.url, prefix=prefix, call_timeout_s=30.0)
    assert store.add(cid, [user("before")], idempotency_key="k1") == 1
    master.kill()
    try:
        assert store.add(cid, [user("during")], idempotency_key="k2") == 2
        assert [m["content"] for m in store.get(cid)] == ["before", "during"]
        assert store.stats()["reconnects"] >= 1
    finally:
        master.start()
        wait_until(cluster.replicas_in_sync, timeout=30, message="old master did not rejoin")
