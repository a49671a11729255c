"""The append lane: a msgpack add to one conversation taken by the connection itself.

``POST .../messages`` with a msgpack body is what every `memoryd.connect` handle sends
for an add, the daemon's busiest write. The ASGI way spends a scope, a response cycle,
its events, the middlewares, a request wrapper and the body's messages in and out of
the receive queue on each. `AppendLane` takes such a request from the connection
(`memoryd.server.limits`) instead:

* at its head (`AppendLane.admit`): the same checks as the app's guard from the raw
  header bytes (`memoryd.server.http.Guard.admits`: Origin, Host, token, URL), the body's
  announced size against the daemon's limit before any of the body is read, its content
  type, and a store that runs here; anything else goes to the app, which checks it
  again and answers it (a 413, a 415, a 401, a store to start, a body decoded in a
  worker thread, a chunked body, ``Expect: 100-continue``);
* once its body is in (`AppendLane.start`): decoded once (`memoryd.server.bodies`, with
  the bounds of every body), its fields and message count checked, the add built and
  checked by `memoryd.store.requests.add`, and handed to the store
  (`memoryd.store.handle.StoreHandle.submit`, which goes to the store actor and is
  woken by its answer, with the store's deadline); a refused body is answered at once;
* the answer (the version, or the error the app would give, with its status) is one
  response, its head and body written together, and the request counted in the
  metrics as `memoryd.server.metrics.Observe` would.

The lane's request stands in for the connection's response cycle while it is in
flight (`PendingAdd`), so a pipelined request waits for it, and a daemon shutting down
closes the connection once it is answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus

import structlog

from memoryd import protocol as wire
from memoryd.errors import (
    HttpError,
    InvalidMessage,
    MemorydError,
    StoreUnavailable,
    WriteTimeout,
)
from memoryd.protocol import check_store_name
from memoryd.server.bodies import decode_body
from memoryd.server.calls import ServerContext, check_fields
from memoryd.server.hot import messages_path
from memoryd.server.http import INLINE_DECODE_BYTES, JSON, Guard, encode
from memoryd.server.metrics import CLIENT_CLOSED_REQUEST, Observe
from memoryd.store import lookup, requests
from memoryd.store.handle import StoreHandle

__all__ = ["AppendLane", "PendingAdd"]

log = structlog.get_logger("memoryd.server")

_MSGPACK = b"application/msgpack"
_FIELDS = {"messages", "then_clear", "idempotency_key", "expected_version"}
_REQUIRED = {"messages"}

Done = Callable[[int, bytes, bytes], None]
"""Called once with the answer: ``(status, content type, body)``."""


class _Event:
    """The response cycle's ``message_event`` as the connection sets it: nothing waits."""

    __slots__ = ()

    def set(self) -> None:
        """Nothing waits for a lane request's body events."""


_NO_EVENT = _Event()


class PendingAdd:
    """One add the lane took: what its head said, and its body as it arrives.

    It stands in for the connection's response cycle while the add is in flight (the
    attributes uvicorn's protocol reads of a cycle), so a pipelined request waits for it.

    Args:
        handle: the store's handle, found running when the head came in.
        cid: the conversation id, as the path gave it.
        path: the request's path, for the metrics and the log.
        msgpack: the client accepts msgpack answers.
        started: when the request's head was complete (``time.perf_counter``).
    """

    __slots__ = (
        "body",
        "cid",
        "cut",
        "cut_key",
        "disconnected",
        "handle",
        "keep_alive",
        "msgpack",
        "path",
        "response_complete",
        "started",
    )

    response_started = False
    chunked_encoding = None
    expected_content_length = 0
    message_event = _NO_EVENT

    def __init__(
        self,
        handle: StoreHandle,
        cid: str,
        path: str,
        *,
        msgpack: bool,
        started: float,
    ) -> None:
        self.cut = False
        """Answered at the shutdown's cut before its body came whole."""
        self.cut_key = -1
        self.handle = handle
        self.cid = cid
        self.path = path
        self.msgpack = msgpack
        self.started = started
        self.body = b""
        self.response_complete = False
        self.disconnected = False
        self.keep_alive = True


class AppendLane:
    """Takes msgpack adds for the connections of one app.

    Args:
        observe: the app's metrics middleware.
        guard: the app's guard.
        ctx: the app's context (its stores, limits and thread limiter).
    """

    def __init__(self, observe: Observe, guard: Guard, ctx: ServerContext) -> None:
        self._observe = observe
        self._guard = guard
        self._ctx = ctx
        self._max_body = min(ctx.config.max_body_bytes, INLINE_DECODE_BYTES)
        self._tasks: set[asyncio.Task[None]] = set()

    def admit(
        self,
        url: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        server: tuple[str, int | None] | None,
    ) -> PendingAdd | None:
        """The add a ``POST`` of ``url`` with ``headers`` asks for, or None (the app takes it).

        Args:
            url: the request target as received.
            headers: its headers, names in lower case.
            server: the listening address (port None on a Unix socket).
        """
        started = time.perf_counter()
        seen = dict(reversed(headers))  # each name's first value counts, as for the app
        if b"transfer-encoding" in seen or b"expect" in seen:
            return None
        length = seen.get(b"content-length")
        if (
            seen.get(b"content-type") != _MSGPACK
            or length is None
            or not length.isdigit()
            or not 0 < int(length) <= self._max_body
        ):
            return None
        parts = messages_path(url)  # no query: nothing clients do not send
        if parts is None:
            return None
        on_tcp = server is not None and server[1] is not None
        guard = self._guard
        if not guard.admits(
            seen.get(b"origin"), seen.get(b"host"), seen.get(b"authorization"), on_tcp, url
        ):
            return None
        store = parts[0]
        try:
            running = wire.DEFAULT_STORE_NAME if store is None else check_store_name(store)
        except ValueError:
            return None
        handle = lookup.whereis(running)
        if handle is None:
            return None  # the app starts it (in a worker thread), or refuses
        accept = seen.get(b"accept")
        return PendingAdd(
            handle,
            parts[1],
            parts[2],
            msgpack=accept is not None and _MSGPACK in accept,
            started=started,
        )

    def on_cut(self, callback: Callable[[], None]) -> int:
        """Have ``callback`` called at the shutdown's cut (`Drain.on_cut`): an add whose
        body is still arriving answers then. Returns the key for `forget_cut`."""
        return self._ctx.drain.on_cut(callback)

    def forget_cut(self, key: int) -> None:
        """The add `on_cut` gave ``key`` to has its body (or its client left)."""
        self._ctx.drain.forget(key)

    def cut_unread(self, pending: PendingAdd, done: Done) -> None:
        """Answer an add whose body had not all come at the shutdown's cut: nothing was
        written, so a 503 its client retries once the daemon is back."""
        _log_cut(pending, "nothing written")
        error = StoreUnavailable(
            "the daemon is stopping and this add's body had not all come; nothing was "
            "written: retry once the daemon is back"
        )
        self._answer_error(pending, error, done)

    def start(self, pending: PendingAdd, done: Done) -> None:
        """Check ``pending``'s body and send its add; ``done`` gets the answer.

        A refused body is answered before this returns; an add sent to its store is
        answered when the store has committed it (or failed).
        """
        handle = pending.handle
        try:
            request = self._request(pending, handle.max_message_bytes)
        except Exception as exc:
            self._answer_error(pending, exc, done)
            return
        task = asyncio.get_running_loop().create_task(self._submit(pending, handle, request, done))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._ctx.drain.track(task)  # answered at the shutdown's cut, as the app's are

    def gone(self, pending: PendingAdd) -> None:
        """The client left before ``pending``'s body arrived: counted and logged as the app
        counts it (`CLIENT_CLOSED_REQUEST`); nothing was sent to the store."""
        log.info("client_disconnected", method="POST", path=pending.path, op="add")
        self._observe.record(
            "POST",
            pending.path,
            "add",
            CLIENT_CLOSED_REQUEST,
            time.perf_counter() - pending.started,
        )

    def _request(self, pending: PendingAdd, max_message_bytes: int) -> requests.Add:
        """The add of ``pending``'s body, every check of the app's ``add_messages`` done.

        Raises:
            HttpError: a body that is not one msgpack object of the add's fields.
            InvalidMessage: too many messages, or one the store would refuse.
            InvalidConversationId: a bad conversation id.
            ValueError: any other bad field.
        """
        config = self._ctx.config
        body = decode_body(pending.body, "msgpack", config.max_messages_per_add)
        if not isinstance(body, dict):
            raise HttpError(400, "ValueError", "the request body must be an object")
        check_fields(body, _FIELDS, _REQUIRED)
        messages = body["messages"]
        if isinstance(messages, list) and len(messages) > config.max_messages_per_add:
            raise InvalidMessage(
                f"an add holds at most {config.max_messages_per_add} messages; this one holds "
                f"{len(messages)}: split it"
            )
        return requests.add(
            pending.cid,
            messages,
            idempotency_key=body.get("idempotency_key"),
            expected_version=body.get("expected_version"),
            then_clear=body.get("then_clear"),
            max_bytes=max_message_bytes,
        )

    async def _submit(
        self,
        pending: PendingAdd,
        handle: StoreHandle,
        request: requests.Add,
        done: Done,
    ) -> None:
        """Hand the add to its store and answer with its version (or its error).

        A store stopped since the head came in answers `StoreUnavailable` (a 503, which
        clients retry with the same idempotency key; the app then starts it if it may).
        """
        try:
            version = await handle.submit(request)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or not self._ctx.drain.taken_back(task):
                raise
            _log_cut(pending, "unknown")
            self._answer_error(pending, _cut_write(), done)
            return
        except Exception as exc:
            self._answer_error(pending, exc, done)
            return
        body, media = encode({"version": version}, pending.msgpack)
        self._answer(pending, 200, media, body, done)

    def _answer_error(self, pending: PendingAdd, exc: Exception, done: Done) -> None:
        """Answer ``exc`` as the app's error handler would."""
        if isinstance(exc, HttpError):
            status, payload = exc.status, wire.error_to_wire(exc, type_name=exc.type_name)
        elif isinstance(exc, MemorydError | ValueError):
            status, payload = wire.error_status(exc), wire.error_to_wire(exc)
        else:
            log.error("request_failed", path=pending.path, error=repr(exc))
            error = HttpError(500, "InternalError", f"{type(exc).__name__}: {exc}")
            status, payload = 500, wire.error_to_wire(error, type_name=error.type_name)
        body, _ = encode(payload, False)
        self._answer(pending, status, JSON, body, done)

    def _answer(
        self, pending: PendingAdd, status: int, media: str, body: bytes, done: Done
    ) -> None:
        self._observe.record(
            "POST", pending.path, "add", status, time.perf_counter() - pending.started
        )
        done(status, media.encode("latin-1"), body)


def _log_cut(pending: PendingAdd, outcome: str) -> None:
    """The line an add cut at the shutdown logs, as the app's requests log theirs."""
    log.warning(
        "request_cut_at_shutdown", method="POST", path=pending.path, op="add", outcome=outcome
    )


def _cut_write() -> WriteTimeout:
    """The error of an add handed to its store and cut at shutdown (outcome unknown)."""
    return WriteTimeout(
        "the daemon is stopping and cut this add before its store answered; its outcome "
        "is unknown: retry with the same idempotency key once the daemon is back"
    )


_PHRASES: dict[int, bytes] = {}


def status_line(status: int) -> bytes:
    """``HTTP/1.1 <status> <phrase>`` and its line end."""
    line = _PHRASES.get(status)
    if line is None:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        line = _PHRASES[status] = b"HTTP/1.1 %d %s\r\n" % (status, phrase.encode("latin-1"))
    return line
