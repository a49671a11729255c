"""The append lane answers a msgpack add as the app would: every check, every refusal.

The connection takes ``POST .../messages`` with a msgpack body itself
(`memoryd.server.appends`); whatever it does not admit at its head goes to the app.
Requests are written byte for byte on raw sockets, over TCP (where the token and the
Host count) and over the Unix socket.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import codec
from memoryd.messages import user
from memoryd.server.application import create_app
from memoryd.server.calls import ServerContext
from memoryd.server.config import ServerConfig
from memoryd.server.lane import FastLane
from memoryd.server.metrics import Metrics
from memoryd.server.stores import StoreRegistry, lmdb_stores
from tests.server.daemon import TOKEN, Daemon
from tests.server.test_fast_lane import _exchange
from tests.server.test_security import wait_until

_MSGPACK_BODY = (b"content-type", b"application/msgpack")
_ACCEPT = (b"accept", b"application/msgpack")
_HOST = (b"host", b"127.0.0.1")
_BEARER = (b"authorization", b"Bearer " + TOKEN.encode())


def _body(**fields: Any) -> bytes:
    return codec.pack_wire(fields, trusted=True)


def _head(target: bytes, headers: list[tuple[bytes, bytes]], length: int) -> bytes:
    head = b"POST " + target + b" HTTP/1.1\r\n"
    head += b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    return head + b"content-length: %d\r\n\r\n" % length


def _tcp(daemon: Daemon) -> socket.socket:
    host, port = daemon.http.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def _post(
    daemon: Daemon,
    cid: str,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, bytes, bytes]:
    """POST ``body`` to ``cid``'s messages over TCP: status, head, body."""
    sent = [_MSGPACK_BODY, _ACCEPT, _HOST, _BEARER] if headers is None else headers
    target = b"/v1/conversations/" + cid.encode() + b"/messages"
    with _tcp(daemon) as sock:
        return _exchange(sock, _head(target, sent, len(body)) + body)


def _decoded(head: bytes, body: bytes) -> Any:
    if b"content-type: application/msgpack" in head:
        return codec.unpack_wire(body)
    return json.loads(body)


def test_an_add_is_written_and_answered_with_its_version(daemon: Daemon) -> None:
    """The version comes back as msgpack (or JSON, as the client asked), and the
    messages are stored."""
    status, head, body = _post(daemon, "al-ok", _body(messages=[user("one")]))
    assert status == 200, body
    assert _decoded(head, body) == {"version": 1}
    headers = [_MSGPACK_BODY, (b"accept", b"application/json"), _HOST, _BEARER]
    status, head, body = _post(daemon, "al-ok", _body(messages=[user("two")]), headers)
    assert status == 200, body
    assert b"content-type: application/json" in head
    assert json.loads(body) == {"version": 2}
    assert daemon.connect().get("al-ok") == [user("one"), user("two")]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([_MSGPACK_BODY, _HOST, (b"authorization", b"Bearer wrong"), _BEARER], 401),
        ([_MSGPACK_BODY, _HOST], 401),
        ([_MSGPACK_BODY, (b"host", b"evil.example"), _BEARER], 403),
        ([_MSGPACK_BODY, _HOST, _BEARER, (b"origin", b"http://evil.example")], 403),
        ([_MSGPACK_BODY, _HOST, (b"authorization", b"Bearer  " + TOKEN.encode())], 200),
        ([(b"content-type", b"application/json"), _HOST, _BEARER], 200),
    ],
)
def test_an_add_is_admitted_or_refused_as_the_guard_does(
    daemon: Daemon, headers: list[tuple[bytes, bytes]], status: int
) -> None:
    """A refused add writes nothing; an admitted one is written, whichever way took it."""
    cid = f"al-guard-{status}-{len(headers)}-{abs(hash(tuple(headers)))}"
    message = [user("m")]
    is_json = (b"content-type", b"application/json") in headers
    body = json.dumps({"messages": message}).encode() if is_json else _body(messages=message)
    got, _, answer = _post(daemon, cid, body, headers)
    assert got == status, answer
    assert daemon.connect().version(cid) == (1 if status == 200 else 0)


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (b"\xc1", 400, "ValueError"),  # not msgpack
        (codec.pack_wire([1, 2], trusted=True), 400, "ValueError"),  # not an object
        (_body(messages=[user("m")], colour="red"), 400, "ValueError"),  # unknown field
        (_body(idempotency_key="k"), 400, "ValueError"),  # no messages
        (_body(messages=[{"role": "nobody", "content": "m"}]), 422, "InvalidMessage"),
        (_body(messages="m"), 422, "InvalidMessage"),
        (_body(messages=[user("m")], expected_version="1"), 400, "ValueError"),
        (_body(messages=[user("m")], idempotency_key=""), 400, "ValueError"),
        (_body(messages=[user("m")], then_clear="al-bad"), 400, "ValueError"),
        (_body(messages=[{} for _ in range(10_001)]), 400, "ValueError"),
    ],
)
def test_a_bad_body_gets_the_apps_4xx_and_writes_nothing(
    daemon: Daemon, body: bytes, status: int, kind: str
) -> None:
    """Every refusal is a 4xx naming the problem, never a 500."""
    got, head, answer = _post(daemon, "al-bad", body)
    assert (got, _decoded(head, answer)["error"]["type"]) == (status, kind), answer
    assert daemon.connect().version("al-bad") == 0


def test_a_body_announced_over_the_limit_is_refused_before_it_is_sent(daemon: Daemon) -> None:
    """A 413 comes back on the head alone: the body is never read."""
    headers = [_MSGPACK_BODY, _HOST, _BEARER]
    with _tcp(daemon) as sock:
        status, _, body = _exchange(
            sock, _head(b"/v1/conversations/al-big/messages", headers, 1 << 40)
        )
    assert status == 413, body


def test_idempotency_keys_and_expected_versions_hold_on_the_lane(daemon: Daemon) -> None:
    """A repeated key answers the first version and writes nothing; a stale expected
    version is a 409 naming both versions."""
    first = _body(messages=[user("m")], idempotency_key="al-key")
    assert _post(daemon, "al-key", first)[0] == 200
    status, head, body = _post(daemon, "al-key", first)
    assert (status, _decoded(head, body)) == (200, {"version": 1})
    status, head, body = _post(daemon, "al-key", _body(messages=[user("n")], expected_version=0))
    error = _decoded(head, body)["error"]
    assert (status, error["type"], error["expected"], error["actual"]) == (
        409,
        "ConflictError",
        0,
        1,
    )
    assert daemon.connect().get("al-key") == [user("m")]


def test_a_pipelined_request_waits_for_the_add_before_it(daemon: Daemon) -> None:
    """An add and a read sent together are answered in order, the read seeing the add."""
    body = _body(messages=[user("piped")])
    head = _head(b"/v1/conversations/al-pipe/messages", [_MSGPACK_BODY, _HOST, _BEARER], len(body))
    read = b"GET /v1/conversations/al-pipe/messages?limit=5 HTTP/1.1\r\n"
    read += b"accept: application/msgpack\r\nhost: 127.0.0.1\r\n"
    read += b"authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n"
    with _tcp(daemon) as sock:
        sock.sendall(head + body + read)
        first, second = _responses(sock, 2)
    assert first[0] == 200 and json.loads(first[1]) == {"version": 1}
    assert second[0] == 200 and codec.unpack_wire(second[1]) == {"messages": [user("piped")]}


def _responses(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """``count`` whole responses read off ``sock`` in order: status and body of each."""
    data = b""
    out: list[tuple[int, bytes]] = []
    while len(out) < count:
        top, found, rest = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.partition(b":")[2])
                for line in top.split(b"\r\n")[1:]
                if line.partition(b":")[0].strip().lower() == b"content-length"
            ),
            -1,
        )
        if found and 0 <= length <= len(rest):
            out.append((int(top.split()[1]), rest[:length]))
            data = rest[length:]
            continue
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return out


def test_an_add_over_the_unix_socket_needs_no_token(daemon: Daemon) -> None:
    """The Unix socket (0600) takes adds without a token, through the lane too."""
    body = _body(messages=[user("u")])
    head = _head(b"/v1/conversations/al-unix/messages", [_MSGPACK_BODY, _HOST], len(body))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(daemon.unix)
        status, _, answer = _exchange(sock, head + body)
    assert status == 200, answer
    assert daemon.connect().version("al-unix") == 1


def test_a_client_gone_before_its_body_arrives_is_counted_and_writes_nothing(
    daemon: Daemon,
) -> None:
    """Announce 1000 bytes, send 10, hang up: ``client_disconnected`` at info, a 499 in
    the metrics, no write."""
    path = "/v1/conversations/al-gone/messages"
    with _tcp(daemon) as sock:
        sock.sendall(_head(path.encode(), [_MSGPACK_BODY, _HOST, _BEARER], 1000) + b"\x81" * 10)
    wait_until(
        lambda: [e for e in daemon.events("client_disconnected") if e["path"] == path],
        timeout=10,
        message="no client_disconnected event",
    )
    assert daemon.connect().version("al-gone") == 0
    metrics = daemon.connect()._daemon._http.request("GET", "/metrics", timeout=30).body
    assert b'memoryd_http_requests_total{method="POST",op="add",status="499"}' in metrics


def test_the_lane_counts_its_adds_in_the_metrics(daemon: Daemon) -> None:
    """Each add the lane answered is counted as an add, with its status."""
    store = daemon.connect()
    try:

        def adds() -> float:
            text = store._daemon._http.request("GET", "/metrics", timeout=30).body.decode()
            for line in text.splitlines():
                if line.startswith(
                    'memoryd_http_requests_total{method="POST",op="add",status="200"}'
                ):
                    return float(line.rsplit(" ", 1)[1])
            return 0.0

        before = adds()
        for i in range(3):
            store.add("al-count", [user(f"m{i}")])
        assert adds() == before + 3
    finally:
        store.close()


def _appends_lane(data: Path) -> Any:
    """The append lane of a daemon app over the data directory ``data`` (no server)."""
    config = ServerConfig(data=data)
    stores = StoreRegistry(lmdb_stores(data, max_message_bytes=1 << 20), max_message_bytes=1 << 20)
    ctx = ServerContext(config=config, stores=stores, metrics=Metrics(stores))
    lane = FastLane.over(create_app(ctx))
    assert lane is not None and lane.appends is not None
    return lane.appends


def _answer_of(appends: Any, pending: Any) -> tuple[int, bytes, bytes]:
    """Start an admitted add on the lane in a fresh event loop; its one answer."""
    answers: list[tuple[int, bytes, bytes]] = []

    async def run() -> None:
        answered = asyncio.Event()

        def done(status: int, media: bytes, answer: bytes) -> None:
            answers.append((status, media, answer))
            answered.set()

        appends.start(pending, done)
        await asyncio.wait_for(answered.wait(), 30)

    asyncio.run(run())
    [answer] = answers
    return answer


def test_an_add_to_a_store_stopped_since_its_head_came_in_is_a_503(tmp_path: Path) -> None:
    """The lane writes to the store it found at the head; stopped meanwhile, the add is
    answered 503 `StoreUnavailable` (clients retry it with the same key), never a 500."""
    appends = _appends_lane(tmp_path)
    store = memoryd.EphemeralStore.start(name="al-stopped")
    body = _body(messages=[user("late")])
    headers = [_MSGPACK_BODY, (b"content-length", b"%d" % len(body))]
    pending = appends.admit(b"/v1/stores/al-stopped/conversations/c/messages", headers, None)
    assert pending is not None
    store.stop()
    pending.body = body
    status, media, answer = _answer_of(appends, pending)
    assert (status, media) == (503, b"application/json")
    assert json.loads(answer)["error"]["type"] == "StoreUnavailable"


_HOLD_WRITE_LOCK = """
import sys, lmdb
env = lmdb.open(sys.argv[1], subdir=True, max_dbs=64, create=False)
txn = env.begin(write=True)  # LMDB's writer lock, shared with the store's process
print("held", flush=True)
sys.stdin.read()  # until the test closes stdin
txn.abort()
env.close()
"""


def test_an_add_its_store_does_not_confirm_in_time_is_a_504(tmp_path: Path) -> None:
    """A write the store does not confirm within its deadline is answered 504
    `WriteTimeout` (the outcome is unknown; clients retry it with the same key), and
    the retry once the store is free writes it once."""
    appends = _appends_lane(tmp_path)
    data = tmp_path / "slow"
    store = memoryd.LmdbStore.start(data, name="al-slow", call_timeout_s=0.5)
    holder: subprocess.Popen[str] | None = None
    try:
        assert store.add("c", [user("first")]) == 1
        # a real process takes LMDB's writer lock: the store's next commit waits for it
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLD_WRITE_LOCK, str(data)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        body = _body(messages=[user("late")], idempotency_key="k-late")
        headers = [_MSGPACK_BODY, _ACCEPT, (b"content-length", b"%d" % len(body))]
        pending = appends.admit(b"/v1/stores/al-slow/conversations/c/messages", headers, None)
        assert pending is not None
        pending.body = body
        status, media, answer = _answer_of(appends, pending)
        assert (status, media) == (504, b"application/json")
        assert json.loads(answer)["error"]["type"] == "WriteTimeout"
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(30) == 0
        holder = None
        # the retry with the same key: the add is written once, whether or not the
        # timed-out attempt committed once the lock was free
        version = store.add("c", [user("late")], idempotency_key="k-late")
        assert version == 2
        assert [m["content"] for m in store.get("c")] == ["first", "late"]
    finally:
        if holder is not None:
            holder.kill()
            holder.wait(30)
        store.stop()
