"""Connection limits: what a client may hold before it has authenticated.

Nothing about a request is known until its head (request line and headers) has
arrived, so the head itself is bounded on every connection: `bounded` builds a
subclass of uvicorn's httptools protocol that

* closes a connection whose head is not complete `ServerConfig.head_timeout_s`
  (``--head-timeout``, 10 s by default) after it was opened (or after its previous
  request ended), answering 408;
* refuses a head larger than `MAX_HEAD_BYTES` with 431 and closes the connection;
* refuses, at accept time, a connection past its listener's budget (closed at once,
  so it holds its file descriptor for microseconds);
* answers a request httptools refuses (bad framing) with a JSON 400 naming the
  parser's reason, and closes the connection (`memoryd.server.framing`); when the
  refused head follows requests still being answered on the connection (pipelined),
  the refusal waits for their answers, in order, and nothing more is read;
* bounds a head by what the parser finds in it too, so a head that arrives after
  another request in the same read is refused (431) as one alone is; any refusal of a
  request that follows others still due waits for their answers;
* lets at most `MAX_PIPELINED` requests wait behind the one being answered (429 past
  it, after the answers due);
* closes a connection whose request was answered before its body came (401, 413):
  it sends EOF, drops what the client still sends for `LINGER_S`, then closes, so a
  client cannot hold a connection by dribbling a body no one will read;
* writes a response's head and its body in one system call (`OneWrite`): uvicorn
  writes them apart, and each write to a socket wakes the client once more;
* answers a last-N msgpack read as soon as its head is in, through the app's
  `memoryd.server.lane.FastLane`, when the connection has no other request in flight
  (such a request builds no ASGI scope: the scope is made once the app is to run);
* takes a msgpack add the same way (`memoryd.server.appends.AppendLane`): its body is
  collected by the connection, and the answer written once the store has committed it;
  meanwhile the add stands in for the connection's response cycle, so a pipelined
  request waits, and a shutdown closes the connection after the answer;
* keeps one timer per connection, the head timer, moved lazily: an idle keep-alive
  connection is closed by it (with a 408) that long after its last response,
  before uvicorn's own keep-alive timeout could end it, so uvicorn's keep-alive timer,
  a timer made and cancelled per request, is not armed; and a request whose body
  stalls (no byte of it for that long, while the app waits for it or has answered
  without it) gets a 408 and its connection closed, so a client that announces more
  than it sends never holds a connection.

Each listener (the Unix socket, TCP) runs its own uvicorn server with its own
budget, so a flood on TCP can never take the Unix socket's connections. The
budgets come from the process's file-descriptor limit (`fd_budget`), which the
daemon raises from its soft to its hard value at start.
"""

from __future__ import annotations

import asyncio
import resource
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from memoryd.server.appends import PendingAdd, status_line
from memoryd.server.config import DEFAULT_HEAD_TIMEOUT_S
from memoryd.server.framing import quiet_uvicorn, refusal
from memoryd.server.onewrite import OneWrite

if TYPE_CHECKING:
    from memoryd.server.lane import FastLane

__all__ = [
    "FD_PER_STORE",
    "MAX_HEAD_BYTES",
    "FdBudget",
    "bounded",
    "fd_budget",
    "raise_fd_limit",
]

log = structlog.get_logger("memoryd.server")

MAX_HEAD_BYTES = 64 << 10
"""The largest request head accepted (431 above it)."""

FD_PER_STORE = 4
"""File descriptors one running LMDB store holds (data, lock, the directory's lock, spare)."""

_FD_RESERVE = 64
"""Descriptors kept for everything else (logs, the listeners themselves, threads' files)."""

_MIN_CONNECTIONS = 64
"""The fewest connections a listener is given, whatever else must shrink."""

_STATUS = {
    408: b"408 Request Timeout",
    429: b"429 Too Many Requests",
    431: b"431 Request Header Fields Too Large",
}


def _refusal(status: int, message: str) -> bytes:
    body = b'{"error":{"type":"HttpError","message":"' + message.encode("ascii") + b'"}}'
    return (
        b"HTTP/1.1 "
        + _STATUS[status]
        + b"\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode("ascii")
        + b"\r\nconnection: close\r\n\r\n"
        + body
    )


_TOO_LARGE = _refusal(431, f"the request head is over {MAX_HEAD_BYTES} bytes")

LINGER_S = 2.0
"""How long a connection answered before its request's body arrived reads (and drops)
what still comes before it is closed: closed at once with unread bytes, the kernel
would reset it, and the client could lose the answer it was sent."""


class _HeadTooLarge(Exception):
    """Raised from a parser callback: the head's fields are over `MAX_HEAD_BYTES`."""


MAX_PIPELINED = 32
"""The most requests one connection may have waiting behind the one being answered.
Each waiting request holds its parsed head and an ASGI cycle; behind a long-poll, a
client could otherwise queue hundreds of thousands of them. The one past the limit is
refused (429, after the answers before it) and the connection closed."""

_TOO_MANY = _refusal(
    429,
    f"more than {MAX_PIPELINED} requests pipelined on one connection: "
    "wait for the answers before sending more",
)


class _TooManyPipelined(Exception):
    """Raised from a parser callback: past `MAX_PIPELINED` requests waiting."""


def raise_fd_limit() -> int:
    """Raise the soft limit on open files to the hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    elif hard == resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY:
        for wanted in (1 << 20, 1 << 16):
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                soft = wanted
                break
            except (ValueError, OSError):
                continue
    return int(soft) if soft != resource.RLIM_INFINITY else 1 << 20


@dataclass(frozen=True, kw_only=True, slots=True)
class FdBudget:
    """How the daemon's file descriptors are shared out.

    Attributes:
        nofile: the process's limit on open files.
        stores: the most named stores that may run (``--max-stores``, lowered when the
            descriptors cannot hold that many).
        unix: the most connections the Unix socket holds at once.
        tcp: the most connections the TCP listener holds at once.
    """

    nofile: int
    stores: int
    unix: int
    tcp: int


def fd_budget(nofile: int, *, max_stores: int, tcp: bool) -> FdBudget:
    """Share ``nofile`` descriptors among stores and listeners (a pure function).

    Stores get `FD_PER_STORE` each; the listeners share the rest, half each when
    there is a TCP listener, each at least `_MIN_CONNECTIONS` (stores give way first).

    Args:
        nofile: the limit on open files.
        max_stores: the most named stores asked for.
        tcp: whether a TCP listener runs.
    """
    listeners = 2 if tcp else 1
    spare = nofile - _FD_RESERVE - listeners * _MIN_CONNECTIONS
    stores = max(1, min(max_stores, spare // FD_PER_STORE))
    left = max(listeners * _MIN_CONNECTIONS, nofile - _FD_RESERVE - stores * FD_PER_STORE)
    if tcp:
        return FdBudget(nofile=nofile, stores=stores, unix=left - left // 2, tcp=left // 2)
    return FdBudget(nofile=nofile, stores=stores, unix=left, tcp=0)


def bounded(
    max_connections: int,
    lane: FastLane | None = None,
    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S,
) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with the head limits and a connection budget.

    Args:
        max_connections: the most connections its server holds at once; one more is
            closed as soon as it is accepted.
        lane: answers the reads it can before the app is called (None: the app
            answers every request).
        head_timeout_s: how long a head may take to arrive, a connection may idle
            between requests, and a body may go without a byte arriving (a 408 and
            the connection closed after it).

    Returns:
        The protocol class (pass it to `memoryd.server.peercred.peer_checked`).
    """
    quiet_uvicorn()
    timed_out = _refusal(408, f"the request head did not arrive within {head_timeout_s:g} s")
    body_timed_out = _refusal(
        408, f"the request body stalled: no byte of it arrived for {head_timeout_s:g} s"
    )

    class Bounded(HttpToolsProtocol):
        _dropped = False
        _head_bytes = 0
        _heads = 0
        _reading_head = True
        _head_timer: asyncio.TimerHandle | None = None
        _head_due: float | None = None
        _out: OneWrite | None = None
        _lane_served = False
        _adding: PendingAdd | None = None
        """The lane's add whose body is arriving."""
        _fields = 0
        """Bytes of the current head's target and header fields, counted as parsed."""
        _refused: bytes | None = None
        """A refusal due once the requests before the refused one are answered."""
        _due = 0
        """Requests taken whose answers are not complete yet (running or waiting)."""
        _lingering = False

        def connection_made(self, transport: Any) -> None:
            if len(self.connections) >= max_connections:
                self._dropped = True
                log.warning("connection_refused", reason="listener_full", limit=max_connections)
                transport.abort()
                return
            super().connection_made(transport)
            self._out = OneWrite(transport, self)
            self.transport = self._out  # type: ignore[assignment]
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._adding is not None and lane is not None and lane.appends is not None:
                lane.appends.forget_cut(self._adding.cut_key)
                if not self._adding.cut:
                    lane.appends.gone(self._adding)  # its body never came whole
                self._adding = None
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            if not self._dropped:
                super().connection_lost(exc)

        def _arm(self) -> None:
            # one timer per connection, moved lazily: a request costs a clock read, not
            # a timer's creation and cancellation
            due = self.loop.time() + head_timeout_s
            self._head_due = due
            if self._head_timer is None:
                self._head_timer = self.loop.call_at(due, self._head_timed_out)

        def _disarm(self) -> None:
            self._head_due = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            due = self._head_due
            if due is None:
                return  # no head is due: the next response arms the timer again
            if due > self.loop.time():
                self._head_timer = self.loop.call_at(due, self._head_timed_out)
                return
            if self.transport.is_closing():
                return
            cycle = self.cycle
            idle = cycle is None or cycle.response_complete
            if self._reading_head:
                if idle:
                    self.transport.write(timed_out)
                    self.transport.close()
                return
            # a body is due: its head came, its end did not
            answering = cycle is not None and cycle.response_started and not idle
            if self.flow.read_paused or answering:
                self._arm()  # the app has not taken what came, or it is answering
                return
            self.transport.write(body_timed_out)
            self.transport.close()

        def send_400_response(self, msg: str) -> None:
            # uvicorn calls this from its ``except httptools.HttpParserError`` alone, so
            # the parser's error is the one being handled: a JSON 400 that names it
            error = sys.exc_info()[1]
            cause = getattr(error, "__context__", None)
            if isinstance(cause, _HeadTooLarge):
                answer = _TOO_LARGE  # a pipelined head past the limit (`_count`)
                log.warning("request_head_too_large", limit=MAX_HEAD_BYTES)
            elif isinstance(cause, _TooManyPipelined):
                answer = _TOO_MANY
                log.warning("too_many_pipelined", limit=MAX_PIPELINED)
            else:
                refused = refusal(
                    error, self.parser.get_method(), self.server_state.default_headers
                )
                log.warning("malformed_request", status=refused.status, reason=refused.reason)
                answer = refused.answer
            in_head = self._reading_head or isinstance(cause, _TooManyPipelined)
            self._reading_head = False
            self._disarm()
            if not in_head and self.pipeline and self.pipeline[0][0] is self.cycle:
                # The refused body is a request's still waiting in the pipeline: it never
                # runs (the refusal is its answer), and the requests before it are
                # answered first, as for a refused head.
                self.pipeline.popleft()
                self.cycle.response_complete = True
                self._due -= 1
                in_head = True
            if in_head and self._answering():
                # The refused request follows others in the same stream: they are
                # answered first, in order, and then the refusal (`on_response_complete`);
                # nothing more is read. Written now, it would take the place of their
                # answers, and close the connection under them.
                self._refused = answer
                return
            cycle = self.cycle  # a response half-written cannot be followed by another
            if cycle is None or not cycle.response_started or cycle.response_complete:
                self.transport.write(answer)
            self.transport.close()

        def _answering(self) -> bool:
            """True while a request before the one being parsed waits for its answer."""
            return self._due > 0

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

        def _count(self, size: int) -> None:
            """Bound a head by what the parser found in it: a head that arrives after
            another request in one read is not counted by `data_received`."""
            self._fields += size
            if self._fields > MAX_HEAD_BYTES:
                raise _HeadTooLarge

        def on_message_begin(self) -> None:
            # the scope waits for `_scope`: a request the lane answers needs none
            self._fields = 0
            self.url = b""
            self.expect_100_continue = False
            self.headers = []

        def _scope(self) -> None:
            """Build the request's ASGI scope as uvicorn does at the message's begin."""
            url, headers, expect = self.url, self.headers, self.expect_100_continue
            super().on_message_begin()
            self.url, self.headers, self.expect_100_continue = url, headers, expect
            self.scope["headers"] = headers

        def data_received(self, data: bytes) -> None:
            if self._dropped or self._lingering or self._refused is not None:
                return  # nothing more of this connection is read: dropped
            room = MAX_HEAD_BYTES - self._head_bytes
            if self._reading_head and len(data) > room:
                # feed the head's allowance only: a body may follow in the same chunk
                heads = self._heads
                self._head_bytes = MAX_HEAD_BYTES
                super().data_received(data[:room])
                if (
                    self._heads == heads
                    and self._refused is None
                    and not self.transport.is_closing()
                ):
                    self._reading_head = False
                    self._disarm()
                    log.warning("request_head_too_large", limit=MAX_HEAD_BYTES)
                    if self._answering():  # after the answers still due, as any refusal
                        self._refused = _TOO_LARGE
                        return
                    self.transport.write(_TOO_LARGE)
                    self.transport.close()
                elif not self.transport.is_closing():
                    self.data_received(data[room:])
                return
            if self._reading_head:
                self._head_bytes += len(data)
            super().data_received(data)
            if not self._reading_head and not self.transport.is_closing():
                self._arm()  # a body is due: its next bytes within the timeout

        def on_headers_complete(self) -> None:
            self._reading_head = False
            self._heads += 1
            self._head_due = None  # `_disarm`, spelled out
            if lane is not None and self._by_lane():
                return
            self._scope()
            super().on_headers_complete()
            self._due += 1
            if len(self.pipeline) > MAX_PIPELINED:
                self.pipeline.popleft()  # this one: refused, never run
                self.cycle.response_complete = True
                self._due -= 1
                raise _TooManyPipelined

        def _by_lane(self) -> bool:
            """Take the request into the lane if it can; True once it is taken (a read
            answered, an add waiting for its body)."""
            cycle = self.cycle
            parser = self.parser
            if (
                (cycle is not None and not cycle.response_complete)
                or self.pipeline
                or self.flow.write_paused
                or self.app is not self.config.loaded_app  # a refused peer's connection
                or parser.get_http_version() != "1.1"
                or not parser.should_keep_alive()
                or parser.should_upgrade()
            ):
                return False
            assert lane is not None
            method = parser.get_method()
            if method == b"POST":
                appends = lane.appends
                if appends is None:
                    return False
                pending = appends.admit(self.url, self.headers, self.server)
                if pending is None:
                    return False
                self.cycle = pending  # type: ignore[assignment]  # a pipelined request waits
                self._adding = pending
                pending.cut_key = appends.on_cut(lambda: self._cut_adding(pending))
                self._due += 1  # answered by `_added`, which completes it as a cycle does
                return True
            if method != b"GET":
                return False
            response = lane.answer(
                self.url, self.headers, self.server, self.server_state.default_headers
            )
            if response is None:
                return False
            self._out.raw.write(response)  # type: ignore[union-attr]  # nothing held
            self._lane_served = True
            return True

        def on_body(self, body: bytes) -> None:
            adding = self._adding
            if adding is None:
                super().on_body(body)
            else:  # at most the announced length, which the lane bounded
                adding.body += body

        def on_message_complete(self) -> None:
            adding = self._adding
            if adding is not None:  # the add's body is in: check it and send it
                self._adding = None
                self._reading_head = True
                self._head_bytes = 0
                assert lane is not None and lane.appends is not None
                lane.appends.forget_cut(adding.cut_key)
                if not adding.cut:  # else answered at the shutdown's cut already
                    lane.appends.start(adding, lambda *answer: self._added(adding, *answer))
                return
            if self._lane_served:  # its response is written: the connection is free
                self._lane_served = False
                self._reading_head = True
                self._head_bytes = 0
                self.server_state.total_requests += 1
                if not self.transport.is_closing():
                    self._arm()
                return
            super().on_message_complete()
            self._reading_head = True
            self._head_bytes = 0

        def _cut_adding(self, pending: PendingAdd) -> None:
            """The shutdown's cut came while ``pending``'s body was still arriving: it is
            answered now (503, nothing written) and the connection closes."""
            if self._adding is not pending or pending.cut:
                return
            pending.cut = True
            pending.keep_alive = False
            assert lane is not None and lane.appends is not None
            lane.appends.cut_unread(pending, lambda *answer: self._added(pending, *answer))

        def _added(self, pending: PendingAdd, status: int, media: bytes, body: bytes) -> None:
            """Write the answer of a lane's add (head and body in one write), then free
            the connection for its next request, as a finished response cycle does."""
            pending.response_complete = True
            assert lane is not None
            transport = self._out.raw  # type: ignore[union-attr]  # nothing held
            if transport.is_closing():
                return
            close = not pending.keep_alive  # the server is shutting down
            transport.write(
                b"".join(
                    (
                        status_line(status),
                        lane.header_lines(self.server_state.default_headers),
                        b"content-type: ",
                        media,
                        b"\r\ncontent-length: %d\r\n" % len(body),
                        b"connection: close\r\n\r\n" if close else b"\r\n",
                        body,
                    )
                )
            )
            if close:
                transport.close()
                return
            self.on_response_complete()

        def on_response_complete(self) -> None:
            # uvicorn's, without its keep-alive timer: the head timer, armed here, closes
            # an idle connection sooner
            if self._out is not None:
                self._out.flush()
            self.server_state.total_requests += 1
            self._due -= 1
            if self.transport.is_closing():
                return
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
                if self._refused is None:
                    self.flow.resume_reading()
                    self._arm()
                return
            if self._refused is not None:  # the requests before it are answered now
                if not self._answering():
                    self.transport.write(self._refused)
                    self.transport.close()
                return
            if getattr(self.cycle, "more_body", False):
                # Answered before its body came (401, 413, a refusal of its head): the
                # rest of the body is of no use, and a client must not hold the
                # connection by dribbling it. Drop what comes for a moment, then close.
                self._linger()
                return
            self.flow.resume_reading()
            self._arm()  # the next request's head is due within the timeout

        def _linger(self) -> None:
            """Send EOF after the answer, drop what the client still sends for `LINGER_S`
            at most, then close."""
            self._lingering = True
            self._disarm()
            raw = self._out.raw if self._out is not None else self.transport
            try:
                if raw.can_write_eof():
                    raw.write_eof()
            except (OSError, RuntimeError):
                raw.close()
                return
            self.flow.resume_reading()
            self.loop.call_later(LINGER_S, raw.close)

    return Bounded
