"""Hostile and buggy clients against a real daemon: a body that never arrives whole, a
change feed asked past its last position, a feed whose store stops under it.

Each is answered with a 4xx naming the problem (or a stream ended whole), the
connection is never left hanging, nothing is written, and the daemon logs no
unhandled error.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import wait_until
from tests.server.daemon import Daemon

HEAD_TIMEOUT_S = 1.0
"""The daemon's ``--head-timeout`` here: how long a stalled body is waited for."""

_DEADLINE_S = 30.0
"""How long a test waits for the daemon to act (never reached when it works)."""


@pytest.fixture(scope="module")
def quick() -> Iterator[Daemon]:
    """A daemon that gives up on a stalled request after `HEAD_TIMEOUT_S`."""
    extra = ("--fault-injection", "--head-timeout", str(HEAD_TIMEOUT_S))
    with Daemon(extra=extra).start() as running:
        yield running


def _connect(daemon: Daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(_DEADLINE_S)
    sock.connect(daemon.unix)
    return sock


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the daemon sends until it closes the connection (within the deadline)."""
    received = b""
    deadline = time.monotonic() + _DEADLINE_S
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"the daemon kept the connection open; it sent {received[:500]!r}")


def _unhandled(daemon: Daemon) -> list[str]:
    return [
        line
        for line in daemon.stderr_lines
        if "Traceback" in line or '"level": "error"' in line or "Exception in ASGI" in line
    ]


@pytest.mark.parametrize(
    ("content_type", "start"),
    [("application/msgpack", b"\x81"), ("application/json", b'{"messages": [')],
)
def test_a_body_that_stalls_gets_408_and_its_connection_closed(
    quick: Daemon, content_type: str, start: bytes
) -> None:
    """A request announcing 100 body bytes that sends a few and stops (the append lane's
    msgpack add, the app's JSON add): a 408 naming the stalled body, the connection
    closed, nothing written."""
    cid = f"stalled-{content_type.rsplit('/', 1)[1]}"
    with _connect(quick) as sock:
        sock.sendall(
            f"POST /v1/conversations/{cid}/messages HTTP/1.1\r\nHost: memoryd\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: 100\r\n\r\n".encode()
            + start
        )
        answer = read_to_eof(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answer
    assert "request body stalled" in json.loads(body)["error"]["message"]
    assert quick.connect().version(cid) == 0
    assert not _unhandled(quick)


def test_a_body_the_app_never_reads_does_not_hold_the_connection(quick: Daemon) -> None:
    """A GET announcing a body it never sends is answered, then, its body still
    missing, the connection is closed (after the answer, within the linger) instead of
    waiting for a body no one will read."""
    with _connect(quick) as sock:
        sock.sendall(
            b"GET /v1/conversations/unread/version HTTP/1.1\r\nHost: memoryd\r\n"
            b"Content-Length: 50\r\n\r\n"
        )
        answer = read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # closed, no second answer
    assert not _unhandled(quick)


def test_a_slow_body_that_keeps_coming_is_served(quick: Daemon) -> None:
    """A body whose bytes keep arriving, though it takes longer than the timeout in
    all, is served: only a stall is refused."""
    body = json.dumps({"messages": [{"role": "user", "content": "slow but steady"}]}).encode()
    pieces = [body[i : i + 4] for i in range(0, len(body), 4)]
    with _connect(quick) as sock:
        sock.sendall(
            b"POST /v1/conversations/trickled/messages HTTP/1.1\r\nHost: memoryd\r\n"
            b"Content-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        for piece in pieces:  # paced by the client: 3 s in all, a piece every 0.2 s
            sock.sendall(piece)
            time.sleep(3 * HEAD_TIMEOUT_S / len(pieces))
        answer = read_to_eof(sock)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert quick.connect().get("trickled") == [{"role": "user", "content": "slow but steady"}]


@pytest.mark.parametrize("path", ["/v1/tail/stream", "/v1/tail"])
@pytest.mark.parametrize("after", [2**64 - 1, 2**64, 10**30])
def test_a_feed_read_after_its_last_position_is_a_400(quick: Daemon, path: str, after: int) -> None:
    """``after`` past the last position a feed can hold: a 400 naming it, before any
    stream starts, and nothing logged as an error."""
    transport = httpx.HTTPTransport(uds=quick.unix)
    with httpx.Client(transport=transport, base_url="http://memoryd", timeout=30) as client:
        answer = client.get(path, params={"after": after})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        f"after must be at most 2**64-2 (positions end there), not {after}"
    )
    assert not _unhandled(quick)


def test_a_feed_of_a_store_stopped_under_it_ends_whole_and_logs_no_error(quick: Daemon) -> None:
    """A stream of a named store's changes whose store is stopped: the stream ends with
    its last chunk (no truncated body), logged as ``tail_stream_ended``, not as an
    unhandled error."""
    store = quick.connect(store="streamed")
    store.add("a", [{"role": "user", "content": "x"}])
    transport = httpx.HTTPTransport(uds=quick.unix)
    with (
        httpx.Client(transport=transport, base_url="http://memoryd", timeout=30) as client,
        client.stream("GET", "/v1/stores/streamed/tail/stream") as stream,
    ):
        assert stream.status_code == 200
        lines = stream.iter_lines()
        assert json.loads(next(lines))["conversation_id"] == "a"
        assert client.delete("/v1/stores/streamed").json() == {"stopped": True}
        assert list(lines) == []  # ends whole: httpx raises on a truncated chunked body
    ended = wait_until(lambda: quick.events("tail_stream_ended"), timeout=_DEADLINE_S)
    assert ended[-1]["reason"] == "StoreUnavailable"
    assert not _unhandled(quick)


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("limit=" + "9" * 5000, "limit must be an integer"),
        ("at_version=" + "x" * 5000, "at_version must be an integer"),
        ("system=" + "y" * 5000, "system must be true or false"),
    ],
    ids=["digits", "text", "flag"],
)
def test_a_huge_query_value_is_a_400_that_names_it_without_echoing_it(
    quick: Daemon, query: str, named: str
) -> None:
    """A query parameter of 5,000 characters that is not a value it may hold: a 400
    naming the parameter and its length, the value cut (not sent back whole)."""
    transport = httpx.HTTPTransport(uds=quick.unix)
    with httpx.Client(transport=transport, base_url="http://memoryd", timeout=30) as client:
        answer = client.get(f"/v1/conversations/q/messages?{query}")
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert message.startswith(named)
    assert message.endswith("... (5000 characters)")
    assert len(message) < 200
