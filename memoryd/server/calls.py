"""What every endpoint needs: the server's context, request parameters, and the
three ways a store call runs without stalling the event loop.

* `submit`: a write is checked on the loop and handed to the store actor, whose
  answer wakes the loop (no thread);
* `read_inline`: a small read of a local memory-mapped store runs on the loop,
  never waiting (a restarting store sends it to a thread);
* `answer` / `in_thread`: anything else runs in a worker thread, bounded by a
  capacity limiter, so a slow fsync or a waiting ``tail`` never stalls the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import anyio
import anyio.to_thread
import structlog
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from memoryd._shown import shown
from memoryd.errors import MemorydError
from memoryd.events import Change
from memoryd.protocol import DEFAULT_STORE_NAME, check_store_name
from memoryd.server.config import ServerConfig
from memoryd.server.http import Answer, HttpError, encode, read_body, wants_msgpack
from memoryd.server.metrics import Metrics
from memoryd.server.stores import StoreRegistry
from memoryd.store import lookup as api
from memoryd.store.handle import StoreHandle, WouldWait, without_waiting
from memoryd.store.requests import WriteRequest

__all__ = [
    "MAX_EVENTS_PAGE",
    "MAX_TAIL_PAGE",
    "MAX_TAIL_TIMEOUT_S",
    "WRITING",
    "Drain",
    "Endpoint",
    "ServerContext",
    "answer",
    "bool_param",
    "check_fields",
    "checked_body",
    "ctx_of",
    "drained",
    "float_param",
    "in_thread",
    "int_param",
    "internal_error",
    "query",
    "read_inline",
    "respond",
    "running_store",
    "store_of",
    "submit",
    "tail_poll",
    "version_answer",
]

log = structlog.get_logger("memoryd.server")

_N = TypeVar("_N", int, float)

MAX_TAIL_TIMEOUT_S = 300.0
MAX_TAIL_PAGE = 10_000
"""The most changes one read of the feed answers, whatever ``limit`` asks: a feed read
holds its page in memory twice (the changes, then their encoding), and a client asking
for a million would have the daemon build that in one answer. A read answers "at most
``limit``" anyway, so a client pages on with ``after`` as it does for any page."""
MAX_EVENTS_PAGE = 1_000
"""The most events one read of a conversation's log answers (``GET .../events``): an
event can hold many messages, so a page is smaller than the feed's. The answer says
``more`` when later events follow, and `memoryd.RemoteStore.events` reads on."""
_TAIL_SLICE_S = 0.5

Endpoint = Callable[[Request], Awaitable[Response]]


class Drain:
    """The end of a stopping server's requests: each one is answered before its grace
    period runs out, with a JSON error if it has not finished by then.

    Past its grace period uvicorn cancels the requests still running, and the client
    got a plain-text 500 and the log a traceback. Every endpoint runs under `drained`
    instead, which `stop` arms to cut a moment before uvicorn would: a request still
    running then (a body still arriving, a store call still waiting) is answered with a
    503 ``StoreUnavailable`` when nothing was written (a client retries it), or a 504
    ``WriteTimeout`` once a write was handed over (`WRITING`: its outcome is unknown;
    retry with the same idempotency key), and logged in one line. A worker thread the
    request waited on runs on to the end of its call; the daemon's registry refuses any
    store it would start by then (`memoryd.server.stores.StoreRegistry.close`).

    A request is cut the way ``asyncio.timeout`` cuts its block (its task cancelled,
    the cancellation taken back with ``uncancel`` where it is caught), with one timer
    for the whole server instead of one per request: a request costs a set entry.

    Its state is the event loop's: `bind` it on the loop; `stop` may be called from any
    thread.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: set[asyncio.Task[Any]] = set()
        self._cut: set[asyncio.Task[Any]] = set()
        self._over = False
        self._waiting: dict[int, Callable[[], None]] = {}
        """What to call at the cut for requests that have no task yet (a lane's add whose
        body is still arriving), by key."""
        self._keys = itertools.count()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve the requests of ``loop`` (the app's lifespan calls it)."""
        self._loop = loop

    def stop(self, after_s: float) -> None:
        """Cut the requests still running ``after_s`` seconds from now. Any thread."""
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # a closed loop runs nothing any more
            loop.call_soon_threadsafe(loop.call_later, after_s, self._cut_all)

    def _cut_all(self) -> None:
        """Cancel every request still running (and any that starts from now on), and
        answer those that have no task yet."""
        self._over = True
        for task in self._open - self._cut:
            self._cut.add(task)
            task.cancel()
        waiting, self._waiting = self._waiting, {}
        for callback in waiting.values():
            callback()

    def on_cut(self, callback: Callable[[], None]) -> int:
        """Call ``callback`` at the cut (on the loop): a request without a task of its
        own (a lane's add whose body is still arriving) answers then. Returns the key
        `forget` takes once the request no longer needs it."""
        key = next(self._keys)
        if self._over and self._loop is not None:
            self._loop.call_soon(callback)
        else:
            self._waiting[key] = callback
        return key

    def forget(self, key: int) -> None:
        """The request `on_cut` gave ``key`` to goes on by itself now."""
        self._waiting.pop(key, None)

    def track(self, task: asyncio.Task[Any]) -> None:
        """Cut ``task`` with the requests (a task of the connection's own append lane,
        which answers without the app); it asks `taken_back` when it is cancelled."""
        if self._over:
            self._cut.add(task)
            task.cancel()
            return
        self._open.add(task)

        def untrack(done: asyncio.Task[Any]) -> None:
            self._open.discard(done)
            self._cut.discard(done)

        task.add_done_callback(untrack)

    def taken_back(self, task: asyncio.Task[Any]) -> bool:
        """True when the cancellation ``task`` caught was the cut's (taken back then: the
        task answers with its error); False for any other, which goes on."""
        return task in self._cut and task.uncancel() == 0

    async def run(self, endpoint: Endpoint, request: Request) -> Response:
        """Run ``endpoint`` on ``request`` under the cut (see `drained`)."""
        task = asyncio.current_task()
        assert task is not None
        if self._over:
            raise _cut(request)
        self._open.add(task)
        try:
            return await endpoint(request)
        except asyncio.CancelledError:
            # the cut's cancellation alone is taken back; any other (uvicorn's) goes on
            if task in self._cut and task.uncancel() == 0:
                raise _cut(request) from None
            raise
        finally:
            self._open.discard(task)
            if self._over:
                self._cut.discard(task)


def _cut(request: Request) -> HttpError:
    """The answer of a request cut by `Drain`, logged."""
    scope = request.scope
    op = scope.get("memoryd.op", "unknown")
    written = bool(scope.get(WRITING))
    log.warning(
        "request_cut_at_shutdown",
        method=scope["method"],
        path=scope["path"],
        op=op,
        outcome="unknown" if written else "nothing written",
    )
    if written:
        return HttpError(
            504,
            "WriteTimeout",
            f"the daemon is stopping, and its grace period ran out before this {op} was "
            "answered: its outcome is unknown; retry with the same idempotency key",
        )
    return HttpError(
        503,
        "StoreUnavailable",
        "the daemon is stopping, and its grace period ran out before this request was "
        "answered; nothing was written: retry once the daemon is back",
    )


WRITING = "memoryd.writing"
"""The scope key set once a request's write is handed over (to its store, or to the
registry): from then on a request cut at shutdown has an unknown outcome."""


def drained(endpoint: Endpoint) -> Endpoint:
    """``endpoint``, answered before the grace period of a stopping server runs out
    (see `Drain`); `memoryd.server.application.create_app` wraps every endpoint."""

    @functools.wraps(endpoint)
    async def run(request: Request) -> Response:
        return await ctx_of(request).drain.run(endpoint, request)

    return run


@dataclass(kw_only=True)
class ServerContext:
    """What every endpoint needs: config, stores, metrics, thread limits, the stop flag
    and the cut of the requests still running when the stop's grace period ends."""

    config: ServerConfig
    stores: StoreRegistry
    metrics: Metrics
    stopping: threading.Event = field(default_factory=threading.Event)
    drain: Drain = field(default_factory=Drain)
    limiter: anyio.CapacityLimiter | None = None
    tail_limiter: anyio.CapacityLimiter | None = None
    decode_limiter: anyio.CapacityLimiter | None = None


def ctx_of(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.ctx
    return ctx


# --------------------------------------------------------------------------- parameters


def query(request: Request) -> dict[str, str]:
    """The query parameters (the last value of a repeated one), parsed once per request
    with ``parse_qsl``, as the router's ``QueryParams`` would (without building one)."""
    parsed: dict[str, str] | None = request.scope.get("memoryd.query")
    if parsed is None:
        raw = request.scope.get("query_string", b"").decode("latin-1")
        parsed = dict(parse_qsl(raw, keep_blank_values=True))
        request.scope["memoryd.query"] = parsed
    return parsed


def _number_param(request: Request, name: str, parse: Callable[[str], _N], kind: str) -> _N | None:
    """The query parameter ``name`` read by ``parse``; None when it is absent or empty."""
    text = query(request).get(name)
    if text is None or text == "":
        return None
    try:
        return parse(text)
    except ValueError:  # the text shown cut: a query may be as long as a head
        raise HttpError(400, "ValueError", f"{name} must be {kind}, not {shown(text)}") from None


def int_param(request: Request, name: str, default: int | None = None) -> int | None:
    value = _number_param(request, name, int, "an integer")
    return default if value is None else value


def float_param(request: Request, name: str, default: float) -> float:
    value = _number_param(request, name, float, "a number")
    return default if value is None else value


def bool_param(request: Request, name: str) -> bool:
    text = query(request).get(name)
    if text is None or text in ("", "false", "0"):
        return False
    if text in ("true", "1"):
        return True
    raise HttpError(400, "ValueError", f"{name} must be true or false, not {shown(text)}")


_SHOWN_FIELDS = 5
"""How many unknown field names an error shows (the rest are counted)."""


def _fields_shown(names: set[str]) -> str:
    """The first few of ``names``, each cut (`shown`), and how many more there are: a
    body may carry 100k unknown names or one of a megabyte, and the error is echoed."""
    first = sorted(names)[:_SHOWN_FIELDS]
    listed = "[" + ", ".join(shown(name) for name in first) + "]"
    more = len(names) - len(first)
    return f"{listed} and {more} more" if more else listed


def check_fields(body: dict[str, Any], allowed: set[str], required: set[str]) -> None:
    odd = next((name for name in body if not isinstance(name, str)), None)
    if odd is not None:  # a msgpack map may have any keys: bytes, numbers
        raise HttpError(
            400,
            "ValueError",
            f"field names are strings, not {type(odd).__name__} ({shown(repr(odd), 40)})",
        )
    unknown = set(body) - allowed
    if unknown:
        expected = sorted(allowed)
        raise HttpError(
            400, "ValueError", f"unknown fields {_fields_shown(unknown)}; expected {expected}"
        )
    missing = required - set(body)
    if missing:
        raise HttpError(400, "ValueError", f"missing fields {sorted(missing)}")


async def checked_body(
    request: Request, op: str, allowed: set[str], required: set[str]
) -> dict[str, Any]:
    """The request's body once its fields are checked (see `check_fields`).

    The request is named ``op`` first, so a refused body or a client that hangs up
    while sending it is counted under its operation.
    """
    request.scope["memoryd.op"] = op
    ctx = ctx_of(request)
    config = ctx.config
    body = await read_body(
        request, config.max_body_bytes, ctx.decode_limiter, config.max_messages_per_add
    )
    check_fields(body, allowed, required)
    return body


# --------------------------------------------------------------------------- running calls


def store_of(request: Request, *, create: bool = False) -> StoreHandle:
    """The request's store, started if it exists (or, with ``create``, a write's, in any case).

    Raises:
        StoreNotRunning: not running, and the client asked not to start it.
        HttpError: 404 for a read of a store that does not exist; 409 past ``--max-stores``.
    """
    autostart = request.headers.get("memoryd-autostart", "yes").lower() != "no"
    name = request.path_params.get("store")
    return ctx_of(request).stores.resolve(name, autostart=autostart, create=create)


def internal_error(request: Request, exc: Exception) -> HttpError:
    """A 500 naming an unexpected failure, logged once."""
    log.error("request_failed", path=request.url.path, error=repr(exc))
    return HttpError(500, "InternalError", f"{type(exc).__name__}: {exc}")


async def in_thread(request: Request, work: Callable[[], Any], *, tail: bool = False) -> Any:
    ctx = ctx_of(request)
    limiter = ctx.tail_limiter if tail else ctx.limiter

    def guarded() -> Any:
        try:
            return work()
        except (MemorydError, ValueError, HttpError):
            raise
        except Exception as exc:
            raise internal_error(request, exc) from exc

    return await anyio.to_thread.run_sync(guarded, limiter=limiter)


def respond(request: Request, payload: Any, status: int = 200) -> Response:
    body, media = encode(payload, wants_msgpack(request))
    return Answer(body, media, status)


def running_store(request: Request) -> StoreHandle | None:
    """The request's store if it runs now (never blocks; None: resolve it in a thread)."""
    name = request.path_params.get("store")
    return api.whereis(DEFAULT_STORE_NAME if name is None else check_store_name(name))


async def submit(
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
    store = running_store(request)
    if store is None:
        store = await in_thread(request, lambda: store_of(request, create=True))
    write = make(store)
    request.scope[WRITING] = True
    try:
        result = await store.submit(write)
    except (MemorydError, ValueError, HttpError):
        raise
    except Exception as exc:
        raise internal_error(request, exc) from exc
    return respond(request, shape(result))


def read_inline(
    request: Request, op: str, records: int | None, call: Callable[[StoreHandle], Any]
) -> Response | None:
    """Answer a small read on the loop when the store's reads are local memory lookups.

    A last-N read of an LMDB store is a cursor walk over the memory map (the last-50 read
    row of `make bench`): cheaper than the hand-off to a worker thread and back. Returns
    None when the read must go to a thread (not running, remote reads, restarting):
    the read never waits on the loop.
    """
    store = running_store(request)
    if store is None or not store.reads_inline(records):
        return None
    request.scope["memoryd.op"] = op
    try:
        with without_waiting():
            return respond(request, call(store))
    except WouldWait:
        return None
    except (MemorydError, ValueError, HttpError):
        raise
    except Exception as exc:
        raise internal_error(request, exc) from exc


async def answer(
    request: Request, op: str, call: Callable[[StoreHandle], Any], *, status: int = 200
) -> Response:
    request.scope["memoryd.op"] = op
    msgpack = wants_msgpack(request)

    def work() -> tuple[bytes, str]:
        return encode(call(store_of(request)), msgpack)

    body, media = await in_thread(request, work)
    return Answer(body, media, status)


async def tail_poll(
    request: Request, store: StoreHandle, after: int, limit: int, timeout: float
) -> list[Change]:
    """The changes after ``after`` (at most ``limit``), waiting up to ``timeout`` s for one.

    The wait runs in slices, each in a worker thread holding one of the
    `ServerConfig.tail_waiters` slots (``ctx.tail_limiter``), and between slices the
    poll looks at its client and at the server: a client that hung up frees its slot
    within a slice (a thread blocked for the whole timeout never learns it left, and
    256 abandoned polls took every slot), and a stopping server answers at once. A
    poll with requests pipelined behind it does not learn its client left (the server
    tells only a connection's last request): it waits out its own timeout, as before,
    and the requests behind it are bounded (`limits.MAX_PIPELINED`).

    A poll that finds every slot taken waits for one only until its own deadline, then
    reads once without waiting, on the ordinary worker threads (no slot needed); so a
    ``timeout=0`` poll never queues for a slot, and every poll ends its waiting by its
    deadline (its answer follows, after one read that does not wait). It is answered
    rather than refused with a 503 because slots turn over every slice: "all taken" is
    a moment, and a 503 would refuse polls a slot serves milliseconds later, making
    every long-poll client carry a retry policy. The final read keeps the answer true:
    an empty list means the feed had nothing new.

    Args:
        request: the poll's request (its client is watched; its context's limiters used).
        store: the store whose feed is read.
        after: the last position the client has.
        limit: the most changes answered.
        timeout: how long to wait for a change, in seconds.

    Returns:
        The changes, or [] when none came in time.

    Raises:
        ClientDisconnect: the client hung up (counted as a 499, as a body never sent is).
    """
    stopping = ctx_of(request).stopping
    deadline = time.monotonic() + timeout
    while not stopping.is_set():
        if await request.is_disconnected():  # free the slot now: nobody is left to answer
            raise ClientDisconnect()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break

        def wait() -> list[Change]:
            # the slice is cut when the thread starts, not when the slot was asked for:
            # a poll that queued for a slot still ends its wait by its own deadline
            left = min(deadline - time.monotonic(), _TAIL_SLICE_S)
            return store.tail(after=after, limit=limit, timeout=max(0.0, left))

        changes: list[Change] = []
        with anyio.move_on_after(remaining):  # bounds the queue for a slot, not the slice
            changes = await in_thread(request, wait, tail=True)
        if changes:
            return changes
    read: list[Change] = await in_thread(
        request, functools.partial(store.tail, after=after, limit=limit, timeout=0.0)
    )
    return read


def version_answer(version: Any) -> dict[str, Any]:
    return {"version": version}
