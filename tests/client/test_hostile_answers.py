"""A `RemoteStore` whose "daemon" answers what no memoryd daemon would.

The server is a scripted one (`tests.client._scripted`): a 2xx whose body decodes but
has the wrong shape, a redirect, an error whose message is huge. Every store call
raises `ProtocolError` naming the call and what was wrong (never a KeyError,
TypeError or AttributeError from inside the client, nor a version that is not one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import memoryd
from memoryd import codec
from memoryd.client.calls import MAX_ERROR_MESSAGE_CHARS
from memoryd.client.remote import RemoteStore, whereis
from memoryd.protocol import ProtocolError
from tests.client._scripted import Answer, ScriptedServer

Call = Callable[[RemoteStore], Any]

_HI = [{"role": "user", "content": "hi"}]


def _answer(status: int, body: Any, wire: str = "json") -> Answer:
    data = codec.pack_wire(body) if wire == "msgpack" else json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} X\r\ncontent-type: application/{wire}\r\n"
        f"content-length: {len(data)}\r\n\r\n"
    ).encode()
    return Answer((head + data,))


@pytest.fixture
def remote() -> Iterator[Callable[..., tuple[ScriptedServer, RemoteStore]]]:
    made: list[tuple[ScriptedServer, RemoteStore]] = []

    def make(*answers: Answer, wire: str = "json") -> tuple[ScriptedServer, RemoteStore]:
        server = ScriptedServer(list(answers))
        store = memoryd.connect(server.url, timeout=5, wire=wire)
        made.append((server, store))
        return server, store

    yield make
    for server, store in made:
        store.close()
        server.close()


def _add(s: RemoteStore) -> Any:
    return s.add("c", _HI)


def _keyed_add(s: RemoteStore) -> Any:
    return s.add("c", _HI, idempotency_key="k", expected_version=0)


def _record(s: RemoteStore) -> Any:
    return s.record("c", "memo", data={"lease": "mine"}, expected_version=3)


_CALLS: dict[str, Call] = {
    "add": _add,
    "keyed-add": _keyed_add,
    "record": _record,
    "fork": lambda s: s.fork("c", "d"),
    "pop": lambda s: s.pop("c"),
    "get": lambda s: s.get("c"),
    "last-n": lambda s: s.get("c", limit=5),
    "version": lambda s: s.version("c"),
    "events": lambda s: s.events("c", after=2),
    "conversations": lambda s: s.conversations(prefix="run/"),
    "tail": lambda s: s.tail(after=0),
    "stats": lambda s: s.stats(),
}

_WRONG: list[tuple[str, Any, str]] = [
    ("add", {}, "has no 'version' field"),
    ("add", [], "is a list of 0, not an object"),
    ("add", {"version": "7"}, "holds the version '7'"),
    ("add", {"version": None}, "holds the version None"),
    ("keyed-add", {"version": -5}, "holds the version -5"),
    ("keyed-add", {"version": True}, "holds the version True"),
    ("record", {"version": 1.5}, "holds the version 1.5"),
    ("record", {"version": 2**64}, "holds the version 18446744073709551616"),
    ("fork", {"versions": 1}, "has no 'version' field"),
    ("pop", {}, "has no 'message' field"),
    ("pop", {"message": "last"}, "holds the message 'last', not an object or null"),
    ("get", {"messages": 5}, "holds messages as 5, not a list"),
    ("get", "text", "is 'text', not an object"),
    ("last-n", {}, "has no 'messages' field"),
    ("last-n", {"messages": [1, 2]}, "holds messages[0] as 1, not a dict"),
    ("version", {"version": "x"}, "holds the version 'x'"),
    ("version", {"version": -1}, "holds the version -1"),
    ("events", {"events": 5}, "holds events as 5, not a list"),
    ("events", {"events": ["e"]}, "holds events[0] as 'e', not a dict"),
    ("events", {"events": [{"messages": [], "version": "x"}]}, "a record that cannot be read"),
    ("events", {"events": [{"messages": [], "timestamp": 10**400}]}, "cannot be read"),
    ("events", {"events": [], "more": "yes"}, "holds more 'yes', not true or false"),
    (
        "events",  # a page that does not move on would be read for ever
        {
            "events": [{"version": 2, "kind": "appended", "messages": _HI, "timestamp": 1.0}],
            "more": True,
        },
        "holds version 2, not one after 2",
    ),
    ("conversations", {"conversations": 5}, "holds conversations as 5, not a list"),
    ("conversations", {"conversations": [5]}, "holds conversations[0] as 5, not a str"),
    ("tail", {"changes": {"a": 1}}, "holds changes as a dict of 1, not a list"),
    ("tail", {"changes": [{"messages": []}]}, "a record that cannot be read"),
    ("stats", [1, 2], "is a list of 2, not an object"),
]


@pytest.mark.parametrize(
    ("call", "body", "match"), _WRONG, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(_WRONG)]
)
def test_an_answer_of_the_wrong_shape_is_a_protocol_error(
    remote: Any, call: str, body: Any, match: str
) -> None:
    """A 200 whose body decodes but is not the call's answer: ProtocolError naming the
    call and the problem; the call is not sent again."""
    server, store = remote(_answer(200, body), _answer(200, body))
    with pytest.raises(ProtocolError, match="the daemon's answer to ") as caught:
        _CALLS[call](store)
    assert match in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("call", ["add", "version", "last-n"])
def test_a_msgpack_answer_of_the_wrong_shape_is_a_protocol_error(remote: Any, call: str) -> None:
    """The same over msgpack bodies, on the busiest calls' own ways of reading them."""
    _, store = remote(_answer(200, {"version": -1, "messages": "x"}, "msgpack"), wire="msgpack")
    with pytest.raises(ProtocolError, match="the daemon's answer to "):
        _CALLS[call](store)


@pytest.mark.parametrize("status", [101, 204, 301, 304, 307])
def test_a_status_no_daemon_sends_is_a_protocol_error(remote: Any, status: int) -> None:
    """A switch of protocols or a redirect is not a daemon's answer: ProtocolError naming
    the status (a 204 has no body, so no version), sent once."""
    head = f"HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n".encode()
    if status == 101:
        head = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n"
    server, store = remote(Answer((head,), close=True), Answer((head,), close=True))
    with pytest.raises(ProtocolError, match=f"HTTP {status}|has no 'version' field"):
        store.add("c", _HI)
    assert len(server.requests) == 1


def test_a_huge_error_message_is_cut(remote: Any) -> None:
    """An error whose message is a megabyte is raised with its first
    `MAX_ERROR_MESSAGE_CHARS` characters and its length."""
    message = "x" * (1 << 20)
    _, store = remote(_answer(400, {"error": {"type": "ValueError", "message": message}}))
    with pytest.raises(ValueError, match=r"\.\.\. \(1048576 characters in all\)$") as caught:
        store.get("c")
    assert len(str(caught.value)) < MAX_ERROR_MESSAGE_CHARS + 100


def test_a_store_start_or_lookup_with_a_bad_limit_is_a_protocol_error(remote: Any) -> None:
    """A store's info whose ``max_message_bytes`` is not a positive int: ProtocolError,
    and no handle is returned to check messages against it."""
    info = {"name": "s", "max_message_bytes": "lots"}
    server = ScriptedServer([_answer(201, info), _answer(200, info)])
    try:
        with pytest.raises(ProtocolError, match="holds max_message_bytes 'lots'"):
            RemoteStore.start(server.url, name="s", timeout=5)
        with pytest.raises(ProtocolError, match="holds max_message_bytes 'lots'"):
            whereis(server.url, "s", timeout=5)
    finally:
        server.close()


def _page(versions: list[int], more: bool) -> Answer:
    events = [
        {"version": v, "kind": "appended", "messages": _HI, "timestamp": 1.0} for v in versions
    ]
    return _answer(200, {"events": events, "more": more})


def test_a_log_cut_by_a_clear_between_pages_is_read_again_whole(remote: Any) -> None:
    """Pages 1-2, then a page from version 5 (a clear removed 3 and 4 between the two
    reads): pieced together the log would skip versions, so the read starts over and
    returns the log the conversation holds now."""
    server, store = remote(_page([1, 2], True), _page([5], False), _page([5, 6], False))
    assert [e.version for e in store.events("c")] == [5, 6]
    targets = [r.split(b" ")[1] for r in server.requests]
    assert targets == [
        b"/v1/conversations/c/events?after=0",
        b"/v1/conversations/c/events?after=2",
        b"/v1/conversations/c/events?after=0",
    ]


def test_a_log_cut_by_clears_at_every_read_is_unavailable_not_read_for_ever(remote: Any) -> None:
    """Clears cutting every one of five reads: StoreUnavailable saying so, ten requests."""
    cut = [_page([1, 2], True), _page([5], False)] * 5
    server, store = remote(*cut)
    with pytest.raises(memoryd.StoreUnavailable, match="cleared while it was read, 5 times"):
        store.events("c")
    assert len(server.requests) == 10
