"""A superseding memo over HTTP: the daemon checks the field and the store's refusal is a
JSON 4xx naming the problem; nothing is written by a refused request."""

from __future__ import annotations

import json

import pytest

from tests.server.daemon import Daemon
from tests.server.test_security import ADD, messages_path, raw_request, version


def _record(daemon: Daemon, cid: str, body: dict[str, object]) -> tuple[int, object]:
    return raw_request(
        daemon, "POST", f"/v1/conversations/{cid}/record".encode(), body=json.dumps(body).encode()
    )


def test_a_superseding_memo_over_http_leaves_one_event(daemon: Daemon) -> None:
    """Three superseding memos: version 3, one event in the log."""
    for n in (1, 2, 3):
        status, answer = _record(
            daemon, "lease-http", {"kind": "memo", "data": {"n": n}, "supersede": True}
        )
        assert status == 200, answer
    events = daemon.connect().events("lease-http")
    assert [(e.version, e.data) for e in events] == [(3, {"n": 3})]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        pytest.param(
            {"kind": "memo", "supersede": "yes"}, "supersede must be True or False", id="not-bool"
        ),
        pytest.param({"kind": "memo", "supersede": 1}, "supersede must be True or False", id="int"),
        pytest.param(
            {"kind": "compacted", "supersede": True}, "only a memo may supersede", id="compacted"
        ),
    ],
)
def test_a_bad_supersede_field_is_a_400_naming_it(
    daemon: Daemon, body: dict[str, object], named: str
) -> None:
    """A non-boolean ``supersede``, or one on a compacted event: a JSON 400, no write."""
    status, answer = _record(daemon, "bad-supersede", body)
    assert status == 400, answer
    assert isinstance(answer, dict) and named in answer["error"]["message"]
    assert version(daemon, "bad-supersede") == 0


def test_superseding_a_conversation_with_messages_is_a_4xx_and_drops_nothing(
    daemon: Daemon,
) -> None:
    """The store refuses it: a JSON 4xx saying why; the message and the version stay."""
    status, _ = raw_request(daemon, "POST", messages_path(b"kept"), body=ADD)
    assert status == 200
    status, answer = _record(daemon, "kept", {"kind": "memo", "data": {}, "supersede": True})
    assert 400 <= status < 500, answer
    assert isinstance(answer, dict) and "holds 1 message" in answer["error"]["message"]
    remote = daemon.connect()
    assert remote.version("kept") == 1
    assert [m["content"] for m in remote.get("kept")] == ["x"]
