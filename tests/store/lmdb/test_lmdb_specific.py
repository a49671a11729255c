"""What only the durable LMDB store does: persistence, ownership of a directory, file modes,
map growth, fsync accounting and its options."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd.messages import user
from memoryd.testing import texts


def lmdb_store(path: Path, **options: object) -> memoryd.LmdbStore:
    return memoryd.LmdbStore.start(str(path), **options)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def umask_022() -> Iterator[None]:
    """Run with the common umask, under which default file modes would be world-readable."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


# --- persistence ------------------------------------------------------------------------------


def test_messages_and_versions_are_back_after_stop_and_start(path: Path) -> None:
    """Stop, start again on the same path: every conversation's history and version is back."""
    store = lmdb_store(path)
    store.add("a", [user("1"), user("2")])
    store.add("a", [user("3")])
    store.pop("a")
    store.add("ab", [user("x")])
    store.stop()

    again = lmdb_store(path)
    assert texts(again.get("a")) == ["1", "2"]
    assert again.version("a") == 3
    assert texts(again.get("ab")) == ["x"]
    assert again.conversations() == ["a", "ab"]


def test_event_log_is_back_after_stop_and_start(path: Path) -> None:
    """The event log (versions, kinds, messages, keys, timestamps) survives a reopen."""
    store = lmdb_store(path)
    store.add("c", [user("a")], idempotency_key="k1")
    store.add("c", [user("b")])
    store.pop("c")
    before = [(e.version, e.kind, e.idempotency_key, e.timestamp) for e in store.events("c")]
    appended = [list(e.messages) for e in store.events("c") if e.kind == "appended"]
    store.stop()

    again = lmdb_store(path)
    events = again.events("c")
    assert [(e.version, e.kind, e.idempotency_key, e.timestamp) for e in events] == before
    assert [list(e.messages) for e in events if e.kind == "appended"] == appended


def test_idempotency_keys_are_remembered_after_reopen(path: Path) -> None:
    """A key acknowledged before a stop is still deduplicated after a start."""
    store = lmdb_store(path)
    store.add("c", [user("a")], idempotency_key="k1")
    store.stop()
    again = lmdb_store(path)
    assert again.add("c", [user("a")], idempotency_key="k1") == 1
    assert texts(again.get("c")) == ["a"]


def test_tail_positions_continue_after_reopen(path: Path) -> None:
    """The global feed keeps its positions and continues counting after a reopen."""
    store = lmdb_store(path)
    store.add("a", [user("1")])
    store.add("b", [user("2")])
    store.stop()
    again = lmdb_store(path)
    again.add("a", [user("3")])
    changes = again.tail()
    assert [(c.position, c.conversation_id, c.version) for c in changes] == [
        (1, "a", 1),
        (2, "b", 1),
        (3, "a", 2),
    ]


def test_cleared_history_stays_deleted_after_reopen(path: Path) -> None:
    """A clear is durable: after a reopen the old messages are neither current nor readable."""
    store = lmdb_store(path)
    store.add("c", [user("secret")])
    store.clear("c")
    store.stop()
    again = lmdb_store(path)
    assert again.get("c") == []
    assert again.version("c") == 2
    assert again.conversations() == []
    with pytest.raises(ValueError):
        again.get("c", at_version=1)


def test_data_is_back_after_shutdown(path: Path) -> None:
    """memoryd.shutdown() closes the store cleanly; a later start finds the data."""
    lmdb_store(path).add("c", [user("a")])
    memoryd.shutdown()
    assert texts(lmdb_store(path).get("c")) == ["a"]


# --- ownership of the directory and names ----------------------------------------------------


def test_start_creates_a_missing_directory(path: Path) -> None:
    """LmdbStore.start on a path that does not exist creates the directory."""
    assert not path.exists()
    lmdb_store(path).add("c", [user("a")])
    assert path.is_dir()


def test_default_names_differ_per_path(tmp_path: Path) -> None:
    """Stores started without a name get distinct names derived from their paths."""
    one = lmdb_store(tmp_path / "one")
    two = lmdb_store(tmp_path / "two")
    assert one.name != two.name
    one.add("c", [user("one")])
    found = memoryd.whereis(one.name)
    assert found is not None
    assert texts(found.get("c")) == ["one"]
    assert two.get("c") == []


def test_second_start_on_the_same_path_raises_already_started(path: Path) -> None:
    """A path in use refuses a second store, even under another name; the first keeps going."""
    first = lmdb_store(path, name="first")
    first.add("c", [user("a")])
    with pytest.raises(memoryd.AlreadyStarted):
        lmdb_store(path, name="second")
    assert memoryd.whereis("second") is None
    assert texts(first.get("c")) == ["a"]


def test_same_directory_through_a_symlink_raises_already_started(tmp_path: Path) -> None:
    """Paths are compared by their real path: a symlink to an open directory is refused."""
    real = tmp_path / "real"
    lmdb_store(real, name="first").add("c", [user("a")])
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    with pytest.raises(memoryd.AlreadyStarted):
        lmdb_store(link, name="second")


def test_same_name_on_another_path_raises_already_started(tmp_path: Path) -> None:
    """A name in use refuses a second LMDB store on a different directory."""
    lmdb_store(tmp_path / "one", name="mem")
    with pytest.raises(memoryd.AlreadyStarted):
        lmdb_store(tmp_path / "two", name="mem")


def test_path_owned_by_another_process_raises_already_started(path: Path) -> None:
    """A second process opening an owned directory gets AlreadyStarted naming the owner's pid."""
    lmdb_store(path).add("c", [user("a")])
    script = textwrap.dedent(
        """
        import sys
        import memoryd
        try:
            memoryd.LmdbStore.start(sys.argv[1])
        except memoryd.AlreadyStarted as exc:
            print("ALREADY", exc)
        else:
            print("STARTED")
        memoryd.shutdown()
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    outcome = [
        line for line in result.stdout.splitlines() if line.startswith(("ALREADY", "STARTED"))
    ]
    assert len(outcome) == 1, result.stdout + result.stderr
    assert outcome[0].startswith("ALREADY"), result.stdout + result.stderr
    assert str(os.getpid()) in outcome[0]


def test_path_can_be_opened_again_after_stop(path: Path) -> None:
    """stop releases the directory: the same process can start a store on it at once."""
    lmdb_store(path, name="first").stop()
    again = lmdb_store(path, name="second")
    assert again.add("c", [user("a")]) == 1


# --- files -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("umask_022")
def test_directory_and_files_are_private(path: Path) -> None:
    """The data directory is mode 0700 and every file in it 0600, whatever the umask."""
    store = lmdb_store(path)
    store.add("c", [user("a")])
    found = []
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs)]:
            assert stat.S_IMODE(os.stat(name).st_mode) == 0o700, name
        for name in files:
            full = os.path.join(root, name)
            found.append(full)
            assert stat.S_IMODE(os.stat(full).st_mode) == 0o600, full
    assert found, "the store wrote no files"


# --- map growth, stats, options ---------------------------------------------------------------


def test_map_grows_past_a_tiny_initial_size(path: Path) -> None:
    """Started with a 64 KiB map, the store takes several MB and reads all of it back."""
    store = lmdb_store(path, map_size=64 * 1024)
    chunk = "m" * (100 * 1024)
    for i in range(60):
        store.add(f"c{i % 4}", [user(f"{i}:{chunk}")])
    assert store.stats()["map_size"] >= 60 * len(chunk)
    for c in range(4):
        got = texts(store.get(f"c{c}"))
        assert got == [f"{i}:{chunk}" for i in range(c, 60, 4)]
    store.stop()
    again = lmdb_store(path, map_size=64 * 1024)
    assert sum(len(again.get(f"c{c}")) for c in range(4)) == 60


def test_stats_reports_lmdb_counters(path: Path) -> None:
    """LMDB stats add 'fsyncs', 'appends' and 'map_size' to the common keys."""
    store = lmdb_store(path)
    store.add("c", [user("a")])
    stats = store.stats()
    for key in ("conversations", "events", "fsyncs", "appends", "map_size"):
        assert isinstance(stats[key], int), key
    assert stats["fsyncs"] >= 1
    assert stats["appends"] >= 1
    assert stats["map_size"] > 0


def test_stats_time_the_write_transactions(path: Path) -> None:
    """'txn_build_s' and 'txn_commit_s' grow with each commit, and a read adds no time."""
    store = lmdb_store(path)
    first = store.stats()
    assert first["txn_build_s"] == 0.0 and first["txn_commit_s"] == 0.0
    store.add("c", [user("a")])
    one = store.stats()
    assert one["txn_build_s"] > 0.0
    assert one["txn_commit_s"] > 0.0  # a durable commit waits for the disk
    store.get("c")
    assert store.stats()["txn_commit_s"] == one["txn_commit_s"]
    for i in range(3):
        store.add("c", [user(str(i))])
    three = store.stats()
    assert three["txn_commit_s"] > one["txn_commit_s"]
    assert three["txn_build_s"] > one["txn_build_s"]


def test_every_sequential_add_is_fsynced_before_it_returns(path: Path) -> None:
    """Adds made one after another cannot share a commit: each one costs an fsync."""
    store = lmdb_store(path)
    store.add("c", [user("warm up")])
    before = store.stats()["fsyncs"]
    for i in range(5):
        store.add("c", [user(str(i))])
    assert store.stats()["fsyncs"] - before >= 5


def test_max_message_bytes_option_sets_the_limit(path: Path) -> None:
    """LmdbStore.start(max_message_bytes=n) refuses larger messages and keeps smaller ones."""
    store = lmdb_store(path, max_message_bytes=1000)
    store.add("c", [user("x" * 100)])
    with pytest.raises(memoryd.InvalidMessage):
        store.add("c", [user("x" * 2000)])
    assert store.version("c") == 1
    assert texts(store.get("c")) == ["x" * 100]
