"""The store contract run against RemoteStore, through a real ``memoryd serve`` subprocess.

Each store is a named store on the daemon, started exclusively with
``RemoteStore.start`` (so a taken name raises ``AlreadyStarted``) and ephemeral (so a
name started again is empty, as with a fresh local store). The few contract tests
that reach into the local process get the daemon's equivalents, keeping their
bodies unchanged:

* ``supervisors.kill(name)`` crashes the store's actor *in the daemon*
  (``POST /v1/stores/{name}/crash``, enabled by ``--fault-injection``);
* ``memoryd.whereis(name)`` asks the daemon which stores run (``GET /v1/stores/{name}``);
* ``memoryd.shutdown()`` stops every named store on the daemon (``DELETE /v1/stores/{name}``),
  after which their handles raise ``StoreNotRunning``.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import memoryd
import supervisors
from memoryd.client import remote as client
from memoryd.testing import (
    ImportContract,
    JournalSpaceContract,
    RecordContract,
    Store,
    StoreContract,
    StoreFactory,
)
from tests.server.daemon import Daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the module; every test uses stores of its own on it."""
    running = Daemon().start()
    yield running
    running.close()


def _stop_named_stores(daemon: Daemon) -> None:
    with httpx.Client(transport=httpx.HTTPTransport(uds=daemon.unix), base_url="http://m") as http:
        for info in http.get("/v1/stores").json()["stores"]:
            if info["name"] != "memoryd.default":
                http.delete(f"/v1/stores/{info['name']}").raise_for_status()


class TestRemoteStore(StoreContract, RecordContract, ImportContract, JournalSpaceContract):
    """Every contract behaviour, on a RemoteStore over the daemon's Unix socket."""

    @pytest.fixture
    def make_store(self, daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> Iterator[StoreFactory]:
        counter = itertools.count()
        run = uuid.uuid4().hex[:8]
        made: list[client.RemoteStore] = []

        def make(**options: Any) -> Store:
            name = options.pop("name", None) or f"remote-{run}-{next(counter)}"
            store = client.RemoteStore.start(daemon.address, name=name, ephemeral=True, **options)
            made.append(store)
            return store

        def remote_kill(target: Any, reason: str = "killed") -> bool:
            handle = client.whereis(daemon.address, str(target))
            return handle is not None and handle.crash()

        monkeypatch.setattr(supervisors, "kill", remote_kill)
        monkeypatch.setattr(memoryd, "whereis", lambda name: client.whereis(daemon.address, name))
        monkeypatch.setattr(memoryd, "shutdown", lambda: _stop_named_stores(daemon))
        yield make
        _stop_named_stores(daemon)
        for store in made:
            store.close()
