"""A small keep-alive HTTP/1.1 transport for the daemon's client, on the standard library.

The client sends one short request per store call; a general HTTP client spends
most of each call in its own machinery (about 0.8 ms of CPU a request here,
against 0.2 ms for ``http.client``), and with many client processes that CPU is
what limits throughput. This transport keeps one connection per thread, reuses
it, and checks an idle connection for a close by the server before reusing it,
so a request is only ever sent on a connection that was open.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urlsplit

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = ["ConnectFailed", "HttpTransport", "Reply", "TransportFailed"]


class ConnectFailed(Exception):
    """No connection could be made: the request was surely not sent."""


class TransportFailed(Exception):
    """The connection failed after the request was (perhaps) sent: outcome unknown."""


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP response: status, content type and body."""

    status: int
    content_type: str
    body: bytes


class _OneWrite(http.client.HTTPConnection):
    """Sends a request's head and body in ONE write.

    ``http.client`` writes them separately: a second system call here, and in the
    daemon a second read and a second turn of its event loop for every request.
    """

    _held: list[bytes] | None = None

    def send(self, data: ReadableBuffer) -> None:  # type: ignore[override]
        """Hold the data while `request_whole` assembles a request; else send it."""
        if self._held is not None:
            self._held.append(bytes(data))
            return
        super().send(data)

    def request_whole(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str]
    ) -> None:
        """`request`, written to the socket at once."""
        self._held = []
        try:
            self.request(method, url, body=body, headers=headers)
        finally:
            held, self._held = self._held, None
        super().send(b"".join(held))


class _TcpConnection(_OneWrite):
    pass


class _TlsConnection(_OneWrite, http.client.HTTPSConnection):
    pass


class _UnixConnection(_OneWrite):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("memoryd", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _server_closed(conn: http.client.HTTPConnection) -> bool:
    """True if an idle kept-alive connection was closed (or broken) by the other side."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)  # an idle HTTP connection is only readable at EOF or error


class HttpTransport:
    """Thread-safe: each thread keeps its own connection to the daemon.

    Args:
        base_url: ``http://host:port``, ``https://host:port``, or ``http://memoryd``
            with ``uds``.
        uds: the daemon's Unix socket path, or None for TCP.
        headers: sent with every request.
    """

    def __init__(self, base_url: str, *, uds: str | None, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"cannot use base URL {base_url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._base_path = parts.path.rstrip("/")
        self._uds = uds
        self._headers = dict(headers)
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _new(self, timeout: float) -> _OneWrite:
        conn: _OneWrite
        if self._uds is not None:
            conn = _UnixConnection(self._uds, timeout)
        elif self._scheme == "https":
            conn = _TlsConnection(self._host, self._port, timeout=timeout)
        else:
            conn = _TcpConnection(self._host, self._port, timeout=timeout)
        try:
            conn.connect()
            if conn.sock is not None and self._uds is None:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            conn.close()
            raise ConnectFailed(str(exc) or type(exc).__name__) from exc
        with self._lock:
            self._all.append(conn)
        return conn

    def _connection(self, timeout: float) -> _OneWrite:
        conn: _OneWrite | None = getattr(self._local, "conn", None)
        if conn is not None and _server_closed(conn):
            self._drop(conn)
            conn = None
        if conn is None:
            conn = self._new(timeout)
            self._local.conn = conn
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

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

        Raises:
            ConnectFailed: no connection could be made (nothing was sent).
            TransportFailed: the exchange failed after sending began.
        """
        url = self._base_path + path
        if params:
            url += "?" + urlencode({k: str(v) for k, v in params.items()})
        all_headers = {**self._headers, **(headers or {})}
        if content is not None:
            all_headers["content-length"] = str(len(content))
        conn = self._connection(timeout)
        try:
            conn.request_whole(method, url, content, all_headers)
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop(conn)
            raise TransportFailed(f"{type(exc).__name__}: {exc}") from exc
        if response.will_close:
            self._drop(conn)
        return Reply(response.status, response.getheader("content-type", ""), body)

    def close(self) -> None:
        """Close every connection this transport opened."""
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
