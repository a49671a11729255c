"""Routes against clients that leave, HEAD what streams, or send values far past any sense.

A real daemon, real HTTP on its Unix socket (raw sockets where the bytes matter):
abandoned long-polls give their waiter slots back, a poll is answered by its own
timeout however many others wait, a HEAD of a stream ends, an error never echoes a
huge value whole, and ``record`` refuses every ``messages`` that is not a list.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import memoryd
from memoryd.events import Event
from memoryd.server.calls import MAX_EVENTS_PAGE, MAX_TAIL_PAGE
from memoryd.server.config import ServerConfig
from tests.helpers import wait_until
from tests.server.daemon import Daemon
from tests.server.test_hostile_requests import read_to_eof
from tests.server.test_security import connect, raw_request, version

_DEADLINE_S = 30.0
"""How long a test waits for an answer (never reached when it works; the bugs these
tests catch held a poll for 300 s, or forever)."""

TAIL_WAITERS = next(f.default for f in dataclasses.fields(ServerConfig) if f.name == "tail_waiters")
"""The daemon's long-poll slots (``ServerConfig.tail_waiters``, not a ``serve`` flag)."""

_LAST_AFTER = 2**64 - 2
"""The last ``after`` a feed accepts: a poll from it waits its whole timeout."""


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the module, on its Unix socket."""
    with Daemon().start() as running:
        yield running


@pytest.fixture
def fresh() -> Iterator[Daemon]:
    """A daemon of its own, so its threads count only this test's polls (a worker
    thread stays idle for a while after its poll, and would count as one)."""
    with Daemon().start() as running:
        yield running


def _threads(daemon: Daemon) -> int:
    """How many threads the daemon's process runs (each waiting poll holds a worker)."""
    assert daemon.proc is not None
    for line in Path(f"/proc/{daemon.proc.pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line in /proc/<pid>/status")


def _get(daemon: Daemon, target: str) -> tuple[bytes, bytes]:
    """One GET on a fresh connection, closed after it: its head and its body."""
    with connect(daemon) as sock:
        sock.settimeout(_DEADLINE_S)
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: memoryd\r\nConnection: close\r\n\r\n".encode()
        )
        head, _, body = read_to_eof(sock).partition(b"\r\n\r\n")
    return head, body


def _take_every_waiter_slot(daemon: Daemon, stack: ExitStack) -> list[socket.socket]:
    """`TAIL_WAITERS` long-polls of 300 s with nothing to wait for, each on its own
    connection (closed by ``stack``), returned once the daemon runs a thread for each."""
    before = _threads(daemon)
    poll = f"GET /v1/tail?after={_LAST_AFTER}&timeout=300 HTTP/1.1\r\nHost: memoryd\r\n\r\n"
    polls = []
    for _ in range(TAIL_WAITERS):
        sock = stack.enter_context(connect(daemon))
        sock.sendall(poll.encode())
        polls.append(sock)
    wait_until(
        lambda: _threads(daemon) >= before + TAIL_WAITERS,
        timeout=_DEADLINE_S,
        message=f"the daemon did not start {TAIL_WAITERS} waiting polls",
    )
    return polls


# --------------------------------------------------------------------------- long-polls


def _tail_polls_counted(daemon: Daemon, *, status: int) -> int:
    """How many ``GET /v1/tail`` the daemon's metrics count as ended with ``status``."""
    _, body = _get(daemon, "/metrics")
    series = f'memoryd_http_requests_total{{method="GET",op="tail",status="{status}"}} '
    for line in body.decode().splitlines():
        if line.startswith(series):
            return int(float(line.removeprefix(series)))
    return 0


def test_a_tail_poll_is_answered_by_its_own_timeout_while_every_slot_is_taken(
    fresh: Daemon,
) -> None:
    """Every waiter slot held by a live 300 s poll: a ``timeout=0`` read still answers
    at once with what the feed holds, and a ``timeout=1`` poll with an empty answer at
    its timeout; neither queues behind the others."""
    fresh.connect().add("busy", [{"role": "user", "content": "x"}])
    with ExitStack() as stack:
        _take_every_waiter_slot(fresh, stack)
        head, body = _get(fresh, "/v1/tail?after=0&limit=1&timeout=0")
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert len(json.loads(body)["changes"]) == 1
        head, body = _get(fresh, f"/v1/tail?after={_LAST_AFTER}&timeout=1")
        assert head.startswith(b"HTTP/1.1 200 "), head
        assert json.loads(body) == {"changes": []}


def test_abandoned_tail_polls_give_their_waiter_slots_back(fresh: Daemon) -> None:
    """Every waiter slot taken by a 300 s poll whose client then hangs up: each poll
    ends soon after (counted as a 499, long before its timeout), and a poll with news
    waiting is answered with it."""
    fresh.connect().add("left", [{"role": "user", "content": "x"}])
    with ExitStack() as stack:
        _take_every_waiter_slot(fresh, stack)
    wait_until(
        lambda: _tail_polls_counted(fresh, status=499) == TAIL_WAITERS,
        timeout=_DEADLINE_S,
        message="the abandoned polls kept waiting after their clients left",
    )
    head, body = _get(fresh, "/v1/tail?after=0&limit=1&timeout=120")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert len(json.loads(body)["changes"]) == 1
    assert not [line for line in fresh.stderr_lines if "Traceback" in line]


# --------------------------------------------------------------------------- HEAD of a stream


@pytest.mark.parametrize("path", ["/v1/tail/stream", "/v1/stores/headed/tail/stream"])
def test_a_head_of_the_change_stream_ends_and_the_next_request_is_served(
    daemon: Daemon, path: str
) -> None:
    """A HEAD of the endless change stream gets the stream's head (200, NDJSON) and
    ends; a request pipelined after it on the same connection is answered."""
    daemon.connect(store="headed").add("h", [{"role": "user", "content": "x"}])
    with connect(daemon) as sock:
        sock.settimeout(_DEADLINE_S)
        sock.sendall(
            f"HEAD {path}?after=0 HTTP/1.1\r\nHost: memoryd\r\n\r\n"
            "GET /healthz HTTP/1.1\r\nHost: memoryd\r\nConnection: close\r\n\r\n".encode()
        )
        answer = read_to_eof(sock)
    head, _, after_head = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), answer
    assert b"content-type: application/x-ndjson" in head.lower()
    health_head, _, health_body = after_head.partition(b"\r\n\r\n")
    assert health_head.startswith(b"HTTP/1.1 200 "), answer  # no stray body before it
    assert json.loads(health_body)["status"] == "ok"


# --------------------------------------------------------------------------- echoed values


_MB = 1 << 20


@pytest.mark.parametrize(
    ("path", "body", "status", "named"),
    [
        (
            "messages",
            '{"messages":[{"role":"' + "u" * _MB + '","content":"a"}]}',
            422,
            "is not one of",
        ),
        ("messages", '{"messages":[],"' + "f" * _MB + '":1}', 400, "unknown fields"),
        (
            "messages",
            '{"messages":[],' + ",".join(f'"f{i}":1' for i in range(100_000)) + "}",
            400,
            "and 99995 more",
        ),
        ("record", '{"kind":"' + "k" * _MB + '"}', 400, "writes only the kinds"),
        (
            "messages",
            '{"messages":[{"role":"user","content":"a","x":' + "9" * 4000 + "}]}",
            422,
            "outside the stored range",
        ),
    ],
    ids=["role", "field-name", "many-fields", "record-kind", "integer"],
)
def test_an_error_shows_a_huge_value_cut_not_whole(
    daemon: Daemon, path: str, body: str, status: int, named: str
) -> None:
    """A megabyte role, field name or record kind, 100k unknown fields or a 4000-digit
    integer: the 4xx still names the problem, and shows the value cut (its length, or
    the first few names and a count), not sent back whole; nothing is written."""
    cid = f"echo-{path}-{len(body)}"
    answer, error = raw_request(
        daemon, "POST", f"/v1/conversations/{cid}/{path}".encode(), body=body.encode()
    )
    assert answer == status, error
    assert error is not None
    message = error["error"]["message"]
    assert named in message
    assert len(message) < 1000, message[:300]
    assert version(daemon, cid) == 0


# --------------------------------------------------------------------------- record's messages


@pytest.mark.parametrize("value", [0, False, "", {}, None], ids=repr)
def test_record_refuses_a_messages_that_is_not_a_list_even_when_empty(
    daemon: Daemon, value: object
) -> None:
    """``messages`` of 0, false, "", {} or null is refused with the status ``"abc"``
    gets, and writes nothing; a record without ``messages`` is still written."""
    cid = f"typed-{type(value).__name__}"
    path = f"/v1/conversations/{cid}/record".encode()
    wrong, _ = raw_request(daemon, "POST", path, body=b'{"kind":"memo","messages":"abc"}')
    body = json.dumps({"kind": "memo", "messages": value}).encode()
    status, error = raw_request(daemon, "POST", path, body=body)
    assert status == wrong == 422, error
    assert error is not None and "messages must be a list" in error["error"]["message"]
    assert version(daemon, cid) == 0
    assert raw_request(daemon, "POST", path, body=b'{"kind":"memo"}')[0] == 200
    assert version(daemon, cid) == 1


def _filled(data: Path, count: int) -> list[Event]:
    """A data directory whose conversation ``c`` holds ``count`` one-message events (as
    many changes in the feed); its log."""
    filled = memoryd.LmdbStore.start(data, name=f"filled-{data.name}-{count}")
    many = [
        Event(
            version=n + 1,
            kind="appended",
            messages=({"role": "user", "content": str(n)},),
            timestamp=1.0,
        )
        for n in range(count)
    ]
    assert filled.import_events("c", many) == count
    whole = filled.events("c")
    filled.stop()
    return whole


def test_a_log_read_answers_at_most_a_page_and_the_client_reads_on(tmp_path: Path) -> None:
    """A conversation of 2,050 events: ``GET .../events`` answers `MAX_EVENTS_PAGE` of
    them with ``more`` (it built the whole log in one answer, whatever its size), a
    ``limit`` below the page is kept, and `RemoteStore.events` reads every page, so it
    gets the whole log, or its ``limit``, as a local store does."""
    data = tmp_path / "d"
    whole = _filled(data, 2 * MAX_EVENTS_PAGE + 50)
    with Daemon(data).start() as running:
        status, body = raw_request(running, "GET", b"/v1/conversations/c/events")
        assert status == 200 and body is not None
        assert [e["version"] for e in body["events"]] == list(range(1, MAX_EVENTS_PAGE + 1))
        assert body["more"] is True
        last = f"/v1/conversations/c/events?after={2 * MAX_EVENTS_PAGE}".encode()
        status, body = raw_request(running, "GET", last)
        assert (status, len(body["events"]), body["more"]) == (200, 50, False)  # type: ignore[index]
        status, body = raw_request(running, "GET", b"/v1/conversations/c/events?limit=3")
        assert (status, len(body["events"]), body["more"]) == (200, 3, True)  # type: ignore[index]
        status, body = raw_request(running, "GET", b"/v1/conversations/c/events?limit=-1")
        assert status == 400 and "limit" in body["error"]["message"]  # type: ignore[index]
        remote = running.connect()
        assert remote.events("c") == whole
        assert remote.events("c", after=10, limit=1500) == whole[10:1510]
        assert remote.events("c", after=2040, limit=1500) == whole[2040:]
    memoryd.shutdown()


def test_a_feed_read_answers_at_most_a_page_however_many_it_asks_for(tmp_path: Path) -> None:
    """A store holding 10,050 changes: a read of the feed asking for 20,000 gets
    `MAX_TAIL_PAGE` (the daemon never builds an answer of any size a client names), and
    the next page, from the last position, gets the rest."""
    data = tmp_path / "d"
    _filled(data, MAX_TAIL_PAGE + 50)
    with Daemon(data).start() as running:
        remote = running.connect()
        page = remote.tail(limit=2 * MAX_TAIL_PAGE)
        assert len(page) == MAX_TAIL_PAGE
        rest = remote.tail(after=page[-1].position, limit=2 * MAX_TAIL_PAGE)
        assert len(rest) == 50
    memoryd.shutdown()
