"""Reads on an event loop never wait: a restarting store sends them to a thread.

`StoreHandle.reads_inline` says yes while the store runs, but the store may start
restarting right after. A read made `without_waiting` then raises `WouldWait` at
once instead of holding the loop until the store is back. The restart is held
open by the store actor's test hook, so each check runs while it is surely down.
(The daemon's side, a get sent to a thread meanwhile: ``tests/server/test_calls.py``.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import messages as msgs
from memoryd.store import actor as store_actor
from memoryd.store import lookup
from memoryd.store.handle import WouldWait, without_waiting
from tests.helpers import wait_until
from tests.store.restart_hold import HeldRestart, crash_and_hold


@pytest.fixture
def held() -> Iterator[HeldRestart]:
    hold = HeldRestart("inline-test")
    yield hold
    hold.release.set()
    store_actor.fault_hook = None


def test_a_read_without_waiting_raises_while_the_store_restarts(
    tmp_path: Path, held: HeldRestart
) -> None:
    """While the restart is held a read without waiting raises WouldWait at once; an
    ordinary read waits for the store and gets the history."""
    store = memoryd.LmdbStore.start(tmp_path / "d", name=held.name, call_timeout_s=10.0)
    store.add("c", [msgs.user("kept")])
    with without_waiting():
        assert store.get("c", limit=5) == [msgs.user("kept")]
    crash_and_hold(store, held)
    with without_waiting(), pytest.raises(WouldWait, match="restarting"):
        store.get("c", limit=5)
    with without_waiting(), pytest.raises(WouldWait):
        store.version("c")
    assert not held.release.is_set()  # answered while the restart was still held
    waited: list[Any] = []
    reader = threading.Thread(target=lambda: waited.append(store.get("c", limit=5)))
    reader.start()  # an ordinary read waits for the store instead
    held.release.set()
    reader.join(15)
    assert waited == [[msgs.user("kept")]]
    store.stop()


def test_a_read_without_waiting_raises_while_the_map_grows(tmp_path: Path) -> None:
    """A full map is grown only once no reader is inside a transaction; a read that may
    not wait meanwhile raises WouldWait, and the write lands once the reader leaves."""
    store = memoryd.LmdbStore.start(tmp_path / "d", name="growing", map_size=1 << 20)
    store.add("c", [msgs.user("kept")])
    engine = lookup.engine("growing")
    assert engine is not None
    inside, leave = threading.Event(), threading.Event()

    def reader() -> None:
        with engine.reading():
            inside.set()
            leave.wait(20)

    held = threading.Thread(target=reader)
    held.start()
    assert inside.wait(10)
    big = [msgs.user("x" * 600_000), msgs.user("y" * 600_000)]  # past the 1 MiB map
    added: list[int] = []
    writer = threading.Thread(target=lambda: added.append(store.add("big", big)))
    writer.start()
    wait_until(lambda: engine._pausing, timeout=10, message="the map never began to grow")
    with without_waiting(), pytest.raises(WouldWait, match="growing"):
        store.get("c", limit=5)
    assert not added  # the write waits for the growth, which waits for the reader
    leave.set()
    held.join(10)
    writer.join(20)
    assert added == [1]
    assert store.get("c") == [msgs.user("kept")]
    store.stop()
