"""The busiest routes, dispatched without the router: a pure ASGI shortcut.

A request passes half a dozen layers before its endpoint runs (error middleware,
exception middleware, router, route, request wrapper), each a call and an object
per request that a small add or get does not need. `HotRoutes` recognises the
conversation routes clients call all the time (``add``, ``get``, ``version``) by
their last path segment and calls the same endpoint functions directly; anything
else goes on to the full app. It runs inside the guard and the metrics, so
authentication, limits and counting are unchanged.

The split of a path is the router's own: ``{cid:path}`` is everything between
``/conversations/`` and the last segment, ``{store}`` one segment.

A last-N read asked as msgpack (``GET .../messages?limit=N``) is answered before
any of that, its stored messages copied into the body (`memoryd.server.inline`);
whatever that way cannot answer, an error included, goes the general way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import unquote

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memoryd.protocol import check_store_name
from memoryd.server.calls import Endpoint
from memoryd.server.http import MSGPACK, Answer
from memoryd.server.inline import last_n_limit, packed_messages, wants_msgpack_only

__all__ = ["HotRoutes", "messages_path", "split_conversation_path"]

ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]

_PATH_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%/"
"""The bytes of a path the connection's lanes read: what clients send (`memoryd.connect`
quotes every other byte of an id); a path with any other byte goes to the app, which
parses it whole."""

_CONVERSATIONS = "/v1/conversations/"
_STORES = "/v1/stores/"
_NAMED = "/conversations/"


def split_conversation_path(path: str) -> tuple[str | None, str, str] | None:
    """``(store or None, cid, last segment)`` for a conversation route's path, else None.

    >>> split_conversation_path("/v1/conversations/a/b/messages")
    (None, 'a/b', 'messages')
    >>> split_conversation_path("/v1/stores/notes/conversations/x/version")
    ('notes', 'x', 'version')
    """
    store: str | None = None
    if path.startswith(_CONVERSATIONS):
        rest = path[len(_CONVERSATIONS) :]
    elif path.startswith(_STORES):
        named = path[len(_STORES) :]
        cut = named.find("/")
        if cut <= 0 or not named.startswith(_NAMED, cut):
            return None
        store, rest = named[:cut], named[cut + len(_NAMED) :]
    else:
        return None
    cut = rest.rfind("/")
    if cut < 0:
        return None
    return store, rest[:cut], rest[cut + 1 :]


def messages_path(raw_path: bytes) -> tuple[str | None, str, str] | None:
    """``(store or None, cid, path)`` for the raw path of a conversation's ``messages``
    route as clients send it (only `_PATH_BYTES`, percent-escapes undone), else None.

    Neither name is checked here.

    >>> messages_path(b"/v1/stores/notes/conversations/a%2Fb/messages")
    ('notes', 'a/b', '/v1/stores/notes/conversations/a/b/messages')
    >>> messages_path(b"/v1/conversations/a b/messages") is None
    True
    """
    if raw_path[:1] != b"/" or raw_path.translate(None, _PATH_BYTES):
        return None
    path = raw_path.decode("ascii")
    if "%" in path:
        path = unquote(path)
    parts = split_conversation_path(path)
    if parts is None or parts[2] != "messages":
        return None
    return parts[0], parts[1], path


class HotRoutes:
    """Calls the endpoints of the hottest conversation routes directly.

    Args:
        app: the full app, for every other request (and its lifespan).
        routes: ``(method, last segment) -> endpoint``.
        on_error: turns an endpoint's exception into an error response.
    """

    def __init__(
        self, app: ASGIApp, routes: Mapping[tuple[str, str], Endpoint], on_error: ErrorHandler
    ) -> None:
        self.app = app
        self._routes = dict(routes)
        self._on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a hot route, or pass the request on."""
        if scope["type"] == "http":
            parts = split_conversation_path(scope["path"])
            if parts is not None:
                if (
                    parts[2] == "messages"
                    and scope["method"] == "GET"
                    and await self._last_n(parts, scope, receive, send)
                ):
                    return
                endpoint = self._routes.get((scope["method"], parts[2]))
                if endpoint is not None:
                    await self._serve(endpoint, parts, scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _last_n(
        self, parts: tuple[str | None, str, str], scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Answer a last-N read with its messages as stored; False: go the general way."""
        limit = last_n_limit(scope["query_string"])
        if limit is None or not wants_msgpack_only(scope["headers"]):
            return False
        store, cid, _ = parts
        try:
            body = packed_messages(None if store is None else check_store_name(store), cid, limit)
        except Exception:  # the general way reads it again and answers the error
            return False
        if body is None:
            return False
        scope["memoryd.op"] = "get"
        await Answer(body, MSGPACK)(scope, receive, send)
        return True

    async def _serve(
        self,
        endpoint: Endpoint,
        parts: tuple[str | None, str, str],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        store, cid, _ = parts
        scope["app"] = self.app
        scope["path_params"] = {"cid": cid} if store is None else {"store": store, "cid": cid}
        request = Request(scope, receive, send)
        try:
            response = await endpoint(request)
        except ClientDisconnect:
            raise  # no one to answer: `Observe` counts and logs it
        except Exception as exc:
            response = await self._on_error(request, exc)
        await response(scope, receive, send)
