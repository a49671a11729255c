"""A request httptools refuses (bad framing) gets a JSON 400 naming the parser's reason,
then the connection closes; the daemon logs one bounded line for it."""

from __future__ import annotations

import json
import socket
from typing import Any

import httptools
import pytest

from memoryd.server.framing import MAX_REASON_CHARS, refusal
from tests.helpers import wait_until
from tests.server.daemon import Daemon

CASES = {
    "bad_chunk_size": (
        b"POST /v1/conversations/c/messages HTTP/1.1\r\nhost: x\r\n"
        b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        "Invalid character in chunk size",
    ),
    "length_and_chunked": (
        b"POST /v1/conversations/c/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n"
        b"transfer-encoding: chunked\r\n\r\n",
        "Transfer-Encoding can't be present with Content-Length",
    ),
    "two_lengths": (
        b"POST /v1/conversations/c/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n"
        b"content-length: 4\r\n\r\nabcd",
        "Duplicate Content-Length",
    ),
    "http2_preface": (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2 preface"),
    "bad_method": (b"G(T /healthz HTTP/1.1\r\nhost: x\r\n\r\n", "Invalid method"),
    "header_without_colon": (b"GET /healthz HTTP/1.1\r\nhost x\r\n\r\n", "Invalid header token"),
    "nul_in_header": (
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: b\x00c\r\n\r\n",
        "Invalid header value char",
    ),
    "bad_url": (b"GET http://[/ HTTP/1.1\r\nhost: x\r\n\r\n", "invalid url"),
}


def _exchange(path: str, request: bytes) -> bytes:
    """Send ``request`` on a new connection; everything the daemon sends until it closes."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)  # a deadline: the daemon must close the connection before it
    try:
        sock.connect(path)
        sock.sendall(request)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out
    finally:
        sock.close()


def _response(raw: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["content-length"]) == len(body), raw
    return int(lines[0].split()[1]), headers, json.loads(body)


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_framing_gets_a_json_400_naming_it_then_the_connection_closes(
    daemon: Daemon, case: str
) -> None:
    """The answer is the daemon's JSON error naming httptools' reason; the daemon closes
    the connection after it."""
    request, reason = CASES[case]
    status, headers, body = _response(_exchange(daemon.unix, request))
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert body["error"]["type"] == "HttpError"
    assert body["error"]["message"].startswith("malformed HTTP request: ")
    assert reason in body["error"]["message"]


def test_a_malformed_request_is_logged_once_with_its_reason(daemon: Daemon) -> None:
    """One ``malformed_request`` warning with the reason; uvicorn's reasonless line is gone."""
    request, reason = CASES["two_lengths"]
    before = len(daemon.events("malformed_request"))
    _exchange(daemon.unix, request)
    events = wait_until(lambda: daemon.events("malformed_request")[before:] or None, timeout=30)
    assert len(events) == 1 and reason in events[0]["reason"]
    assert events[0]["level"] == "warning"
    assert not daemon.events("Invalid HTTP request received.")
    assert not any("Traceback" in line for line in daemon.stderr_lines)


def test_the_daemon_serves_after_malformed_requests(daemon: Daemon) -> None:
    """Refused requests take nothing down: a well-formed one on the next connection works."""
    for request, _ in CASES.values():
        _exchange(daemon.unix, request)
    raw = _exchange(daemon.unix, b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 200 ")


def _parser_error(data: bytes) -> tuple[BaseException, bytes | None]:
    """What a real httptools parser raises on ``data``, and the method it read."""

    class Callbacks:
        url = b""

        def on_url(self, url: bytes) -> None:
            self.url += url

        def on_headers_complete(self) -> None:
            if self.url == b"/boom":
                raise KeyError("boom")

    parser = httptools.HttpRequestParser(Callbacks())
    with pytest.raises(httptools.HttpParserError) as caught:
        parser.feed_data(data)
    return caught.value, parser.get_method()


def test_a_long_or_unprintable_reason_is_cut_to_one_bounded_line() -> None:
    """A reason quoting the client's bytes is printable ASCII, at most MAX_REASON_CHARS."""
    error = httptools.HttpParserInvalidURLError("invalid url b'" + "\x1b\n" * 5000 + "'")
    refused = refusal(error, b"GET")
    reason = refused.reason.removeprefix("malformed HTTP request: ")
    assert len(reason) <= MAX_REASON_CHARS
    assert reason.isascii() and reason.isprintable()
    assert len(refused.answer) < 1024


def test_a_callback_that_fails_on_a_good_request_is_a_500_not_a_400() -> None:
    """A connection's own callback raising is the daemon's fault: 500, naming its type."""
    error, method = _parser_error(b"GET /boom HTTP/1.1\r\nhost: x\r\n\r\n")
    refused = refusal(error, method)
    assert refused.status == 500
    assert refused.answer.startswith(b"HTTP/1.1 500 ")
    assert b'"type": "InternalError"' in refused.answer and b"KeyError" in refused.answer
