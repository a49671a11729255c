"""Online backups under load: a consistent copy that verifies and opens as a store."""

from __future__ import annotations

from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.store.lmdb.backup import backup
from tests.helpers import wait_until
from tools.reliability.verify import verify
from tools.reliability.writers import KeyedWriters


def test_a_backup_taken_under_load_verifies_and_holds_every_earlier_ack(tmp_path: Path) -> None:
    """4 writers run during the copy; it has every write acknowledged before it began."""
    store = memoryd.LmdbStore.start(tmp_path / "live", name="src")
    copies = []
    with KeyedWriters(store, writers=4) as writers:
        for k in range(3):
            wait_until(lambda k=k: len(writers.acknowledged()) >= 200 * (k + 1), timeout=60)
            before = writers.acknowledged()
            copies.append((backup(store, tmp_path / f"copy{k}"), before))
    store.stop()
    for data, before in copies:
        assert verify(data.parent) == []
        assert data.stat().st_mode & 0o777 == 0o600
        copy = memoryd.LmdbStore.start(data.parent, name="copy")
        have = {m["content"] for cid in writers.conversations for m in copy.get(cid)}
        copy.stop()
        assert set(before) <= have
    assert backup(tmp_path / "live", tmp_path / "offline").exists()


def test_a_backup_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    """The destination must be new: a typed error, nothing overwritten."""
    store = memoryd.LmdbStore.start(tmp_path / "live", name="src")
    store.add("c", [messages.user("x")])
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep").write_text("mine")
    with pytest.raises(memoryd.StorageError, match="not empty"):
        backup(store, tmp_path / "taken")
    assert (tmp_path / "taken" / "keep").read_text() == "mine"
