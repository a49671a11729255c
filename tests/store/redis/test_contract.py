"""The store contract run against RedisStore: on one redis-server, and on a Redis Cluster.

Both servers are real ``redis-server`` processes on free loopback ports, started once
per module with ``appendonly yes``, ``appendfsync always`` and no RDB snapshots. Every
store gets a key prefix of its own and the servers are flushed after each test.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import memoryd
from memoryd.messages import user
from memoryd.testing import (
    ImportContract,
    JournalSpaceContract,
    RecordContract,
    Store,
    StoreContract,
    StoreFactory,
    texts,
)
from tests.redis_servers import RedisCluster, RedisServer


def _factory(url: str, **defaults: Any) -> StoreFactory:
    counter = itertools.count()
    run = uuid.uuid4().hex[:8]

    def make(**options: Any) -> Store:
        options.setdefault("prefix", f"t-{run}-{next(counter)}")
        for key, value in defaults.items():
            options.setdefault(key, value)
        store: Store = memoryd.RedisStore.start(url, **options)
        return store

    return make


class TestRedisStore(StoreContract, RecordContract, ImportContract, JournalSpaceContract):
    """Every contract behaviour, on a single durable redis-server."""

    @pytest.fixture
    def make_store(self, redis_server: RedisServer) -> Iterator[StoreFactory]:
        yield _factory(redis_server.url)
        memoryd.shutdown()
        redis_server.flush()


class TestRedisClusterStore(StoreContract, RecordContract, ImportContract, JournalSpaceContract):
    """Every contract behaviour, on a three-master Redis Cluster (detected, not told)."""

    @pytest.fixture
    def make_store(self, redis_cluster: RedisCluster) -> Iterator[StoreFactory]:
        yield _factory(redis_cluster.url)
        memoryd.shutdown()
        redis_cluster.flush()

    def test_cluster_is_detected(self, store: Store) -> None:
        """A store started on a cluster node's URL talks to the Cluster."""
        assert store.stats()["cluster"] is True

    def test_conversations_spread_over_every_master(
        self, store: Store, redis_cluster: RedisCluster
    ) -> None:
        """Conversations land on all three masters, and each one's keys share one slot."""
        ids = [f"spread-{i}" for i in range(30)]
        for cid in ids:
            store.add(cid, [user(cid)])
        holding = 0
        for node in redis_cluster.nodes:
            client = node.client()
            try:
                keys = [k.decode() for k in client.scan_iter(match="*:m", count=1000)]
                holding += bool(keys)
                for key in keys:
                    assert client.exists(key[:-1] + "s") == 1  # the stream is on this node
            finally:
                client.close()
        assert holding == 3
        assert store.conversations(prefix="spread-") == sorted(ids)

    def test_feed_merges_every_master_in_commit_order(self, store: Store) -> None:
        """tail lists writes to conversations on different masters in the order made."""
        ids = [f"order-{i}" for i in range(12)]
        for round_ in range(2):
            for cid in ids:
                store.add(cid, [user(f"{cid}/{round_}")])
        changes = store.tail()
        assert [c.position for c in changes] == list(range(1, 25))
        assert [texts(c.messages)[0] for c in changes] == [
            f"{cid}/{r}" for r in range(2) for cid in ids
        ]


class TestRedisStartErrors:
    """RedisStore.start refuses bad options with errors that say what to do."""

    @pytest.mark.parametrize(
        "url",
        ["", "http://localhost:6379", "localhost:6379", None, 6379, b"redis://x"],
    )
    def test_bad_url_is_refused(self, url: Any) -> None:
        """A url without a redis://, rediss:// or unix:// scheme raises ValueError."""
        with pytest.raises(ValueError, match="url must be"):
            memoryd.RedisStore.start(url, cluster=False)

    @pytest.mark.parametrize("prefix", ["", "a{b}", "a*", "with space", "x" * 65, None, 3])
    def test_bad_prefix_is_refused(self, prefix: Any) -> None:
        """A prefix that could break hash tags or SCAN patterns raises ValueError."""
        with pytest.raises(ValueError, match="prefix must be"):
            memoryd.RedisStore.start("redis://127.0.0.1:1/0", prefix=prefix, cluster=False)

    @pytest.mark.parametrize("count", [-1, 1.5, "2", True])
    def test_bad_wait_replicas_is_refused(self, count: Any) -> None:
        """wait_replicas must be an int >= 0."""
        with pytest.raises(ValueError, match="wait_replicas"):
            memoryd.RedisStore.start("redis://127.0.0.1:1/0", wait_replicas=count, cluster=False)

    def test_bad_cluster_flag_is_refused(self) -> None:
        """cluster must be True, False or None."""
        with pytest.raises(ValueError, match="cluster must be"):
            memoryd.RedisStore.start("redis://127.0.0.1:1/0", cluster="yes")  # type: ignore[arg-type]

    def test_unreachable_server_without_cluster_flag(self, tmp_path: Path) -> None:
        """Detecting the mode needs the server: unreachable raises StoreUnavailable."""
        from tests.redis_servers import free_port

        url = f"redis://127.0.0.1:{free_port()}/0"
        with pytest.raises(memoryd.StoreUnavailable, match="cannot reach Redis"):
            memoryd.RedisStore.start(url, call_timeout_s=1.0)
        assert memoryd.whereis(f"redis:{url}/memoryd") is None

    def test_password_is_not_in_the_name_or_stats(self, redis_server: RedisServer) -> None:
        """A URL's password never shows in the default name, the url property or stats."""
        client = redis_server.client()
        try:
            client.config_set("requirepass", "s3cret")
            url = f"redis://:s3cret@127.0.0.1:{redis_server.port}/0"
            store = memoryd.RedisStore.start(url, prefix=f"pw-{uuid.uuid4().hex[:6]}")
            store.add("c", [user("a")])
            assert "s3cret" not in store.name
            assert "s3cret" not in store.url
            assert "s3cret" not in repr(store.stats())
            memoryd.shutdown()
        finally:
            authed = redis.Redis(host="127.0.0.1", port=redis_server.port, password="s3cret")
            authed.config_set("requirepass", "")
            authed.close()
            client.close()
