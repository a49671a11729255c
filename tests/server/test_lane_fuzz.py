"""Hostile bytes at the connection's own lanes: never a 5xx, never a crash, nothing lost.

The msgpack add (`memoryd.server.appends`) and the msgpack last-N read
(`memoryd.server.lane`) are taken by the connection before the ASGI app, so the
OpenAPI-driven fuzzing (`test_schemathesis`, JSON bodies) never reaches them. Here
hypothesis writes requests byte for byte to a real ``memoryd serve`` over TCP:
arbitrary msgpack documents and raw bytes as add bodies, adds whose fields hold values
of every msgpack type, and read targets with odd ids and limits. Every answer must be
a 2xx or a 4xx, the daemon must stay up and log no failed request, and a conversation
written before the fuzzing must read back the same after it, with exactly the adds
that were answered 200 on top.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd import codec
from memoryd.messages import user
from tests.server.daemon import TOKEN, Daemon
from tests.server.test_fast_lane import _exchange

EXAMPLES = int(os.environ.get("MEMORYD_LANE_FUZZ_EXAMPLES", "120"))
_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_HEADERS = (
    b"content-type: application/msgpack\r\n"
    b"accept: application/msgpack\r\n"
    b"host: 127.0.0.1\r\n"
    b"authorization: Bearer " + TOKEN.encode() + b"\r\n"
)
_TARGET = "fz-target"
_SEEDED = "fz-seeded"


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon(tcp=True, extra=()).start() as running:
        yield running


@pytest.fixture(scope="module")
def accepted() -> set[int]:
    """The versions of `_TARGET` that 200 answers gave, over the whole module (a replayed
    idempotency key answers its first version again)."""
    return set()


def _send(daemon: Daemon, request: bytes) -> tuple[int, bytes]:
    host, port = daemon.http.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        status, _, body = _exchange(sock, request)
    return status, body


def _post(daemon: Daemon, cid: str, body: bytes) -> tuple[int, bytes]:
    target = f"/v1/conversations/{quote(cid, safe='')}/messages".encode()
    head = b"POST " + target + b" HTTP/1.1\r\n" + _HEADERS
    return _send(daemon, head + b"content-length: %d\r\n\r\n" % len(body) + body)


def _answered(status: int, body: bytes) -> None:
    assert 200 <= status < 500, (status, body[:300])


_INTS = st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)
"""Every integer msgpack can carry."""
_SCALARS = (
    st.none()
    | st.booleans()
    | _INTS
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.binary(max_size=40)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=10) | _INTS | st.binary(max_size=5), inner, max_size=5)
    ),
    max_leaves=20,
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool", "", "x"]) | _SCALARS},
    optional={
        "content": _VALUES,
        "tool_calls": _VALUES,
        "tool_call_id": _VALUES,
        "name": _VALUES,
    },
)
_ADD = st.fixed_dictionaries(
    {"messages": st.lists(_MESSAGE | _VALUES, max_size=4) | _VALUES},
    optional={
        "idempotency_key": _VALUES,
        "expected_version": _VALUES,
        "then_clear": _VALUES,
        "extra": _VALUES,
    },
)

_WELL_FORMED = st.fixed_dictionaries(
    {"messages": st.lists(st.text(max_size=30).map(user), min_size=1, max_size=3)},
    optional={
        "idempotency_key": st.sampled_from(["k1", "k2", "k3"]),
        "expected_version": st.integers(min_value=0, max_value=40),
    },
)
"""Adds the daemon may take: their answers (a version, a replayed key's first version, a
conflict) keep the tally at the end exact."""


def _pack(document: Any) -> bytes:
    return msgpack.packb(document, use_bin_type=True, strict_types=False)


def test_an_add_with_a_field_named_by_empty_bytes_is_a_400(daemon: Daemon) -> None:
    """The decoder refuses binary data by its length, so an empty one passes: an add with
    a field named ``b""`` beside another unknown one was a 500 (the unknown names could not be
    sorted for the error message; hypothesis found it). It is a 400 naming the name."""
    body = _pack({"messages": [user("x")], b"": 1, "extra": 2})
    status, answer = _post(daemon, _TARGET, body)
    assert status == 400, answer
    assert b"field names are strings" in answer, answer


@_SETTINGS
@given(document=_WELL_FORMED | _ADD | _VALUES)
def test_an_add_of_any_msgpack_document_is_answered_2xx_or_4xx(
    daemon: Daemon, accepted: set[int], document: Any
) -> None:
    status, body = _post(daemon, _TARGET, _pack(document))
    _answered(status, body)
    if status == 200:
        accepted.add(codec.unpack_wire(body)["version"])


@_SETTINGS
@given(body=st.binary(max_size=300))
def test_an_add_of_arbitrary_bytes_is_answered_2xx_or_4xx(
    daemon: Daemon, accepted: set[int], body: bytes
) -> None:
    status, answer = _post(daemon, _TARGET, body)
    _answered(status, answer)
    if status == 200:
        accepted.add(codec.unpack_wire(body)["version"])


@_SETTINGS
@given(cid=st.text(min_size=1, max_size=60), limit=st.text(max_size=25) | st.integers().map(str))
def test_a_read_with_any_id_and_limit_is_answered_2xx_or_4xx(
    daemon: Daemon, cid: str, limit: str
) -> None:
    target = f"/v1/conversations/{quote(cid, safe='')}/messages?limit={quote(limit, safe='')}"
    head = b"GET " + target.encode() + b" HTTP/1.1\r\n" + _HEADERS + b"\r\n"
    status, body = _send(daemon, head)
    _answered(status, body)


@_SETTINGS
@given(cid=st.text(min_size=1, max_size=300))
def test_an_add_to_any_conversation_id_is_answered_2xx_or_4xx(daemon: Daemon, cid: str) -> None:
    status, body = _post(daemon, cid, codec.pack_wire({"messages": [user("x")]}, trusted=True))
    _answered(status, body)


def test_the_fuzzing_lost_nothing_and_stored_only_what_was_answered_200(
    daemon: Daemon, accepted: set[int]
) -> None:
    """Runs last in the module: the seeded conversation is intact, every version of the
    target was answered 200 once, and no request failed inside the daemon."""
    store = daemon.connect()
    try:
        assert accepted == set(range(1, store.version(_TARGET) + 1))
        assert store.get(_SEEDED) == [user("seeded one"), user("seeded two")]
        assert daemon.proc is not None and daemon.proc.poll() is None
        failures = [line for line in daemon.stderr_lines if "request_failed" in line]
        assert failures == [], failures[:3]
    finally:
        store.close()


@pytest.fixture(scope="module", autouse=True)
def _seeded(daemon: Daemon) -> None:
    store = daemon.connect()
    try:
        store.add(_SEEDED, [user("seeded one"), user("seeded two")])
    finally:
        store.close()
