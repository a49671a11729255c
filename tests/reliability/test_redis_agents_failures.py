"""Supervised agents on a RedisStore while redis-server fails under them: killed mid-run,
hung, restarted without its data, flushed by someone else, at its maxmemory.

Each test starts its own redis-server (``appendonly yes``, ``appendfsync always``) and
an `AgentSystem` on a `RedisStore` there, as a user running agents on Redis does.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import memoryd
import supervisors
from memoryd.agents import AgentSystem
from tests.agents._agents import Gate, echo_model, factory, note_tool, start, stepping_model
from tests.helpers import Worker
from tests.redis_servers import RedisServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    started = RedisServer(tmp_path / "redis").start()
    yield started
    started.stop()


def _store(server: RedisServer, **options: Any) -> memoryd.RedisStore:
    return memoryd.RedisStore.start(
        server.url,
        name=f"redis-agents-{uuid.uuid4().hex[:8]}",
        prefix=f"ra-{uuid.uuid4().hex[:8]}",
        cluster=False,
        **options,
    )


def _lost(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "redis_data_lost"]


def test_a_run_whose_redis_dies_mid_steps_fails_typed_and_resumes_once_redis_is_back(
    server: RedisServer, systems: list[AgentSystem]
) -> None:
    """redis-server SIGKILLed while a 3-step run waits in its second tool: the caller gets
    a memoryd error (no raw redis exception) within the store's deadline, calls and acalls
    during the outage do too, the instance lives on, and once Redis is back the run is
    pending, is resumed without running its journaled first tool again, and the turn is
    stored once."""
    store = _store(server, call_timeout_s=1.0)
    gate, log = Gate(), []
    tool = note_tool(log, gate_at=1, gate=gate)
    system = start(
        systems,
        {"w": factory(store, lambda: stepping_model(3), tool), "e": factory(store, echo_model)},
        store=store,
        call_timeout_s=30.0,
    )
    assert system.call("e", "a", "hi").text == "echo: hi"
    caller = Worker(lambda: system.call("w", "k", "go", request_id="r1"))
    caller.start()
    assert gate.arrived.acquire(timeout=10)
    server.kill()
    gate.release.set()
    with pytest.raises(memoryd.StoreUnavailable):
        caller.outcome(timeout=30)
    with pytest.raises(memoryd.StoreUnavailable):
        system.call("e", "a", "during")
    with pytest.raises(memoryd.StoreUnavailable):
        asyncio.run(system.acall("e", "a", "during"))
    server.start()
    (pending,) = system.pending_runs()
    assert pending.orphaned and pending.conversation_id == "w/k"
    assert system.resume(pending.run_id).text == "done 3 for go"
    assert system.call("w", "k", "go", request_id="r1").text == "done 3 for go"
    assert log.count("0") == 1  # journaled before the kill: never run again
    assert [len(e.messages) for e in store.events("w/k")] == [8]
    assert system.call("e", "a", "after").text == "echo: after"
    assert system.pending_runs() == []


def test_a_redis_restarted_without_its_data_is_reported_not_served_silently(
    server: RedisServer, systems: list[AgentSystem]
) -> None:
    """An instance's memory is in Redis; redis-server is SIGKILLed and restarted on the
    same port with an empty data directory. The next call is answered (from an empty
    memory), but the store logs ``redis_data_lost`` as an error, once, and counts it in
    ``stats()["data_lost"]``. A restart with its data (the control) reports nothing."""
    store = _store(server, call_timeout_s=2.0)
    system = start(systems, {"e": factory(store, echo_model)}, store=store)
    system.call("e", "a", "my name is Alice")
    server.kill()
    server.start()  # with its data: nothing lost
    with capture_logs() as logs:
        system.call("e", "a", "still here")
    assert _lost(logs) == []
    assert len(store.get("e/a")) == 4
    server.kill()
    shutil.rmtree(server.directory)
    server.directory.mkdir()
    server.start()  # empty
    with capture_logs() as logs:
        assert system.call("e", "a", "what is my name?").text == "echo: what is my name?"
        system.call("e", "a", "and now?")
    (lost,) = _lost(logs)
    assert lost["log_level"] == "error"
    assert "FLUSHALL" in lost["hint"]
    assert store.stats()["data_lost"] == 1
    assert len(store.get("e/a")) == 4  # the two calls after the loss


def test_a_flushall_by_someone_else_is_reported_at_the_next_write(
    server: RedisServer, systems: list[AgentSystem]
) -> None:
    """Someone runs FLUSHALL while the connections stay up: no reconnect tells the store,
    but the instance's next turn finds its conversation at a lower version than this
    process wrote, and the store reports ``redis_data_lost`` once."""
    store = _store(server, call_timeout_s=2.0)
    system = start(systems, {"e": factory(store, echo_model)}, store=store)
    system.call("e", "a", "one")
    system.call("e", "a", "two")
    client = server.client()
    try:
        client.flushall()
    finally:
        client.close()
    with capture_logs() as logs:
        system.call("e", "a", "three")
        system.call("e", "a", "four")
    (lost,) = _lost(logs)
    assert lost["log_level"] == "error"
    assert store.stats()["data_lost"] == 1


def test_a_redis_at_its_maxmemory_refuses_runs_without_crashing_the_store(
    server: RedisServer, systems: list[AgentSystem]
) -> None:
    """Redis at ``maxmemory`` with ``noeviction``: every call fails with a StorageError
    saying Redis is out of memory and that nothing was written; the store's actor is the
    same incarnation throughout (no crash loop, no restart), the instance lives on, and
    once memory is raised the next call is answered and nothing is left pending."""
    store = _store(server, call_timeout_s=2.0)
    system = start(systems, {"e": factory(store, echo_model)}, store=store)
    assert system.call("e", "a", "before").text == "echo: before"
    actor = supervisors.whereis(store.name)
    assert actor is not None
    client = server.client()
    try:
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)
        for n in range(20):
            with pytest.raises(memoryd.StorageError, match=r"out of memory.*nothing was written"):
                system.call("e", "a", f"refused {n}")
        with pytest.raises(memoryd.StorageError, match="out of memory"):
            store.add("direct", [{"role": "user", "content": "x"}])
        assert supervisors.whereis(store.name) is actor
        assert [m["content"] for m in store.get("e/a")] == ["before", "echo: before"]
        client.config_set("maxmemory", 0)
    finally:
        client.close()
    assert system.call("e", "a", "after").text == "echo: after"
    assert supervisors.whereis(store.name) is actor
    assert system.pending_runs() == []
    assert [i.incarnations for i in system.instances()] == [1]


def test_at_its_maxmemory_calls_stop_before_their_tool_steps(
    server: RedisServer, systems: list[AgentSystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis at ``maxmemory``: the first call runs its tool, then its journal write is
    refused; the calls after it stop before their tool step (`refuses_writes`, read
    without a round trip, says yes after a refusal) with `DiskFull`, so 20 calls run the
    tool once, not 20 times. The hint ends once its time is up, and a write that goes
    through clears it. (The hint lasts `OUT_OF_MEMORY_HINT_S`; the test lengthens it so
    a slow machine cannot outlast it, then sets it to nothing to show its end.)"""
    from memoryd.store.redis import engine

    monkeypatch.setattr(engine, "OUT_OF_MEMORY_HINT_S", 600.0)
    store = _store(server, call_timeout_s=2.0)
    ran: list[Any] = []
    system = start(
        systems, {"t": factory(store, lambda: stepping_model(1), note_tool(ran))}, store=store
    )
    assert system.call("t", "a", "before").text == "done 1 for before"
    assert not store.refuses_writes()
    client = server.client()
    try:
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", 1)
        with pytest.raises(memoryd.StorageError, match="out of memory"):
            system.call("t", "a", "refused 0")
        assert store.refuses_writes()
        for n in range(1, 20):
            with pytest.raises(memoryd.DiskFull, match="or its Redis is out of memory"):
                system.call("t", "a", f"refused {n}")
        assert ran == ["0", "0"]
        monkeypatch.setattr(engine, "OUT_OF_MEMORY_HINT_S", 0.0)  # the hint's time is up
        assert not store.refuses_writes()  # so the next write asks Redis again
        monkeypatch.setattr(engine, "OUT_OF_MEMORY_HINT_S", 600.0)
        assert store.refuses_writes()  # nothing went through meanwhile
        client.config_set("maxmemory", 0)
    finally:
        client.close()
    store.add("direct", [{"role": "user", "content": "memory is back"}])
    assert not store.refuses_writes()
    assert system.call("t", "a", "after").text == "done 1 for after"
    assert system.pending_runs() == []
