"""The hot-route shortcut serves exactly what the router would, and nothing else.

`HotRoutes` splits a path by hand instead of asking the router: these tests hold
the two to the same answer for generated paths, and run requests through a real
daemon whose debug log must show one event per request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.routing import Match, Route

from memoryd.server import application, calls
from memoryd.server.hot import split_conversation_path
from tests.server.daemon import Daemon

_ROUTES = [Route(p, fn, methods=[m]) for m, p, fn, _, _ in application.all_ops()]
_HOT = application.HOT_ROUTES

_segment = st.sampled_from(
    ["messages", "version", "pop", "conversations", "stores", "v1", "a", "é", "", "x y", "%2F"]
)
_paths = st.lists(_segment, min_size=1, max_size=7).map(lambda parts: "/" + "/".join(parts))
_prefixes = st.sampled_from(["/v1/conversations/", "/v1/stores/notes/conversations/", "/v1/"])


def _routed(method: str, path: str) -> tuple[Any, dict[str, Any]] | None:
    """What the router would call: (endpoint, path params), or None."""
    scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in _ROUTES:
        match, child = route.matches(scope)
        if match == Match.FULL:
            return route.endpoint, child["path_params"]
    return None


def _hot(method: str, path: str) -> tuple[Any, dict[str, Any]] | None:
    parts = split_conversation_path(path)
    if parts is None:
        return None
    store, cid, last = parts
    endpoint = _HOT.get((method, last))
    if endpoint is None:
        return None
    return endpoint, ({"cid": cid} if store is None else {"store": store, "cid": cid})


@settings(max_examples=400, deadline=None)
@given(prefix=_prefixes, rest=_paths, method=st.sampled_from(["GET", "POST", "DELETE"]))
def test_hot_routes_agree_with_the_router(prefix: str, rest: str, method: str) -> None:
    """Wherever the shortcut answers, the router picks the same endpoint and parameters."""
    path = prefix + rest.lstrip("/")
    hot = _hot(method, path)
    routed = _routed(method, path)
    if hot is not None:
        assert routed == hot, path
    elif routed is not None:
        assert routed[0] not in _HOT.values() or method == "DELETE", path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/conversations/a/b/messages", (None, "a/b", "messages")),
        ("/v1/conversations//messages", (None, "", "messages")),
        ("/v1/stores/notes/conversations/x/version", ("notes", "x", "version")),
        ("/v1/conversations/messages", None),
        ("/v1/stores//conversations/x/messages", None),
        ("/v1/stores/notes/other/x/messages", None),
        ("/v2/conversations/x/messages", None),
    ],
)
def test_split_conversation_path(path: str, expected: Any) -> None:
    """The split is the router's: cid up to the last segment, one segment for the store."""
    assert split_conversation_path(path) == expected


@pytest.fixture(scope="module")
def debug_daemon() -> Iterator[Daemon]:
    with Daemon(tcp=True, token="t0k", extra=("--log-level", "debug")).start() as running:
        yield running


def test_hot_routes_keep_the_guard_the_errors_and_the_debug_log(debug_daemon: Daemon) -> None:
    """Adds and gets on the shortcut are refused without the token, answer bad input with
    a JSON 4xx, and each request is one debug event with its op and status."""
    base = f"http://{debug_daemon.http}"
    auth = {"authorization": "Bearer t0k"}
    with httpx.Client(base_url=base, trust_env=False) as http:
        body = {"messages": [{"role": "user", "content": "hi"}]}
        refused = http.post("/v1/conversations/hot/messages", json=body)
        assert refused.status_code == 401
        assert http.get("/v1/conversations/hot/version", headers=auth).json() == {"version": 0}
        added = http.post("/v1/conversations/hot/messages", json=body, headers=auth)
        assert added.status_code == 200 and added.json() == {"version": 1}
        bad = http.post("/v1/conversations/hot/messages", json={"messages": []}, headers=auth)
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "InvalidMessage"
        named = http.post("/v1/stores/hotnamed/conversations/c/messages", json=body, headers=auth)
        assert named.status_code == 200
        got = http.get("/v1/stores/hotnamed/conversations/c/messages", headers=auth)
        assert got.json() == {"messages": [{"role": "user", "content": "hi"}]}
        fell_through = http.get("/v1/conversations/hot/nothing", headers=auth)
        assert fell_through.status_code == 404
    assert debug_daemon.connect().get("hot") == [{"role": "user", "content": "hi"}]
    seen = {(e["method"], e["op"], e["status"]) for e in debug_daemon.events("request")}
    assert ("POST", "other", 401) in seen  # the guard refuses before any route runs
    assert {("POST", "add", 200), ("POST", "add", 422), ("GET", "get", 200)} <= seen
    assert ("GET", "version", 200) in seen


def test_info_level_writes_no_request_events() -> None:
    """At the default level the per-request event is not written."""
    with Daemon(tcp=False).start() as running:
        running.connect().add("quiet", [{"role": "user", "content": "x"}])
        assert running.connect().get("quiet")
    assert running.events("request") == []
    assert running.events("server_listening")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab=&%+2F;é x0", max_size=14))
def test_query_parsing_agrees_with_starlette(raw: str) -> None:
    """The daemon's own query split gives what Starlette's QueryParams gives."""
    query = raw.encode("utf-8")
    theirs = QueryParams(query)
    mine = calls.query(Request({"type": "http", "query_string": query}))
    assert mine == {key: theirs[key] for key in theirs}
