"""``memoryd check --data DIR``: every store of a data directory verified offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.store.lmdb import check
from tests.cli._run import run


def _data(root: Path) -> Path:
    default = memoryd.LmdbStore.start(root, name="check-default")
    notes = memoryd.LmdbStore.start(root / "stores" / "notes", name="check-notes")
    try:
        for n in range(5):
            default.add(f"c{n}", [messages.user(f"default message {n}")])
            notes.add(f"n{n}", [messages.user(f"notes message {n}")])
    finally:
        memoryd.shutdown()
    return root


def test_check_of_a_sound_directory_exits_0_with_every_store(tmp_path: Path) -> None:
    """Both the default store and a named store are checked and reported sound."""
    data = _data(tmp_path / "data")
    done = run("check", "--data", str(data))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["sound"] is True
    assert [(s["path"], s["conversations"]) for s in report["stores"]] == [
        (str(data), 5),
        (str(data / "stores" / "notes"), 5),
    ]


def test_check_of_a_damaged_store_exits_1_naming_it_and_how_to_restore(tmp_path: Path) -> None:
    """A flipped bit in a named store's message: status 1, the event named, restore advice."""
    data = _data(tmp_path / "data")
    path = data / "stores" / "notes" / "data.mdb"
    raw = path.read_bytes()
    damaged = raw.replace(b"notes message 3", b"notes massage 3")  # stale copies too
    assert damaged != raw
    path.write_bytes(damaged)
    done = run("check", "--data", str(data))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["sound"] is False
    default, notes = report["stores"]
    assert default["sound"] is True
    assert any("event 1 of conversation 'n3'" in p for p in notes["problems"])
    assert "memoryd backup" in report["restore"]


def test_check_needs_data(tmp_path: Path) -> None:
    """Without --data, check fails with a message and status 1."""
    done = run("check")
    assert done.returncode == 1
    assert "--data" in done.stderr


def test_a_check_tells_how_far_each_stores_walk_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every PROGRESS_EVERY records the walk tells which store and how many it read, and
    the count starts again for the next store; the reports are the same as without."""
    data = _data(tmp_path / "data")
    monkeypatch.setattr(check, "PROGRESS_EVERY", 4)
    told: list[tuple[Path, int]] = []
    reports = check.check_directory(data, progress=lambda path, read: told.append((path, read)))
    assert all(r.sound for r in reports)
    for store in (data, data / "stores" / "notes"):
        counts = [read for path, read in told if path == store]
        assert counts and counts == list(range(4, 4 * len(counts) + 1, 4))
    assert [r.events for r in reports] == [r.events for r in check.check_directory(data)]
