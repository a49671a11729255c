"""Prometheus metrics: requests and latencies per operation, and the stores' counters.

Store figures (fsyncs, commits, appends, mean group-commit batch, sizes, restarts)
are read from ``stats()`` when ``/metrics`` is scraped; the request counters are
kept by `Observe`, an ASGI middleware that also logs one event per request at debug.

A client that hangs up before its request body has arrived is answered nothing:
its request is counted with the status ``499`` (`CLIENT_CLOSED_REQUEST`, the
"client closed request" code of nginx's logs, outside the HTTP standard) and
logged once as ``client_disconnected`` at info, not as a server error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryd.errors import MemorydError
from memoryd.server.stores import StoreRegistry
from memoryd.store import lookup

__all__ = ["CLIENT_CLOSED_REQUEST", "CONTENT_TYPE", "Metrics", "Observe", "stores_up"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CLIENT_CLOSED_REQUEST = 499

log = structlog.get_logger("memoryd.server")

_COUNTERS = (
    ("fsyncs", "fsyncs of committed write transactions (this incarnation)"),
    ("commits", "write transactions committed (this incarnation)"),
    ("appends", "writes committed (this incarnation)"),
    ("txn_build_s", "seconds spent building committed write transactions (this incarnation)"),
    ("txn_commit_s", "seconds spent committing them: page writes and flushes (this incarnation)"),
)
_GAUGES = (
    ("mean_batch", "mean writes per commit: the group-commit batch size"),
    ("conversations", "conversations holding messages"),
    ("events", "events stored"),
    ("used_bytes", "bytes of the LMDB map in use"),
    ("map_size", "LMDB map size in bytes"),
)


def stores_up(stores: StoreRegistry) -> dict[str, bool]:
    """Each running store's state: True while it has an open engine, False while it is
    down (crashed, waiting for its restart, or failing to reopen)."""
    up = {}
    for name in stores.running():
        engine = lookup.engine(name)
        up[name] = engine is not None and not engine.closed
    return up


class _StoreCollector(Collector):
    def __init__(self, stores: StoreRegistry) -> None:
        self.stores = stores

    def collect(self) -> Iterator[Any]:
        counters = {
            key: CounterMetricFamily(f"memoryd_store_{key}", text, labels=["store"])
            for key, text in _COUNTERS
        }
        gauges = {
            key: GaugeMetricFamily(f"memoryd_store_{key}", text, labels=["store"])
            for key, text in _GAUGES
        }
        restarts = CounterMetricFamily(
            "memoryd_store_restarts", "store restarts observed by the daemon", labels=["store"]
        )
        up = GaugeMetricFamily(
            "memoryd_store_up",
            "1 while the store has an open engine, 0 while it is down or restarting",
            labels=["store"],
        )
        for name, running in stores_up(self.stores).items():
            up.add_metric([name], 1.0 if running else 0.0)
        full = GaugeMetricFamily(
            "memoryd_store_disk_full",
            "1 while the store refuses writes because its disk is full",
            labels=["store"],
        )
        for name, count in self.stores.restarts().items():
            restarts.add_metric([name], count)
            try:
                stats = self.stores.resolve(name, autostart=False).stats()
            except MemorydError:
                continue
            for key, counter in counters.items():
                value = stats.get(key)
                if isinstance(value, int | float):
                    counter.add_metric([name], float(value))
            for key, gauge in gauges.items():
                value = stats.get(key)
                if isinstance(value, int | float):
                    gauge.add_metric([name], float(value))
            if "disk_full" in stats:
                full.add_metric([name], 1.0 if stats["disk_full"] else 0.0)
        yield from counters.values()
        yield from gauges.values()
        yield restarts
        yield up
        yield full


class Metrics:
    """The daemon's metrics, in a registry of their own.

    Args:
        stores: read for the store figures at each scrape.
    """

    def __init__(self, stores: StoreRegistry) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "memoryd_http_requests",
            "HTTP requests answered",
            ["method", "op", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memoryd_http_request_seconds",
            "HTTP request latency",
            ["op"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0),
            registry=self.registry,
        )
        self.registry.register(_StoreCollector(stores))

    def render(self) -> bytes:
        """The exposition text."""
        return bytes(generate_latest(self.registry))


class Observe:
    """Counts, times and logs (at debug) every request.

    A `ClientDisconnect` from the app ends here: the request is counted as
    `CLIENT_CLOSED_REQUEST` and logged as ``client_disconnected``.

    Args:
        app: the wrapped ASGI app.
        metrics: where to count.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics
        self._log = log.bind()  # resolved once: a lazy proxy binds again on every call
        # the level is fixed when the daemon starts: skip building unwritten records
        self._debug = bool(getattr(self._log, "is_enabled_for", lambda _: True)(logging.DEBUG))
        self._children: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def _series(self, method: str, op: str, status: str) -> tuple[Any, Any]:
        """The request counter and latency histogram of one label set, looked up once."""
        key = (method, op, status)
        found = self._children.get(key)
        if found is None:
            found = (
                self.metrics.requests.labels(method, op, status),
                self.metrics.latency.labels(op),
            )
            if len(self._children) < 1024:  # odd methods from clients must not grow it
                self._children[key] = found
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request and record it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        except ClientDisconnect:
            # the client left before its body arrived: there is no one left to answer
            status = CLIENT_CLOSED_REQUEST
            self._log.info(
                "client_disconnected", method=scope["method"], path=scope["path"], op=_op(scope)
            )
        finally:
            self.record(
                scope["method"], scope["path"], _op(scope), status, time.perf_counter() - started
            )

    def record(self, method: str, path: str, op: str, status: int, elapsed: float) -> None:
        """Count and time one request answered (and log it at debug).

        `Observe` calls it for every request it runs; the connection's fast lane
        (`memoryd.server.lane`) for each request it answers without the app.
        """
        count, latency = self._series(method, op, str(status))
        count.inc()
        latency.observe(elapsed)
        if self._debug:
            self._log.debug(
                "request",
                method=method,
                path=path,
                op=op,
                status=status,
                ms=round(elapsed * 1000, 3),
            )


def _op(scope: Scope) -> str:
    """The operation an endpoint named for the request (``other`` before any did)."""
    return str(scope.get("memoryd.op", "other"))
