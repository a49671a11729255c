"""The HTTP API (``/v1``): every store method, for the default store and for named stores.

Each endpoint hands its store call to a worker thread (bounded by a capacity
limiter), so a slow fsync or a waiting ``tail`` never stalls the event loop.
The same table of operations builds the routes and the OpenAPI document.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import anyio
import anyio.to_thread
import structlog
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp

from memoryd import _version, api, wire
from memoryd.errors import InvalidMessage, MemorydError, StoreNotRunning
from memoryd.events import Change
from memoryd.server.config import ServerConfig
from memoryd.server.hot import HotRoutes
from memoryd.server.http import (
    Answer,
    Guard,
    HttpError,
    encode,
    error_response,
    read_body,
    wants_msgpack,
)
from memoryd.server.metrics import CONTENT_TYPE, Metrics, Observe
from memoryd.server.stores import StoreRegistry
from memoryd.store import build
from memoryd.store.handle import StoreHandle, WouldWait, without_waiting
from memoryd.store.requests import WriteRequest
from memoryd.wire import DEFAULT_STORE_NAME, check_store_name
from supervisors import kill

__all__ = ["MAX_TAIL_TIMEOUT_S", "ServerContext", "create_app", "openapi"]

log = structlog.get_logger("memoryd.server")

MAX_TAIL_TIMEOUT_S = 300.0
_TAIL_SLICE_S = 0.5


@dataclass(kw_only=True)
class ServerContext:
    """What every endpoint needs: config, stores, metrics, thread limits, the stop flag."""

    config: ServerConfig
    stores: StoreRegistry
    metrics: Metrics
    stopping: threading.Event = field(default_factory=threading.Event)
    limiter: anyio.CapacityLimiter | None = None
    tail_limiter: anyio.CapacityLimiter | None = None


Endpoint = Callable[[Request], Awaitable[Response]]


def _ctx(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


# --------------------------------------------------------------------------- parameters


def _query(request: Request) -> dict[str, str]:
    """The query parameters (the last value of a repeated one), parsed once per request.

    A plain query such as ``limit=50`` is split directly; one with escapes goes
    through ``parse_qsl``, as the router's ``QueryParams`` would.
    """
    parsed: dict[str, str] | None = request.scope.get("memoryd.query")
    if parsed is None:
        raw = request.scope.get("query_string", b"").decode("latin-1")
        if "%" in raw or "+" in raw:
            parsed = dict(parse_qsl(raw, keep_blank_values=True))
        else:
            parsed = {}
            for pair in raw.split("&"):
                if pair:
                    name, _, value = pair.partition("=")
                    parsed[name] = value
        request.scope["memoryd.query"] = parsed
    return parsed


def _int_param(request: Request, name: str, default: int | None = None) -> int | None:
    text = _query(request).get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise HttpError(400, "ValueError", f"{name} must be an integer, not {text!r}") from None


def _float_param(request: Request, name: str, default: float) -> float:
    text = _query(request).get(name)
    if text is None or text == "":
        return default
    try:
        return float(text)
    except ValueError:
        raise HttpError(400, "ValueError", f"{name} must be a number, not {text!r}") from None


def _bool_param(request: Request, name: str) -> bool:
    text = _query(request).get(name)
    if text is None or text in ("", "false", "0"):
        return False
    if text in ("true", "1"):
        return True
    raise HttpError(400, "ValueError", f"{name} must be true or false, not {text!r}")


def _fields(body: dict[str, Any], allowed: set[str], required: set[str]) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise HttpError(
            400, "ValueError", f"unknown fields {sorted(unknown)}; expected {sorted(allowed)}"
        )
    missing = required - set(body)
    if missing:
        raise HttpError(400, "ValueError", f"missing fields {sorted(missing)}")


# --------------------------------------------------------------------------- running calls


def _store_of(request: Request) -> StoreHandle:
    autostart = request.headers.get("memoryd-autostart", "yes").lower() != "no"
    name = request.path_params.get("store")
    return _ctx(request).stores.resolve(name, autostart=autostart)


def _internal(request: Request, exc: Exception) -> HttpError:
    """A 500 naming an unexpected failure, logged once."""
    log.error("request_failed", path=request.url.path, error=repr(exc))
    return HttpError(500, "InternalError", f"{type(exc).__name__}: {exc}")


async def _in_thread(request: Request, work: Callable[[], Any], *, tail: bool = False) -> Any:
    ctx = _ctx(request)
    limiter = ctx.tail_limiter if tail else ctx.limiter

    def guarded() -> Any:
        try:
            return work()
        except (MemorydError, ValueError, HttpError):
            raise
        except Exception as exc:
            raise _internal(request, exc) from exc

    return await anyio.to_thread.run_sync(guarded, limiter=limiter)


def _respond(request: Request, payload: Any, status: int = 200) -> Response:
    body, media = encode(payload, wants_msgpack(request))
    return Answer(body, media, status)


def _running_store(request: Request) -> StoreHandle | None:
    """The request's store if it runs now (never blocks; None: resolve it in a thread)."""
    name = request.path_params.get("store")
    return api.whereis(DEFAULT_STORE_NAME if name is None else check_store_name(name))


async def _submit(
    request: Request,
    op: str,
    make: Callable[[StoreHandle], WriteRequest],
    shape: Callable[[Any], Any],
) -> Response:
    """Run a write without a worker thread: validate here, await the store's answer.

    The request is checked on the loop (microseconds), handed to the store actor,
    and the loop is woken by the actor's answer (`StoreHandle.submit`); the loop
    never blocks on the commit. A store that is not running yet is resolved
    (maybe started) in a worker thread first.
    """
    request.scope["memoryd.op"] = op
    store = _running_store(request)
    if store is None:
        store = await _in_thread(request, lambda: _store_of(request))
    try:
        result = await store.submit(make(store))
    except (MemorydError, ValueError, HttpError):
        raise
    except Exception as exc:
        raise _internal(request, exc) from exc
    return _respond(request, shape(result))


def _read_inline(
    request: Request, op: str, records: int | None, call: Callable[[StoreHandle], Any]
) -> Response | None:
    """Answer a small read on the loop when the store's reads are local memory lookups.

    A last-N read of an LMDB store is a cursor walk over the memory map (about 0.1 ms
    for 50 messages): cheaper than the hand-off to a worker thread and back. Returns
    None when the read must go to a thread (not running, remote reads, restarting):
    the read never waits on the loop.
    """
    store = _running_store(request)
    if store is None or not store.reads_inline(records):
        return None
    request.scope["memoryd.op"] = op
    try:
        with without_waiting():
            return _respond(request, call(store))
    except WouldWait:
        return None
    except (MemorydError, ValueError, HttpError):
        raise
    except Exception as exc:
        raise _internal(request, exc) from exc


async def _answer(
    request: Request, op: str, call: Callable[[StoreHandle], Any], *, status: int = 200
) -> Response:
    request.scope["memoryd.op"] = op
    msgpack = wants_msgpack(request)

    def work() -> tuple[bytes, str]:
        return encode(call(_store_of(request)), msgpack)

    body, media = await _in_thread(request, work)
    return Answer(body, media, status)


def _tail_wait(
    store: StoreHandle, after: int, limit: int, timeout: float, stopping: threading.Event
) -> list[Change]:
    """Long-poll in slices, so a shutting-down server answers its waiters at once."""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        changes = store.tail(
            after=after, limit=limit, timeout=max(0.0, min(remaining, _TAIL_SLICE_S))
        )
        if changes or remaining <= _TAIL_SLICE_S or stopping.is_set():
            return changes


def _version_answer(version: Any) -> dict[str, Any]:
    return {"version": version}


# --------------------------------------------------------------------------- store endpoints


async def conversations(request: Request) -> Response:
    """List conversations (``prefix``, ``after``, ``limit``, ``include_empty``)."""
    prefix = _query(request).get("prefix", "")
    after = _query(request).get("after")
    limit = _int_param(request, "limit")
    empty = _bool_param(request, "include_empty")
    return await _answer(
        request,
        "conversations",
        lambda s: {
            "conversations": s.conversations(
                prefix=prefix, after=after, limit=limit, include_empty=empty
            )
        },
    )


async def get_messages(request: Request) -> Response:
    """The conversation's history (``limit``, ``at_version``)."""
    cid = request.path_params["cid"]
    limit = _int_param(request, "limit")
    at = _int_param(request, "at_version")

    def call(store: StoreHandle) -> dict[str, Any]:
        return {"messages": store.get(cid, limit=limit, at_version=at)}

    return _read_inline(request, "get", limit, call) or await _answer(request, "get", call)


async def add_messages(request: Request) -> Response:
    """Append messages as one event."""
    request.scope["memoryd.op"] = "add"
    ctx = _ctx(request)
    body = await read_body(request, ctx.config.max_body_bytes)
    _fields(body, {"messages", "idempotency_key", "expected_version"}, {"messages"})
    messages = body["messages"]
    if isinstance(messages, list) and len(messages) > ctx.config.max_messages_per_add:
        raise InvalidMessage(
            f"an add holds at most {ctx.config.max_messages_per_add} messages; this one holds "
            f"{len(messages)}: split it"
        )
    cid = request.path_params["cid"]
    return await _submit(
        request,
        "add",
        lambda s: build.add(
            cid,
            messages,
            idempotency_key=body.get("idempotency_key"),
            expected_version=body.get("expected_version"),
            max_bytes=s.max_message_bytes,
        ),
        _version_answer,
    )


async def clear_messages(request: Request) -> Response:
    """Delete the conversation's messages (a ``cleared`` marker stays in the log)."""
    cid = request.path_params["cid"]
    return await _submit(request, "clear", lambda _: build.clear(cid), lambda _: {"cleared": True})


async def pop_message(request: Request) -> Response:
    """Remove and return the last message (``null`` when there is none)."""
    cid = request.path_params["cid"]
    return await _submit(request, "pop", lambda _: build.pop(cid), lambda m: {"message": m})


async def fork(request: Request) -> Response:
    """Start ``target`` as a copy of this conversation (at ``at_version``)."""
    request.scope["memoryd.op"] = "fork"
    body = await read_body(request, _ctx(request).config.max_body_bytes)
    _fields(body, {"target", "at_version"}, {"target"})
    source = request.path_params["cid"]
    return await _submit(
        request,
        "fork",
        lambda _: build.fork(source, body["target"], at_version=body.get("at_version")),
        _version_answer,
    )


async def record_event(request: Request) -> Response:
    """Append a ``memo`` or ``compacted`` event (the message history is unchanged)."""
    request.scope["memoryd.op"] = "record"
    body = await read_body(request, _ctx(request).config.max_body_bytes)
    _fields(
        body,
        {"kind", "messages", "data", "idempotency_key", "expected_version"},
        {"kind"},
    )
    cid = request.path_params["cid"]
    return await _submit(
        request,
        "record",
        lambda s: build.record(
            cid,
            body["kind"],
            messages=body.get("messages") or (),
            data=body.get("data"),
            idempotency_key=body.get("idempotency_key"),
            expected_version=body.get("expected_version"),
            max_bytes=s.max_message_bytes,
        ),
        _version_answer,
    )


async def import_events(request: Request) -> Response:
    """Write events exactly as they are (the exact import path; idempotent)."""
    request.scope["memoryd.op"] = "import"
    body = await read_body(request, _ctx(request).config.max_body_bytes)
    _fields(body, {"events"}, {"events"})
    raw = body["events"]
    if not isinstance(raw, list):
        raise HttpError(400, "ValueError", "events must be a list of event objects")
    try:
        events = [wire.event_from_wire(event) for event in raw]
    except ValueError as exc:
        raise HttpError(400, "ValueError", f"a bad event: {exc}") from None
    cid = request.path_params["cid"]
    return await _submit(
        request,
        "import",
        lambda s: build.import_events(cid, events, max_bytes=s.max_message_bytes),
        _version_answer,
    )


async def version(request: Request) -> Response:
    """The conversation's version (0 if never written)."""
    cid = request.path_params["cid"]

    def call(store: StoreHandle) -> dict[str, Any]:
        return {"version": store.version(cid)}

    return _read_inline(request, "version", 1, call) or await _answer(request, "version", call)


async def events(request: Request) -> Response:
    """The conversation's event log (versions above ``after``)."""
    cid = request.path_params["cid"]
    after = _int_param(request, "after", 0)
    return await _answer(
        request,
        "events",
        lambda s: {"events": [wire.event_to_wire(e) for e in s.events(cid, after=after or 0)]},
    )


def _tail_args(request: Request) -> tuple[int, int, float]:
    after = _int_param(request, "after", 0) or 0
    limit = _int_param(request, "limit", 1000)
    timeout = _float_param(request, "timeout", 0.0)
    if not 0 <= timeout <= MAX_TAIL_TIMEOUT_S:
        raise HttpError(
            400, "ValueError", f"timeout must be between 0 and {MAX_TAIL_TIMEOUT_S:g} seconds"
        )
    return after, 1000 if limit is None else limit, timeout


async def tail(request: Request) -> Response:
    """The global change feed from ``after + 1``; waits up to ``timeout`` s for news."""
    request.scope["memoryd.op"] = "tail"
    after, limit, timeout = _tail_args(request)
    msgpack = wants_msgpack(request)
    stopping = _ctx(request).stopping

    def work() -> tuple[bytes, str]:
        changes = _tail_wait(_store_of(request), after, limit, timeout, stopping)
        return encode({"changes": [wire.change_to_wire(c) for c in changes]}, msgpack)

    body, media = await _in_thread(request, work, tail=True)
    return Response(body, media_type=media)


async def tail_stream(request: Request) -> Response:
    """The change feed as a stream: one JSON change a line, until the client leaves."""
    request.scope["memoryd.op"] = "tail_stream"
    after, limit, _ = _tail_args(request)
    ctx = _ctx(request)
    store = await _in_thread(request, lambda: _store_of(request))

    async def lines() -> AsyncIterator[bytes]:
        position = after
        while not ctx.stopping.is_set():
            changes = await _in_thread(
                request,
                functools.partial(_tail_wait, store, position, limit, 1.0, ctx.stopping),
                tail=True,
            )
            for change in changes:
                yield json.dumps(wire.change_to_wire(change), ensure_ascii=False).encode() + b"\n"
                position = change.position
            if await request.is_disconnected():
                return

    return StreamingResponse(lines(), media_type="application/x-ndjson")


async def stats(request: Request) -> Response:
    """The store's counts and sizes."""
    return await _answer(request, "stats", lambda s: s.stats())


# --------------------------------------------------------------------------- admin endpoints


async def list_stores(request: Request) -> Response:
    """The running stores."""
    request.scope["memoryd.op"] = "stores"
    stores = _ctx(request).stores
    infos = await _in_thread(request, lambda: [stores.info(n) for n in stores.running()])
    return JSONResponse({"stores": [i for i in infos if i is not None]})


async def store_info(request: Request) -> Response:
    """One running store, or 404."""
    request.scope["memoryd.op"] = "store_info"
    name = request.path_params["store"]
    info = await _in_thread(request, lambda: _ctx(request).stores.info(name))
    if info is None:
        body = wire.error_to_wire(StoreNotRunning(f"store {name!r} is not running"))
        return error_response(404, body)
    return JSONResponse(info)


async def start_store(request: Request) -> Response:
    """Start a named store (``kind``: lmdb or ephemeral; ``exclusive``: 409 if running)."""
    request.scope["memoryd.op"] = "start_store"
    body = await read_body(request, _ctx(request).config.max_body_bytes)
    _fields(body, {"kind", "exclusive"}, set())
    name = request.path_params["store"]
    kind = body.get("kind", "lmdb")
    exclusive = body.get("exclusive", False)
    if not isinstance(exclusive, bool):
        raise HttpError(400, "ValueError", "exclusive must be true or false")
    stores = _ctx(request).stores
    _, started = await _in_thread(
        request, lambda: stores.start(name, kind=kind, exclusive=exclusive)
    )
    info = await _in_thread(request, lambda: stores.info(name))
    return JSONResponse({**(info or {}), "started": started}, status_code=201 if started else 200)


async def stop_store(request: Request) -> Response:
    """Stop a named store."""
    request.scope["memoryd.op"] = "stop_store"
    name = request.path_params["store"]
    stopped = await _in_thread(request, lambda: _ctx(request).stores.stop(name))
    return JSONResponse({"stopped": stopped})


async def crash_store(request: Request) -> Response:
    """Fault injection (only with ``fault_injection``): crash the store's actor."""
    request.scope["memoryd.op"] = "crash"
    ctx = _ctx(request)
    if not ctx.config.fault_injection:
        raise HttpError(404, "NotFound", "fault injection is not enabled on this daemon")
    handle = await _in_thread(request, lambda: ctx.stores.resolve(request.path_params["store"]))
    return JSONResponse({"killed": kill(handle.name, "crash requested over HTTP")})


async def healthz(request: Request) -> Response:
    """Liveness: the daemon answers and its default store runs."""
    request.scope["memoryd.op"] = "healthz"
    ctx = _ctx(request)
    running = ctx.stores.running()
    ok = wire.DEFAULT_STORE_NAME in running and not ctx.stopping.is_set()
    return JSONResponse(
        {"status": "ok" if ok else "unavailable", "version": _version.__version__},
        status_code=200 if ok else 503,
    )


async def metrics(request: Request) -> Response:
    """Prometheus exposition."""
    request.scope["memoryd.op"] = "metrics"
    text = await _in_thread(request, _ctx(request).metrics.render)
    return Response(text, media_type=CONTENT_TYPE)


async def openapi_document(request: Request) -> Response:
    """The OpenAPI 3.1 document of this API."""
    request.scope["memoryd.op"] = "openapi"
    return JSONResponse(openapi())


# --------------------------------------------------------------------------- table

_STORE_OPS: tuple[tuple[str, str, Endpoint, str, tuple[str, ...]], ...] = (
    (
        "GET",
        "/conversations",
        conversations,
        "list conversations",
        ("prefix", "after", "limit", "include_empty"),
    ),
    ("GET", "/conversations/{cid:path}/messages", get_messages, "get", ("limit", "at_version")),
    ("POST", "/conversations/{cid:path}/messages", add_messages, "add", ()),
    ("DELETE", "/conversations/{cid:path}/messages", clear_messages, "clear", ()),
    ("POST", "/conversations/{cid:path}/pop", pop_message, "pop", ()),
    ("POST", "/conversations/{cid:path}/fork", fork, "fork", ()),
    ("POST", "/conversations/{cid:path}/record", record_event, "record a memo event", ()),
    ("POST", "/conversations/{cid:path}/import", import_events, "import events exactly", ()),
    ("GET", "/conversations/{cid:path}/version", version, "version", ()),
    ("GET", "/conversations/{cid:path}/events", events, "events", ("after",)),
    ("GET", "/tail", tail, "tail (long-poll)", ("after", "limit", "timeout")),
    ("GET", "/tail/stream", tail_stream, "tail (NDJSON stream)", ("after", "limit")),
    ("GET", "/stats", stats, "stats", ()),
)
_OTHER_OPS: tuple[tuple[str, str, Endpoint, str, tuple[str, ...]], ...] = (
    ("GET", "/healthz", healthz, "liveness", ()),
    ("GET", "/metrics", metrics, "Prometheus metrics", ()),
    ("GET", "/v1/openapi.json", openapi_document, "this document", ()),
    ("GET", "/v1/stores", list_stores, "list running stores", ()),
    ("GET", "/v1/stores/{store}", store_info, "one running store", ()),
    ("PUT", "/v1/stores/{store}", start_store, "start a named store", ()),
    ("DELETE", "/v1/stores/{store}", stop_store, "stop a named store", ()),
    ("POST", "/v1/stores/{store}/crash", crash_store, "fault injection (tests)", ()),
)
_BODIES = {
    "add_messages": {
        "messages": "array",
        "idempotency_key": "string",
        "expected_version": "integer",
    },
    "fork": {"target": "string", "at_version": "integer"},
    "import_events": {"events": "array"},
    "record_event": {
        "kind": "string",
        "messages": "array",
        "data": "object",
        "idempotency_key": "string",
        "expected_version": "integer",
    },
    "start_store": {"kind": "string", "exclusive": "boolean"},
}


# served by `HotRoutes` without the router (the same endpoints, same paths)
_HOT = {
    ("POST", "messages"): add_messages,
    ("GET", "messages"): get_messages,
    ("GET", "version"): version,
}


def _all_ops() -> list[tuple[str, str, Endpoint, str, tuple[str, ...]]]:
    # The router tries routes in order: the default store's, the busiest, come first.
    ops = [(m, "/v1" + p, fn, s, q) for m, p, fn, s, q in _STORE_OPS]
    ops.extend(_OTHER_OPS)
    ops.extend((m, "/v1/stores/{store}" + p, fn, s, q) for m, p, fn, s, q in _STORE_OPS)
    return ops


def openapi() -> dict[str, Any]:
    """The OpenAPI document, built from the same table as the routes."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, endpoint, summary, query in _all_ops():
        clean = path.replace(":path}", "}")
        params: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in ("store", "cid")
            if "{" + name in path
        ]
        params += [{"name": q, "in": "query", "schema": {"type": "string"}} for q in query]
        operation: dict[str, Any] = {
            "operationId": f"{endpoint.__name__}{'_named' if '{store}' in path else ''}",
            "summary": summary,
            "description": (endpoint.__doc__ or "").strip(),
            "parameters": params,
            "responses": {
                "200": {"description": "JSON, or msgpack with Accept: application/msgpack"},
                "default": {"description": '{"error": {"type": ..., "message": ...}}'},
            },
        }
        fields = _BODIES.get(endpoint.__name__)
        if fields is not None:
            schema = {"type": "object", "properties": {k: {"type": t} for k, t in fields.items()}}
            operation["requestBody"] = {
                "content": {"application/json": {"schema": schema}, "application/msgpack": {}}
            }
        paths.setdefault(clean, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "memoryd", "version": _version.__version__},
        "paths": paths,
    }


async def _on_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        name = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
        error = HttpError(
            exc.status_code, name, f"{request.method} {request.url.path}: {exc.detail}"
        )
        return error_response(exc.status_code, wire.error_to_wire(error, type_name=name))
    if not isinstance(exc, MemorydError | ValueError | HttpError):
        exc = _internal(request, exc)
    if isinstance(exc, HttpError):
        return error_response(exc.status, wire.error_to_wire(exc, type_name=exc.type_name))
    return error_response(wire.error_status(exc), wire.error_to_wire(exc))


def create_app(ctx: ServerContext) -> ASGIApp:
    """The ASGI app serving ``ctx``'s stores.

    Args:
        ctx: the shared context (limiters are created when the app starts).

    Returns:
        The Starlette app behind the hot-route shortcut, wrapped in the metrics
        and guard middlewares (outermost first: metrics, guard, hot routes).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ctx.limiter = anyio.CapacityLimiter(ctx.config.threads)
        ctx.tail_limiter = anyio.CapacityLimiter(ctx.config.tail_waiters)
        yield

    routes = [Route(p, fn, methods=[m]) for m, p, fn, _, _ in _all_ops()]
    app = Starlette(
        routes=routes,
        exception_handlers={
            MemorydError: _on_error,
            ValueError: _on_error,
            HttpError: _on_error,
            HTTPException: _on_error,
        },
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    hot = HotRoutes(app, _HOT, _on_error)
    return Observe(Guard(hot, config=ctx.config), metrics=ctx.metrics)
