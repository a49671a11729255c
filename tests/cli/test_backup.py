"""``memoryd backup DEST``: a consistent copy of a data directory, also while a daemon serves it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import memoryd
from memoryd.store.lmdb.handle import LmdbStore
from tests.cli._run import run
from tests.server.daemon import Daemon


def test_backup_of_a_served_data_directory_opens_as_a_store_with_the_data(tmp_path: Path) -> None:
    """While a daemon serves DIR, ``backup --data DIR`` copies every acknowledged write."""
    daemon = Daemon().start()
    try:
        store = daemon.connect()
        for i in range(50):
            store.add(f"c{i % 5}", [{"role": "user", "content": f"m{i}"}])
        daemon.connect(store="notes").add("n", [{"role": "user", "content": "named"}])
        done = run("backup", str(tmp_path / "copy"), "--data", str(daemon.data))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["backup"] == str((tmp_path / "copy").resolve())
        done = run(
            "backup", str(tmp_path / "notes"), "--data", str(daemon.data), "--store", "notes"
        )
        assert done.returncode == 0, done.stderr
    finally:
        daemon.close()
    assert stat.S_IMODE(os.stat(tmp_path / "copy" / "data.mdb").st_mode) == 0o600
    copy = LmdbStore.start(tmp_path / "copy", name="backup-copy")
    notes = LmdbStore.start(tmp_path / "notes", name="backup-notes")
    try:
        for c in range(5):
            assert [m["content"] for m in copy.get(f"c{c}")] == [
                f"m{i}" for i in range(50) if i % 5 == c
            ]
        assert notes.get("n") == [{"role": "user", "content": "named"}]
    finally:
        memoryd.shutdown()


def test_backup_needs_data_and_an_empty_destination(tmp_path: Path) -> None:
    """Without --data, or onto a non-empty directory, backup fails with a message and status 1."""
    done = run("backup", str(tmp_path / "x"), "--address", "unix:///nowhere.sock")
    assert done.returncode == 1
    assert "--data" in done.stderr
    data = tmp_path / "data"
    assert run("add", "c", "--content", "x", "--data", str(data)).returncode == 0
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("mine")
    done = run("backup", str(tmp_path / "full"), "--data", str(data))
    assert done.returncode == 1
    assert "not empty" in done.stderr
    assert (tmp_path / "full" / "keep").read_text() == "mine"


def test_a_failed_backup_leaves_no_destination_behind(tmp_path: Path) -> None:
    """A backup of a directory holding no store fails (status 1) and removes the
    destination it made; an empty destination that was there stays, still empty."""
    (tmp_path / "empty-data").mkdir()
    done = run("backup", str(tmp_path / "copy"), "--data", str(tmp_path / "empty-data"))
    assert done.returncode == 1
    assert "holds no LMDB data file" in done.stderr
    assert not (tmp_path / "copy").exists()
    (tmp_path / "there").mkdir()
    done = run("backup", str(tmp_path / "there"), "--data", str(tmp_path / "empty-data"))
    assert done.returncode == 1
    assert list((tmp_path / "there").iterdir()) == []
