"""The ASGI app: one table of operations builds the routes, the OpenAPI document and
the hot-route shortcut; the guard and the metrics wrap it all."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from memoryd import _version
from memoryd import protocol as wire
from memoryd.errors import MemorydError
from memoryd.server.calls import Endpoint, ServerContext, drained, internal_error
from memoryd.server.config import DECODE_THREADS
from memoryd.server.hot import HotRoutes
from memoryd.server.http import Guard, HttpError, error_response
from memoryd.server.metrics import Observe
from memoryd.server.routes import (
    add_messages,
    clear_messages,
    conversations,
    crash_store,
    events,
    fork,
    get_messages,
    healthz,
    import_events,
    list_stores,
    metrics,
    pop_message,
    record_event,
    start_store,
    stats,
    stop_store,
    store_info,
    tail,
    tail_stream,
    version,
)

__all__ = ["HOT_ROUTES", "all_ops", "create_app", "openapi"]


async def openapi_document(request: Request) -> Response:
    """The OpenAPI 3.1 document of this API."""
    request.scope["memoryd.op"] = "openapi"
    return JSONResponse(openapi())


_STORE_OPS: tuple[tuple[str, str, Endpoint, str, tuple[str, ...]], ...] = (
    (
        "GET",
        "/conversations",
        conversations,
        "list conversations",
        ("prefix", "after", "limit", "include_empty"),
    ),
    (
        "GET",
        "/conversations/{cid:path}/messages",
        get_messages,
        "get",
        ("limit", "at_version", "system"),
    ),
    ("POST", "/conversations/{cid:path}/messages", add_messages, "add", ()),
    ("DELETE", "/conversations/{cid:path}/messages", clear_messages, "clear", ()),
    ("POST", "/conversations/{cid:path}/pop", pop_message, "pop", ()),
    ("POST", "/conversations/{cid:path}/fork", fork, "fork", ()),
    ("POST", "/conversations/{cid:path}/record", record_event, "record a memo event", ()),
    ("POST", "/conversations/{cid:path}/import", import_events, "import events exactly", ()),
    ("GET", "/conversations/{cid:path}/version", version, "version", ()),
    ("GET", "/conversations/{cid:path}/events", events, "events", ("after", "limit")),
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
        "supersede": "boolean",
    },
    "start_store": {"kind": "string", "exclusive": "boolean"},
}


# served by `HotRoutes` without the router (the same endpoints, same paths)
HOT_ROUTES = {
    ("POST", "messages"): add_messages,
    ("GET", "messages"): get_messages,
    ("GET", "version"): version,
}


def all_ops() -> list[tuple[str, str, Endpoint, str, tuple[str, ...]]]:
    # The router tries routes in order: the default store's, the busiest, come first.
    ops = [(m, "/v1" + p, fn, s, q) for m, p, fn, s, q in _STORE_OPS]
    ops.extend(_OTHER_OPS)
    ops.extend((m, "/v1/stores/{store}" + p, fn, s, q) for m, p, fn, s, q in _STORE_OPS)
    return ops


def openapi() -> dict[str, Any]:
    """The OpenAPI document, built from the same table as the routes."""
    paths: dict[str, dict[str, Any]] = {}
    for method, path, endpoint, summary, query in all_ops():
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
        exc = internal_error(request, exc)
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
        ctx.decode_limiter = anyio.CapacityLimiter(DECODE_THREADS)
        ctx.drain.bind(asyncio.get_running_loop())
        yield

    # every endpoint is answered before a stopping server's grace period runs out
    routes = [Route(p, drained(fn), methods=[m]) for m, p, fn, _, _ in all_ops()]
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
    hot = HotRoutes(app, {key: drained(fn) for key, fn in HOT_ROUTES.items()}, _on_error)
    return Observe(Guard(hot, config=ctx.config), metrics=ctx.metrics)
