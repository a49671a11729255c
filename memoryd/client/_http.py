"""A small keep-alive HTTP/1.1 client for the daemon's client: raw sockets and httptools.

The client sends one short request per store call. ``http.client`` spends most
of such a call in its own machinery (request assembly header by header, a
buffered file over the socket, an ``email`` parser for the response headers),
and with many client processes that CPU is what limits the daemon's throughput.
This transport does only what the daemon's exchanges need:

* the request is built as bytes, its fixed headers encoded once per transport,
  and written with one ``sendall``;
* the response is read with ``recv_into`` a per-connection buffer and fed to
  httptools' response parser (llhttp, the parser uvicorn uses): it decides the
  framing (``content-length``, ``transfer-encoding: chunked``, the end of the
  connection), interim ``1xx`` answers and keep-alive, and refuses malformed
  responses; its callbacks collect the status, the content type and the body;
* the head and the body are bounded (`MAX_HEAD_BYTES`, ``max_body_bytes``);
* each thread keeps one connection and reuses it, after checking that the
  server did not close it while it was idle, so a request is only ever sent on
  a connection that was open;
* a connection is dropped on any error, on a malformed response, on bytes past
  the end of a response, and when the server says it will close.

The socket's timeout is the call's remaining deadline (to within a millisecond)
at every send and receive.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import select
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import quote_plus, urlsplit

import httptools

from memoryd.errors import ConnectFailed, TransportFailed

if TYPE_CHECKING:
    import ssl

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "ConnectFailed",
    "HttpTransport",
    "Reply",
    "TransportFailed",
]

MAX_HEAD_BYTES = 64 * 1024
"""The most bytes a response may send before its head ends (interim answers included)."""

DEFAULT_MAX_BODY_BYTES = 1 << 30
"""The largest response body read by default: the largest the client can decode (the
codec's ``MAX_WIRE_BYTES``, named here so that a client on JSON bodies loads no codec)."""

_BUFFER_BYTES = 64 * 1024
_TIMEOUT_SLACK_S = 0.001
_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_METHODS = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")
_EXTRA_CACHE_SIZE = 32


class Reply(NamedTuple):
    """An HTTP response: status, content type and body (immutable)."""

    status: int
    content_type: str
    body: bytes


class _Stop(Exception):
    """Raised in a parser callback to stop the parser; the connection knows why."""


class _Connection:
    """One socket, its receive buffer and its response parser; used by one thread at a time.

    The parser calls the ``on_*`` methods while `response` feeds it received bytes.
    """

    __slots__ = (
        "_body",
        "_coding",
        "_content_type",
        "_done",
        "_failure",
        "_head_done",
        "_head_only",
        "_keep",
        "_length",
        "_max_body",
        "_parser",
        "_poll",
        "_size",
        "_status",
        "_timeout",
        "_view",
        "closed",
        "sock",
    )

    _body: list[bytes]
    _coding: bytes | None
    _content_type: bytes
    _done: bool
    _failure: str | None
    _head_done: bool
    _head_only: bool
    _keep: bool
    _length: int | None
    _size: int
    _status: int

    def __init__(self, sock: socket.socket, max_body_bytes: int) -> None:
        self.sock = sock
        self.closed = False
        self._view = memoryview(bytearray(_BUFFER_BYTES))
        self._parser = httptools.HttpResponseParser(self)
        self._max_body = max_body_bytes
        self._timeout = sock.gettimeout() or 0.0  # the socket's timeout, as last set
        self._poll: select.poll | None = None
        if hasattr(select, "poll"):
            self._poll = select.poll()
            self._poll.register(sock.fileno(), select.POLLIN)
        self._start(head_only=False)

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def idle_closed(self) -> bool:
        """True if the server closed (or broke, or wrote to) this idle connection."""
        if self.closed:
            return True
        try:
            if self._poll is not None:
                ready = bool(self._poll.poll(0))
            else:
                ready = bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True
        if ready:  # an idle HTTP connection is only readable at EOF or error
            return True
        ssl = sys.modules.get("ssl")  # loaded by the first https connection, if any
        return ssl is not None and isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0

    def arm(self, deadline: float) -> None:
        """Make the socket's timeout the time left until ``deadline``, to a millisecond.

        Setting it costs a system call, so a timeout within a millisecond of the
        time left (the common case: each call has the same deadline) is kept.

        Raises:
            TimeoutError: the deadline has passed.
        """
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        if abs(self._timeout - remaining) > _TIMEOUT_SLACK_S:
            self.sock.settimeout(remaining)
            self._timeout = remaining

    # -- the parser's callbacks ------------------------------------------------------

    def _refuse(self, problem: str) -> None:
        self._failure = problem
        raise _Stop

    def on_message_begin(self) -> None:
        if self._done:  # bytes past the end of the response
            raise _Stop

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._head_done:  # a trailer of a chunked body
            return
        name = name.lower()
        if name == b"content-type":
            self._content_type = value
        elif name == b"content-length":
            self._length = int(value)  # the parser checked its digits and refuses two
        elif name == b"transfer-encoding":
            self._coding = value

    def on_headers_complete(self) -> None:
        parser = self._parser
        status = parser.get_status_code()
        if status < 100:
            self._refuse(f"malformed status code {status:03d}: want 100 to 999")
        version = parser.get_http_version()
        if not version.startswith("1."):
            self._refuse(f"unsupported HTTP version {version}: want HTTP/1.x")
        if status < 200 and status != 101:
            return  # an interim answer: the real one follows
        self._status = status
        self._head_done = True
        if self._head_only:  # no body follows a HEAD's head; the parser cannot know that
            self._done = True
            raise _Stop
        if self._length is not None and self._length > self._max_body:
            self._refuse(
                f"the response announces a body of {self._length} bytes; "
                f"the limit is {self._max_body}"
            )

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._max_body:
            self._refuse(f"the response's body exceeds {self._max_body} bytes")
        self._body.append(body)

    def on_message_complete(self) -> None:
        if self._head_done:
            self._done = True
            self._keep = self._parser.should_keep_alive()
        else:  # an interim answer ended: forget its headers
            self._content_type = b""
            self._length = self._coding = None

    # -- receiving -------------------------------------------------------------------

    def _start(self, *, head_only: bool) -> None:
        """Forget the previous response."""
        self._head_only = head_only
        self._status = 0
        self._content_type = b""
        self._length = None
        self._coding = None
        self._body = []
        self._size = 0
        self._head_done = False
        self._done = False
        self._keep = False
        self._failure = None

    def _ended(self, received: int) -> None:
        """The server closed the connection before the response was complete by its framing.

        Raises:
            TransportFailed: unless the body is framed by the end of the connection.
        """
        if not received:
            raise TransportFailed("the server closed the connection without answering")
        if not self._head_done:
            raise TransportFailed(
                "the server closed the connection in the middle of the response's head"
            )
        if self._length is not None:
            raise TransportFailed(
                f"the server closed the connection {self._length - self._size} bytes "
                "before the end of the body"
            )
        last_coding = (self._coding or b"").rpartition(b",")[2]
        if last_coding.strip().lower() == b"chunked":
            raise TransportFailed(
                "the server closed the connection before the end of the chunked body"
            )
        self._done = True  # a body framed by the end of the connection

    def response(self, head_only: bool, deadline: float) -> tuple[Reply, bool]:
        """Read one whole response.

        Returns:
            The reply, and whether the connection may carry another request.

        Raises:
            TransportFailed: a malformed or oversized response, or the connection
                closed before the response ended.
            OSError: the socket failed or timed out.
        """
        self._start(head_only=head_only)
        received = 0
        limit = self._max_body + MAX_HEAD_BYTES
        view = self._view
        while not self._done:
            self.arm(deadline)
            # a head is read up to one byte past its limit: a longer one never completes
            got = self.sock.recv_into(
                view if self._head_done else view[: MAX_HEAD_BYTES + 1 - received]
            )
            if not got:
                self._ended(received)
                break
            received += got
            try:
                self._parser.feed_data(view[:got])
            except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
                if self._failure is not None:
                    raise TransportFailed(self._failure) from None
                if not self._done:
                    raise TransportFailed(f"malformed HTTP response: {exc}") from None
                self._keep = False  # bytes past the end of the response, or a protocol switch
            if not self._head_done and received > MAX_HEAD_BYTES:
                raise TransportFailed(f"the response's head exceeds {MAX_HEAD_BYTES} bytes")
            if received > limit:
                raise TransportFailed(f"the response exceeds {limit} bytes")
        reply = Reply(self._status, self._content_type.decode("latin-1"), b"".join(self._body))
        self._body = []
        return reply, self._keep


def _query(params: dict[str, object]) -> str:
    """A query string, as ``urlencode`` of ``str(value)`` writes it (integers need no
    quoting, nor do names that are identifiers)."""
    parts = []
    for name, value in params.items():
        key = name if name.isidentifier() and name.isascii() else quote_plus(name)
        if type(value) is int:
            parts.append(f"{key}={value}")
        else:
            parts.append(f"{key}={quote_plus(str(value))}")
    return "&".join(parts)


def _header_lines(headers: dict[str, str]) -> bytes:
    """Headers as CRLF-ended ``name: value`` lines.

    Raises:
        ValueError: a header name that is not an HTTP token, or a value holding
            CR, LF or NUL.
    """
    lines = []
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"invalid HTTP header name {name!r}")
        if _BAD_VALUE.search(value):
            raise ValueError(f"invalid value for HTTP header {name!r}: {value!r}")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("latin-1")


class HttpTransport:
    """Thread-safe: each thread keeps its own connection to the daemon.

    Args:
        base_url: ``http://host:port``, ``https://host:port``, or ``http://memoryd``
            with ``uds``.
        uds: the daemon's Unix socket path, or None for TCP.
        headers: sent with every request (a request's own headers override them).
        body_headers: sent with every request that has a body (a content type, say);
            encoded once, here.
        max_body_bytes: the largest response body read; a larger one, announced or
            received, fails the call with `TransportFailed`.

    Raises:
        ValueError: a base URL that is not ``http(s)://host[:port][/path]``, or an
            invalid header.
    """

    def __init__(
        self,
        base_url: str,
        *,
        uds: str | None,
        headers: dict[str, str],
        body_headers: dict[str, str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"cannot use base URL {base_url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        default_port = 443 if parts.scheme == "https" else 80
        self._port = parts.port or default_port
        # An address literal is dialled as bytes: name lookup then skips the IDNA codec
        # (a str host loads it, and its tables, on every connect).
        self._dial_host: str | bytes = self._host
        with contextlib.suppress(ValueError):
            self._dial_host = str(ipaddress.ip_address(self._host)).encode("ascii")
        self._base_path = parts.path.rstrip("/")
        self._uds = uds
        self._max_body = max_body_bytes
        host = self._host if ":" not in self._host else f"[{self._host}]"
        if self._port != default_port:
            host = f"{host}:{self._port}"
        try:
            host.encode("ascii")
        except UnicodeEncodeError:
            host = host.encode("idna").decode("ascii")
        self._headers = {
            "host": host,
            "accept-encoding": "identity",
            **{name.lower(): value for name, value in headers.items()},
        }
        self._fixed = _header_lines(self._headers)
        self._extra: dict[tuple[tuple[str, str], ...], bytes] = {}
        self._body_headers = dict(body_headers or {})
        self._with_body = self._header_block(self._body_headers) if body_headers else self._fixed
        self._tls: ssl.SSLContext | None = None
        self._local = threading.local()
        self._all: list[_Connection] = []
        self._lock = threading.Lock()

    # -- connections -----------------------------------------------------------------

    def _open(self, timeout: float) -> socket.socket:
        if self._uds is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(self._uds)
            except BaseException:
                sock.close()
                raise
            return sock
        address = (self._dial_host, self._port)  # getaddrinfo takes a bytes host too
        sock = socket.create_connection(address, timeout)  # type: ignore[arg-type]
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._scheme == "https":
                if self._tls is None:
                    import ssl  # noqa: PLC0415 (TLS loads only for an https address)

                    context = ssl.create_default_context()
                    context.set_alpn_protocols(["http/1.1"])
                    self._tls = context
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connection(self, deadline: float) -> _Connection:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.idle_closed():
            self._drop(conn)
            conn = None
        if conn is None:
            try:
                sock = self._open(max(deadline - time.monotonic(), 0.001))
            except OSError as exc:
                raise ConnectFailed(str(exc) or type(exc).__name__) from exc
            conn = _Connection(sock, self._max_body)
            with self._lock:
                self._all.append(conn)
            self._local.conn = conn
        return conn

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    # -- requests --------------------------------------------------------------------

    def _header_block(self, headers: dict[str, str]) -> bytes:
        """Every header of a request with these headers of its own, but content-length."""
        key = tuple(headers.items())
        block = self._extra.get(key)
        if block is None:
            own = {name.lower(): value for name, value in headers.items()}
            own.pop("content-length", None)
            if own.keys() & self._headers.keys():
                block = _header_lines({**self._headers, **own})
            else:
                block = self._fixed + _header_lines(own)
            if len(self._extra) < _EXTRA_CACHE_SIZE:
                self._extra[key] = block
        return block

    def _encode(
        self,
        method: str,
        path: str,
        params: dict[str, object] | None,
        content: bytes | None,
        headers: dict[str, str] | None,
    ) -> bytes:
        target = self._base_path + path
        if params:
            target += "?" + _query(params)
        if method not in _METHODS and not _TOKEN.fullmatch(method):
            raise ValueError(f"cannot send an HTTP request with method {method!r}")
        if not (target.isascii() and target.isprintable()) or " " in target:
            raise ValueError(f"cannot send to {target!r}: use printable ASCII without spaces")
        if headers:
            block = self._header_block(
                headers if content is None else {**self._body_headers, **headers}
            )
        else:
            block = self._fixed if content is None else self._with_body
        if content is not None:
            length = b"content-length: %d\r\n\r\n" % len(content)
        elif method in _METHODS_WITH_BODY and b"\r\ntransfer-encoding:" not in block:
            length, content = b"content-length: 0\r\n\r\n", b""
        else:
            length, content = b"\r\n", b""
        line = f"{method} {target} HTTP/1.1\r\n".encode("ascii")
        return b"".join((line, block, length, content))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, object] | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float,
    ) -> Reply:
        """Send one request and read the whole response.

        Args:
            method: the HTTP method.
            path: the path under the base URL.
            params: query parameters.
            content: the request body (its content-length is added).
            headers: this request's headers (they override the transport's).
            timeout: the deadline of the whole exchange, in seconds.

        Returns:
            The response.

        Raises:
            ConnectFailed: no connection could be made (nothing was sent).
            TransportFailed: the exchange failed after sending began, or the
                response was malformed.
            ValueError: an invalid method, path or header.
        """
        deadline = time.monotonic() + timeout
        data = self._encode(method, path, params, content, headers)
        conn = self._connection(deadline)
        if deadline <= time.monotonic():
            raise ConnectFailed("the deadline passed before the request could be sent")
        try:
            conn.arm(deadline)
            conn.sock.sendall(data)
            reply, reusable = conn.response(method == "HEAD", deadline)
        except OSError as exc:
            self._drop(conn)
            raise TransportFailed(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            self._drop(conn)
            raise
        if not reusable:
            self._drop(conn)
        return reply

    def close(self) -> None:
        """Close every connection this transport opened."""
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
