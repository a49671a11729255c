"""Fixtures of the agent-system tests: a fresh ephemeral store, and the list of systems a
test started (each stopped after the test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memoryd
from memoryd.agents import AgentSystem


@pytest.fixture
def store() -> memoryd.StoreHandle:
    return memoryd.EphemeralStore.start(name=f"agents-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def systems() -> Iterator[list[AgentSystem]]:
    started: list[AgentSystem] = []
    yield started
    for system in started:
        system.stop()
