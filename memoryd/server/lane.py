"""The fast lane: a last-N read answered by the connection itself, as soon as its head is in.

Every request uvicorn hands to the app costs a scope, a response cycle, an event and
an asyncio task before any endpoint runs, and the middlewares after that. The read
clients make most, ``GET .../messages?limit=N`` asked as msgpack, needs none of it:
`FastLane.answer` takes the request's head as the HTTP parser left it, applies the
same checks as the app (`memoryd.server.http.Guard.admits`: Origin, Host, token and
URL, from the raw header bytes, in the one pass over the headers that also finds
``Accept``), reads the messages as `memoryd.server.inline` does (copied as stored,
on the loop) and returns the whole response, its parts joined once;
`memoryd.server.limits` writes it and counts the request in the metrics as
`memoryd.server.metrics.Observe` would.

Anything it does not answer, the app answers as before: another route, method or
parameter, a JSON client, a body, a request the guard does not admit at a glance (the
app checks it again and writes the refusal, if any), a store that is not running
here, an error of any kind (the app meets it again and answers it), and every
request on a connection that already has one in flight.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from memoryd.messages import validate_conversation_id
from memoryd.protocol import check_store_name
from memoryd.server.appends import AppendLane
from memoryd.server.calls import ServerContext
from memoryd.server.hot import messages_path
from memoryd.server.http import Guard
from memoryd.server.inline import last_n_limit, packed_parts
from memoryd.server.metrics import Observe

__all__ = ["FastLane"]

_MSGPACK = b"application/msgpack"
_HEAD = b"HTTP/1.1 200 OK\r\n"
_TYPE = b"content-type: application/msgpack\r\ncontent-length: "


_TARGETS = 256
"""How many read targets a lane keeps parsed (one per conversation and limit read)."""

_Target = tuple[str | None, str, int, str, bytes]
"""A last-N read's target parsed: store (None: the default), id, limit, path, raw path."""


def _read_target(url: bytes) -> _Target | None:
    """``url`` parsed as a last-N read of the messages of one conversation, or None.

    The store's name and the conversation id are checked here: a target kept is valid.
    """
    raw_path, _, query = url.partition(b"?")
    limit = last_n_limit(query)
    if limit is None:
        return None
    parts = messages_path(raw_path)
    if parts is None:
        return None
    store, cid, path = parts
    try:
        if store is not None:
            store = check_store_name(store)
        cid = validate_conversation_id(cid)
    except ValueError:
        return None  # the app names the problem
    return store, cid, limit, path, raw_path


class FastLane:
    """Answers last-N msgpack reads for the connections of one app.

    Args:
        observe: the app as `memoryd.server.application.create_app` built it: the
            metrics middleware around the guard.
        guard: the guard inside it.
        ctx: the app's context, for the append lane (`memoryd.server.appends`).
    """

    def __init__(self, observe: Observe, guard: Guard, ctx: ServerContext | None = None) -> None:
        self._observe = observe
        self._guard = guard
        self.appends = None if ctx is None else AppendLane(observe, guard, ctx)
        """Takes the msgpack adds (None: the app takes every add)."""
        self._targets: dict[bytes, _Target] = {}
        self._defaults: Sequence[tuple[bytes, bytes]] | None = None
        self._default_lines = b""

    @classmethod
    def over(cls, app: object) -> FastLane | None:
        """The lane for ``app``, or None when it is not shaped as `create_app` builds it."""
        if isinstance(app, Observe) and isinstance(app.app, Guard):
            state = getattr(getattr(app.app.app, "app", None), "state", None)
            ctx = getattr(state, "ctx", None)
            return cls(app, app.app, ctx if isinstance(ctx, ServerContext) else None)
        return None

    def header_lines(self, default_headers: Sequence[tuple[bytes, bytes]]) -> bytes:
        """``default_headers`` as header lines; built again only when the server replaces
        them (once a second, for the ``date``)."""
        if default_headers is not self._defaults:
            self._default_lines = b"".join(
                b"%s: %s\r\n" % (name, value) for name, value in default_headers
            )
            self._defaults = default_headers
        return self._default_lines

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
        first = dict(reversed(headers))  # each name's first value counts, as for the app
        announced = first.get(b"content-length")
        if (announced is not None and announced != b"0") or b"transfer-encoding" in first:
            return None
        accept = first.get(b"accept")
        if accept is None or _MSGPACK not in accept:
            return None
        target = self._targets.get(url)
        if target is None:
            target = _read_target(url)
            if target is None:
                return None
            if len(self._targets) >= _TARGETS:
                self._targets.clear()
            self._targets[url] = target
        store, cid, limit, path, raw_path = target
        on_tcp = server is not None and server[1] is not None
        if not self._guard.admits(
            first.get(b"origin"), first.get(b"host"), first.get(b"authorization"), on_tcp, raw_path
        ):
            return None
        try:
            body = packed_parts(store, cid, limit, checked=True)
        except Exception:  # the app reads it again and answers the error
            return None
        if body is None:
            return None
        length = sum(map(len, body))
        response = b"".join(
            (_HEAD, self.header_lines(default_headers), _TYPE, b"%d\r\n\r\n" % length, *body)
        )
        self._observe.record("GET", path, "get", 200, time.perf_counter() - started)
        return response
