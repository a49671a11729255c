"""The store contract run against EphemeralStore, plus what only an ephemeral store does."""

from __future__ import annotations

import itertools
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

import memoryd
import supervisors
from memoryd.messages import user
from memoryd.testing import (
    ImportContract,
    JournalSpaceContract,
    RecordContract,
    Store,
    StoreContract,
    StoreFactory,
    texts,
)


class TestEphemeralStore(StoreContract, RecordContract, ImportContract, JournalSpaceContract):
    """Every contract behaviour, on an ephemeral store (temp dir, no fsync)."""

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        counter = itertools.count()
        run = uuid.uuid4().hex[:8]

        def make(**options: Any) -> Store:
            options.setdefault("name", f"ephemeral-{run}-{next(counter)}")
            store: Store = memoryd.EphemeralStore.start(**options)
            return store

        return make


class TestEphemeralDirectory:
    """An ephemeral store lives in a directory of its own under the system temp dir."""

    @pytest.fixture
    def temp_root(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """Point Python's tempfile at an empty directory the test can watch."""
        root = tmp_path / "tmp"
        root.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(root))
        monkeypatch.setenv("TMPDIR", str(root))
        return root

    def test_ephemeral_directory_is_removed_after_stop(self, temp_root: Path) -> None:
        """The temp directory exists while the store runs and is gone after stop."""
        store = memoryd.EphemeralStore.start(name="scratch")
        store.add("c", [user("a")])
        assert list(temp_root.iterdir()) != []
        store.stop()
        assert list(temp_root.iterdir()) == []

    def test_ephemeral_directory_is_removed_by_shutdown(self, temp_root: Path) -> None:
        """memoryd.shutdown() removes the temp directory too."""
        store = memoryd.EphemeralStore.start(name="scratch")
        store.add("c", [user("a")])
        memoryd.shutdown()
        assert list(temp_root.iterdir()) == []

    def test_restarted_ephemeral_store_still_removes_its_directory(self, temp_root: Path) -> None:
        """After a crash and restart, stop still leaves nothing behind in the temp dir."""
        store = memoryd.EphemeralStore.start(name="scratch")
        store.add("c", [user("a")])
        supervisors.kill(store.name)
        assert texts(store.get("c")) == ["a"]
        store.stop()
        assert list(temp_root.iterdir()) == []

    def test_a_new_ephemeral_store_starts_empty(self, temp_root: Path) -> None:
        """Stopping and starting an ephemeral store under the same name gives an empty store."""
        store = memoryd.EphemeralStore.start(name="scratch")
        store.add("c", [user("a")])
        store.stop()
        again = memoryd.EphemeralStore.start(name="scratch")
        assert again.get("c") == []
        assert again.version("c") == 0


class TestDefaultStore:
    """memoryd.default_store(): the shared, lazily started store."""

    def test_default_store_is_shared_under_its_fixed_name(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """default_store() is registered as "memoryd.default" and every call reaches it."""
        monkeypatch.delenv("MEMORYD_DATA", raising=False)
        first = memoryd.default_store()
        assert first.name == "memoryd.default"
        first.add("c", [user("a")])
        assert texts(memoryd.default_store().get("c")) == ["a"]
        found = memoryd.whereis("memoryd.default")
        assert found is not None
        assert texts(found.get("c")) == ["a"]

    def test_default_store_is_fresh_after_shutdown(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without MEMORYD_DATA the default store is ephemeral: a shutdown forgets it."""
        monkeypatch.delenv("MEMORYD_DATA", raising=False)
        memoryd.default_store().add("c", [user("a")])
        memoryd.shutdown()
        assert memoryd.default_store().get("c") == []
