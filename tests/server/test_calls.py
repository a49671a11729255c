"""How the daemon runs store calls: a small read on the loop goes to a worker thread
when the store cannot answer at once, and the loop serves other requests meanwhile.

The app runs in-process, driven by ASGI messages, so a test can hold the default
store's restart open (`tests.store.restart_hold`) while requests are in flight.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
from starlette.types import ASGIApp, Message

import memoryd
from memoryd import messages as msgs
from memoryd.protocol import DEFAULT_STORE_NAME
from memoryd.server.application import create_app
from memoryd.server.calls import ServerContext
from memoryd.server.config import ServerConfig
from memoryd.server.metrics import Metrics
from memoryd.server.stores import StoreRegistry, lmdb_stores
from memoryd.store import actor as store_actor
from tests.store.restart_hold import HeldRestart, crash_and_hold


async def asgi_request(app: ASGIApp, method: str, path: str, query: bytes = b"") -> tuple[int, Any]:
    """One bodiless request through ``app``: its status and its body (msgpack decoded)."""
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
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent[1:])
    kind = dict(sent[0]["headers"]).get(b"content-type", b"")
    return sent[0]["status"], msgpack.unpackb(body) if kind.endswith(b"msgpack") else body


def test_the_daemon_answers_other_requests_while_an_inline_read_waits(tmp_path: Path) -> None:
    """A get while the store restarts is served from a worker thread once the store is
    back; the loop answers other requests meanwhile."""
    hold = HeldRestart(DEFAULT_STORE_NAME)
    data = tmp_path / "d"
    data.mkdir()
    config = ServerConfig(data=data)
    mmb = config.max_message_bytes
    stores = StoreRegistry(lmdb_stores(data, max_message_bytes=mmb), max_message_bytes=mmb)
    default = stores.start_default()
    default.add("c", [msgs.user("kept")])
    app = create_app(ServerContext(config=config, stores=stores, metrics=Metrics(stores)))

    async def main() -> tuple[Any, Any, bool]:
        async with asyncio.timeout(30):
            crash_and_hold(default, hold)
            get = asyncio.create_task(
                asgi_request(app, "GET", "/v1/conversations/c/messages", b"limit=5")
            )
            health = await asgi_request(app, "GET", "/healthz")  # served while the get waits
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
