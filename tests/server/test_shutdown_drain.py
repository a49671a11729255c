"""A daemon stopping with requests in flight: they finish (their stores still run) within
the grace period, or are answered with a JSON error by its end; nothing is logged as a
failure and nothing starts once the daemon has stopped. Also SIGHUP, which stops it as
SIGTERM does.

The daemons here run `memoryd.server.daemon.run` with a short grace period (``memoryd
serve`` has 10 s), so a request that outlives it ends the test in a few seconds.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgpack
import pytest

from tests.helpers import wait_until
from tests.server.daemon import Daemon

GRACE_S = 2.0

_LAUNCHER = """
import sys
from pathlib import Path
from memoryd import logging
from memoryd.server import ServerConfig, run
logging.configure(fmt="json", level="info")
sys.exit(run(ServerConfig(data=Path(sys.argv[1]), grace_s=float(sys.argv[2]))))
"""


class ShortGraceDaemon(Daemon):
    """`Daemon`, with a grace period of `GRACE_S` seconds."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", _LAUNCHER, str(self.data), str(GRACE_S)]


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with ShortGraceDaemon().start() as running:
        yield running


def _add_body(text: str, media: str = "json") -> bytes:
    body = {"messages": [{"role": "user", "content": text}]}
    return msgpack.packb(body) if media == "msgpack" else json.dumps(body).encode()


def _begin(
    daemon: Daemon, method: str, path: str, body: bytes, sent: int, media: str = "json"
) -> socket.socket:
    """A request whose head and first ``sent`` body bytes are on their way (a msgpack
    add is taken by the connection's append lane, not the app)."""
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(30)
    sock.connect(daemon.unix)
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: m\r\nContent-Type: application/{media}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body[:sent])
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of the one response on ``sock`` (read to its end)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed without an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed in the middle of the answer"
        body += chunk
    sock.close()
    return int(lines[0].split()[1]), json.loads(body)


def _refuses_connections(daemon: Daemon) -> bool:
    """True once the daemon no longer accepts connections (it is stopping)."""
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(daemon.unix)
    except OSError:
        return True
    finally:
        probe.close()
    return False


def _sigterm_and_wait_until_it_stops_accepting(daemon: Daemon) -> None:
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: _refuses_connections(daemon), timeout=10)


def _failures(daemon: Daemon) -> list[str]:
    """The log lines that say something failed: errors, tracebacks."""
    return [
        line
        for line in daemon.stderr_lines
        if '"level": "error"' in line or "Traceback" in line or '"exception"' in line
    ]


def _after_stopped(daemon: Daemon) -> list[str]:
    """The events logged after ``daemon_stopped``."""
    events = [json.loads(line).get("event") for line in daemon.stderr_lines if line[:1] == "{"]
    assert "daemon_stopped" in events
    return events[events.index("daemon_stopped") + 1 :]


def _stored(daemon: Daemon, cid: str, store: str | None = None) -> list[str]:
    daemon.start()
    try:
        handle = daemon.connect(**({"store": store} if store else {}))
        return [m["content"] for m in handle.get(cid)]
    finally:
        assert daemon.terminate() == 0


def test_writes_in_flight_at_sigterm_finish_on_their_running_stores(daemon: Daemon) -> None:
    """An add whose body is still arriving when SIGTERM comes, to the default store and
    to a named store that is not running yet, is answered 200 once its body is in, and is
    stored: the stores run, and may start, until the requests in flight are done."""
    body = _add_body("in flight")
    default = _begin(daemon, "POST", "/v1/conversations/c/messages", body, 5)
    named = _begin(daemon, "POST", "/v1/stores/team/conversations/c/messages", body, 5)
    time.sleep(0.2)  # let the daemon take both heads in before the signal
    _sigterm_and_wait_until_it_stops_accepting(daemon)
    default.sendall(body[5:])
    named.sendall(body[5:])
    assert _answer(default) == (200, {"version": 1})
    assert _answer(named) == (200, {"version": 1})
    assert daemon.proc is not None and daemon.proc.wait(60) == 0
    assert _failures(daemon) == []
    assert _after_stopped(daemon) == []
    assert _stored(daemon, "c") == ["in flight"]
    assert _stored(daemon, "c", store="team") == ["in flight"]


@pytest.mark.parametrize("media", ["json", "msgpack"])
def test_a_body_still_arriving_when_the_grace_period_ends_gets_a_json_503(
    daemon: Daemon, media: str
) -> None:
    """A body dribbled in past the grace period is answered before it ends, with a JSON
    503 ``StoreUnavailable`` saying nothing was written (a client retries it), logged in
    one line; nothing is written, and no failure is logged. A msgpack add, which the
    connection's append lane takes (every `RemoteStore` add), is answered so too: its
    connection was closed with no answer."""
    body = _add_body("never whole", media)
    slow = _begin(daemon, "POST", "/v1/conversations/slow/messages", body, 1, media)
    stop = threading.Event()

    def dribble() -> None:
        for i in range(2, len(body)):  # never the last byte
            if stop.wait(0.1):
                return
            try:
                slow.sendall(body[i - 1 : i])
            except OSError:
                return

    dripping = threading.Thread(target=dribble, daemon=True)
    dripping.start()
    time.sleep(0.2)
    _sigterm_and_wait_until_it_stops_accepting(daemon)
    status, answer = _answer(slow)
    stop.set()
    dripping.join()
    assert status == 503
    assert answer["error"]["type"] == "StoreUnavailable"
    assert "nothing was written" in answer["error"]["message"]
    assert daemon.proc is not None and daemon.proc.wait(60) == 0
    assert _failures(daemon) == []
    assert [e["outcome"] for e in daemon.events("request_cut_at_shutdown")] == ["nothing written"]
    assert _stored(daemon, "slow") == []


def test_store_churn_at_sigterm_ends_cleanly_and_starts_nothing_after(daemon: Daemon) -> None:
    """Clients starting, writing to and stopping named stores when SIGTERM comes: every
    answer is a success or a JSON error, the daemon exits 0, logs no failure, and starts
    no store (nor a supervision tree) after it said it stopped."""
    statuses: list[tuple[int, str]] = []
    stop = threading.Event()

    def churn(k: int) -> None:
        transport = httpx.HTTPTransport(uds=daemon.unix)
        with httpx.Client(transport=transport, base_url="http://m", timeout=30) as client:
            i = 0
            while not stop.is_set():
                name = f"s{k}-{i % 3}"
                try:
                    for method, path, payload in (
                        ("PUT", f"/v1/stores/{name}", {"kind": "lmdb"}),
                        ("POST", f"/v1/stores/{name}/conversations/c/messages", None),
                        ("DELETE", f"/v1/stores/{name}", None),
                    ):
                        content = (
                            json.dumps(payload).encode()
                            if payload is not None
                            else _add_body("x")
                            if method == "POST"
                            else None
                        )
                        response = client.request(method, path, content=content)
                        statuses.append((response.status_code, response.text))
                except httpx.TransportError:  # the daemon is gone
                    return
                i += 1

    clients = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
    for client in clients:
        client.start()
    wait_until(lambda: len(statuses) >= 40, timeout=30)
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGTERM)
    status = daemon.proc.wait(60)
    stop.set()
    for client in clients:
        client.join(60)
    assert status == 0
    assert [(code, text) for code, text in statuses if code >= 500 and code != 503] == []
    assert all(json.loads(text)["error"] for code, text in statuses if code >= 400)
    assert _failures(daemon) == []
    assert _after_stopped(daemon) == []


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT])
def test_sighup_and_sigint_stop_the_daemon_as_sigterm_does(daemon: Daemon, signum: int) -> None:
    """SIGHUP (and SIGINT) stop the daemon gracefully: exit 0, the signal logged, the
    socket removed, what was written kept."""
    daemon.connect().add("c", [{"role": "user", "content": "kept"}])
    assert daemon.proc is not None
    daemon.proc.send_signal(signum)
    assert daemon.proc.wait(60) == 0
    assert [e.get("signal") for e in daemon.events("daemon_stopping")] == [
        signal.Signals(signum).name
    ]
    assert not Path(daemon.unix).exists()
    assert _stored(daemon, "c") == ["kept"]


def test_a_second_ctrl_c_stops_at_once(tmp_path: Path) -> None:
    """Ctrl-C while a request's body is still coming: the daemon waits for it, up to its
    10 s grace period; Ctrl-C again and it exits at once, status 130, saying so (the
    second one was ignored: uvicorn's "CTRL+C to force quit" did nothing). Nothing
    acknowledged is lost: the write made before is there after a restart."""
    with Daemon(tmp_path / "d") as daemon:
        daemon.start()
        daemon.connect().add("kept", [{"role": "user", "content": "before"}])
        slow = _begin(daemon, "POST", "/v1/conversations/c/messages", _add_body("x"), 5)
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGINT)
        wait_until(lambda: any("daemon_stopping" in line for line in daemon.stderr_lines))
        daemon.proc.send_signal(signal.SIGINT)
        assert daemon.proc.wait(timeout=5) == 130
        wait_until(lambda: any("Ctrl-C again" in line for line in daemon.stderr_lines))
        slow.close()
    with Daemon(tmp_path / "d") as again:
        again.start()
        assert again.connect().get("kept") == [{"role": "user", "content": "before"}]
