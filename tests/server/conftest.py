"""Fixtures of the daemon tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the module, on its Unix socket and on TCP with the token `TOKEN`."""
    with Daemon(tcp=True).start() as running:
        yield running
