"""Run journals on Redis leave no key behind: a journaled run's writes take no change-feed
position, and the turn's commit erases its journal (every key of it), as LMDB erases it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis

import memoryd
from memoryd import messages
from memoryd.llm import ScriptedModel
from memoryd.store.redis import scripts as lua
from memoryd.store.requests import HIDDEN_PREFIX
from tests.redis_servers import RedisCluster, RedisServer


@memoryd.tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value-of-{key}"


def _turn(n: int) -> list[Any]:
    calls = [messages.tool_call(f"c{n}-{k}", "lookup", {"key": f"k{k}"}) for k in range(3)]
    return [messages.assistant(tool_calls=[call]) for call in calls] + [f"done {n}"]


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_journaled_runs_leave_no_key_and_no_feed_entry(
    where: str, request: pytest.FixtureRequest
) -> None:
    """Four runs of three tool steps each, on one redis-server and on a Cluster (whose
    feed is written after each commit): the prefix holds the conversation's keys and the
    feed's, the feed one entry per turn; no journal key is left."""
    server: RedisServer | RedisCluster = request.getfixturevalue(
        "redis_server" if where == "server" else "redis_cluster"
    )
    cluster = where == "cluster"
    prefix = f"jk-{uuid.uuid4().hex[:8]}"
    store = memoryd.RedisStore.start(server.url, prefix=prefix, cluster=cluster)
    try:
        agent = memoryd.Agent(
            llm=ScriptedModel([step for n in range(4) for step in _turn(n)]),
            memory=store,
            tools=[lookup],
        )
        for n in range(4):
            assert agent.run(f"job {n}", conversation_id="chat").text == f"done {n}"
        client: Any = (
            redis.RedisCluster.from_url(server.url) if cluster else redis.Redis.from_url(server.url)
        )
        keys = {key.decode() for key in client.scan_iter(match=f"*{prefix}*", count=1000)}
        hidden_tag = HIDDEN_PREFIX.encode().hex()
        assert not [key for key in keys if hidden_tag in key]
        chat = set(lua.erase_keys(prefix, "chat"))
        assert keys - chat == set(lua.feed_keys(prefix))
        feed = client.xrange(lua.feed_keys(prefix)[0])
        assert [bytes.fromhex(fields[b"c"].decode()).decode() for _, fields in feed] == ["chat"] * 4
        assert store.conversations(prefix=HIDDEN_PREFIX, include_empty=True) == []
    finally:
        store.stop()
