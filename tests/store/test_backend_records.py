"""A backend is one record: a third one plugs in as a `Backend` with no table to edit.

The backend here is a new handle class that reuses the LMDB actor; the tree starts,
restarts and stops it from its record alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memoryd
import supervisors
from memoryd import app, messages
from memoryd.store import lookup
from memoryd.store.lmdb.actor import LmdbStoreActor
from memoryd.store.lmdb.config import LmdbConfig
from memoryd.store.lmdb.handle import LmdbStore
from memoryd.store.spec import Backend


class JournalStore(LmdbStore):
    """The third backend's handle: an LMDB-backed store under a kind of its own."""

    def first_words(self, cid: str) -> list[str]:
        """Something only this handle class offers: each message's first word."""
        return [str(m["content"]).split()[0] for m in self.get(cid)]


JOURNAL = Backend(kind="journal", actor=LmdbStoreActor, handle=JournalStore)


def _config(tmp_path: Path, name: str = "journal") -> LmdbConfig:
    return LmdbConfig(name=name, path=tmp_path / name, durable=False)


def _children() -> dict[str, Any]:
    ref = supervisors.whereis(app.STORES)
    assert ref is not None
    sup = supervisors.DynamicSupervisor(ref, name=app.STORES, call_timeout_s=10.0)
    return {child.id: child.ref for child in sup.which_children()}


def test_a_third_backend_starts_writes_reads_and_stops_through_the_tree(tmp_path: Path) -> None:
    """A new handle class on the LMDB actor, as one record: started under memoryd.stores,
    written and read through its own handle, found by name, and stopped for good."""
    store = lookup.start(JOURNAL, _config(tmp_path))

    assert type(store) is JournalStore
    assert "journal" in _children()
    assert store.add("c", [messages.user("hello there"), messages.user("bye now")]) == 1
    assert store.first_words("c") == ["hello", "bye"]
    assert store.stats()["kind"] == "journal"
    found = memoryd.whereis("journal")
    assert isinstance(found, JournalStore) and found == store
    assert found.get("c", limit=1) == [messages.user("bye now")]

    store.stop()
    assert memoryd.whereis("journal") is None
    assert supervisors.whereis("journal") is None
    assert "journal" not in _children()
    with pytest.raises(memoryd.StoreUnavailable, match="not running"):
        store.get("c")


def test_a_third_backend_is_restarted_from_its_record(
    tmp_path: Path, wait_until: Callable[..., Any]
) -> None:
    """Killing the store's actor restarts it from the same record: same handle class,
    same data, and the old handle reaches the new incarnation."""
    store = lookup.start(JOURNAL, _config(tmp_path))
    store.add("c", [messages.user("kept across restarts")])
    first = supervisors.whereis("journal")
    assert first is not None

    supervisors.kill("journal")
    wait_until(lambda: supervisors.whereis("journal") not in (None, first))

    assert store.first_words("c") == ["kept"]
    assert store.add("c", [messages.user("after the restart")]) == 2
    assert isinstance(memoryd.whereis("journal"), JournalStore)


def test_a_third_backend_name_cannot_be_taken_twice(tmp_path: Path) -> None:
    """The table refuses a second store under a running store's name, whatever its backend."""
    lookup.start(JOURNAL, _config(tmp_path))
    with pytest.raises(memoryd.AlreadyStarted, match="journal"):
        memoryd.EphemeralStore.start(name="journal")
    with pytest.raises(memoryd.AlreadyStarted, match="journal"):
        lookup.start(JOURNAL, _config(tmp_path, "journal"))
    assert isinstance(memoryd.whereis("journal"), JournalStore)


def test_a_record_and_a_config_must_fit(tmp_path: Path) -> None:
    """A backend's handle refuses another backend's config, naming both; a record needs a kind."""
    from memoryd.store.config import StoreConfig
    from memoryd.store.spec import StoreSpec

    with pytest.raises(TypeError, match="JournalStore needs a LmdbConfig, not StoreConfig"):
        StoreSpec(backend=JOURNAL, config=StoreConfig(name="plain")).handle()
    with pytest.raises(ValueError, match="kind"):
        Backend(kind="", actor=LmdbStoreActor, handle=JournalStore)


def test_the_tree_is_shut_down_with_a_third_backend_running(tmp_path: Path) -> None:
    """memoryd.shutdown() stops a third backend's store too; the next start is fresh."""
    lookup.start(JOURNAL, _config(tmp_path)).add("c", [messages.user("durable enough")])
    memoryd.shutdown()
    assert memoryd.whereis("journal") is None
    again = lookup.start(JOURNAL, _config(tmp_path))
    assert again.first_words("c") == ["durable"]


def test_the_daemons_registry_serves_a_third_backend_from_its_factory(tmp_path: Path) -> None:
    """The daemon's registry starts durable stores with the one factory it was given (here
    the third backend's), ephemeral ones as ephemeral, and refuses any other kind."""
    from memoryd.server.stores import StoreRegistry

    def journal(name: str) -> JournalStore:
        return lookup.start(JOURNAL, _config(tmp_path, name))

    registry = StoreRegistry(journal, max_message_bytes=1 << 20)
    registry.start_default().add("c", [messages.user("default entry")])
    started, fresh = registry.start("notes")
    assert fresh and isinstance(started, JournalStore)
    registry.start("scratch", kind="ephemeral")
    with pytest.raises(ValueError, match="kind must be one of"):
        registry.start("other", kind="redis")

    assert registry.running() == ["memoryd.default", "notes", "scratch"]
    kinds = [(registry.info(n) or {}).get("kind") for n in registry.running()]
    assert kinds == ["journal", "journal", "ephemeral"]
    assert registry.resolve(None).get("c") == [messages.user("default entry")]
    assert registry.stop("notes") and registry.running() == ["memoryd.default", "scratch"]


def test_a_backend_actor_missing_a_hook_fails_its_start_naming_the_hook(tmp_path: Path) -> None:
    """A store actor that does not implement `_write_batch` cannot be made: starting its
    record raises, naming the missing hook, and no store is left running."""
    from memoryd.store.actor import StoreActor

    class HalfActor(StoreActor[LmdbConfig, Any]):
        def _open_engine(self) -> Any:
            return object()

    with pytest.raises(TypeError, match="_write_batch"):
        HalfActor(_config(tmp_path, "half"))
    half = Backend(kind="half", actor=HalfActor, handle=JournalStore)
    with pytest.raises(Exception, match="_write_batch"):
        lookup.start(half, _config(tmp_path, "half"))
    assert memoryd.whereis("half") is None
