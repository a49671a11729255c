"""The client's HTTP/1.1 transport against real servers.

A real ``memoryd serve`` subprocess checks the round trips a store makes, over TCP and
over the Unix socket. A scripted socket server (`tests.client._scripted`) answers with exactly
the bytes each test needs: chunked bodies, bodies ended by closing the connection,
interim answers, and malformed or truncated responses.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import memoryd
from memoryd.client import remote as client
from memoryd.client._http import (
    DEFAULT_MAX_BODY_BYTES,
    ConnectFailed,
    HttpTransport,
    TransportFailed,
)
from memoryd.codec import MAX_WIRE_BYTES
from memoryd.protocol import AUTO_KEY_PREFIX
from memoryd.store.requests import MAX_IDEMPOTENCY_KEY_BYTES
from tests.client._scripted import Answer, ScriptedServer
from tests.helpers import wait_until
from tests.server.daemon import Daemon

TOKEN = "transport-token"
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# --------------------------------------------------------------------------- the daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    running = Daemon(tcp=True, token=TOKEN).start()
    yield running
    running.close()


@pytest.fixture(params=["tcp", "unix"])
def store(daemon: Daemon, request: pytest.FixtureRequest) -> Iterator[client.RemoteStore]:
    address = f"http://{daemon.http}" if request.param == "tcp" else daemon.address
    handle = memoryd.connect(address, token=TOKEN)
    yield handle
    handle.close()


def test_adds_and_gets_round_trip_through_the_daemon(store: client.RemoteStore) -> None:
    """Messages added through the transport come back from a get, in order."""
    cid = f"rt-{uuid.uuid4().hex}"
    assert store.add(cid, [user("one")]) == 1
    assert store.add(cid, [user("two"), user("three")]) == 2
    assert [m["content"] for m in store.get(cid)] == ["one", "two", "three"]
    assert [m["content"] for m in store.get(cid, limit=2)] == ["two", "three"]
    assert store.version(cid) == 2


def test_the_client_needs_nothing_of_the_server_extra(daemon: Daemon) -> None:
    """A client process talks to the daemon without importing the server's web stack
    (what the ``server`` extra installs): ``memoryd.connect`` works on a plain install."""
    code = (
        "import sys, memoryd\n"
        f"store = memoryd.connect({daemon.address!r})\n"
        "store.add('plain-install', [{'role': 'user', 'content': 'hi'}])\n"
        "print(store.version('plain-install') >= 1)\n"
        "print(sorted(m for m in ('starlette', 'uvicorn', 'httpx', 'uvloop') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.splitlines()
    assert out == ["True", "[]"]


def test_a_large_history_arrives_whole(store: client.RemoteStore) -> None:
    """A body far larger than the transport's receive buffer is read completely."""
    cid = f"big-{uuid.uuid4().hex}"
    texts = [f"{i}:" + "z" * 20_000 for i in range(20)]
    store.add(cid, [user(t) for t in texts])
    assert [m["content"] for m in store.get(cid)] == texts


def test_adds_without_keys_are_never_deduplicated(store: client.RemoteStore) -> None:
    """Each add without an idempotency key gets a key of its own."""
    cid = f"keys-{uuid.uuid4().hex}"
    for _ in range(5):
        store.add(cid, [user("same")])
    assert store.version(cid) == 5


def test_threads_share_a_handle(store: client.RemoteStore) -> None:
    """Threads adding through one handle each get their answers (one connection each)."""
    cid = f"threads-{uuid.uuid4().hex}"
    errors: list[BaseException] = []

    def add_some() -> None:
        try:
            for i in range(20):
                store.add(cid, [user(str(i))])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=add_some) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert store.version(cid) == 80


# --------------------------------------------------------------------------- idempotency keys


def _key_in_child(queue: Any) -> None:
    queue.put(client._auto_key())


def test_generated_keys_are_unique_prefixed_and_short() -> None:
    """Generated keys start with AUTO_KEY_PREFIX, differ, and fit the key limit."""
    keys = [client._auto_key() for _ in range(1000)]
    assert len(set(keys)) == 1000
    assert all(k.startswith(AUTO_KEY_PREFIX) for k in keys)
    assert max(len(k.encode()) for k in keys) <= MAX_IDEMPOTENCY_KEY_BYTES


def test_a_forked_child_draws_a_key_prefix_of_its_own() -> None:
    """A child forked after the parent made keys does not repeat the parent's keys."""
    parent_key = client._auto_key()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_key_in_child, args=(queue,))
    child.start()
    child_key = queue.get(timeout=30)
    child.join(30)
    next_parent_key = client._auto_key()
    assert child_key != next_parent_key
    assert child_key.rpartition(".")[0] != parent_key.rpartition(".")[0]
    assert next_parent_key.rpartition(".")[0] == parent_key.rpartition(".")[0]


# --------------------------------------------------------------------------- a scripted server


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedServer] = []
    transports: list[HttpTransport] = []

    def start(*answers: Answer, **options: Any) -> tuple[ScriptedServer, HttpTransport]:
        server = ScriptedServer(list(answers))
        transport = HttpTransport(server.url, uds=None, headers={"accept": "text/plain"}, **options)
        servers.append(server)
        transports.append(transport)
        return server, transport

    yield start
    for transport in transports:
        transport.close()
    for server in servers:
        server.close()


def ok(body: bytes) -> Answer:
    return Answer((HEAD + b"content-length: %d\r\n\r\n" % len(body) + body,))


def get(transport: HttpTransport, path: str = "/x", timeout: float = 10.0) -> Any:
    return transport.request("GET", path, timeout=timeout)


def test_sends_one_well_formed_request(serve: Any) -> None:
    """The request line, Host, the transport's headers, the call's headers and the body."""
    server, transport = serve(ok(b"done"))
    reply = transport.request(
        "POST",
        "/v1/things",
        params={"limit": 5, "q": "a b"},
        content=b"payload",
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert (reply.status, reply.content_type, reply.body) == (200, "text/plain", b"done")
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/things?limit=5&q=a+b HTTP/1.1"
    assert f"host: 127.0.0.1:{server.port}".encode() in lines
    assert b"accept: text/plain" in lines
    assert b"content-type: application/json" in lines
    assert b"content-length: 7" in lines
    assert body == b"payload"


def test_body_headers_go_with_bodies_only(serve: Any) -> None:
    """``body_headers`` are sent with a request that has a body, not with one that has none;
    a request's own headers still override them."""
    server, transport = serve(
        ok(b"1"), ok(b"2"), ok(b"3"), body_headers={"content-type": "application/msgpack"}
    )
    transport.request("POST", "/a", content=b"\x80", timeout=10)
    transport.request("GET", "/b", timeout=10)
    transport.request(
        "POST", "/c", content=b"{}", headers={"Content-Type": "application/json"}, timeout=10
    )
    heads = [request.partition(b"\r\n\r\n")[0].split(b"\r\n") for request in server.requests]
    assert b"content-type: application/msgpack" in heads[0]
    assert not any(line.startswith(b"content-type") for line in heads[1])
    assert [line for line in heads[2] if line.startswith(b"content-type")] == [
        b"content-type: application/json"
    ]


def test_a_post_without_a_body_says_content_length_0(serve: Any) -> None:
    """POST with no content still frames its (empty) body, as http.client did."""
    server, transport = serve(ok(b""))
    transport.request("POST", "/pop", timeout=10)
    assert b"content-length: 0" in server.requests[0].split(b"\r\n")


def test_keeps_one_connection_alive_across_requests(serve: Any) -> None:
    """Requests answered with content-length bodies reuse one connection."""
    server, transport = serve(ok(b"a"), ok(b"bb"), ok(b"ccc"))
    assert [get(transport).body for _ in range(3)] == [b"a", b"bb", b"ccc"]
    assert server.connections == 1


def test_reads_a_chunked_body_and_keeps_the_connection(serve: Any) -> None:
    """Chunks (with extensions and trailers) are joined; the connection is reused."""
    chunked = Answer(
        (
            HEAD + b"transfer-encoding: chunked\r\n\r\n",
            b"5\r\nhello\r\n",
            b"7;name=value\r\n, world\r\n",
            b"0\r\nx-trailer: yes\r\n\r\n",
        )
    )
    server, transport = serve(chunked, ok(b"next"))
    assert get(transport).body == b"hello, world"
    assert get(transport).body == b"next"
    assert server.connections == 1


def test_reads_a_chunked_body_larger_than_the_buffer(serve: Any) -> None:
    """Chunks bigger than the receive buffer arrive whole."""
    big = os.urandom(200_000)
    chunked = Answer(
        (
            HEAD + b"transfer-encoding: chunked\r\n\r\n",
            b"%x\r\n" % len(big) + big + b"\r\n",
            b"3\r\nend\r\n0\r\n\r\n",
        )
    )
    _, transport = serve(chunked)
    assert get(transport).body == big + b"end"


def test_rejects_a_malformed_chunk_size(serve: Any) -> None:
    """A chunk-size line that is not hexadecimal fails the call."""
    _, transport = serve(Answer((HEAD + b"transfer-encoding: chunked\r\n\r\nzz\r\n",)))
    with pytest.raises(TransportFailed, match=r"malformed HTTP response: .*chunk size"):
        get(transport)


def test_reads_a_body_ended_by_connection_close(serve: Any) -> None:
    """``connection: close`` with no length: the body ends at EOF; the next call reconnects."""
    closing = Answer((HEAD + b"connection: close\r\n\r\n", b"until ", b"the end"), close=True)
    server, transport = serve(closing, ok(b"again"))
    assert get(transport).body == b"until the end"
    assert get(transport).body == b"again"
    assert server.connections == 2


def test_reads_an_http_1_0_body_ended_by_eof(serve: Any) -> None:
    """An HTTP/1.0 answer without keep-alive is read to EOF and its connection dropped."""
    old = Answer((b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nold body",), close=True)
    server, transport = serve(old, ok(b"new"))
    reply = get(transport)
    assert (reply.status, reply.body) == (200, b"old body")
    assert get(transport).body == b"new"
    assert server.connections == 2


def test_drops_the_connection_when_the_server_says_close(serve: Any) -> None:
    """``connection: close`` with a content-length: the next call uses a new connection."""
    closing = Answer((HEAD + b"connection: close\r\ncontent-length: 2\r\n\r\nhi",), close=True)
    server, transport = serve(closing, ok(b"fresh"))
    assert get(transport).body == b"hi"
    assert get(transport).body == b"fresh"
    assert server.connections == 2


def test_skips_an_interim_100_continue(serve: Any) -> None:
    """A ``100 Continue`` before the answer is skipped."""
    interim = Answer((b"HTTP/1.1 100 Continue\r\n\r\n", HEAD + b"content-length: 4\r\n\r\nreal"))
    _, transport = serve(interim)
    reply = get(transport)
    assert (reply.status, reply.body) == (200, b"real")


def test_a_204_has_no_body_and_keeps_the_connection(serve: Any) -> None:
    """A 204 ends at its head; the connection carries the next request."""
    server, transport = serve(Answer((b"HTTP/1.1 204 No Content\r\n\r\n",)), ok(b"after"))
    reply = get(transport)
    assert (reply.status, reply.body, reply.content_type) == (204, b"", "")
    assert get(transport).body == b"after"
    assert server.connections == 1


def test_reads_headers_case_insensitively(serve: Any) -> None:
    """Header names in any case are understood; the content type keeps its case."""
    answer = Answer(
        (b"HTTP/1.1 201 Created\r\nContent-Type: Text/Plain\r\nCONTENT-LENGTH: 3\r\n\r\nabc",)
    )
    _, transport = serve(answer)
    reply = get(transport)
    assert (reply.status, reply.content_type, reply.body) == (201, "Text/Plain", b"abc")


def test_reconnects_when_the_server_closed_an_idle_connection(serve: Any) -> None:
    """A kept-alive connection the server closed while idle is replaced, not used."""
    server, transport = serve(
        Answer((HEAD + b"content-length: 5\r\n\r\nfirst",), close=True), ok(b"second")
    )
    assert get(transport).body == b"first"
    wait_until(lambda: server.closed_connections == 1)
    idle = transport._local.conn.sock
    wait_until(lambda: select.select([idle], [], [], 0)[0])  # its FIN has arrived
    assert get(transport).body == b"second"
    assert server.connections == 2


def test_a_response_with_trailing_bytes_is_not_reused(serve: Any) -> None:
    """Bytes past the end of a response make its connection unusable: it is dropped."""
    extra = Answer((HEAD + b"content-length: 2\r\n\r\nokGARBAGE",))
    server, transport = serve(extra, ok(b"clean"))
    assert get(transport).body == b"ok"
    assert get(transport).body == b"clean"
    assert server.connections == 2


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        pytest.param(b"HTTX/1.1 200 OK\r\n\r\n", "Expected HTTP/", id="not-http"),
        pytest.param(b"HTTP/1.1 2x0 OK\r\n\r\n", "Invalid status code", id="bad-status"),
        pytest.param(b"HTTP/1.1 099 Low\r\n\r\n", "status code 099", id="status-below-100"),
        pytest.param(b"garbage\r\n\r\n", "Expected HTTP/", id="garbage"),
        pytest.param(b"HTTP/2.0 200 OK\r\n\r\n", "unsupported HTTP version 2.0", id="http2"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-length: 12abc\r\n\r\n",
            "Invalid character in Content-Length",
            id="bad-length",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
            "Duplicate Content-Length",
            id="two-lengths",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
            "Content-Length can't be present with Transfer-Encoding",
            id="framed-twice",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % 10**30,
            "Content-Length overflow",
            id="length-overflow",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "Invalid header token", id="bad-header"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nx-a: 1\r\n folded\r\ncontent-length: 0\r\n\r\n",
            "whitespace after header value",
            id="obsolete-folding",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\ncontent-length: 0\n\n", "Missing expected CR", id="bare-lf"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"h" * 70_000 + b"\r\n\r\n",
            "exceeds",
            id="oversized-head",
        ),
    ],
)
def test_a_malformed_response_fails_naming_the_problem(
    serve: Any, response: bytes, problem: str
) -> None:
    """Malformed responses raise TransportFailed saying what was wrong; the next call
    reconnects."""
    server, transport = serve(Answer((response,)), ok(b"recovered"))
    with pytest.raises(TransportFailed, match=problem):
        get(transport)
    assert get(transport).body == b"recovered"
    assert server.connections == 2


def test_a_bad_chunk_ending_fails(serve: Any) -> None:
    """Chunk data not followed by CRLF fails the call."""
    bad = Answer((HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n",))
    _, transport = serve(bad)
    with pytest.raises(TransportFailed, match=r"malformed HTTP response: .*after chunk data"):
        get(transport)


def test_a_body_announced_past_the_limit_is_refused_at_its_head(serve: Any) -> None:
    """A content-length past ``max_body_bytes`` fails before any of the body is read."""
    server, transport = serve(
        Answer((HEAD + b"content-length: 101\r\n\r\n",)), ok(b"small"), max_body_bytes=100
    )
    with pytest.raises(TransportFailed, match="announces a body of 101 bytes; the limit is 100"):
        get(transport)
    assert get(transport).body == b"small"
    assert server.connections == 2


def test_a_body_at_the_limit_is_read(serve: Any) -> None:
    """A body of exactly ``max_body_bytes`` arrives whole, and its connection is kept."""
    server, transport = serve(ok(b"x" * 100), ok(b"y"), max_body_bytes=100)
    assert get(transport).body == b"x" * 100
    assert get(transport).body == b"y"
    assert server.connections == 1


def test_the_default_body_limit_is_the_largest_the_codec_decodes() -> None:
    """By default the transport reads any body the wire codec can decode, and no larger."""
    assert DEFAULT_MAX_BODY_BYTES == MAX_WIRE_BYTES


@pytest.mark.parametrize(
    "framing",
    [
        pytest.param(
            (
                HEAD + b"transfer-encoding: chunked\r\n\r\n",
                b"40\r\n" + b"c" * 64 + b"\r\n",
                b"40\r\n" + b"c" * 64 + b"\r\n0\r\n\r\n",
            ),
            id="chunked",
        ),
        pytest.param((HEAD + b"connection: close\r\n\r\n", b"e" * 101), id="until-eof"),
    ],
)
def test_a_received_body_past_the_limit_is_refused(serve: Any, framing: tuple[bytes, ...]) -> None:
    """A body with no content-length fails once more than ``max_body_bytes`` arrived."""
    _, transport = serve(Answer(framing, close=True), max_body_bytes=100)
    with pytest.raises(TransportFailed, match="body exceeds 100 bytes"):
        get(transport)


def test_a_head_request_reads_no_body(serve: Any) -> None:
    """A HEAD's answer ends at its head, whatever content-length it announces."""
    _, transport = serve(Answer((HEAD + b"content-length: 5\r\n\r\n",)), ok(b"after"))
    reply = transport.request("HEAD", "/x", timeout=10)
    assert (reply.status, reply.body) == (200, b"")
    assert get(transport).body == b"after"


def test_an_http_1_0_keep_alive_answer_keeps_the_connection(serve: Any) -> None:
    """HTTP/1.0 with ``connection: keep-alive`` and a content-length: the connection is reused."""
    old = Answer((b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 3\r\n\r\nold",))
    server, transport = serve(old, ok(b"new"))
    assert get(transport).body == b"old"
    assert get(transport).body == b"new"
    assert server.connections == 1


def test_data_after_a_connection_close_answer_is_ignored(serve: Any) -> None:
    """Bytes after an answer that said ``connection: close``: the answer stands, the
    connection is dropped."""
    closing = Answer((HEAD + b"connection: close\r\ncontent-length: 2\r\n\r\nhiEXTRA",), close=True)
    server, transport = serve(closing, ok(b"fresh"))
    assert get(transport).body == b"hi"
    assert get(transport).body == b"fresh"
    assert server.connections == 2


def test_eof_in_the_middle_of_the_head_fails(serve: Any) -> None:
    """A connection closed before the head ended fails the call."""
    _, transport = serve(Answer((b"HTTP/1.1 200 OK\r\ncontent-le",), close=True))
    with pytest.raises(TransportFailed, match="in the middle of the response's head"):
        get(transport)


def test_eof_in_the_middle_of_a_body_fails(serve: Any) -> None:
    """A connection closed before content-length bytes arrived fails the call."""
    _, transport = serve(Answer((HEAD + b"content-length: 100\r\n\r\nonly ten b",), close=True))
    with pytest.raises(TransportFailed, match="before the end of the body"):
        get(transport)


def test_a_huge_announced_body_cut_short_fails_without_reserving_it(serve: Any) -> None:
    """A terabyte content-length within the limit, then EOF: a transport error, not
    MemoryError (memory grows with what arrives, not with what was announced)."""
    huge = Answer((HEAD + b"content-length: %d\r\n\r\n" % 10**12 + b"x" * 100_000,), close=True)
    _, transport = serve(huge, max_body_bytes=10**13)
    with pytest.raises(TransportFailed, match="before the end of the body"):
        get(transport)


def test_eof_in_the_middle_of_a_chunked_body_fails(serve: Any) -> None:
    """A connection closed inside a chunked body fails the call."""
    cut = Answer((HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nhel",), close=True)
    _, transport = serve(cut)
    with pytest.raises(TransportFailed, match="closed the connection"):
        get(transport)


def test_eof_before_any_answer_fails(serve: Any) -> None:
    """A server closing the connection without answering fails the call (outcome unknown)."""
    _, transport = serve(Answer(close=True))
    with pytest.raises(TransportFailed, match="without answering"):
        get(transport)


def test_a_server_that_never_answers_times_out(serve: Any) -> None:
    """The call's timeout bounds the wait for an answer."""
    _, transport = serve(Answer(silent=True))
    with pytest.raises(TransportFailed, match="timed out"):
        get(transport, timeout=0.2)


def test_each_call_has_its_own_timeout_on_a_reused_connection(serve: Any) -> None:
    """A short timeout applies on a connection a call with a long timeout opened.

    The second answer comes after 3 s: well past that call's 0.2 s deadline, well
    before the first call's 30 s.
    """
    late = Answer(ok(b"late").pieces, delay_s=3.0)
    server, transport = serve(ok(b"first"), late)
    assert get(transport, timeout=30).body == b"first"
    with pytest.raises(TransportFailed, match="timed out"):
        get(transport, timeout=0.2)
    assert server.connections == 1


def test_connecting_to_nothing_raises_connect_failed() -> None:
    """No listener on the port: ConnectFailed (the request was surely not sent)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    transport = HttpTransport(f"http://127.0.0.1:{port}", uds=None, headers={})
    with pytest.raises(ConnectFailed):
        get(transport)


def test_connecting_to_a_missing_unix_socket_raises_connect_failed(tmp_path: Any) -> None:
    """A Unix socket path with nothing behind it: ConnectFailed."""
    transport = HttpTransport("http://memoryd", uds=str(tmp_path / "none.sock"), headers={})
    with pytest.raises(ConnectFailed):
        get(transport)


def test_refuses_header_injection() -> None:
    """A header value holding CR or LF is refused before anything is sent."""
    with pytest.raises(ValueError, match="header"):
        HttpTransport("http://127.0.0.1:1", uds=None, headers={"authorization": "x\r\nevil: 1"})


def test_close_drops_the_connections(serve: Any) -> None:
    """After close, the next request opens a new connection."""
    server, transport = serve(ok(b"1"), ok(b"2"))
    assert get(transport).body == b"1"
    transport.close()
    assert get(transport).body == b"2"
    assert server.connections == 2


def test_speaks_https_with_certificate_checks(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over https the server's certificate is checked against the trusted CAs."""
    if shutil.which("openssl") is None:  # .ci/run installs it
        pytest.fail("this test makes its certificate with the openssl command: install openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = ScriptedServer([ok(b"secret"), ok(b"again")], tls=context)
    try:
        untrusting = HttpTransport(server.url, uds=None, headers={})
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            get(untrusting)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusting = HttpTransport(server.url, uds=None, headers={})
        assert get(trusting).body == b"secret"
        assert get(trusting).body == b"again"
        assert server.connections == 2
        trusting.close()
    finally:
        server.close()
