"""Reads on an event loop never wait: a restarting store sends them to a thread.

`StoreHandle.reads_inline` says yes while the store runs, but the store may start
restarting right after. A read made `without_waiting` then raises `WouldWait` at
once instead of holding the loop until the store is back. The restart is held
open by the store actor's test hook, so each check runs while it is surely down.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

import memoryd
from memoryd import messages as msgs
from memoryd.server.application import create_app
from memoryd.server.calls import ServerContext
from memoryd.server.config import ServerConfig
from memoryd.server.metrics import Metrics
from memoryd.server.stores import StoreRegistry
from memoryd.store import actor as store_actor
from memoryd.store import engines
from memoryd.store.handle import StoreHandle, WouldWait, without_waiting
from memoryd.wire import DEFAULT_STORE_NAME
from supervisors import kill
from tests.helpers import wait_until


class _HeldRestart:
    """Holds the next start of store ``name`` in its ``init`` until released."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, point: str, name: str) -> None:
        if point == "init" and name == self.name and not self.release.is_set():
            self.holding.set()
            self.release.wait(20)


@pytest.fixture
def held() -> Iterator[_HeldRestart]:
    hold = _HeldRestart("inline-test")
    yield hold
    hold.release.set()
    store_actor.fault_hook = None


def _crash_and_hold(store: StoreHandle, hold: _HeldRestart) -> None:
    """Crash the store's actor; return once its restart is held in ``init``."""
    store_actor.fault_hook = hold
    kill(store.name, "test")
    assert hold.holding.wait(10), "the store did not begin to restart"


def test_a_read_without_waiting_raises_while_the_store_restarts(
    tmp_path: Path, held: _HeldRestart
) -> None:
    store = memoryd.LmdbStore.start(tmp_path / "d", name=held.name, call_timeout_s=10.0)
    store.add("c", [msgs.user("kept")])
    with without_waiting():
        assert store.get("c", limit=5) == [msgs.user("kept")]
    _crash_and_hold(store, held)
    with without_waiting(), pytest.raises(WouldWait, match="restarting"):
        store.get("c", limit=5)
    with without_waiting(), pytest.raises(WouldWait):
        store.version("c")
    assert not held.release.is_set()  # answered while the restart was still held
    waited: list[Any] = []
    reader = threading.Thread(target=lambda: waited.append(store.get("c", limit=5)))
    reader.start()  # an ordinary read waits for the store instead
    held.release.set()
    reader.join(15)
    assert waited == [[msgs.user("kept")]]
    store.stop()


def test_the_daemon_answers_other_requests_while_an_inline_read_waits(
    tmp_path: Path,
) -> None:
    """A get while the store restarts is served from a worker thread once the store is
    back; the loop answers other requests meanwhile."""
    hold = _HeldRestart(DEFAULT_STORE_NAME)
    data = tmp_path / "d"
    data.mkdir()
    config = ServerConfig(data=data)
    stores = StoreRegistry(data, max_message_bytes=config.max_message_bytes)
    default = stores.start_default()
    default.add("c", [msgs.user("kept")])
    app = create_app(ServerContext(config=config, stores=stores, metrics=Metrics(stores)))

    async def call(method: str, path: str, query: bytes = b"") -> tuple[int, Any]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "server": None,
            "client": None,
            "headers": [(b"host", b"memoryd"), (b"accept", b"application/msgpack")],
        }
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)
        body = b"".join(m.get("body", b"") for m in sent[1:])
        kind = dict(sent[0]["headers"]).get(b"content-type", b"")
        return sent[0]["status"], msgpack.unpackb(body) if kind.endswith(b"msgpack") else body

    async def main() -> tuple[Any, Any, bool]:
        async with asyncio.timeout(30):
            _crash_and_hold(default, hold)
            get = asyncio.create_task(call("GET", "/v1/conversations/c/messages", b"limit=5"))
            health = await call("GET", "/healthz")  # served while the get waits
            still_held = not hold.release.is_set() and not get.done()
            hold.release.set()
            return await get, health, still_held

    try:
        got, health, still_held = asyncio.run(main())
    finally:
        hold.release.set()
        store_actor.fault_hook = None
        memoryd.shutdown()
    assert still_held
    assert health[0] in (200, 503)
    assert got == (200, {"messages": [msgs.user("kept")]})


def test_a_read_without_waiting_raises_while_the_map_grows(tmp_path: Path) -> None:
    """A full map is grown only once no reader is inside a transaction; a read that may
    not wait meanwhile raises WouldWait, and the write lands once the reader leaves."""
    store = memoryd.LmdbStore.start(tmp_path / "d", name="growing", map_size=1 << 20)
    store.add("c", [msgs.user("kept")])
    engine = engines.lookup("growing")
    assert engine is not None
    inside, leave = threading.Event(), threading.Event()

    def reader() -> None:
        with engine.reading():
            inside.set()
            leave.wait(20)

    held = threading.Thread(target=reader)
    held.start()
    assert inside.wait(10)
    big = [msgs.user("x" * 600_000), msgs.user("y" * 600_000)]  # past the 1 MiB map
    added: list[int] = []
    writer = threading.Thread(target=lambda: added.append(store.add("big", big)))
    writer.start()
    wait_until(lambda: engine._pausing, timeout=10, message="the map never began to grow")
    with without_waiting(), pytest.raises(WouldWait, match="growing"):
        store.get("c", limit=5)
    assert not added  # the write waits for the growth, which waits for the reader
    leave.set()
    held.join(10)
    writer.join(20)
    assert added == [1]
    assert store.get("c") == [msgs.user("kept")]
    store.stop()
