"""What only the Redis store does: redis-server crashes, lost connections, replicas, tokens.

Each test starts its own redis-server (``appendonly yes``, ``appendfsync always``), since
it kills or reconfigures it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from structlog.testing import capture_logs

import memoryd
from memoryd import codec
from memoryd.events import Event, replay, walk_back
from memoryd.store.redis import scripts as redis_scripts
from memoryd.store.redis.engine import RedisEngine
from memoryd.store.redis.plan import View, Views
from memoryd.store.requests import Add, Pop
from tests.helpers import Worker, wait_until
from tests.redis_servers import RedisServer


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    started = RedisServer(tmp_path / "redis").start()
    yield started
    started.stop()


def test_sigkilled_redis_server_loses_no_acknowledged_write(server: RedisServer) -> None:
    """4 writers add until redis-server is SIGKILLed; after a restart every acked add is there.

    The server runs with appendfsync always, so an acknowledgement means the AOF was
    fsynced; writes in flight at the kill may or may not be there, but none twice.
    """
    store = memoryd.RedisStore.start(server.url, call_timeout_s=2.0)
    acked: dict[int, list[int]] = {t: [] for t in range(4)}
    enough = threading.Event()

    def writer(t: int) -> None:
        i = 0
        while True:
            try:
                store.add(f"w{t}", [user(f"{t}-{i}")], idempotency_key=f"{t}-{i}")
            except memoryd.StoreUnavailable:
                return
            acked[t].append(i)
            if sum(len(v) for v in acked.values()) >= 400:
                enough.set()
            i += 1

    workers = [Worker(lambda t=t: writer(t)) for t in range(4)]
    for w in workers:
        w.start()
    assert enough.wait(60)
    server.kill()
    for w in workers:
        w.outcome(timeout=60)
    server.start()
    for t, done in acked.items():
        stored = [m["content"] for m in store.get(f"w{t}")]
        assert stored[: len(done)] == [f"{t}-{i}" for i in done]
        assert len(stored) <= len(done) + 1  # at most the one write in flight at the kill
        assert len(set(stored)) == len(stored)


def test_lost_connection_fails_within_the_deadline_then_recovers(server: RedisServer) -> None:
    """With redis-server down, reads and writes raise StoreUnavailable; once back, they work."""
    store = memoryd.RedisStore.start(server.url, call_timeout_s=1.0)
    store.add("c", [user("before")])
    server.kill()
    with pytest.raises(memoryd.StoreUnavailable):
        store.get("c")
    with pytest.raises(memoryd.StoreUnavailable):
        store.add("c", [user("lost?")], idempotency_key="retry-me")
    server.start()
    assert store.add("c", [user("lost?")], idempotency_key="retry-me") == 2
    assert store.add("c", [user("after")]) == 3
    assert [m["content"] for m in store.get("c")] == ["before", "lost?", "after"]
    assert store.stats()["reconnects"] >= 1


def test_a_resent_pipeline_writes_nothing_twice(server: RedisServer) -> None:
    """The same write token sent twice (a resend after a lost reply) appends once."""
    engine = RedisEngine(server.url, prefix="tok", cluster=False, call_timeout_s=5.0)
    try:
        keys = [*redis_scripts.conv_keys("tok", "c"), *redis_scripts.feed_keys("tok")]
        payload = codec.pack_event_fields(
            version=1, kind="appended", messages=[user("a")], timestamp=1.0
        )
        args = ["token-1", "", "", 0, "", 1, "0", "appended", 1, payload, "1", "63", 256]
        client = engine.client()
        first = client.eval(redis_scripts.WRITE, len(keys), *keys, *args)
        again = client.eval(redis_scripts.WRITE, len(keys), *keys, *args)
        assert [first[0], int(first[1])] == [b"ok", 1]
        assert [again[0], int(again[1])] == [b"dup", 1]
        assert engine.version("c") == 1
        assert len(engine.events("c", 0)) == 1
    finally:
        engine.close()


def _script(
    client: Any, prefix: str, token: str, base: int, *, clear: bool = False, keep: int = 256
) -> list[Any]:
    """One WRITE call appending one message (or clearing) on top of version ``base``."""
    keys = [*redis_scripts.conv_keys(prefix, "c"), *redis_scripts.feed_keys(prefix)]
    kind = "cleared" if clear else "appended"
    messages = [] if clear else [user(token)]
    payload = codec.pack_event_fields(version=base + 1, kind=kind, messages=messages, timestamp=1.0)
    count = 0 if clear else base + 1
    args = [token, "", "", base, "", count, "1" if clear else "0", kind, len(messages),
            payload, "1", "63", keep]  # fmt: skip
    reply = client.eval(redis_scripts.WRITE, len(keys), *keys, *args)
    return [reply[0].decode(), *(int(x) for x in reply[1:])]


def test_a_resend_after_another_daemons_clear_writes_nothing(server: RedisServer) -> None:
    """A write applied, then cleared by another daemon, then resent: dup, not re-added."""
    client = server.client()
    try:
        assert _script(client, "clr", "mine", 0) == ["ok", 1]
        assert _script(client, "clr", "theirs", 1, clear=True) == ["ok", 2]
        assert _script(client, "clr", "mine", 0) == ["dup", 1]
    finally:
        client.close()
    engine = RedisEngine(server.url, prefix="clr", cluster=False, call_timeout_s=5.0)
    try:
        assert engine.history("c", None, None) == (2, [])
    finally:
        engine.close()


def test_write_tokens_are_remembered_for_at_least_keep_writes(server: RedisServer) -> None:
    """Tokens live in two hashes of ``keep`` versions each: a token is recognised until
    its hash's turn comes again (2 * keep versions on), then forgotten."""
    client = server.client()
    try:
        for version in range(1, 8):  # keep=4: versions 1-3 in w0, 4-7 in w1
            assert _script(client, "gen", f"t{version}", version - 1, keep=4) == ["ok", version]
        assert _script(client, "gen", "t1", 0, keep=4) == ["dup", 1]
        assert _script(client, "gen", "t8", 7, keep=4) == ["ok", 8]  # w0's turn: emptied
        assert _script(client, "gen", "t1", 0, keep=4) == ["stale", 8, 1, 8]
        assert _script(client, "gen", "t4", 3, keep=4) == ["dup", 4]
    finally:
        client.close()


def test_stale_view_is_planned_again(server: RedisServer) -> None:
    """Two engines (two daemons) writing one conversation: no lost update, no duplicate."""
    one = RedisEngine(server.url, prefix="two", cluster=False, call_timeout_s=5.0)
    two = RedisEngine(server.url, prefix="two", cluster=False, call_timeout_s=5.0)
    try:
        for i in range(5):
            for engine, name in ((one, "one"), (two, "two")):
                batch = [Add(cid="c", messages=(user(f"{name}-{i}"),))] * 2
                results = engine.write_batch(batch, 1.0)
                assert all(ok for ok, _ in results)
        ((ok, popped),) = one.write_batch([Pop(cid="c")], 1.0)
        assert ok and popped == user("two-4")
        _, history = two.history("c", None, None)
        assert len(history) == 19
        assert one.version("c") == 21
    finally:
        one.close()
        two.close()


def test_a_full_view_cache_drops_no_view_a_round_plans_with(server: RedisServer) -> None:
    """A batch of more new conversations than the writer's view cache holds: the cache is
    emptied before the round reads their views, not while it plans, so every write lands."""
    engine = RedisEngine(server.url, prefix="full", cluster=False, call_timeout_s=5.0)
    try:
        engine.writer.views = Views(size=2)
        engine.writer.views.remember("old-1", View(1, 1, 1))
        engine.writer.views.remember("old-2", View(1, 1, 1))
        cids = ["a", "b", "c"]
        batch = [Add(cid=cid, messages=(user(cid),)) for cid in cids]
        assert engine.write_batch(batch, 1.0) == [(True, 1)] * 3
        assert "old-1" not in engine.writer.views
        assert len(engine.writer.views) == 3
        assert engine.write_batch(batch, 1.0) == [(True, 2)] * 3
        assert [engine.version(cid) for cid in cids] == [2, 2, 2]
    finally:
        engine.close()


def test_wait_replicas_with_a_replica_acknowledges(server: RedisServer, tmp_path: Path) -> None:
    """wait_replicas=1 with a connected replica: adds return and reach the replica."""
    replica = RedisServer(
        tmp_path / "replica", extra=("--replicaof", "127.0.0.1", str(server.port))
    )
    replica.start()
    try:
        primary, copy = server.client(), replica.client()
        try:
            # Connected is not enough: WAIT counts only a replica past its initial sync.
            wait_until(
                lambda: (
                    primary.info("replication").get("slave0", {}).get("state") == "online"
                    and copy.info("replication").get("master_link_status") == "up"
                ),
                timeout=30,
            )
        finally:
            primary.close()
            copy.close()
        store = memoryd.RedisStore.start(server.url, wait_replicas=1)
        assert store.add("c", [user("a")]) == 1
        copy = replica.client()
        try:
            assert copy.exists(redis_scripts.conv_keys("memoryd", "c").stream) == 1
        finally:
            copy.close()
    finally:
        replica.stop()


def test_wait_replicas_without_replicas_raises_write_timeout(server: RedisServer) -> None:
    """wait_replicas=1 with no replica: WriteTimeout that names the replicas."""
    store = memoryd.RedisStore.start(server.url, wait_replicas=1, call_timeout_s=1.0)
    with pytest.raises(memoryd.WriteTimeout, match="replica"):
        store.add("c", [user("a")], idempotency_key="k")
    # The write is on the primary (only not known to be on a replica); under load the
    # actor may still be inside WAIT when the caller's deadline passes.
    wait_until(lambda: store.version("c") == 1, timeout=15)


def test_stores_with_other_prefixes_do_not_see_each_other(server: RedisServer) -> None:
    """Two prefixes on one server are two stores."""
    a = memoryd.RedisStore.start(server.url, prefix="a", name=f"a-{uuid.uuid4().hex}")
    b = memoryd.RedisStore.start(server.url, prefix="a:b", name=f"b-{uuid.uuid4().hex}")
    a.add("c", [user("in a")])
    b.add("c", [user("in b")])
    assert a.conversations() == ["c"]
    assert [m["content"] for m in b.get("c")] == ["in b"]
    assert [c.conversation_id for c in b.tail()] == ["c"]


def test_walk_history_matches_the_reducer() -> None:
    """The pure reverse walk returns what replaying the log gives, for every limit."""
    log = [
        Event(version=1, kind="appended", messages=(user("a"), user("b")), timestamp=1.0),
        Event(version=2, kind="popped", messages=(user("b"),), timestamp=1.0),
        Event(version=3, kind="memo", messages=(), timestamp=1.0, data={"k": 1}),
        Event(version=4, kind="appended", messages=(user("c"), user("d")), timestamp=1.0),
        Event(version=5, kind="popped", messages=(user("d"),), timestamp=1.0),
    ]
    full = replay(log)
    walk = [(e.kind, e.messages) for e in reversed(log)]
    for limit in (None, 0, 1, 2, 3):
        expected = full if limit is None else full[max(0, len(full) - limit) :] if limit else []
        assert walk_back(walk, limit) == expected


def test_commands_are_encoded_as_redis_py_encodes_them() -> None:
    """The write path's RESP encoding is byte for byte redis-py's, for bytes, str and int."""
    from memoryd.store.redis.connections import encode

    commands = [
        ("EVALSHA", "ab" * 20, 2, "k{x}:s", "k{x}:m", b"\x00\xffpayload", -7, "", "h\u00e9"),
        ("WAIT", 1, 5000),
    ]
    reference = redis.Connection().pack_commands(commands)
    assert encode(commands) == b"".join(bytes(part) for part in reference)
    with pytest.raises(TypeError, match="bytes, str or int"):
        encode([("SET", "k", 1.5)])
    with pytest.raises(TypeError, match="bytes, str or int"):
        encode([("SET", "k", True)])


def test_an_outage_is_logged_once_and_its_end_with_how_long(server: RedisServer) -> None:
    """An add waits out a 1.5 s outage (the writer tries again every few tens of ms):
    the log says `redis_unreachable` once, not at every try, and `redis_reachable_again`
    with how long and how many tries once the add goes through."""
    store = memoryd.RedisStore.start(server.url, call_timeout_s=20.0)
    store.add("c", [user("before")])
    with capture_logs() as logs:
        server.kill()
        adding = Worker(lambda: store.add("c", [user("during")], idempotency_key="during"))
        adding.start()
        time.sleep(1.5)
        server.start()
        assert adding.outcome(timeout=60) == 2
    events = [e for e in logs if e["event"].startswith("redis_")]
    assert [e["event"] for e in events] == ["redis_unreachable", "redis_reachable_again"]
    assert events[0]["log_level"] == "warning"
    assert events[1]["down_s"] >= 1.0
    assert events[1]["tries"] >= 5
    assert store.stats()["reconnects"] >= events[1]["tries"]
    assert [m["content"] for m in store.get("c")] == ["before", "during"]
