"""Suite-wide fixtures.

memoryd is imported lazily (only when a test already imported it), so packages that do not
need the store (tests/core, tests/supervisors) collect and run even before the store exists.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers import wait_until as _wait_until


@pytest.fixture(autouse=True)
def _memoryd_shutdown() -> Iterator[None]:
    """Stop every memoryd store and supervisor after each test, so the next starts fresh."""
    yield
    memoryd = sys.modules.get("memoryd")
    shutdown = getattr(memoryd, "shutdown", None) if memoryd is not None else None
    if shutdown is not None:
        shutdown()


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """``wait_until(pred, timeout=2.0)``: poll a condition with a deadline (see helpers.py)."""
    return _wait_until


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One durable redis-server for the module (a ``tests.redis_servers.RedisServer``)."""
    from tests.redis_servers import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A three-master Redis Cluster for the module (a ``tests.redis_servers.RedisCluster``)."""
    from tests.redis_servers import RedisCluster

    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def systems() -> Iterator[list[Any]]:
    """The agent systems a test started (append each): each stopped after the test."""
    started: list[Any] = []
    yield started
    for system in started:
        system.stop()
