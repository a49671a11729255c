"""The HTTP API's endpoints (``/v1``): every store method, and the admin routes.

Each endpoint reads its parameters, then runs its store call one of the ways
`memoryd.server.calls` offers (a write handed to the store actor, a small read on
the loop, anything else in a worker thread). `memoryd.server.application` builds
the routes and the OpenAPI document from one table of these endpoints.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import structlog
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from memoryd import _version
from memoryd import protocol as wire
from memoryd.errors import InvalidMessage, MemorydError, StoreNotRunning
from memoryd.server.calls import (
    MAX_EVENTS_PAGE,
    MAX_TAIL_PAGE,
    MAX_TAIL_TIMEOUT_S,
    WRITING,
    answer,
    bool_param,
    checked_body,
    ctx_of,
    float_param,
    in_thread,
    int_param,
    query,
    read_inline,
    respond,
    running_store,
    store_of,
    submit,
    tail_poll,
    version_answer,
)
from memoryd.server.http import HttpError, error_response
from memoryd.server.metrics import CONTENT_TYPE, stores_up
from memoryd.store import requests
from memoryd.store.handle import StoreHandle
from supervisors import kill

__all__ = [
    "add_messages",
    "clear_messages",
    "conversations",
    "crash_store",
    "events",
    "fork",
    "get_messages",
    "healthz",
    "import_events",
    "list_stores",
    "metrics",
    "pop_message",
    "record_event",
    "start_store",
    "stats",
    "stop_store",
    "store_info",
    "tail",
    "tail_stream",
    "version",
]

log = structlog.get_logger("memoryd.server")

_NDJSON = "application/x-ndjson"
_STREAM_POLL_S = 1.0
"""How long one poll of a stream waits before it looks again (stopping, the client)."""

# --------------------------------------------------------------------------- store endpoints

_CONDITIONS = ("idempotency_key", "expected_version")


def _conditions(body: dict[str, Any]) -> dict[str, Any]:
    """The optional conditions of an add or a record: its idempotency key, expected version."""
    return {key: body.get(key) for key in _CONDITIONS}


async def conversations(request: Request) -> Response:
    """List conversations (``prefix``, ``after``, ``limit``, ``include_empty``)."""
    prefix = query(request).get("prefix", "")
    after = query(request).get("after")
    limit = int_param(request, "limit")
    empty = bool_param(request, "include_empty")
    return await answer(
        request,
        "conversations",
        lambda s: {
            "conversations": s.conversations(
                prefix=prefix, after=after, limit=limit, include_empty=empty
            )
        },
    )


async def get_messages(request: Request) -> Response:
    """The conversation's history (``limit``, ``at_version``; ``system``: also the system
    messages before the last ``limit``, read with them as one snapshot)."""
    cid = request.path_params["cid"]
    limit = int_param(request, "limit")
    at = int_param(request, "at_version")
    system = bool_param(request, "system")

    def call(store: StoreHandle) -> dict[str, Any]:
        return {"messages": store.get(cid, limit=limit, at_version=at, system=system)}

    return read_inline(request, "get", limit, call) or await answer(request, "get", call)


async def add_messages(request: Request) -> Response:
    """Append messages as one event."""
    body = await checked_body(
        request, "add", {"messages", "then_clear", *_CONDITIONS}, {"messages"}
    )
    ctx = ctx_of(request)
    messages = body["messages"]
    if isinstance(messages, list) and len(messages) > ctx.config.max_messages_per_add:
        raise InvalidMessage(
            f"an add holds at most {ctx.config.max_messages_per_add} messages; this one holds "
            f"{len(messages)}: split it"
        )
    cid = request.path_params["cid"]
    return await submit(
        request,
        "add",
        lambda s: requests.add(
            cid,
            messages,
            **_conditions(body),
            then_clear=body.get("then_clear"),
            max_bytes=s.max_message_bytes,
        ),
        version_answer,
    )


async def clear_messages(request: Request) -> Response:
    """Delete the conversation's messages (a ``cleared`` marker stays in the log)."""
    cid = request.path_params["cid"]
    return await submit(
        request, "clear", lambda _: requests.clear(cid), lambda _: {"cleared": True}
    )


async def pop_message(request: Request) -> Response:
    """Remove and return the last message (``null`` when there is none)."""
    cid = request.path_params["cid"]
    return await submit(request, "pop", lambda _: requests.pop(cid), lambda m: {"message": m})


async def fork(request: Request) -> Response:
    """Start ``target`` as a copy of this conversation (at ``at_version``)."""
    body = await checked_body(request, "fork", {"target", "at_version"}, {"target"})
    source = request.path_params["cid"]
    return await submit(
        request,
        "fork",
        lambda _: requests.fork(source, body["target"], at_version=body.get("at_version")),
        version_answer,
    )


async def record_event(request: Request) -> Response:
    """Append a ``memo`` or ``compacted`` event (the message history is unchanged)."""
    body = await checked_body(
        request, "record", {"kind", "messages", "data", "supersede", *_CONDITIONS}, {"kind"}
    )
    cid = request.path_params["cid"]
    return await submit(
        request,
        "record",
        lambda s: requests.record(
            cid,
            body["kind"],
            # absent: none; any other value is checked as given (0, "", {} and null are
            # not lists: `body.get(...) or ()` took them for "none" and wrote the event)
            messages=body.get("messages", ()),
            data=body.get("data"),
            **_conditions(body),
            max_bytes=s.max_message_bytes,
            supersede=body.get("supersede", False),
        ),
        version_answer,
    )


async def import_events(request: Request) -> Response:
    """Write events exactly as they are (the exact import path; idempotent)."""
    body = await checked_body(request, "import", {"events"}, {"events"})
    raw = body["events"]
    if not isinstance(raw, list):
        raise HttpError(400, "ValueError", "events must be a list of event objects")
    try:
        events = [wire.event_from_wire(event) for event in raw]
    except ValueError as exc:
        raise HttpError(400, "ValueError", f"a bad event: {exc}") from None
    cid = request.path_params["cid"]
    return await submit(
        request,
        "import",
        lambda s: requests.import_events(cid, events, max_bytes=s.max_message_bytes),
        version_answer,
    )


async def version(request: Request) -> Response:
    """The conversation's version (0 if never written)."""
    cid = request.path_params["cid"]

    def call(store: StoreHandle) -> dict[str, Any]:
        return {"version": store.version(cid)}

    return read_inline(request, "version", 1, call) or await answer(request, "version", call)


async def events(request: Request) -> Response:
    """The conversation's event log (versions above ``after``), a page at a time: at
    most ``limit`` events and never more than `MAX_EVENTS_PAGE`, with ``more`` true when
    later events follow (read them with ``after`` set to the page's last version)."""
    cid = request.path_params["cid"]
    after = int_param(request, "after", 0) or 0
    limit = int_param(request, "limit")
    if limit is not None and limit < 0:
        raise HttpError(400, "ValueError", f"limit must be 0 or more, not {limit}")
    page = MAX_EVENTS_PAGE if limit is None else min(limit, MAX_EVENTS_PAGE)

    def call(store: StoreHandle) -> dict[str, Any]:
        found = store.events(cid, after=after, limit=page + 1)  # one more: is there more?
        return {"events": [wire.event_to_wire(e) for e in found[:page]], "more": len(found) > page}

    return await answer(request, "events", call)


def _tail_args(request: Request) -> tuple[int, int, float]:
    after = int_param(request, "after", 0) or 0
    limit = int_param(request, "limit", 1000)
    timeout = float_param(request, "timeout", 0.0)
    if not 0 <= timeout <= MAX_TAIL_TIMEOUT_S:
        raise HttpError(
            400, "ValueError", f"timeout must be between 0 and {MAX_TAIL_TIMEOUT_S:g} seconds"
        )
    # checked here, before a stream's 200 is sent: the store would refuse them mid-stream
    try:
        requests.check_after(after)
    except ValueError as exc:
        raise HttpError(400, "ValueError", str(exc)) from None
    if limit is not None and limit < 1:
        raise HttpError(400, "ValueError", f"limit must be 1 or more, not {limit}")
    return after, 1000 if limit is None else min(limit, MAX_TAIL_PAGE), timeout


async def _feed_store(request: Request) -> StoreHandle:
    """The store whose feed is read: resolved off the tail slots, which are for waiting."""
    return running_store(request) or await in_thread(request, lambda: store_of(request))


async def tail(request: Request) -> Response:
    """The global change feed from ``after + 1``; waits up to ``timeout`` s for news."""
    request.scope["memoryd.op"] = "tail"
    after, limit, timeout = _tail_args(request)
    store = await _feed_store(request)
    changes = await tail_poll(request, store, after, limit, timeout)
    return respond(request, {"changes": [wire.change_to_wire(c) for c in changes]})


async def _no_lines() -> AsyncIterator[bytes]:
    """An empty stream: the body of a HEAD."""
    return
    yield  # pragma: no cover  (makes this an async generator)


async def tail_stream(request: Request) -> Response:
    """The change feed as a stream: one JSON change a line, until the client leaves.

    A HEAD gets the stream's head alone (its status, after the same checks as a GET)
    and ends: its body would be the endless stream, which a HEAD never sends, so the
    connection would hang and a request pipelined after it would never be served.
    """
    request.scope["memoryd.op"] = "tail_stream"
    after, limit, _ = _tail_args(request)
    store = await _feed_store(request)
    if request.method == "HEAD":
        return StreamingResponse(_no_lines(), media_type=_NDJSON)
    stopping = ctx_of(request).stopping

    async def lines() -> AsyncIterator[bytes]:
        position = after
        while not stopping.is_set():
            try:
                changes = await tail_poll(request, store, position, limit, _STREAM_POLL_S)
            except ClientDisconnect:
                return  # the client left: the stream ends as it always has
            except (MemorydError, ValueError, HttpError) as exc:
                # the 200 is sent: end the stream whole (its last chunk), the reason logged
                log.warning(
                    "tail_stream_ended",
                    path=request.url.path,
                    reason=type(exc).__name__,
                    error=str(exc),
                    position=position,
                )
                return
            for change in changes:
                yield json.dumps(wire.change_to_wire(change), ensure_ascii=False).encode() + b"\n"
                position = change.position
            if await request.is_disconnected():
                return

    return StreamingResponse(lines(), media_type=_NDJSON)


async def stats(request: Request) -> Response:
    """The store's counts and sizes."""
    return await answer(request, "stats", lambda s: s.stats())


# --------------------------------------------------------------------------- admin endpoints


async def list_stores(request: Request) -> Response:
    """The running stores."""
    request.scope["memoryd.op"] = "stores"
    stores = ctx_of(request).stores
    infos = await in_thread(request, lambda: [stores.info(n) for n in stores.running()])
    return JSONResponse({"stores": [i for i in infos if i is not None]})


async def store_info(request: Request) -> Response:
    """One running store, or 404."""
    request.scope["memoryd.op"] = "store_info"
    name = request.path_params["store"]
    info = await in_thread(request, lambda: ctx_of(request).stores.info(name))
    if info is None:
        body = wire.error_to_wire(StoreNotRunning(f"store {name!r} is not running"))
        return error_response(404, body)
    return JSONResponse(info)


async def start_store(request: Request) -> Response:
    """Start a named store (``kind``: lmdb or ephemeral; ``exclusive``: 409 if running)."""
    body = await checked_body(request, "start_store", {"kind", "exclusive"}, set())
    name = request.path_params["store"]
    kind = body.get("kind", "lmdb")
    exclusive = body.get("exclusive", False)
    if not isinstance(exclusive, bool):
        raise HttpError(400, "ValueError", "exclusive must be true or false")
    stores = ctx_of(request).stores
    request.scope[WRITING] = True
    _, started = await in_thread(
        request, lambda: stores.start(name, kind=kind, exclusive=exclusive)
    )
    info = await in_thread(request, lambda: stores.info(name))
    return JSONResponse({**(info or {}), "started": started}, status_code=201 if started else 200)


async def stop_store(request: Request) -> Response:
    """Stop a named store."""
    request.scope["memoryd.op"] = "stop_store"
    name = request.path_params["store"]
    request.scope[WRITING] = True
    stopped = await in_thread(request, lambda: ctx_of(request).stores.stop(name))
    return JSONResponse({"stopped": stopped})


async def crash_store(request: Request) -> Response:
    """Fault injection (only with ``fault_injection``): crash the store's actor."""
    request.scope["memoryd.op"] = "crash"
    ctx = ctx_of(request)
    if not ctx.config.fault_injection:
        raise HttpError(404, "NotFound", "fault injection is not enabled on this daemon")
    name = request.path_params["store"]
    handle = await in_thread(request, lambda: ctx.stores.resolve(name, create=False))
    return JSONResponse({"killed": kill(handle.name, "crash requested over HTTP")})


async def healthz(request: Request) -> Response:
    """Health: 200 while the default store and every other running store are up; 503
    (naming the stores that are down) while one is down or restarting, or the daemon stops."""
    request.scope["memoryd.op"] = "healthz"
    ctx = ctx_of(request)
    up = stores_up(ctx.stores)
    down = sorted(name for name, running in up.items() if not running)
    ok = up.get(wire.DEFAULT_STORE_NAME, False) and not down and not ctx.stopping.is_set()
    return JSONResponse(
        {
            "status": "ok" if ok else "unavailable",
            "version": _version.__version__,
            "stores_down": down,
        },
        status_code=200 if ok else 503,
    )


async def metrics(request: Request) -> Response:
    """Prometheus exposition."""
    request.scope["memoryd.op"] = "metrics"
    text = await in_thread(request, ctx_of(request).metrics.render)
    return Response(text, media_type=CONTENT_TYPE)
