"""The Redis system-message index: a conversation written before the index existed keeps
working (one full read), and its next write, from any daemon, fills the index."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.events import Event
from memoryd.messages import assistant, system, user
from memoryd.store.redis import scripts as redis_scripts
from memoryd.store.redis.engine import RedisEngine
from memoryd.store.requests import Add, Import, Pop
from memoryd.testing import texts
from tests.redis_servers import RedisServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    started = RedisServer(tmp_path / "redis").start()
    yield started
    started.stop()


def _engine(server: RedisServer, prefix: str) -> RedisEngine:
    return RedisEngine(server.url, prefix=prefix, cluster=False, call_timeout_s=5.0)


def test_an_old_conversation_reads_right_and_is_indexed_by_its_next_write(
    server: RedisServer,
) -> None:
    """Index keys and markers removed (as before the index existed): the windowed read
    falls back to a full read with the same answer; a fresh daemon's next add, pop or
    import rebuilds the index and marks it."""
    prefix = f"old-{uuid.uuid4().hex[:8]}"
    first = _engine(server, prefix)
    client = server.client()
    try:
        batch = [
            Add(cid=cid, messages=(system("persona"), user("u1"), system("late"), user("u2")))
            for cid in ("add", "pop", "import")
        ]
        assert first.write_batch(batch, 1.0) == [(True, 1)] * 3
        for cid in ("add", "pop", "import"):
            client.delete(redis_scripts.system_key(prefix, cid))
            client.hdel(redis_scripts.conv_keys(prefix, cid).meta, "y")
            assert texts(first.history_with_system(cid, 1)) == ["persona", "late", "u2"]
    finally:
        first.close()
    second = _engine(server, prefix)  # another daemon: no cached view of these
    try:
        later = Event(version=2, kind="appended", messages=(assistant("a"),), timestamp=1.0)
        results = second.write_batch(
            [
                Add(cid="add", messages=(user("u3"),)),
                Pop(cid="pop"),
                Import(cid="import", events=(later,)),
            ],
            2.0,
        )
        assert [ok for ok, _ in results] == [True, True, True]
        assert texts(second.history_with_system("add", 1)) == ["persona", "late", "u3"]
        assert texts(second.history_with_system("pop", 1)) == ["persona", "late"]
        assert texts(second.history_with_system("import", 1)) == ["persona", "late", "a"]
        for cid in ("add", "pop", "import"):
            assert client.hget(redis_scripts.conv_keys(prefix, cid).meta, "y") == b"1"
            assert client.zcard(redis_scripts.system_key(prefix, cid)) == 2
    finally:
        second.close()
        client.close()
