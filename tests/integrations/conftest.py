"""Stores for the adapter tests: LMDB (tmp_path), ephemeral, and the daemon via RemoteStore.

Every adapter test takes the parametrized ``store`` fixture, so each behaviour runs
against all three backends. The daemon is started once per module; tests on it keep
apart by using a fresh conversation id (``cid``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd.store.handle import StoreHandle
from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One ``memoryd serve`` process for the module."""
    running = Daemon().start()
    yield running
    running.close()


@pytest.fixture(params=["lmdb", "ephemeral", "remote"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreHandle]:
    """A store handle of each backend; local stores are fresh, the daemon's is shared."""
    run = uuid.uuid4().hex[:8]
    handle: StoreHandle
    if request.param == "lmdb":
        handle = memoryd.LmdbStore.start(str(tmp_path / "db"), name=f"integ-lmdb-{run}")
    elif request.param == "ephemeral":
        handle = memoryd.EphemeralStore.start(name=f"integ-eph-{run}")
    else:
        daemon: Daemon = request.getfixturevalue("daemon")
        handle = daemon.connect()
    yield handle
    if request.param != "remote":
        handle.stop()


@pytest.fixture
def cid() -> str:
    """A conversation id no other test uses."""
    return f"conv-{uuid.uuid4().hex}"
