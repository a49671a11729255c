"""memoryd's bookkeeping space (``memoryd.run/``): a fork into it, or an import to it, is
refused by the request builders every backend uses, and so by the daemon itself, however
the request reaches it. (The backend-wide rule is in `memoryd.testing`'s
`HistoryContract`; here, the builders and the daemon's own check.)"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from memoryd.errors import InvalidConversationId
from memoryd.events import Event
from memoryd.store import requests
from memoryd.store.requests import HIDDEN_PREFIX
from tests.server.daemon import Daemon

_HIDDEN = f"{HIDDEN_PREFIX}notes"
_EVENT = Event(
    version=1,
    kind="appended",
    messages=({"role": "user", "content": "m"},),
    timestamp=1.5,
    idempotency_key=None,
    data=None,
)


def test_a_fork_target_in_the_bookkeeping_space_is_refused_naming_the_prefix() -> None:
    """requests.fork refuses a hidden target with InvalidConversationId (a ValueError)
    that names the prefix and says nothing was written."""
    with pytest.raises(InvalidConversationId) as caught:
        requests.fork("a", _HIDDEN, at_version=None)
    assert isinstance(caught.value, ValueError)
    assert "fork target" in str(caught.value)
    assert repr(HIDDEN_PREFIX) in str(caught.value)
    assert "nothing was written" in str(caught.value)


def test_a_fork_out_of_the_bookkeeping_space_is_built() -> None:
    """Only the target is checked: a copy out of the space is seen by every listing."""
    assert requests.fork(_HIDDEN, "a", at_version=None).target == "a"


def test_an_import_into_the_bookkeeping_space_is_refused_naming_the_prefix() -> None:
    """requests.import_events refuses a hidden id, as an export file's check does."""
    with pytest.raises(InvalidConversationId, match=re.escape(repr(HIDDEN_PREFIX))):
        requests.import_events(_HIDDEN, [_EVENT], max_bytes=1 << 20)


def test_the_prefix_alone_is_checked_not_look_alikes() -> None:
    """Ids that only resemble the prefix are ordinary conversations."""
    for cid in ("memoryd.run", "memoryd.runs/x", "x/memoryd.run/y", "Memoryd.run/x"):
        assert requests.fork("a", cid, at_version=None).target == cid
        assert requests.import_events(cid, [_EVENT], max_bytes=1 << 20).cid == cid


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon().start() as running:
        yield running


@pytest.fixture
def http(daemon: Daemon) -> Iterator[httpx.Client]:
    """Raw HTTP to the daemon: past the client's own checks, straight to its routes."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.unix), base_url="http://m") as c:
        yield c


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param("/v1/conversations/src/fork", {"target": _HIDDEN}, id="fork"),
        pytest.param(
            "/v1/conversations/memoryd.run%2Fnotes/import",
            {
                "events": [
                    {
                        "version": 1,
                        "kind": "appended",
                        "messages": [{"role": "user", "content": "m"}],
                        "timestamp": 1.5,
                        "idempotency_key": None,
                        "data": None,
                    }
                ]
            },
            id="import",
        ),
    ],
)
def test_the_daemon_refuses_a_copy_into_the_bookkeeping_space(
    daemon: Daemon, http: httpx.Client, path: str, body: dict[str, object]
) -> None:
    """A raw request gets 400 InvalidConversationId naming the prefix; nothing written."""
    store = daemon.connect()
    store.add("src", [{"role": "user", "content": "keep"}])
    response = http.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "InvalidConversationId"
    assert repr(HIDDEN_PREFIX) in error["message"]
    assert (store.version(_HIDDEN), store.events(_HIDDEN)) == (0, [])
    assert store.conversations(prefix=HIDDEN_PREFIX, include_empty=True) == []
