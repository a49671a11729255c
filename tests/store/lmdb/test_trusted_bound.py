"""What a process remembers of the data files it closed (`engine._trusted`) stays bounded.

A store's reopen skips the page-by-page verification when this process closed that very
file unchanged; the signatures are kept per directory. Each ephemeral store has a new
directory, so keeping every one would grow a long-running daemon without end.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.store.lmdb import check, engine


def _cycle(store: memoryd.LmdbStore | memoryd.EphemeralStore) -> Path:
    """Write once to ``store``, stop it, and return its directory."""
    store.add("c", [messages.user("x")])
    path = store.path
    store.stop()
    return path


def test_stopped_ephemeral_stores_leave_nothing_remembered() -> None:
    """200 ephemeral stores started, written and stopped add no entry: each directory is
    forgotten with the directory itself."""
    before = set(engine._trusted)
    paths = [_cycle(memoryd.EphemeralStore.start(name=f"eph{n}")) for n in range(200)]
    assert not any(path.exists() for path in paths)
    assert set(engine._trusted) - before == set()


def test_remembered_files_are_capped_oldest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past TRUSTED_MAX the oldest entry goes; a store still remembered reopens without
    a full verification, one forgotten is verified again."""
    monkeypatch.setattr(engine, "TRUSTED_MAX", 8)
    paths = [_cycle(memoryd.LmdbStore.start(tmp_path / f"s{n}", name=f"s{n}")) for n in range(20)]
    assert list(engine._trusted)[-8:] == paths[-8:]
    assert len(engine._trusted) <= 8
    verified: list[Path] = []
    real = check.structure_problems
    monkeypatch.setattr(
        check, "structure_problems", lambda path: verified.append(path) or real(path)
    )
    memoryd.LmdbStore.start(paths[-1], name="kept").stop()
    memoryd.LmdbStore.start(paths[0], name="dropped").stop()
    assert verified == [paths[0]]


def test_directories_that_are_gone_go_before_the_oldest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the cap, entries of removed directories go first: the oldest stores that are
    still there stay remembered."""
    monkeypatch.setattr(engine, "TRUSTED_MAX", 4)
    engine._trusted.clear()
    kept = [_cycle(memoryd.LmdbStore.start(tmp_path / f"k{n}", name=f"k{n}")) for n in range(3)]
    for n in range(10):
        shutil.rmtree(_cycle(memoryd.LmdbStore.start(tmp_path / f"g{n}", name=f"g{n}")))
    assert set(kept) <= set(engine._trusted)
    assert len(engine._trusted) <= 4


def test_an_open_store_is_not_remembered_and_its_close_is(tmp_path: Path) -> None:
    """Opening takes the entry out (the file is about to change); closing puts the new
    signature back, so a restart still skips the verification."""
    path = tmp_path / "data"
    store = memoryd.LmdbStore.start(path, name="reopen")
    store.add("c", [messages.user("x")])
    store.stop()
    assert path in engine._trusted
    store = memoryd.LmdbStore.start(path, name="reopen")
    assert path not in engine._trusted
    store.add("c", [messages.user("y")])
    store.stop()
    assert engine._trusted[path] == engine._signature(path)
