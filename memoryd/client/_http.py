"""A small keep-alive HTTP/1.1 client for the daemon's client, on raw sockets.

The client sends one short request per store call. ``http.client`` spends most
of such a call in its own machinery (request assembly header by header, a
buffered file over the socket, an ``email`` parser for the response headers),
and with many client processes that CPU is what limits the daemon's throughput.
This transport does only what the daemon's exchanges need:

* the request is built as bytes, its fixed headers encoded once per transport,
  and written with one ``sendall``;
* the response is read with ``recv_into`` a per-connection buffer, its status
  line and headers parsed by hand (`memoryd.client._http_wire`); bodies are framed by
  ``content-length``, ``transfer-encoding: chunked``, or the end of the connection;
* each thread keeps one connection and reuses it, after checking that the
  server did not close it while it was idle, so a request is only ever sent on
  a connection that was open;
* a connection is dropped on any error, on a malformed response, and when the
  server says it will close.

The socket's timeout is the call's remaining deadline (to within a millisecond)
at every send and receive.
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from urllib.parse import urlencode, urlsplit

from memoryd.client._http_wire import Connection, Reply, TransportFailed
from memoryd.errors import ConnectFailed

__all__ = ["ConnectFailed", "HttpTransport", "Reply", "TransportFailed"]

_METHODS_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_METHODS = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")
_EXTRA_CACHE_SIZE = 32


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

    Raises:
        ValueError: a base URL that is not ``http(s)://host[:port][/path]``, or an
            invalid header.
    """

    def __init__(self, base_url: str, *, uds: str | None, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"cannot use base URL {base_url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        default_port = 443 if parts.scheme == "https" else 80
        self._port = parts.port or default_port
        self._base_path = parts.path.rstrip("/")
        self._uds = uds
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
        self._tls: ssl.SSLContext | None = None
        self._local = threading.local()
        self._all: list[Connection] = []
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
        sock = socket.create_connection((self._host, self._port), timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._scheme == "https":
                if self._tls is None:
                    context = ssl.create_default_context()
                    context.set_alpn_protocols(["http/1.1"])
                    self._tls = context
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        return sock

    def _connection(self, deadline: float) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None and conn.idle_closed():
            self._drop(conn)
            conn = None
        if conn is None:
            try:
                sock = self._open(max(deadline - time.monotonic(), 0.001))
            except OSError as exc:
                raise ConnectFailed(str(exc) or type(exc).__name__) from exc
            conn = Connection(sock)
            with self._lock:
                self._all.append(conn)
            self._local.conn = conn
        return conn

    def _drop(self, conn: Connection) -> None:
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
            target += "?" + urlencode({k: str(v) for k, v in params.items()})
        if method not in _METHODS and not _TOKEN.fullmatch(method):
            raise ValueError(f"cannot send an HTTP request with method {method!r}")
        if not (target.isascii() and target.isprintable()) or " " in target:
            raise ValueError(f"cannot send to {target!r}: use printable ASCII without spaces")
        block = self._header_block(headers) if headers else self._fixed
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
