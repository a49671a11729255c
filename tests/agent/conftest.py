"""Fixtures of the agent tests: a daemon shared by a module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon().start() as running:
        yield running
