"""Refusals on a connection that carries other requests, and early answers.

A malformed or oversized request that follows others in one stream is refused only
after they are answered, in order; a request answered before its body came (401, 413)
has its connection closed soon after, however slowly the client goes on sending.
Real daemon, raw sockets."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator

import pytest

from memoryd.server.limits import LINGER_S, MAX_HEAD_BYTES, MAX_PIPELINED
from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def tcp_daemon() -> Iterator[Daemon]:
    with Daemon(tcp=True).start() as running:
        yield running


def _all_answers(path: str, stream: bytes, deadline_s: float = 30.0) -> list[tuple[int, bytes]]:
    """Send ``stream`` in one write on a new Unix connection; the responses read until
    the daemon closes it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(deadline_s)
    raw = b""
    try:
        sock.connect(path)
        sock.sendall(stream)
        while chunk := sock.recv(65536):
            raw += chunk
    finally:
        sock.close()
    answers = []
    while raw:  # the responses one after the other, each as long as it says
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length:")
        )
        answers.append((int(lines[0].split()[1]), rest[:length]))
        raw = rest[length:]
    return answers


def _add(cid: str, text: str) -> bytes:
    body = json.dumps({"messages": [{"role": "user", "content": text}]}).encode()
    return (
        b"POST /v1/conversations/%s/messages HTTP/1.1\r\nhost: x\r\n"
        b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
    ) % (cid.encode(), len(body), body)


def test_a_malformed_request_after_others_is_refused_after_their_answers(
    daemon: Daemon,
) -> None:
    """GET, add, then garbage, in one write: the GET and the add are answered in order,
    then the 400; the add is stored; the daemon logs no traceback."""
    before = len(daemon.stderr_lines)
    stream = (
        b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n" + _add("piped", "kept") + b"GARBAGE\r\n\r\n"
    )
    for _ in range(5):
        statuses = [status for status, _ in _all_answers(daemon.unix, stream)]
        assert statuses == [200, 200, 400]
    assert [m["content"] for m in daemon.connect().get("piped")] == ["kept"] * 5
    time.sleep(0.2)
    assert not any("Traceback" in line for line in daemon.stderr_lines[before:])


def test_an_oversized_head_after_another_request_is_refused_as_one_alone_is(
    daemon: Daemon,
) -> None:
    """A head over the limit gets 431 whether it comes alone or right after a small
    request in the same write (the first one answered first)."""
    big = (
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: "
        + b"a" * (MAX_HEAD_BYTES + 6000)
        + b"\r\n\r\n"
    )
    small = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"
    assert [s for s, _ in _all_answers(daemon.unix, big)] == [431]
    assert [s for s, _ in _all_answers(daemon.unix, small + big)] == [200, 431]


def test_a_request_refused_before_its_body_cannot_hold_its_connection(
    tcp_daemon: Daemon,
) -> None:
    """An add with no token announcing 60 MB: the 401 comes at once, then the daemon
    stops reading and closes the connection within its linger, though the client
    keeps sending a byte every 0.2 s (each byte used to keep it open)."""
    host, port = tcp_daemon.http.split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    try:
        sock.sendall(
            b"POST /v1/conversations/c/messages HTTP/1.1\r\nhost: %s\r\n"
            b"content-type: application/json\r\ncontent-length: 60000000\r\n\r\n{"
            % tcp_daemon.http.encode()
        )
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        sock.settimeout(10 * LINGER_S)
        assert sock.recv(65536) == b""  # EOF after the answer: nothing more is said
        # The daemon still drops what comes for its linger, then closes: a byte sent
        # every 0.1 s meets a closed socket (a reset, or a broken pipe) soon after.
        started = time.monotonic()
        with pytest.raises(OSError):
            while time.monotonic() - started < 10 * LINGER_S:
                sock.sendall(b"x")
                time.sleep(0.1)
    finally:
        sock.close()


def test_an_oversized_head_in_a_later_read_waits_for_the_answer_before_it(
    daemon: Daemon,
) -> None:
    """A long-poll, then (in a read of its own, while the poll waits) a head over the
    limit: the poll is answered, then the 431, then the connection closes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    raw = b""
    try:
        sock.connect(daemon.unix)
        sock.sendall(
            b"GET /v1/tail?after=18446744073709551614&timeout=1 HTTP/1.1\r\nhost: x\r\n\r\n"
        )
        time.sleep(0.3)
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (MAX_HEAD_BYTES + 6000)
        )
        while chunk := sock.recv(65536):
            raw += chunk
    finally:
        sock.close()
    statuses = [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", raw)]
    assert statuses == [200, 431]


def test_a_refused_body_waiting_in_the_pipeline_is_refused_after_the_answer_before_it(
    daemon: Daemon,
) -> None:
    """A long-poll, then (in the same write) a request whose chunked body is malformed:
    the poll is answered first, then the 400; no traceback."""
    before = len(daemon.stderr_lines)
    bad = (
        b"POST /v1/conversations/c/messages HTTP/1.1\r\nhost: x\r\n"
        b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"
    )
    poll = b"GET /v1/tail?after=18446744073709551614&timeout=1 HTTP/1.1\r\nhost: x\r\n\r\n"
    assert [status for status, _ in _all_answers(daemon.unix, poll + bad)] == [200, 400]
    time.sleep(0.2)
    assert not any("Traceback" in line for line in daemon.stderr_lines[before:])


def test_requests_pipelined_past_the_limit_are_refused_after_the_answers_due(
    daemon: Daemon,
) -> None:
    """Behind a long-poll, more requests than `MAX_PIPELINED` in one write: the poll
    and the first `MAX_PIPELINED` are answered, in order, then a 429, then the
    connection closes (a client cannot queue without bound behind a slow answer)."""
    poll = b"GET /v1/tail?after=18446744073709551614&timeout=1 HTTP/1.1\r\nhost: x\r\n\r\n"
    ping = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"
    statuses = [s for s, _ in _all_answers(daemon.unix, poll + ping * (MAX_PIPELINED + 10))]
    assert statuses == [200] * (MAX_PIPELINED + 1) + [429]
