"""The daemon as users meet it: its socket, its bind policy, auth, limits, errors, signals."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import memoryd
from memoryd import codec
from tests.helpers import Worker, wait_until
from tests.server.daemon import TOKEN, Daemon, serve_refused


@pytest.fixture
def unix_http(daemon: Daemon) -> Iterator[httpx.Client]:
    with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.unix), base_url="http://m") as c:
        yield c


@pytest.fixture
def tcp_http(daemon: Daemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://{daemon.http}", trust_env=False) as c:
        yield c


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_socket_file_is_0600(daemon: Daemon) -> None:
    """The Unix socket is a socket only its owner may open."""
    mode = os.stat(daemon.unix).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"authorization": "Bearer wrong"}, id="wrong"),
        pytest.param({"authorization": f"Bearer {TOKEN}x"}, id="longer"),
        pytest.param({"authorization": TOKEN}, id="not-bearer"),
    ],
)
def test_wrong_or_missing_token_is_refused_and_writes_nothing(
    daemon: Daemon, tcp_http: httpx.Client, headers: dict[str, str]
) -> None:
    """Over TCP a request without the right token gets 401 and changes nothing."""
    cid = f"auth-{len(headers)}-{headers.get('authorization', '')[:3]}"
    response = tcp_http.post(
        f"/v1/conversations/{cid}/messages", json={"messages": [user("x")]}, headers=headers
    )
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "Unauthorized"
    assert daemon.connect().version(cid) == 0


def test_right_token_is_accepted_over_tcp(daemon: Daemon) -> None:
    """The client with the token reads and writes over TCP."""
    store = memoryd.connect(f"http://{daemon.http}", token=TOKEN)
    assert store.add("tcp-ok", [user("a")]) == 1
    assert store.get("tcp-ok") == [user("a")]


def test_client_with_wrong_token_raises_authentication_error(daemon: Daemon) -> None:
    """RemoteStore maps 401 to AuthenticationError, a PermissionError."""
    store = memoryd.connect(f"http://{daemon.http}", token="nope")
    with pytest.raises(memoryd.AuthenticationError):
        store.add("c", [user("a")])
    with pytest.raises(PermissionError):
        store.get("c")


def test_foreign_host_and_browser_origin_are_refused(tcp_http: httpx.Client) -> None:
    """A DNS-rebinding Host or a browser Origin gets 403, even with the token."""
    auth = {"authorization": f"Bearer {TOKEN}"}
    evil_host = tcp_http.get("/v1/stats", headers={**auth, "host": "evil.example:80"})
    assert evil_host.status_code == 403
    evil_origin = tcp_http.get("/v1/stats", headers={**auth, "origin": "http://evil.example"})
    assert evil_origin.status_code == 403
    assert tcp_http.get("/v1/stats", headers=auth).status_code == 200


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        pytest.param(["--listen", "0.0.0.0:0"], "without a token", id="public-no-token"),
        pytest.param(["--listen", "127.0.0.1:0"], "without a token", id="loopback-no-token"),
        pytest.param(["--listen", "0.0.0.0:0", "--no-auth"], "loopback", id="public-no-auth"),
    ],
)
def test_tcp_without_a_token_is_refused(tmp_path: Path, args: list[str], needle: str) -> None:
    """serve refuses TCP without a token (and --no-auth off loopback), saying what to do."""
    done = serve_refused(tmp_path / "d", *args)
    assert done.returncode == 2
    assert needle in done.stderr
    assert "--token" in done.stderr
    assert not (tmp_path / "d").exists()


def test_no_auth_on_loopback_serves_with_a_warning() -> None:
    """--no-auth on 127.0.0.1 is accepted and logged as a warning."""
    with Daemon(tcp=True, token=None, extra=("--no-auth",)).start() as daemon:
        store = memoryd.connect(f"http://{daemon.http}")
        assert store.add("c", [user("a")]) == 1
        assert daemon.events("tcp_without_auth")


def add_body(**fields: Any) -> bytes:
    """A JSON add of one user message, with ``fields`` added (or replacing ``messages``)."""
    return json.dumps({"messages": [user("x")], **fields}).encode()


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        pytest.param(b"{not json", 400, "ValueError", id="bad-json"),
        pytest.param(b"[1, 2]", 400, "ValueError", id="not-an-object"),
        pytest.param(add_body(extra=1), 400, "ValueError", id="unknown-field"),
        pytest.param(b"{}", 400, "ValueError", id="missing-messages"),
        pytest.param(
            add_body(messages=[{"role": "robot", "content": "x"}]),
            422,
            "InvalidMessage",
            id="bad-role",
        ),
        pytest.param(add_body(messages=[]), 422, "InvalidMessage", id="no-messages"),
        pytest.param(add_body(expected_version="1"), 400, "ValueError", id="version-str"),
        pytest.param(add_body(expected_version=5), 409, "ConflictError", id="conflict"),
    ],
)
def test_bad_add_gets_a_json_4xx_and_writes_nothing(
    daemon: Daemon, unix_http: httpx.Client, body: bytes, status: int, kind: str
) -> None:
    """Each bad request is answered with its status and error type; nothing is written."""
    store = daemon.connect()
    store.add("bad-add", [user("before")]) if store.version("bad-add") == 0 else None
    before = (store.version("bad-add"), store.get("bad-add"))
    response = unix_http.post(
        "/v1/conversations/bad-add/messages",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == kind
    assert error["message"]
    assert (store.version("bad-add"), store.get("bad-add")) == before


def test_conflict_body_carries_expected_and_actual(unix_http: httpx.Client) -> None:
    """A 409 names the versions; the client raises ConflictError with them."""
    unix_http.post("/v1/conversations/cf/messages", json={"messages": [user("a")]})
    response = unix_http.post(
        "/v1/conversations/cf/messages", json={"messages": [user("b")], "expected_version": 0}
    )
    assert response.status_code == 409
    assert response.json()["error"]["expected"] == 0
    assert response.json()["error"]["actual"] == 1


def test_too_many_messages_in_one_add_is_refused(daemon: Daemon, unix_http: httpx.Client) -> None:
    """An add of more than 10,000 messages is refused whole."""
    response = unix_http.post(
        "/v1/conversations/many/messages", json={"messages": [user("x")] * 10_001}
    )
    assert response.status_code == 422
    assert "10000" in response.json()["error"]["message"]
    assert daemon.connect().version("many") == 0


def test_body_over_the_limit_gets_413_and_writes_nothing(
    daemon: Daemon, unix_http: httpx.Client
) -> None:
    """A body over 64 MiB is refused from its Content-Length, before it is read."""
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * (65 << 20) + b'"}]}'
    response = unix_http.post(
        "/v1/conversations/big/messages", content=big, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "PayloadTooLarge"
    assert daemon.connect().version("big") == 0


def test_bad_query_and_store_names_get_400(unix_http: httpx.Client) -> None:
    """A non-integer limit and an invalid store name are named in a 400."""
    response = unix_http.get("/v1/conversations/c/messages", params={"limit": "ten"})
    assert response.status_code == 400
    assert "limit" in response.json()["error"]["message"]
    response = unix_http.get("/v1/stores/bad name!/stats")
    assert response.status_code == 400
    assert "store name" in response.json()["error"]["message"]
    assert unix_http.get("/v1/nowhere").json()["error"]["type"] == "NotFound"


def test_msgpack_bodies_are_accepted_and_returned(unix_http: httpx.Client) -> None:
    """application/msgpack in and out round-trips the same values as JSON."""
    message = {"role": "user", "content": "h\u00e9llo", "metadata": {"n": [1, 2.5, None]}}
    headers = {"content-type": "application/msgpack", "accept": "application/msgpack"}
    body = codec.pack_wire({"messages": [message]})
    response = unix_http.post("/v1/conversations/mp/messages", content=body, headers=headers)
    assert response.headers["content-type"] == "application/msgpack"
    assert codec.unpack_wire(response.content) == {"version": 1}
    response = unix_http.get("/v1/conversations/mp/messages", headers=headers)
    assert codec.unpack_wire(response.content) == {"messages": [message]}
    assert unix_http.get("/v1/conversations/mp/messages").json() == {"messages": [message]}


def test_json_client_and_msgpack_client_agree(daemon: Daemon) -> None:
    """RemoteStore over JSON reads what RemoteStore over msgpack wrote."""
    memoryd.connect(daemon.address, wire="msgpack").add("wire", [user("a")])
    assert memoryd.connect(daemon.address, wire="json").get("wire") == [user("a")]


def test_healthz_metrics_and_openapi(daemon: Daemon, tcp_http: httpx.Client) -> None:
    """/healthz needs no token; /metrics counts requests and fsyncs; the OpenAPI lists routes."""
    assert tcp_http.get("/healthz").json()["status"] == "ok"
    daemon.connect().add("metrics", [user("a")])
    auth = {"authorization": f"Bearer {TOKEN}"}
    text = tcp_http.get("/metrics", headers=auth).text
    assert 'memoryd_http_requests_total{method="POST",op="add",status="200"}' in text
    assert 'memoryd_store_fsyncs_total{store="memoryd.default"}' in text
    assert "memoryd_store_mean_batch" in text
    commit = re.search(r'memoryd_store_txn_commit_s_total\{store="memoryd.default"\} (\S+)', text)
    assert commit is not None and float(commit.group(1)) > 0.0  # the add above committed
    assert "memoryd_store_restarts_total" in text
    doc = tcp_http.get("/v1/openapi.json", headers=auth).json()
    assert "/v1/conversations/{cid}/messages" in doc["paths"]
    assert set(doc["paths"]["/v1/stores/{store}/conversations/{cid}/messages"]) == {
        "get",
        "post",
        "delete",
    }


def test_named_store_is_started_on_first_use_and_kept_on_disk(daemon: Daemon) -> None:
    """connect(store=name) reaches a durable store under DATA/stores/name."""
    store = daemon.connect(store="notes")
    assert store.add("c", [user("a")]) == 1
    assert (daemon.data / "stores" / "notes" / "data.mdb").exists()
    assert memoryd.connect(daemon.address, store="notes").get("c") == [user("a")]


def test_tail_stream_sends_changes_as_lines(daemon: Daemon, unix_http: httpx.Client) -> None:
    """GET /tail/stream yields one JSON change a line as writes happen."""
    store = daemon.connect(store="streamed")
    store.add("c", [user("first")])
    lines: list[str] = []
    with unix_http.stream("GET", "/v1/stores/streamed/tail/stream") as response:
        for line in response.iter_lines():
            lines.append(line)
            if len(lines) == 1:
                store.add("c", [user("second")])
            if len(lines) == 2:
                break
    assert [json.loads(line)["messages"][0]["content"] for line in lines] == ["first", "second"]


def test_sigterm_under_load_exits_cleanly_and_keeps_every_acknowledged_write() -> None:
    """SIGTERM while clients write: exit 0, and every acknowledged add is there after a restart."""
    with Daemon().start() as daemon:
        acked: dict[int, list[str]] = {t: [] for t in range(4)}
        stop = threading.Event()

        def writer(t: int) -> None:
            store = memoryd.connect(daemon.address, timeout=5.0)
            i = 0
            while not stop.is_set():
                try:
                    store.add(f"w{t}", [user(f"{t}-{i}")])
                except memoryd.StoreUnavailable:
                    return
                acked[t].append(f"{t}-{i}")
                i += 1

        workers = [Worker(lambda t=t: writer(t)) for t in range(4)]
        for w in workers:
            w.start()
        wait_until(lambda: all(len(a) >= 20 for a in acked.values()), timeout=60)
        assert daemon.terminate() == 0
        stop.set()
        for w in workers:
            w.outcome(timeout=60)
        assert any("daemon_stopped" in line for line in daemon.stderr_lines)
        assert not Path(daemon.unix).exists()
        daemon.start()
        store = daemon.connect()
        for t, texts in acked.items():
            stored = [m["content"] for m in store.get(f"w{t}")]
            assert stored[: len(texts)] == texts
            assert len(stored) - len(texts) <= 1  # at most the one add in flight at the signal


def test_every_store_restart_is_counted_and_the_series_stays(
    daemon: Daemon, unix_http: httpx.Client
) -> None:
    """Five crashes of a named store between two scrapes count five restarts (they counted
    as one: restarts were seen only by comparing the actor at each scrape), the first
    scrape after crashes counts them all, and the series is there while a restart is
    under way (it dropped out then)."""
    store = daemon.connect(store="crashy")
    store.add("c", [user("a")])

    def restarts() -> int | None:
        text = unix_http.get("/metrics").text
        found = re.search(r'memoryd_store_restarts_total\{store="crashy"\} (\S+)', text)
        return None if found is None else int(float(found.group(1)))

    assert restarts() == 0
    for n in range(1, 6):
        assert unix_http.post("/v1/stores/crashy/crash").status_code < 300
        store.add("c", [user(f"after {n}")])  # waits for the new incarnation
    assert restarts() == 5
    assert unix_http.post("/v1/stores/crashy/crash").status_code < 300
    assert restarts() in (5, 6)  # there at once, restart under way or done
