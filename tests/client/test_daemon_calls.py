"""`memoryd.client.calls`: daemon addresses, and which failures a call retries or raises.

The daemon is a scripted server (`tests.client._scripted`) answering each request
with the bytes a test gives, so every kind of failure is exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd import codec
from memoryd.client import calls
from memoryd.client._http import Reply
from memoryd.client.calls import DaemonCaller, parse_address
from memoryd.errors import ConflictError, StoreNotRunning, StoreUnavailable, WriteTimeout
from memoryd.protocol import ProtocolError
from tests.client._scripted import Answer, ScriptedServer

# --------------------------------------------------------------------------- addresses


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("unix:///srv/memoryd.sock", ("http://memoryd", "/srv/memoryd.sock")),
        ("unix:memoryd.sock", ("http://memoryd", "memoryd.sock")),
        ("/srv/memoryd.sock", ("http://memoryd", "/srv/memoryd.sock")),
        ("memoryd.sock", ("http://memoryd", "memoryd.sock")),
        ("http://127.0.0.1:8765/", ("http://127.0.0.1:8765", None)),
        ("https://memory.example", ("https://memory.example", None)),
        ("127.0.0.1:8765", ("http://127.0.0.1:8765", None)),
    ],
)
def test_an_address_names_a_unix_socket_or_a_base_url(
    address: str, expected: tuple[str, str | None]
) -> None:
    """unix://PATH, unix:PATH and socket paths go over the socket; the rest over TCP."""
    assert parse_address(address) == expected


@pytest.mark.parametrize(
    ("address", "match"),
    [("", "non-empty str"), (None, "non-empty str"), ("localhost", "cannot read")],
)
def test_an_unreadable_address_is_refused(address: Any, match: str) -> None:
    """Nothing, a non-str, or a bare host name: ValueError saying what to write."""
    with pytest.raises(ValueError, match=match):
        parse_address(address)


@pytest.mark.parametrize("address", ["foo://bar", "redis://localhost:6379", "tcp://h:1"])
def test_an_unknown_scheme_names_the_schemes_memoryd_speaks(address: str) -> None:
    """An address with another scheme is refused naming it and the three that work."""
    scheme = address.split("://", maxsplit=1)[0]
    with pytest.raises(ValueError, match=rf"scheme '{scheme}'.*unix://, http://, https://"):
        parse_address(address)


def test_the_cli_prints_the_schemes_for_an_unknown_one(tmp_path: Any) -> None:
    """`memoryd --address foo://x get c` exits non-zero naming the schemes, not "No such file"."""
    done = subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "--address", "foo://x", "get", "c"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "unix://, http://, https://" in done.stderr
    assert "No such file" not in done.stderr


# --------------------------------------------------------------------------- calls


def answer(status: int, body: Any, *, msgpack: bool = False) -> Answer:
    """An answer with a JSON (or msgpack) body and a content-length."""
    data = codec.pack_wire(body, trusted=True) if msgpack else json.dumps(body).encode()
    kind = b"application/msgpack" if msgpack else b"application/json"
    head = b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n"
    return Answer((head % (status, kind, len(data)) + data,))


def error(status: int, type_name: str, **fields: Any) -> Answer:
    return answer(status, {"error": {"type": type_name, "message": type_name, **fields}})


HANG_UP = Answer(close=True)
"""Read the request, answer nothing, close the connection."""


@pytest.fixture
def daemon() -> Iterator[Any]:
    made: list[tuple[ScriptedServer, DaemonCaller]] = []

    def start(*answers: Answer, **options: Any) -> tuple[ScriptedServer, DaemonCaller]:
        server = ScriptedServer(list(answers))
        settings: dict[str, Any] = {"token": None, "autostart": True, "msgpack": False}
        caller = DaemonCaller(server.url, base_url=server.url, uds=None, **settings | options)
        made.append((server, caller))
        return server, caller

    yield start
    for server, caller in made:
        caller.close()
        server.close()


def test_a_call_sends_its_body_and_headers_and_decodes_the_answer(daemon: Any) -> None:
    """JSON body, accept, bearer token, autostart refusal; None params are left out."""
    server, caller = daemon(answer(200, {"version": 3}), token="t0k", autostart=False)
    got = caller.call(
        "POST", "/v1/x", timeout=10, retry=False, params={"a": 1, "b": None}, body={"k": "v"}
    )
    assert got == {"version": 3}
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/x?a=1 HTTP/1.1"
    for line in (
        b"accept: application/json",
        b"authorization: Bearer t0k",
        b"memoryd-autostart: no",
        b"content-type: application/json",
    ):
        assert line in lines
    assert json.loads(body) == {"k": "v"}


def test_msgpack_bodies_go_both_ways(daemon: Any) -> None:
    """With msgpack the request and the answer are msgpack."""
    server, caller = daemon(answer(200, {"messages": ["a"]}, msgpack=True), msgpack=True)
    assert caller.call("POST", "/v1/x", timeout=10, retry=True, body={"k": 1}) == {
        "messages": ["a"]
    }
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    assert b"content-type: application/msgpack" in head.split(b"\r\n")
    assert codec.unpack_wire(body) == {"k": 1}


def test_a_conflict_comes_back_with_its_fields(daemon: Any) -> None:
    """A 409 ConflictError is raised as ConflictError with expected and actual."""
    _, caller = daemon(error(409, "ConflictError", expected=1, actual=2))
    with pytest.raises(ConflictError) as caught:
        caller.call("POST", "/v1/x", timeout=10, retry=True)
    assert (caught.value.expected, caught.value.actual) == (1, 2)


@pytest.mark.parametrize(
    ("first", "retry", "raised"),
    [
        (error(409, "ConflictError"), True, ConflictError),
        (error(503, "StoreNotRunning"), True, StoreNotRunning),
        (error(504, "WriteTimeout"), False, WriteTimeout),
        (HANG_UP, False, WriteTimeout),
    ],
    ids=["conflict", "store-not-running", "write-timeout", "lost-answer"],
)
def test_a_failure_waiting_cannot_cure_is_raised_at_once(
    daemon: Any, first: Answer, retry: bool, raised: type[Exception]
) -> None:
    """Errors other than unavailability, and unknown outcomes of a call that must not
    run twice, are raised after one request."""
    server, caller = daemon(first)
    with pytest.raises(raised):
        caller.call("POST", "/v1/x", timeout=10, retry=retry)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("first", "retry"),
    [
        (error(503, "StoreUnavailable"), False),
        (error(504, "WriteTimeout"), True),
        (HANG_UP, True),
    ],
    ids=["store-unavailable", "write-timeout", "lost-answer"],
)
def test_a_failure_is_sent_again_when_that_is_safe(daemon: Any, first: Answer, retry: bool) -> None:
    """An unavailable store is asked again (the call surely did not run); an unknown
    outcome is resent only for a call that may run twice."""
    server, caller = daemon(first, answer(200, {"version": 1}))
    assert caller.call("POST", "/v1/x", timeout=10, retry=retry) == {"version": 1}
    assert len(server.requests) == 2


def test_a_lost_answer_is_reported_as_an_unknown_outcome(daemon: Any) -> None:
    """The connection dropped after the request: WriteTimeout saying so."""
    _, caller = daemon(HANG_UP)
    with pytest.raises(WriteTimeout, match="outcome is unknown"):
        caller.call("POST", "/v1/x", timeout=10, retry=False)


def test_a_daemon_that_cannot_be_reached_is_unavailable(tmp_path: Path) -> None:
    """No connection until the deadline: StoreUnavailable naming the address."""
    missing = str(tmp_path / "memoryd.sock")
    caller = DaemonCaller(
        f"unix://{missing}",
        base_url="http://memoryd",
        uds=missing,
        token=None,
        autostart=True,
        msgpack=False,
    )
    try:
        with pytest.raises(StoreUnavailable, match="is it running"):
            caller.call("POST", "/v1/x", timeout=0.2, retry=False)
    finally:
        caller.close()


def test_an_unreadable_answer_is_a_protocol_error(daemon: Any) -> None:
    """A body that does not parse as its content type: ProtocolError."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 3\r\n\r\n"
    _, caller = daemon(Answer((head + b"{{{",)))
    with pytest.raises(ProtocolError, match="unreadable body"):
        caller.call("GET", "/v1/x", timeout=10, retry=True)


@pytest.mark.parametrize("version", [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32, 2**64 - 1])
def test_a_writes_answer_is_read_as_the_general_decoder_reads_it(version: int) -> None:
    """``{"version": n}`` is read from its bytes, exactly as the msgpack decoder reads it."""
    body = codec.pack_wire({"version": version})
    assert calls._decode(Reply(200, "application/msgpack", body)) == {"version": version}


@pytest.mark.parametrize(
    "body",
    [
        {"version": -1},
        {"version": 1.5},
        {"version": "7"},
        {"version": 1, "more": 2},
        {"versions": 1},
    ],
)
def test_any_other_answer_goes_to_the_general_decoder(body: dict[str, Any]) -> None:
    """An answer other than one unsigned version is decoded as any other."""
    packed = codec.pack_wire(body)
    assert calls._decode(Reply(200, "application/msgpack", packed)) == body


@pytest.mark.parametrize("tail", [b"\x00", b"\xcd\x00"])
def test_a_malformed_write_answer_is_a_protocol_error(tail: bytes) -> None:
    """Bytes past a version, or a truncated one, are refused as an unreadable answer."""
    body = codec.pack_wire({"version": 5})[:9] + (b"\x05" + tail if tail == b"\x00" else tail)
    with pytest.raises(ProtocolError, match="unreadable"):
        calls._decode(Reply(200, "application/msgpack", body))


def test_an_unreadable_msgpack_answer_is_a_protocol_error(daemon: Any) -> None:
    """A msgpack body that does not decode is the daemon's fault, not the store's:
    ProtocolError, not CorruptRecord."""
    body = b"\xc1"  # never used by msgpack
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/msgpack\r\ncontent-length: 1\r\n\r\n"
    _, caller = daemon(Answer((head + body,)))
    with pytest.raises(ProtocolError, match="unreadable body"):
        caller.call("GET", "/v1/x", timeout=10, retry=True)
