"""Fixtures of the agent-system tests: a fresh ephemeral store and a daemon shared by a
module (the list of systems a test started is the suite's `systems`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memoryd
from tests.server.daemon import Daemon


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"agents-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """A `memoryd serve` process shared by a module's tests."""
    running = Daemon().start()
    yield running
    running.close()
