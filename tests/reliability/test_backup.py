"""Online backups under load: a consistent copy that verifies and opens as a store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.store.lmdb_backup import backup
from tools.reliability.verify import verify


def test_a_backup_taken_under_load_verifies_and_holds_every_earlier_ack(tmp_path: Path) -> None:
    """4 writers run during the copy; it has every write acknowledged before it began."""
    store = memoryd.LmdbStore.start(tmp_path / "live", name="src")
    acked: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            key = f"w{n}-{i}"
            store.add(f"c{n}", [messages.user(key)], idempotency_key=key)
            with lock:
                acked.append(key)
            i += 1

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    copies = []
    for k in range(3):
        while len(acked) < 200 * (k + 1):
            threading.Event().wait(0.01)
        with lock:
            before = list(acked)
        copies.append((backup(store, tmp_path / f"copy{k}"), before))
    stop.set()
    for t in threads:
        t.join(10)
    store.stop()
    for data, before in copies:
        assert verify(data.parent) == []
        assert data.stat().st_mode & 0o777 == 0o600
        copy = memoryd.LmdbStore.start(data.parent, name="copy")
        have = {m["content"] for n in range(4) for m in copy.get(f"c{n}")}
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
