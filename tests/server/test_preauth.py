"""Before authentication: a client that never finishes its request head, or sends a huge
one, or opens thousands of connections, cannot take the daemon from anyone else.

A real ``memoryd serve`` is flooded over TCP with raw sockets; its Unix socket is
asked throughout, and must answer every time.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoryd.server.config import DEFAULT_HEAD_TIMEOUT_S as HEAD_TIMEOUT_S
from memoryd.server.limits import MAX_HEAD_BYTES, fd_budget
from tests.server.daemon import Daemon, serve_refused


def _slow_heads(daemon: Daemon, count: int) -> list[socket.socket]:
    """``count`` TCP connections that each sent a request line, no token, and stop there."""
    host, port = daemon.http.rsplit(":", 1)
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(30)
        try:
            sock.connect((host, int(port)))
            sock.sendall(b"GET /v1/conversations/x/messages HTTP/1.1\r\nHost: localhost\r\n")
        except OSError:
            sock.close()
            continue
        held.append(sock)
    return held


@contextlib.contextmanager
def _files(wanted: int) -> Iterator[None]:
    """Let this test process hold ``wanted`` open files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _unix_get(daemon: Daemon, cid: str) -> int:
    transport = httpx.HTTPTransport(uds=daemon.unix)
    with httpx.Client(transport=transport, base_url="http://memoryd", timeout=30) as client:
        return client.get(f"/v1/conversations/{cid}/messages").status_code


@pytest.mark.parametrize("nofile", [1024, None])
def test_a_flood_of_unfinished_heads_on_tcp_never_stops_the_unix_socket(
    nofile: int | None,
) -> None:
    """4,200 TCP connections that never finish their heads (1,500 with ``ulimit -n
    1024``): every Unix-socket request made meanwhile is answered 200."""
    count = 1500 if nofile is not None else 4200
    with _files(count + 256), Daemon(tcp=True, nofile=nofile).start() as daemon:
        store = daemon.connect()
        store.add("kept", [{"role": "user", "content": "hi"}])
        held = _slow_heads(daemon, count)
        try:
            statuses = [_unix_get(daemon, "kept") for _ in range(50)]
            assert statuses == [200] * 50
            assert store.get("kept") == [{"role": "user", "content": "hi"}]
        finally:
            for sock in held:
                sock.close()
        budgets = daemon.events("fd_budget")
        assert budgets and budgets[0]["tcp_connections"] < budgets[0]["nofile"]


SHORT_HEAD_TIMEOUT_S = 1.5
"""The head timeout of the daemons of the tests that wait for it (``--head-timeout``)."""


def test_a_head_that_never_completes_is_answered_408_and_closed() -> None:
    """A connection whose head stops midway gets 408, naming the daemon's head timeout,
    and is closed by the daemon once that timeout passed."""
    extra = ("--head-timeout", str(SHORT_HEAD_TIMEOUT_S))
    with Daemon(tcp=True, extra=extra).start() as daemon:
        [sock] = _slow_heads(daemon, 1)
        started = time.monotonic()
        with sock:
            sock.settimeout(HEAD_TIMEOUT_S + 30)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"within 1.5 s" in answer
    assert SHORT_HEAD_TIMEOUT_S - 0.5 <= waited < HEAD_TIMEOUT_S


@pytest.mark.parametrize("value", ["0", "-1", "nan", "3601", "soon"])
def test_a_bad_head_timeout_is_refused_at_start(value: str, tmp_path: Path) -> None:
    """``serve --head-timeout`` outside 0.1..3600 s, or not a number: exit 2, naming it."""
    done = serve_refused(tmp_path / "d", "--head-timeout", value)
    assert done.returncode == 2, done.stderr
    assert "--head-timeout" in done.stderr


def test_a_head_over_the_limit_is_refused_431_before_it_is_buffered(daemon: Daemon) -> None:
    """An unauthenticated head bigger than `MAX_HEAD_BYTES` gets 431 and a closed
    connection; the rest of a 128 MiB header is never read."""
    host, port = daemon.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
        sent = 0
        chunk = b"a" * 65536
        answer = b""
        try:
            while sent < 128 << 20:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the daemon closed the connection: the header was refused
        with contextlib.suppress(OSError):
            while part := sock.recv(65536):
                answer += part
    assert sent < 128 << 20
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431 ")
    assert _unix_get(daemon, "after-431") == 200


def test_a_head_at_the_limit_with_a_body_in_the_same_packet_is_served(daemon: Daemon) -> None:
    """Only the head counts against the limit, not a body sent with it."""
    big = b"x" * (MAX_HEAD_BYTES // 2)
    body = b'{"messages":[{"role":"user","content":"' + big + b'"}]}'
    head = (
        b"POST /v1/conversations/with-body/messages HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        b"X-Pad: " + b"p" * (MAX_HEAD_BYTES // 2) + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
    )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(daemon.unix)
        sock.sendall(head + body)
        answer = b""
        while part := sock.recv(65536):
            answer += part
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_the_fd_budget_keeps_connections_for_both_listeners() -> None:
    """With 1,024 files, stores give way so each listener keeps its own connections."""
    budget = fd_budget(1024, max_stores=256, tcp=True)
    assert budget.unix >= 64 and budget.tcp >= 64
    assert budget.stores * 4 + budget.unix + budget.tcp <= 1024
    roomy = fd_budget(20_000, max_stores=256, tcp=True)
    assert roomy.stores == 256 and roomy.unix + roomy.tcp > 15_000
