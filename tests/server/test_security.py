"""The daemon against a hostile caller: browser origins, rebinding hosts, bad names and bodies.

Requests are written byte for byte on raw sockets, so no client library
normalises a path (``..``, ``%2F``) or a header before the daemon sees it.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import wait_until
from tests.server.daemon import TOKEN, Daemon


def connect(daemon: Daemon, *, tcp: bool = False) -> socket.socket:
    """A socket connected to the daemon's Unix socket, or to its TCP port."""
    if tcp:
        host, port = daemon.http.rsplit(":", 1)
        return socket.create_connection((host, int(port)), timeout=30)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(daemon.unix)
    return sock


def raw_request(
    daemon: Daemon,
    method: str,
    target: bytes,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    tcp: bool = False,
) -> tuple[int, dict[str, Any] | None]:
    """Send one HTTP/1.1 request as given and return the status and the JSON body (if any).

    A body goes as JSON unless ``headers`` name another content type.
    """
    sent = {"host": "localhost", "connection": "close", "content-length": str(len(body))}
    if body:
        sent["content-type"] = "application/json"
    if tcp:
        sent["authorization"] = f"Bearer {TOKEN}"
    sent.update(headers or {})
    head = method.encode() + b" " + target + b" HTTP/1.1\r\n"
    head += b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in sent.items() if v != "")
    with connect(daemon, tcp=tcp) as sock:
        sock.sendall(head + b"\r\n" + body)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    status_line, _, rest = answer.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    status = int(status_line.split()[1])
    try:
        decoded = json.loads(payload) if payload else None
    except ValueError:
        decoded = None
    return status, decoded


def messages_path(raw_cid: bytes) -> bytes:
    """The messages route of the conversation ``raw_cid`` names (sent as it is)."""
    return b"/v1/conversations/" + raw_cid + b"/messages"


def version(daemon: Daemon, cid: str, store: str | None = None) -> int:
    """The conversation's version, read through the ordinary client."""
    remote = daemon.connect(store=store) if store else daemon.connect()
    return int(remote.version(cid))


ADD = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()


# --------------------------------------------------------------------------- Origin and Host


@pytest.mark.parametrize("tcp", [False, True], ids=["unix", "tcp"])
@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://localhost", "http://127.0.0.1", "file://"],
)
def test_any_browser_origin_is_refused_and_writes_nothing(
    daemon: Daemon, tcp: bool, origin: str
) -> None:
    """A request carrying an Origin not allowed gets a JSON 403 on both listeners; no write."""
    cid = f"origin-{tcp}-{origin}".replace("/", "_").replace(":", "_")
    status, body = raw_request(
        daemon, "POST", messages_path(cid.encode()), body=ADD, headers={"origin": origin}, tcp=tcp
    )
    assert status == 403
    assert body is not None and body["error"]["type"] == "Forbidden"
    assert version(daemon, cid) == 0


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:80", "127.0.0.1.nip.io", "localhost.evil.example", ""],
)
def test_foreign_or_missing_host_over_tcp_is_refused_and_writes_nothing(
    daemon: Daemon, host: str
) -> None:
    """DNS rebinding: a Host other than the loopback address gets 403 with the token; no write."""
    cid = f"host-{host or 'missing'}"
    status, body = raw_request(
        daemon, "POST", messages_path(cid.encode()), body=ADD, headers={"host": host}, tcp=True
    )
    if host:
        assert status == 403
        assert body is not None and body["error"]["type"] == "Forbidden"
    else:
        # An empty Host header is malformed HTTP/1.1: the pure-Python parser (h11) answers
        # 400 before the application sees it; httptools passes it on and Guard answers 403.
        assert status in (400, 403)
    assert version(daemon, cid) == 0


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "raw_cid",
    [
        pytest.param(b"a%00b", id="nul"),
        pytest.param(b"a%01b", id="control"),
        pytest.param(b"a%1Bb", id="escape"),
        pytest.param(b"a%7Fb", id="del"),
        pytest.param(b"x" * 257, id="overlong"),
        pytest.param(b"%C3%A9" * 129, id="overlong-utf8"),
        pytest.param(b"a%FFb", id="invalid-utf8"),
        pytest.param(b"a%C3", id="truncated-utf8"),
        pytest.param(b"a%ED%A0%80b", id="surrogate-utf8"),
    ],
)
def test_invalid_conversation_ids_get_a_json_4xx_and_write_nothing(
    daemon: Daemon, raw_cid: bytes
) -> None:
    """Ids with NUL, controls, invalid UTF-8 or over 256 bytes are refused on every route."""
    before = daemon.connect().stats()
    for method, suffix, body in (
        ("POST", b"/messages", ADD),
        ("GET", b"/messages", b""),
        ("DELETE", b"/messages", b""),
        ("POST", b"/pop", b""),
    ):
        target = b"/v1/conversations/" + raw_cid + suffix
        status, answer = raw_request(daemon, method, target, body=body)
        assert 400 <= status < 500, (method, status, answer)
        assert answer is not None and answer["error"]["message"], answer
    after = daemon.connect().stats()
    assert after.get("events") == before.get("events")


@pytest.mark.parametrize(
    "raw_cid",
    [
        pytest.param(b"../../../../etc/passwd", id="dotdot"),
        pytest.param(b"..%2F..%2Fescape", id="encoded-slash"),
        pytest.param(b"%2Ftmp%2Fabs", id="absolute"),
        pytest.param(b"/tmp/abs", id="absolute-raw"),
        pytest.param(b"data.mdb", id="file-name"),
    ],
)
def test_path_like_conversation_ids_stay_keys_inside_the_store(
    daemon: Daemon, raw_cid: bytes
) -> None:
    """A path-like id is refused or stored as an opaque key: nothing appears outside the data."""
    status, answer = raw_request(daemon, "POST", messages_path(raw_cid), body=ADD)
    assert status == 200 or 400 <= status < 500, (status, answer)
    assert answer is not None
    if status != 200:
        assert answer["error"]["message"]
    assert not Path("/tmp/abs").exists()
    assert not (daemon.root / "escape").exists()
    assert_only_expected_files(daemon)


@pytest.mark.parametrize(
    "target",
    [
        b"/v1/conversations?prefix=%FF",
        b"/v1/conversations?after=a%C3",
        b"/v1/conversations/c/messages?limit=%FF",
    ],
)
def test_invalid_utf8_in_the_query_gets_400(daemon: Daemon, target: bytes) -> None:
    """A query string that is not UTF-8 once decoded is refused, not read with U+FFFD."""
    status, answer = raw_request(daemon, "GET", target)
    assert status == 400
    assert answer is not None and "UTF-8" in answer["error"]["message"]


def test_ids_that_prefix_each_other_never_see_each_others_messages(daemon: Daemon) -> None:
    """``p``, ``p1``, ``p/``, ``p/1`` and ``p%2F1`` are five conversations with their own data."""
    ids = [b"p", b"p1", b"p10", b"p/", b"p/1", b"p%2F1x", b"p%20"]
    for raw in ids:
        body = json.dumps({"messages": [{"role": "user", "content": raw.decode()}]}).encode()
        status, answer = raw_request(daemon, "POST", messages_path(raw), body=body)
        assert status == 200, (raw, answer)
    for raw in ids:
        status, answer = raw_request(daemon, "GET", messages_path(raw))
        assert status == 200
        assert answer is not None
        assert [m["content"] for m in answer["messages"]] == [raw.decode()]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(b"..", id="dotdot"),
        pytest.param(b"%2E%2E", id="encoded-dotdot"),
        pytest.param(b"..%2Fescape", id="encoded-slash"),
        pytest.param(b"%2Ftmp%2Fabs", id="absolute"),
        pytest.param(b".hidden", id="dot-first"),
        pytest.param(b"a%00b", id="nul"),
        pytest.param(b"a%0Ab", id="newline"),
        pytest.param(b"n" * 65, id="overlong"),
        pytest.param(b"a%FFb", id="invalid-utf8"),
        pytest.param(b"memoryd.evil", id="reserved"),
        pytest.param(b"caf%C3%A9", id="non-ascii"),
    ],
)
def test_bad_store_names_get_a_json_4xx_and_create_nothing(daemon: Daemon, name: bytes) -> None:
    """Store names outside ``[A-Za-z0-9._-]{1,64}`` never become directories."""
    for method, target, body in (
        ("PUT", b"/v1/stores/" + name, b"{}"),
        ("POST", b"/v1/stores/" + name + b"/conversations/c/messages", ADD),
        ("GET", b"/v1/stores/" + name + b"/stats", b""),
    ):
        status, answer = raw_request(daemon, method, target, body=body)
        assert 400 <= status < 500, (method, target, status, answer)
        assert answer is not None and answer["error"]["message"]
    assert_only_expected_files(daemon)


def test_store_names_that_prefix_each_other_are_separate_stores(daemon: Daemon) -> None:
    """Stores ``s`` and ``s1`` keep their own data in their own directories."""
    for name in ("s", "s1"):
        daemon.connect(store=name).add("c", [{"role": "user", "content": name}])
    for name in ("s", "s1"):
        assert daemon.connect(store=name).get("c") == [{"role": "user", "content": name}]
    assert_only_expected_files(daemon)


# --------------------------------------------------------------------------- msgpack bodies


def _nested(depth: int) -> bytes:
    return b"\x91" * depth + b"\xc0"


MSGPACK_BODIES = {
    # {"messages": [ext 5 b"abcd"]}
    "ext-type": b"\x81\xa8messages\x91\xd6\x05abcd",
    # {"messages": [{"role": "user", "content": timestamp ext -1}]}
    "timestamp-ext": b"\x81\xa8messages\x91\x82\xa4role\xa4user\xa7content\xd6\xff\x00\x00\x00\x01",
    "deep-nesting": b"\x81\xa8messages" + _nested(100_000),
    "deep-maps": b"\x81\xa8messages" + b"\x81\xa1k" * 50_000 + b"\xc0",
    "int-key": b"\x81\x01\xa1x",
    "int-key-inside": b"\x81\xa8messages\x91\x81\x01\xa4user",
    "bin-key": b"\x81\xc4\x01k\xa1x",
    "nil-key": b"\x81\xc0\xa1x",
    # a str32 announcing 1 GiB, then 5 bytes
    "str-overlong": b"\x81\xa8messages\xdb\x40\x00\x00\x00hello",
    # an array32 announcing 4 Gi elements, then one
    "array-overlong": b"\x81\xa8messages\xdd\xff\xff\xff\xff\xc0",
    # a map32 announcing 4 Gi pairs
    "map-overlong": b"\xdf\xff\xff\xff\xff\xa1k\xc0",
    "bin-body": b"\xc4\x03abc",
    "truncated": b"\x81\xa8messa",
    "trailing": b"\x80\x80",
    "not-a-map": b"\x93\x01\x02\x03",
}


@pytest.mark.parametrize("name", sorted(MSGPACK_BODIES))
def test_hostile_msgpack_bodies_get_a_clean_4xx_and_write_nothing(
    daemon: Daemon, name: str
) -> None:
    """Ext types, deep nesting, non-str keys and lying length prefixes: a JSON 4xx, no write."""
    cid = f"mp-{name}"
    status, answer = raw_request(
        daemon,
        "POST",
        messages_path(cid.encode()),
        body=MSGPACK_BODIES[name],
        headers={"content-type": "application/msgpack"},
    )
    assert 400 <= status < 500, (status, answer)
    assert answer is not None and answer["error"]["message"]
    assert version(daemon, cid) == 0
    status, _ = raw_request(daemon, "GET", b"/healthz")
    assert status == 200


@pytest.mark.parametrize(
    ("route", "op"),
    [
        pytest.param("messages", "add", id="hot-route"),
        pytest.param("record", "record", id="routed"),
    ],
)
@pytest.mark.parametrize("half_close", [False, True], ids=["close", "half-close"])
def test_a_client_gone_before_its_body_arrives_is_logged_quietly_and_writes_nothing(
    daemon: Daemon, route: str, op: str, half_close: bool
) -> None:
    """Announce 1000 bytes, send 10, hang up: an info ``client_disconnected``, status 499 in
    the metrics, no ``request_failed`` and no write; the daemon serves on."""
    cid = f"cut-{op}-{half_close}"
    path = f"/v1/conversations/{cid}/{route}"
    with connect(daemon) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nhost: localhost\r\n".encode()
            + b"content-type: application/json\r\ncontent-length: 1000\r\n\r\n"
            + ADD[:10]
        )
        if half_close:
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(65536) == b""  # nothing is answered
    events = wait_until(
        lambda: [e for e in daemon.events("client_disconnected") if e["path"] == path],
        timeout=10,
        message=f"no client_disconnected event for {path}",
    )
    assert [(e["level"], e["method"], e["op"]) for e in events] == [("info", "POST", op)]
    assert not [e for e in daemon.events("request_failed") if e.get("path") == path]
    assert not any("Exception in ASGI application" in line for line in daemon.stderr_lines)
    assert version(daemon, cid) == 0
    assert daemon.connect().events(cid) == []
    status, _ = raw_request(daemon, "GET", b"/healthz")
    assert status == 200
    with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.unix), base_url="http://m") as http:
        metrics = http.get("/metrics").text
    assert f'memoryd_http_requests_total{{method="POST",op="{op}",status="499"}}' in metrics


# --------------------------------------------------------------------------- files


def assert_only_expected_files(daemon: Daemon) -> None:
    """The data directory holds the socket, LMDB files (with each store's identity record)
    and store directories, nothing else."""
    for dirpath, dirnames, filenames in os.walk(daemon.data):
        here = Path(dirpath)
        rel = here.relative_to(daemon.data)
        if rel == Path("."):
            assert set(dirnames) <= {"stores"}, dirnames
            expected = {"data.mdb", "lock.mdb", "memoryd.lock", "memoryd.sock", "identity.json"}
            assert set(filenames) <= expected, filenames
        elif rel == Path("stores"):
            for name in dirnames:
                assert name[0].isalnum() and not name.startswith("memoryd."), name
            assert filenames == [], filenames
        else:
            assert rel.parent == Path("stores"), rel
            assert dirnames == [], (rel, dirnames)
            expected = {"data.mdb", "lock.mdb", "memoryd.lock", "identity.json"}
            assert set(filenames) <= expected, (rel, filenames)
    assert sorted(p.name for p in daemon.root.iterdir()) == ["d"]


def test_data_directory_is_0700_files_0600_socket_0600(daemon: Daemon) -> None:
    """Every directory of the data is 0700, every file 0600, the socket 0600."""
    daemon.connect(store="perms").add("c", [{"role": "user", "content": "x"}])
    seen = 0
    for dirpath, _, filenames in os.walk(daemon.data):
        assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o700, dirpath
        for name in filenames:
            mode = os.lstat(Path(dirpath) / name).st_mode
            assert stat.S_IMODE(mode) == 0o600, (dirpath, name, oct(mode))
            seen += 1
    assert seen >= 5  # data.mdb, lock.mdb, memoryd.sock, stores/perms/{data,lock}.mdb
    assert stat.S_ISSOCK(os.stat(daemon.unix).st_mode)
