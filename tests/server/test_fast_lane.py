"""The fast lane admits exactly what the guard admits, and hands every other request on.

The connection answers a last-N msgpack read itself (`memoryd.server.lane`), checking
the raw header bytes with `Guard.admits`; whatever that does not admit at a glance
goes to the app, whose guard names the problem or serves the request. Requests are
written byte for byte on raw sockets, over TCP (where the token and the Host count).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

import memoryd
from memoryd import codec
from memoryd.messages import user
from memoryd.server.config import DEFAULT_HEAD_TIMEOUT_S as HEAD_TIMEOUT_S
from memoryd.server.config import ServerConfig
from memoryd.server.http import Guard
from tests.server.daemon import TOKEN, Daemon


def _exchange(sock: socket.socket, head: bytes) -> tuple[int, bytes, bytes]:
    """Send ``head`` and read one whole response: status, head, body."""
    sock.sendall(head)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in top.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(top.split()[1]), top, body


def _get(daemon: Daemon, target: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    host, port = daemon.http.rsplit(":", 1)
    head = b"GET " + target + b" HTTP/1.1\r\n"
    head += b"".join(name + b": " + value + b"\r\n" for name, value in headers) + b"\r\n"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        status, _, body = _exchange(sock, head)
    return status, body


_MSGPACK = (b"accept", b"application/msgpack")
_HOST = (b"host", b"127.0.0.1")
_BEARER = (b"authorization", b"Bearer " + TOKEN.encode())


@pytest.fixture()
def lane_daemon(daemon: Daemon) -> Daemon:
    store = daemon.connect()
    store.add("lane", [user(f"m{i}") for i in range(5)])
    store.close()
    return daemon


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([_MSGPACK, _HOST, _BEARER], 200),
        # spellings the lane does not read, which the guard admits
        ([_MSGPACK, _HOST, (b"authorization", b"Bearer  " + TOKEN.encode())], 200),
        ([_MSGPACK, _HOST, (b"authorization", b"Bearer " + TOKEN.encode() + b" ")], 200),
        ([_MSGPACK, _HOST, _BEARER, (b"authorization", b"Bearer wrong")], 200),
        ([_MSGPACK, (b"host", b"localhost:1"), _BEARER], 200),
        # refusals: the first header of a name counts, as in the app
        ([_MSGPACK, _HOST, (b"authorization", b"Bearer wrong"), _BEARER], 401),
        ([_MSGPACK, _HOST, (b"authorization", b"bearer " + TOKEN.encode())], 401),
        ([_MSGPACK, _HOST, (b"authorization", b"Bearer " + TOKEN.encode()[:-1])], 401),
        ([_MSGPACK, _HOST], 401),
        ([_MSGPACK, (b"host", b"evil.example"), _BEARER], 403),
        ([_MSGPACK, _HOST, (b"host", b"evil.example"), _BEARER], 200),
        ([_MSGPACK, (b"host", b"evil.example"), _HOST, _BEARER], 403),
        ([_MSGPACK, _HOST, _BEARER, (b"origin", b"http://evil.example")], 403),
    ],
)
def test_a_last_n_read_is_admitted_or_refused_as_the_guard_does(
    lane_daemon: Daemon, headers: list[tuple[bytes, bytes]], status: int
) -> None:
    """Every answer is the guard's: 200 with the messages, or its refusal."""
    got, body = _get(lane_daemon, b"/v1/conversations/lane/messages?limit=3", headers)
    assert got == status, body
    if status == 200:
        answer = codec.unpack_wire(body)
        assert answer == {"messages": [user("m2"), user("m3"), user("m4")]}


@pytest.mark.parametrize("cid", [b"a!b", b"a%21b", b"x(1)", b"caf%C3%A9"])
def test_a_path_outside_what_clients_send_is_read_by_the_app_alike(
    daemon: Daemon, cid: bytes
) -> None:
    """Bytes the lane does not read in a path are read by the app: the same messages."""
    name = {b"a!b": "a!b", b"a%21b": "a!b", b"x(1)": "x(1)", b"caf%C3%A9": "café"}[cid]
    store = daemon.connect()
    store.add(name, [user("one"), user("two")])
    expected = store.get(name, limit=1)
    store.close()
    status, body = _get(
        daemon, b"/v1/conversations/" + cid + b"/messages?limit=1", [_MSGPACK, _HOST, _BEARER]
    )
    assert status == 200, body
    assert codec.unpack_wire(body) == {"messages": expected}


def test_the_guard_admits_no_token_it_would_strip(tmp_path: Path) -> None:
    """A token with surrounding spaces has no exact header spelling: the lane admits
    nothing for it (the guard itself decides), and a latin-1 token is compared as sent."""
    spaced = Guard(
        lambda *_: None,  # type: ignore[arg-type,return-value]
        ServerConfig(data=tmp_path, listen=("127.0.0.1", 1), token=" tok "),
    )
    assert not spaced.admits(None, b"127.0.0.1", b"Bearer  tok ", True, b"/v1/x")
    assert not spaced.admits(None, b"127.0.0.1", b"Bearer tok", True, b"/v1/x")
    latin = Guard(
        lambda *_: None,  # type: ignore[arg-type,return-value]
        ServerConfig(data=tmp_path, listen=("127.0.0.1", 1), token="t\xe9"),
    )
    assert latin.admits(None, b"127.0.0.1", b"Bearer t\xe9", True, b"/v1/x")
    assert not latin.admits(None, b"127.0.0.1", b"Bearer t\xc3\xa9", True, b"/v1/x")
    assert not latin.admits(None, b"127.0.0.1", b"Bearer t\xe9", True, b"/v1/%FF")
    assert latin.admits(None, None, None, False, b"/v1/x")  # the Unix socket: no token


def test_an_idle_connection_after_a_lane_answer_is_closed_by_the_head_timer() -> None:
    """After a read the lane answered, the next head is due within the head timeout: an
    idle connection gets its 408 then, long before uvicorn's keep-alive would end it (a
    daemon with ``--head-timeout 1.5``: the test waits for it)."""
    with Daemon(tcp=True, extra=("--head-timeout", "1.5")).start() as running:
        store = running.connect()
        store.add("lane", [user(f"m{i}") for i in range(5)])
        store.close()
        host, port = running.http.rsplit(":", 1)
        head = b"GET /v1/conversations/lane/messages?limit=2 HTTP/1.1\r\n"
        head += b"accept: application/msgpack\r\nhost: 127.0.0.1\r\n"
        head += b"authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n"
        with socket.create_connection((host, int(port)), timeout=HEAD_TIMEOUT_S + 30) as sock:
            status, top, _ = _exchange(sock, head)
            assert status == 200
            assert b"application/msgpack" in top
            started = time.monotonic()
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert 1.0 <= waited < HEAD_TIMEOUT_S  # uvicorn's keep-alive is 30 s


def test_the_lane_counts_its_answers_in_the_metrics(lane_daemon: Daemon) -> None:
    """A read the lane answered is counted as a get, as the app counts it."""
    store = lane_daemon.connect()
    try:
        before = _gets(store)
        for _ in range(3):
            assert store.get("lane", limit=2) == [user("m3"), user("m4")]
        assert _gets(store) == before + 3
    finally:
        store.close()


def _gets(store: memoryd.RemoteStore) -> float:
    text = store._daemon._http.request("GET", "/metrics", timeout=30).body.decode()
    for line in text.splitlines():
        if line.startswith("memoryd_http_requests_total{") and all(
            label in line for label in ('op="get"', 'status="200"', 'method="GET"')
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
