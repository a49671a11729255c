"""Reading HTTP/1.1 responses off a socket: the receiving half of `memoryd.client._http`.

A `Connection` owns one socket and its receive buffer. It reads a response with
``recv_into`` that buffer and parses the status line and the headers that frame
the body by hand; bodies are framed by ``content-length``, ``transfer-encoding:
chunked``, or the end of the connection. A malformed response raises
`TransportFailed` naming what was wrong.
"""

from __future__ import annotations

import itertools
import re
import select
import socket
import ssl
import time
from dataclasses import dataclass

from memoryd.errors import TransportFailed

__all__ = ["MAX_HEAD_BYTES", "Connection", "Reply", "TransportFailed", "parse_head"]

MAX_HEAD_BYTES = 64 * 1024
"""The largest response head (status line and headers), and the largest chunk-size line."""

_BUFFER_BYTES = MAX_HEAD_BYTES + 8 * 1024
_LARGE_PIECE = 1 << 20
_TIMEOUT_SLACK_S = 0.001
_NO_BODY_STATUSES = frozenset({204, 304})
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_FOLD = (b" ", b"\t")
_FRAMING = frozenset(
    {b"connection", b"content-length", b"content-type", b"keep-alive", b"transfer-encoding"}
)

# A head parsed: (status, content type, content length or None, chunked, server closes).
_Head = tuple[int, str, int | None, bool, bool]


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP response: status, content type and body."""

    status: int
    content_type: str
    body: bytes


def _status(line: bytes) -> tuple[int, bytes]:
    """``(status, version)`` from a status line such as ``HTTP/1.1 200 OK``.

    Raises:
        TransportFailed: a malformed status line, or an HTTP version other than 1.x.
    """
    parts = line.split(None, 2)
    if (
        len(parts) < 2
        or not parts[0].startswith(b"HTTP/")
        or len(parts[1]) != 3
        or not parts[1].isdigit()
        or parts[1][:1] == b"0"
    ):
        raise TransportFailed(f"malformed status line {line[:200]!r}")
    if not parts[0].startswith(b"HTTP/1."):
        raise TransportFailed(f"unsupported HTTP version {parts[0][:20]!r}: want HTTP/1.x")
    return int(parts[1]), parts[0]


def _framing_fields(lines: list[bytes]) -> dict[bytes, bytes]:
    """The headers named in `_FRAMING`, by lower-case name, from a head's lines.

    A repeated header becomes one comma-separated list; an obsolete folded line
    continues the header before it.

    Raises:
        TransportFailed: a malformed header line.
    """
    fields: dict[bytes, bytes] = {}
    last: bytes | None = None  # the previous header's name if kept, else b""
    for line in itertools.islice(lines, 1, None):
        name, colon, value = line.partition(b":")
        key = name.lower()
        if key not in _FRAMING:
            if line[:1] in _FOLD:
                if last is None:
                    raise TransportFailed(f"malformed header line {line[:200]!r}")
                if last:
                    fields[last] += b" " + line.strip()
                continue
            key = key.strip()
            if not colon or not key:
                raise TransportFailed(f"malformed header line {line[:200]!r}")
            if key not in _FRAMING:
                last = b""
                continue
        last = key
        value = value.strip()
        if key in fields:
            fields[key] += b", " + value
        else:
            fields[key] = value
    return fields


def parse_head(head: bytes) -> _Head:
    """Read a response's status line and the headers that frame it.

    Args:
        head: the response head without its final empty line; lines end with CRLF
            (or a bare LF).

    Returns:
        ``(status, content_type, content_length, chunked, close)``; ``close`` is
        True when the server will close the connection after this response.

    Raises:
        TransportFailed: a malformed status line, header line or content-length,
            or an HTTP version other than 1.x.
    """
    lines = head.split(b"\r\n")
    if len(lines) != head.count(b"\n") + 1:  # some lines end with a bare LF
        lines = [line.rstrip(b"\r") for line in head.split(b"\n")]
    status, version = _status(lines[0])
    fields = _framing_fields(lines)
    length: int | None = None
    raw_length = fields.get(b"content-length")
    if raw_length is not None:
        if raw_length.isdigit():
            length = int(raw_length)
        else:  # a repeated header: valid only if every value is the same
            values = {v.strip() for v in raw_length.split(b",")}
            if len(values) != 1 or not (only := values.pop()).isdigit():
                raise TransportFailed(f"malformed content-length {raw_length[:200]!r}")
            length = int(only)
    connection = fields.get(b"connection")
    tokens = {t.strip() for t in connection.lower().split(b",")} if connection else set()
    if version == b"HTTP/1.0":
        close = b"keep-alive" not in tokens and b"keep-alive" not in fields
    else:
        close = b"close" in tokens
    chunked = False
    coding = fields.get(b"transfer-encoding")
    if coding:  # a transfer coding overrides content-length
        chunked = coding.lower().rpartition(b",")[2].strip() == b"chunked"
        if not chunked or length is not None:
            close = True  # framed by the end of the connection, or framed twice
        length = None
    content_type = fields.get(b"content-type", b"").decode("latin-1")
    return status, content_type, length, chunked, close


class Connection:
    """One socket and its receive buffer; used by one thread at a time."""

    __slots__ = ("_buf", "_end", "_poll", "_start", "_timeout", "_view", "closed", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False
        self._buf = bytearray(_BUFFER_BYTES)
        self._view = memoryview(self._buf)
        self._start = 0  # unread received bytes are _buf[_start:_end]
        self._end = 0
        self._timeout = sock.gettimeout() or 0.0  # the socket's timeout, as last set
        self._poll: select.poll | None = None
        if hasattr(select, "poll"):
            self._poll = select.poll()
            self._poll.register(sock.fileno(), select.POLLIN)

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
        return isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0

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

    # -- receiving -------------------------------------------------------------------

    def _fill(self, deadline: float) -> int:
        """Receive more bytes into the buffer; 0 at the end of the connection."""
        if self._end == len(self._buf):  # make room: move the unread bytes to the front
            unread = bytes(self._view[self._start : self._end])
            self._buf[: len(unread)] = unread
            self._start, self._end = 0, len(unread)
        self.arm(deadline)
        got = self.sock.recv_into(self._view[self._end :])
        self._end += got
        return got

    def _until(self, needle: bytes, limit: int, what: str, deadline: float) -> bytes:
        """The bytes up to ``needle`` (consumed with it, not returned)."""
        searched = 0  # unread bytes already searched, but for a needle's length
        buf = self._buf
        while True:
            unread = self._end - self._start
            if unread > searched:
                at = buf.find(needle, self._start + searched, self._end)
                size = len(needle)
                if at < 0 and needle == b"\r\n\r\n":  # a server ending lines with bare LFs
                    at = buf.find(b"\n\n", self._start, self._end)
                    size = 2
                if at - self._start > limit or (at < 0 and unread > limit):
                    raise TransportFailed(f"the response's {what} exceeds {limit} bytes")
                if at >= 0:
                    found = bytes(self._view[self._start : at])
                    self._start = at + size
                    return found
                searched = max(0, unread - len(needle) + 1)
            if not self._fill(deadline):
                raise TransportFailed(
                    f"the server closed the connection in the middle of the response's {what}"
                    if unread or what != "head"
                    else "the server closed the connection without answering"
                )

    def _take(self, size: int, deadline: float) -> bytes:
        """Exactly ``size`` more bytes of the response."""
        if size > len(self._buf) - self._start:
            return self._take_large(size, deadline)
        while self._end - self._start < size:
            if not self._fill(deadline):
                raise TransportFailed(
                    f"the server closed the connection "
                    f"{size - (self._end - self._start)} bytes before the end of the body"
                )
        taken = bytes(self._view[self._start : self._start + size])
        self._start += size
        return taken

    def _take_large(self, size: int, deadline: float) -> bytes:
        """`_take` for a size past the buffer, received straight into pieces of the result.

        Memory grows with the bytes received, not with the size the server announced.
        """
        parts: list[bytes | bytearray] = [bytes(self._view[self._start : self._end])]
        have = self._end - self._start
        self._start = self._end = 0
        while have < size:
            piece = bytearray(min(size - have, _LARGE_PIECE))
            with memoryview(piece) as target:
                filled = 0
                while filled < len(piece):
                    self.arm(deadline)
                    got = self.sock.recv_into(target[filled:])
                    if not got:
                        raise TransportFailed(
                            f"the server closed the connection {size - have - filled} bytes "
                            "before the end of the body"
                        )
                    filled += got
            parts.append(piece)
            have += filled
        return b"".join(parts)

    def _chunked(self, deadline: float) -> bytes:
        """A ``transfer-encoding: chunked`` body, trailers read and ignored."""
        parts: list[bytes] = []
        while True:
            line = self._until(b"\n", MAX_HEAD_BYTES, "chunk-size line", deadline)
            size_field = line.rstrip(b"\r").partition(b";")[0].strip()
            if not _HEX.fullmatch(size_field):
                raise TransportFailed(f"malformed chunk-size line {line[:200]!r}")
            size = int(size_field, 16)
            if size == 0:
                break
            parts.append(self._take(size, deadline))
            if self._until(b"\n", 1, "chunk end", deadline).rstrip(b"\r"):
                raise TransportFailed("a chunk of the body does not end with CRLF")
        trailers = 0
        while line := self._until(b"\n", MAX_HEAD_BYTES, "trailers", deadline).rstrip(b"\r"):
            trailers += len(line)
            if trailers > MAX_HEAD_BYTES:
                raise TransportFailed(f"the response's trailers exceed {MAX_HEAD_BYTES} bytes")
        return b"".join(parts)

    def _to_end(self, deadline: float) -> bytes:
        """The rest of the connection: a body framed by the server closing it."""
        parts: list[bytes] = []
        while True:
            if self._end == len(self._buf):
                parts.append(bytes(self._view[self._start : self._end]))
                self._start = self._end = 0
            if not self._fill(deadline):
                break
        parts.append(bytes(self._view[self._start : self._end]))
        self._start = self._end = 0
        return b"".join(parts)

    def response(self, head_only: bool, deadline: float) -> tuple[Reply, bool]:
        """Read one whole response.

        Returns:
            The reply, and whether the connection may carry another request.
        """
        while True:
            head = self._until(b"\r\n\r\n", MAX_HEAD_BYTES, "head", deadline)
            status, content_type, length, chunked, close = parse_head(head)
            if status >= 200 or status == 101:
                break  # an interim 1xx answer is followed by the real one
        if head_only or status < 200 or status in _NO_BODY_STATUSES:
            body = b""
            close = close or status == 101
        elif chunked:
            body = self._chunked(deadline)
        elif length is not None:
            body = self._take(length, deadline) if length else b""
        else:
            body = self._to_end(deadline)
            close = True
        if self._start != self._end:  # bytes past the response: not reusable
            close = True
        self._start = self._end = 0
        return Reply(status, content_type, body), not close
