"""The fast lane: a last-N read answered by the connection itself, as soon as its head is in.

Every request uvicorn hands to the app costs a scope, a response cycle, an event and
an asyncio task before any endpoint runs, and the middlewares after that. The read
clients make most, ``GET .../messages?limit=N`` asked as msgpack, needs none of it:
`FastLane.answer` takes the request's head as the HTTP parser left it, applies the
same checks as the app (the `memoryd.server.http.Guard`'s Origin, Host, token and URL
checks), reads the messages as `memoryd.server.inline` does (copied as stored, on the
loop) and returns the whole response; `memoryd.server.limits` writes it and counts
the request in the metrics as `memoryd.server.metrics.Observe` would.

Anything it does not answer, the app answers as before: another route, method or
parameter, a JSON client, a body, a refused request (the app writes the refusal), a
store that is not running here, an error of any kind (the app meets it again and
answers it), and every request on a connection that already has one in flight.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from urllib.parse import unquote

import httptools

from memoryd.protocol import check_store_name
from memoryd.server.hot import split_conversation_path
from memoryd.server.http import Guard
from memoryd.server.inline import last_n_limit, packed_messages
from memoryd.server.metrics import Observe

__all__ = ["FastLane"]

_MSGPACK = b"application/msgpack"
_HEAD = b"HTTP/1.1 200 OK\r\n"
_TYPE = b"content-type: application/msgpack\r\ncontent-length: "
_BODY_HEADERS = frozenset({b"content-length", b"transfer-encoding"})


class FastLane:
    """Answers last-N msgpack reads for the connections of one app.

    Args:
        observe: the app as `memoryd.server.application.create_app` built it: the
            metrics middleware around the guard.
    """

    def __init__(self, observe: Observe, guard: Guard) -> None:
        self._observe = observe
        self._guard = guard

    @classmethod
    def over(cls, app: object) -> FastLane | None:
        """The lane for ``app``, or None when it is not shaped as `create_app` builds it."""
        if isinstance(app, Observe) and isinstance(app.app, Guard):
            return cls(app, app.app)
        return None

    def answer(
        self,
        url: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        server: tuple[str, int | None] | None,
        default_headers: Sequence[tuple[bytes, bytes]],
    ) -> bytes | None:
        """The whole HTTP response to a ``GET`` of ``url`` with ``headers``, or None.

        Args:
            url: the request target as received.
            headers: its headers, names in lower case.
            server: the listening address (``(host, port)``; port None on a Unix socket).
            default_headers: headers every response carries (the server's ``date``).

        Returns:
            The response bytes, or None: the app answers this request.
        """
        started = time.perf_counter()
        accepts = False
        for name, value in headers:
            if name == b"accept":
                accepts = _MSGPACK in value
            elif name in _BODY_HEADERS and value != b"0":
                return None
        if not accepts:
            return None
        try:
            parsed = httptools.parse_url(url)
            raw_path = parsed.path
            path = raw_path.decode("ascii")
        except (httptools.HttpParserInvalidURLError, UnicodeDecodeError):
            return None
        if "%" in path:
            path = unquote(path)
        parts = split_conversation_path(path)
        if parts is None or parts[2] != "messages":
            return None
        query = parsed.query or b""
        limit = last_n_limit(query)
        if limit is None:
            return None
        scope = {
            "headers": headers,
            "server": server,
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
        }
        if self._guard._problem(scope) is not None:
            return None
        store, cid, _ = parts
        try:
            body = packed_messages(None if store is None else check_store_name(store), cid, limit)
        except Exception:  # the app reads it again and answers the error
            return None
        if body is None:
            return None
        head = [_HEAD]
        for name, value in default_headers:
            head += (name, b": ", value, b"\r\n")
        head += (_TYPE, b"%d\r\n\r\n" % len(body), body)
        self._observe.record("GET", path, "get", 200, time.perf_counter() - started)
        return b"".join(head)
