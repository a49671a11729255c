"""A superseding memo over HTTP: the daemon checks the field and the store's refusal is a
JSON 4xx naming the problem; nothing is written by a refused request."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from memoryd.store.requests import HIDDEN_PREFIX
from tests.server.daemon import Daemon
from tests.server.test_security import ADD, messages_path, raw_request, version


def _path(cid: str, route: str) -> bytes:
    return f"/v1/conversations/{quote(cid, safe='')}/{route}".encode()


def _record(daemon: Daemon, cid: str, body: dict[str, object]) -> tuple[int, object]:
    return raw_request(daemon, "POST", _path(cid, "record"), body=json.dumps(body).encode())


def test_a_superseding_memo_over_http_leaves_one_event(daemon: Daemon) -> None:
    """Three superseding memos: version 3, one event in the log."""
    lease = f"{HIDDEN_PREFIX}lease/http"
    for n in (1, 2, 3):
        body = {"kind": "memo", "data": {"n": n}, "supersede": True}
        status, answer = _record(daemon, lease, body)
        assert status == 200, answer
    events = daemon.connect().events(lease)
    assert [(e.version, e.data) for e in events] == [(3, {"n": 3})]


@pytest.mark.parametrize(
    ("cid", "body", "named"),
    [
        pytest.param(
            f"{HIDDEN_PREFIX}bad",
            {"kind": "memo", "supersede": "yes"},
            "supersede must be True or False",
            id="not-bool",
        ),
        pytest.param(
            f"{HIDDEN_PREFIX}bad",
            {"kind": "memo", "supersede": 1},
            "supersede must be True or False",
            id="int",
        ),
        pytest.param(
            f"{HIDDEN_PREFIX}bad",
            {"kind": "compacted", "supersede": True},
            "only a memo may supersede",
            id="compacted",
        ),
        pytest.param(
            "visible", {"kind": "memo", "supersede": True}, "own bookkeeping", id="visible-id"
        ),
    ],
)
def test_a_bad_supersede_field_is_a_400_naming_it(
    daemon: Daemon, cid: str, body: dict[str, object], named: str
) -> None:
    """A non-boolean ``supersede``, one on a compacted event or on an id outside the
    hidden space: a JSON 400, no write."""
    status, answer = _record(daemon, cid, body)
    assert status == 400, answer
    assert isinstance(answer, dict) and named in answer["error"]["message"]
    assert version(daemon, cid) == 0


def test_superseding_a_conversation_with_messages_is_a_4xx_and_drops_nothing(
    daemon: Daemon,
) -> None:
    """The store refuses it: a JSON 4xx saying why; the message and the version stay."""
    kept = f"{HIDDEN_PREFIX}kept"
    status, _ = raw_request(daemon, "POST", messages_path(quote(kept, safe="").encode()), body=ADD)
    assert status == 200
    status, answer = _record(daemon, kept, {"kind": "memo", "data": {}, "supersede": True})
    assert 400 <= status < 500, answer
    assert isinstance(answer, dict) and "holds 1 message" in answer["error"]["message"]
    remote = daemon.connect()
    assert remote.version(kept) == 1
    assert [m["content"] for m in remote.get(kept)] == ["x"]
