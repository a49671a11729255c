"""HTTP plumbing: request bodies (JSON or msgpack, bounded), responses, errors, guards.

`Guard` is a pure ASGI middleware that runs before any endpoint: it refuses
browser origins and foreign ``Host`` headers (DNS rebinding), checks the bearer
token in constant time on TCP, and refuses bodies announced larger than the limit.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

import anyio.to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from memoryd import codec
from memoryd._json_values import COMPACT
from memoryd.errors import HttpError
from memoryd.protocol import error_to_wire
from memoryd.server.bodies import decode_body
from memoryd.server.config import ServerConfig, is_loopback

__all__ = [
    "JSON",
    "MSGPACK",
    "Answer",
    "Guard",
    "HttpError",
    "encode",
    "error_response",
    "read_body",
    "wants_msgpack",
]

JSON = "application/json"
MSGPACK = "application/msgpack"
_OPEN_PATHS = frozenset({"/healthz"})
_MEDIA_BYTES = {JSON: JSON.encode(), MSGPACK: MSGPACK.encode()}
_MSGPACK_BYTES = MSGPACK.encode()


def _dumps(payload: Any) -> bytes:
    return COMPACT.encode(payload).encode()


class Answer(Response):
    """A response whose body is already encoded: only two headers, built directly.

    Args:
        body: the encoded body.
        media_type: its content type.
        status_code: the HTTP status.
    """

    def __init__(self, body: bytes, media_type: str, status_code: int = 200) -> None:
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        self.body = body
        self.raw_headers = [
            (b"content-type", _MEDIA_BYTES.get(media_type) or media_type.encode("latin-1")),
            (b"content-length", str(len(body)).encode("latin-1")),
        ]


def error_response(status: int, body: Mapping[str, Any]) -> Response:
    """A JSON error response (errors are always JSON, whatever was asked for)."""
    return Answer(_dumps(body), JSON, status)


def _first_header(request: Request, name: bytes) -> bytes | None:
    """The request's first header ``name`` (lower case), read from the scope as it came:
    no header mapping is built for one look."""
    for key, value in request.scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def wants_msgpack(request: Request) -> bool:
    """True when the client asked for ``application/msgpack`` answers."""
    accept = _first_header(request, b"accept")
    return accept is not None and _MSGPACK_BYTES in accept


def encode(payload: Any, msgpack: bool) -> tuple[bytes, str]:
    """Encode an answer as msgpack or JSON; returns the bytes and the media type."""
    if msgpack:
        return codec.pack_wire(payload, trusted=True), MSGPACK
    return _dumps(payload), JSON


INLINE_DECODE_BYTES = 64 << 10
"""Bodies up to this size are decoded on the event loop (well under a millisecond);
larger ones in a worker thread, a few at a time, so no body holds the loop for long."""


async def read_body(
    request: Request,
    max_bytes: int,
    decode_limiter: anyio.CapacityLimiter | None = None,
    max_items: int = 0,
) -> dict[str, Any]:
    """Read and decode a request body of at most ``max_bytes`` into an object.

    An empty body is ``{}``. Decoding is bounded in memory (`decode_body`); a body
    over `INLINE_DECODE_BYTES` is decoded in a worker thread under ``decode_limiter``.
    ``max_items`` is the route's limit on the elements of one array (see `decode_body`).

    Raises:
        HttpError: 413 over the limit, 415 for an unknown content type, 400 when the
            body is not one JSON (or msgpack) object.
        ClientDisconnect: the client hung up before the whole body arrived.
    """
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    more = True
    while more:  # the ASGI messages themselves: a small body is one message
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        size += len(chunk)
        if size > max_bytes:
            raise HttpError(
                413,
                "PayloadTooLarge",
                f"the request body is over {max_bytes} bytes, the daemon's limit; "
                "split the write into smaller adds",
            )
        chunks.append(chunk)
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if not raw:
        return {}
    given = _first_header(request, b"content-type")
    kind = JSON if given is None else given.decode("latin-1").split(";")[0].strip().lower()
    if kind == MSGPACK:
        form = "msgpack"
    elif kind in (JSON, "text/json", "", "application/x-www-form-urlencoded"):
        form = "json"  # curl -d sends a form content type unless told otherwise
    else:
        raise HttpError(415, "UnsupportedMediaType", f"send {JSON} or {MSGPACK}, not {kind!r}")
    if len(raw) <= INLINE_DECODE_BYTES:
        body = decode_body(raw, form, max_items)
    else:
        body = await anyio.to_thread.run_sync(
            decode_body, raw, form, max_items, limiter=decode_limiter
        )
    if not isinstance(body, dict):
        raise HttpError(400, "ValueError", "the request body must be an object")
    return body


_GUARDED = frozenset({b"origin", b"host", b"authorization", b"content-length"})


def _headers(scope: Scope) -> dict[bytes, str]:
    """The headers the guard looks at, found in one pass (the first of each counts)."""
    found: dict[bytes, str] = {}
    for key, value in scope.get("headers", ()):
        if key in _GUARDED and key not in found:
            found[key] = value.decode("latin-1")
    return found


def _utf8_url(part: bytes) -> bool:
    """True when a URL's path or query is UTF-8 once percent-decoded."""
    try:
        # without a percent sign, unquoting leaves the bytes as they are
        (unquote_to_bytes(part) if b"%" in part else part).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _bearer_bytes(token: str | None) -> bytes | None:
    """The exact ``Authorization`` header bytes `Guard._problem` admits for ``token``
    (``Bearer <token>``, the header read as latin-1), or None when it has no such one
    spelling (no token, or one with surrounding whitespace, which the check strips)."""
    if token is None or token != token.strip():
        return None
    try:
        return b"Bearer " + token.encode("latin-1")
    except UnicodeEncodeError:
        return None


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """Origin, Host, token and announced body size checks, before anything else runs.

    Args:
        app: the wrapped ASGI app.
        config: the server's config.
    """

    def __init__(self, app: ASGIApp, config: ServerConfig) -> None:
        self.app = app
        self.config = config
        listen_host = config.listen[0] if config.listen is not None else None
        self._hosts = {"localhost", "127.0.0.1", "::1"}
        if listen_host is not None:
            self._hosts.add(listen_host)
        self._check_host = listen_host is not None and is_loopback(listen_host)
        self._token = config.token.encode() if config.token is not None else None
        self._seen_hosts: dict[str, bool] = {}
        self._seen_raw_hosts: dict[bytes, bool] = {}
        self._bearer = _bearer_bytes(config.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request early, or pass it on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self._problem(scope)
        if problem is not None:
            error = HttpError(*problem)
            body = error_to_wire(error, type_name=error.type_name)
            await error_response(error.status, body)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _host_allowed(self, host: str | None) -> bool:
        """True if a ``Host`` header names this daemon's loopback address (remembered)."""
        if host is None:
            return False
        allowed = self._seen_hosts.get(host)
        if allowed is None:
            allowed = _host_name(host) in self._hosts
            if len(self._seen_hosts) < 64:  # clients send one or two spellings
                self._seen_hosts[host] = allowed
        return allowed

    def admits(
        self,
        origin: bytes | None,
        host: bytes | None,
        authorization: bytes | None,
        on_tcp: bool,
        raw_path: bytes,
    ) -> bool:
        """True when a request whose first ``Origin``, ``Host`` and ``Authorization``
        headers are these passes every check of `_problem` but the body's size.

        The connection's fast lane asks this for requests that carry no body, from the
        raw header bytes. It is stricter than `_problem`, never looser: an
        ``Authorization`` header admitted is exactly ``Bearer <token>``; False means
        only that `_problem` must decide (and answer the refusal, if any).

        Args:
            origin: the first ``Origin`` header, or None.
            host: the first ``Host`` header, or None.
            authorization: the first ``Authorization`` header, or None.
            on_tcp: the request came over TCP (not the Unix socket).
            raw_path: the request's path as sent (its query is the caller's to check).
        """
        if origin is not None and origin.decode("latin-1") not in self.config.allowed_origins:
            return False
        if on_tcp:
            if self._check_host:
                if host is None:
                    return False
                allowed = self._seen_raw_hosts.get(host)
                if allowed is None:
                    allowed = self._host_allowed(host.decode("latin-1"))
                    if len(self._seen_raw_hosts) < 64:
                        self._seen_raw_hosts[host] = allowed
                if not allowed:
                    return False
            if self._token is not None and (
                authorization is None
                or self._bearer is None
                or not hmac.compare_digest(authorization, self._bearer)
            ):
                return False
        return _utf8_url(raw_path)

    def _problem(self, scope: Scope) -> tuple[int, str, str] | None:
        """Why the request is refused (status, error type, message), or None.

        The common request passes `admits` on its raw header bytes, found in one pass;
        any other is checked again header by header (`_refusal`), which names the
        problem or, for an unusual spelling of valid headers, admits it too.
        """
        origin = host = authorization = length = None
        for key, value in scope.get("headers", ()):
            if key in _GUARDED:  # the first of each counts
                if key == b"content-length":
                    if length is None:
                        length = value
                elif key == b"authorization":
                    if authorization is None:
                        authorization = value
                elif key == b"host":
                    if host is None:
                        host = value
                elif origin is None:
                    origin = value
        server = scope.get("server")
        on_tcp = server is not None and server[1] is not None
        if (
            self.admits(origin, host, authorization, on_tcp, scope.get("raw_path") or b"")
            and _utf8_url(scope.get("query_string") or b"")
            and (
                length is None or not length.isdigit() or int(length) <= self.config.max_body_bytes
            )
        ):
            return None
        return self._refusal(scope)

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """`_problem`, header by header: the problem named, or None."""
        headers = _headers(scope)
        origin = headers.get(b"origin")
        if origin is not None and origin not in self.config.allowed_origins:
            return 403, "Forbidden", f"requests from browser origin {origin!r} are refused"
        server = scope.get("server")
        on_tcp = server is not None and server[1] is not None
        if on_tcp:
            host = headers.get(b"host")
            if self._check_host and not self._host_allowed(host):
                return 403, "Forbidden", f"Host {host!r} is not this daemon's loopback address"
            if self._token is not None and scope.get("path") not in _OPEN_PATHS:
                given = headers.get(b"authorization")
                if given is None or not given.startswith("Bearer "):
                    return (
                        401,
                        "Unauthorized",
                        "missing token: send 'Authorization: Bearer <token>'",
                    )
                if not hmac.compare_digest(given[7:].strip().encode(), self._token):
                    return 401, "Unauthorized", "wrong token"
        if not (
            _utf8_url(scope.get("raw_path") or b"") and _utf8_url(scope.get("query_string") or b"")
        ):
            # the server would decode it with replacement characters: two different
            # ids would reach the same conversation
            return 400, "ValueError", "the request URL is not UTF-8 once percent-decoded"
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.config.max_body_bytes:
            return (
                413,
                "PayloadTooLarge",
                f"the request body is {length} bytes; the daemon's limit is "
                f"{self.config.max_body_bytes}: split the write into smaller adds",
            )
        return None
