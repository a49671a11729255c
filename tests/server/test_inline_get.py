"""The last-N read answered on the loop, and responses written in one piece.

A msgpack ``GET .../messages?limit=N`` is answered with its messages copied as
stored (`memoryd.server.inline`); a JSON client goes the general way. The two must
agree, refuse the same requests the same way, and fail the same way on a damaged
record. Every response's head and body go out in one write (`memoryd.server.limits`):
a response with no body (``HEAD``) and a streamed one must still arrive at once,
and an idle connection must still be closed when its next head is late.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

import memoryd
from memoryd.messages import assistant, user
from memoryd.server.config import DEFAULT_HEAD_TIMEOUT_S as HEAD_TIMEOUT_S
from tests.server.daemon import Daemon
from tests.store.lmdb._damage import flip_event_bit


def _both(daemon: Daemon, store: str | None = None) -> tuple[Any, Any]:
    fast = memoryd.connect(daemon.address, store=store, wire="msgpack")
    general = memoryd.connect(daemon.address, store=store, wire="json")
    return fast, general


@pytest.mark.parametrize("store", [None, "inline-named"])
def test_msgpack_and_json_reads_agree_after_pops_clears_and_forks(
    daemon: Daemon, store: str | None
) -> None:
    """Every limit reads the same history through the copying way and the decoding way."""
    fast, general = _both(daemon, store)
    try:
        fast.add("src", [user("s1"), assistant("s2")])
        fast.fork("src", "conv")
        for i in range(30):
            fast.add("conv", [user(f"u{i}"), assistant(f"a{i}")] if i % 3 else [user(f"u{i}")])
            if i % 7 == 6:
                fast.pop("conv")
            if i == 11:
                fast.clear("conv")
        for limit in (0, 1, 2, 5, 17, 40, 200, None):
            expected = general.get("conv", limit=limit)
            assert fast.get("conv", limit=limit) == expected, limit
        assert fast.get("never-written", limit=50) == []
        assert fast.get("conv", limit=3, system=True) == general.get("conv", limit=3, system=True)
    finally:
        fast.close()
        general.close()


def test_a_bad_conversation_id_or_limit_is_refused_as_the_general_way_does(
    daemon: Daemon,
) -> None:
    """A control character in the id is a 400 InvalidConversationId either way; a
    limit past the inline bound or in another spelling is read the general way."""
    fast, general = _both(daemon)
    try:
        for handle in (fast, general):
            with pytest.raises(memoryd.InvalidConversationId):
                handle._call(
                    "GET", "/v1/conversations/a%01b/messages", params={"limit": 5}, retry=True
                )
        fast.add("spelled", [user(str(i)) for i in range(300)])
        for params in ({"limit": 250}, {"limit": "+5"}, {"limit": "05"}):
            answer = fast._call(
                "GET", "/v1/conversations/spelled/messages", params=params, retry=True
            )
            expected = general._call(
                "GET", "/v1/conversations/spelled/messages", params=params, retry=True
            )
            assert answer == expected, params
        with pytest.raises(ValueError, match="limit must be an integer"):
            fast._call(
                "GET", "/v1/conversations/spelled/messages", params={"limit": "5x"}, retry=True
            )
    finally:
        fast.close()
        general.close()


def test_a_damaged_record_fails_both_ways_with_the_same_error(tmp_path: Any) -> None:
    """A flipped bit in the newest record: a 500 CorruptRecord naming it, msgpack or JSON."""
    with Daemon(tcp=False).start() as running:
        store = memoryd.connect(running.address)
        store.add("a", [user("one")])
        store.add("a", [user("two")])
        store.close()
        assert running.terminate() == 0
        flip_event_bit(running.data, "a", 2)
        running.start()
        fast, general = _both(running)
        try:
            for handle in (fast, general):
                with pytest.raises(memoryd.CorruptRecord, match="event 2 of conversation 'a'"):
                    handle.get("a", limit=1)
        finally:
            fast.close()
            general.close()


def _read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_a_head_request_and_a_stream_get_their_heads_at_once(daemon: Daemon) -> None:
    """No body follows a HEAD's head and a stream's lines may be long in coming: both
    heads arrive without waiting for anything more, and the connection serves on."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(daemon.unix)
        sock.sendall(b"HEAD /v1/conversations/h/messages HTTP/1.1\r\nHost: memoryd\r\n\r\n")
        head = _read_head(sock)
        assert head.startswith(b"HTTP/1.1 200 "), head
        sock.sendall(b"GET /v1/conversations/h/version HTTP/1.1\r\nHost: memoryd\r\n\r\n")
        answer = _read_head(sock)
        assert answer.startswith(b"HTTP/1.1 200 "), answer
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(daemon.unix)
        position = memoryd.connect(daemon.address).stats().get("position", 0)
        after = position + 10**9
        sock.sendall(f"GET /v1/tail/stream?after={after} HTTP/1.1\r\nHost: m\r\n\r\n".encode())
        head = _read_head(sock)
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert b"application/x-ndjson" in head


def test_an_idle_connection_whose_next_head_is_late_gets_408() -> None:
    """After a full exchange the next head is due within the head timeout too (a daemon
    with ``--head-timeout 1.5``: the test waits for it)."""
    with (
        Daemon(tcp=False, extra=("--head-timeout", "1.5")).start() as running,
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock,
    ):
        sock.settimeout(HEAD_TIMEOUT_S + 30)
        sock.connect(running.unix)
        sock.sendall(b"GET /v1/conversations/idle/version HTTP/1.1\r\nHost: memoryd\r\n\r\n")
        assert _read_head(sock).startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"GET /v1/conversations/idle/version HTTP/1.1\r\nHo")
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        waited = time.monotonic() - started
    assert b"HTTP/1.1 408 " in answer
    assert 1.0 <= waited < HEAD_TIMEOUT_S
