"""How a store fails: storage errors crash and restart it, deadlines become clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.store import lookup
from tests.helpers import wait_until
from tools.reliability.writers import KeyedWriters


def _engine(name: str):  # type: ignore[no-untyped-def]
    return wait_until(lambda: lookup.engine(name))


def test_a_storage_error_fails_the_caller_and_the_store_restarts_with_data_kept(
    tmp_path: Path,
) -> None:
    """An LMDB failure in the actor raises StorageError; the supervisor reopens the store."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="fail.storage")
    store.add("c", [messages.user("kept")])
    broken = _engine("fail.storage")
    broken.env.close()  # fault injection: the environment dies under its owner
    with pytest.raises(memoryd.StorageError):
        store.add("c", [messages.user("lost with the environment")])
    wait_until(lambda: lookup.engine("fail.storage") not in (None, broken))
    assert store.add("c", [messages.user("after restart")]) == 2
    assert [m["content"] for m in store.get("c")] == ["kept", "after restart"]


def test_a_write_without_an_answer_in_time_raises_write_timeout(tmp_path: Path) -> None:
    """A deadline shorter than an fsync gives WriteTimeout; a retry with the key is safe."""
    slow = memoryd.LmdbStore.start(tmp_path / "db", name="fail.slow", call_timeout_s=1e-6)
    with pytest.raises(memoryd.WriteTimeout, match="idempotency_key"):
        slow.add("c", [messages.user("maybe")], idempotency_key="k1")
    slow.stop()
    store = memoryd.LmdbStore.start(tmp_path / "db", name="fail.slow")
    version = store.add("c", [messages.user("maybe")], idempotency_key="k1")
    assert version == 1
    assert store.add("c", [messages.user("maybe")], idempotency_key="k1") == 1
    assert len(store.get("c")) == 1


def test_a_call_on_a_stopped_store_raises_store_unavailable_at_once(tmp_path: Path) -> None:
    """A stopped store is not waited for: reads and writes fail with StoreUnavailable."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="fail.stopped")
    store.stop()
    with pytest.raises(memoryd.StoreUnavailable, match="not running"):
        store.get("c")
    with pytest.raises(memoryd.StoreUnavailable, match="not running"):
        store.add("c", [messages.user("x")])


def test_writes_racing_a_crash_are_committed_exactly_once(tmp_path: Path) -> None:
    """Writers keep going through repeated kills: every acknowledged add is there once."""
    import supervisors

    store = memoryd.LmdbStore.start(tmp_path / "db", name="fail.race")
    with KeyedWriters(store, writers=4) as writers:
        for _ in range(4):  # the stores supervisor tolerates 5 restarts in 5 s
            count = len(writers.acknowledged())
            wait_until(lambda c=count: len(writers.acknowledged()) > c + 5)  # type: ignore[misc]
            supervisors.kill("fail.race")
    acked, stored = writers.acknowledged(), writers.contents()
    for n in range(4):  # writer n appends to conversation c{n}
        mine = [k for k in acked if k.startswith(f"w{n}-")]
        assert stored[f"c{n}"][: len(mine)] == mine
        assert len(stored[f"c{n}"]) == len(set(stored[f"c{n}"]))


def test_a_crash_looping_store_is_backed_off_and_a_killed_stores_supervisor_restarted(
    tmp_path: Path,
) -> None:
    """Past the stores supervisor's window a store's restarts are delayed, not counted:
    the stores supervisor lives on. When the stores supervisor itself dies, the root
    restarts it with every started store."""
    import supervisors
    from memoryd import app

    store = memoryd.LmdbStore.start(tmp_path / "db", name="fail.loop")
    store.add("c", [messages.user("kept")])
    first_sup = supervisors.whereis(app.STORES)
    for _ in range(8):
        engine = _engine("fail.loop")
        supervisors.kill("fail.loop")
        wait_until(lambda e=engine: lookup.engine("fail.loop") not in (None, e), timeout=10)  # type: ignore[misc]
    assert supervisors.whereis(app.STORES) is first_sup
    engine = _engine("fail.loop")
    supervisors.kill(app.STORES)
    wait_until(lambda: supervisors.whereis(app.STORES) not in (None, first_sup))
    wait_until(lambda: lookup.engine("fail.loop") not in (None, engine))
    assert [m["content"] for m in store.get("c")] == ["kept"]
    assert store.add("c", [messages.user("again")]) == 2
