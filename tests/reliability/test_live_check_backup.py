"""`memoryd check` and `memoryd backup` of a store another process has open and writes.

The writer is a real process (`_WRITER PATH LIMIT SIZE LEAST`: an `LmdbStore` adding
messages of SIZE bytes, at least LEAST of them, until the data file reaches LIMIT bytes
or its stdin closes; it closes the store when its stdin does); the files are real LMDB
files. A check of a live store is refused, never reported as damage; a backup taken
while the writer grows the file past the size the copy's environment mapped when it
opened still succeeds and checks sound.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import lmdb
import pytest

import memoryd
from memoryd import messages
from memoryd.cli.commands import CHECK_IN_USE
from memoryd.store.lmdb import backup as backup_module
from memoryd.store.lmdb import check, dirlock
from memoryd.store.lmdb.backup import backup
from tests.cli._run import run
from tests.helpers import wait_until

_WRITER = """
import sys, threading
from pathlib import Path
import memoryd
from memoryd import messages
from memoryd.store import lookup

path, limit, size, least = Path(sys.argv[1]), *map(int, sys.argv[2:5])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
store = memoryd.LmdbStore.start(path, name="writer")
print("READY", lookup.engine("writer").env.max_readers(), flush=True)
n = 0
while n < least or (not stop.is_set() and (path / "data.mdb").stat().st_size < limit):
    store.add(f"c{n % 8}", [messages.user(f"{n} " + "z" * size)])
    n += 1
print("WROTE", n, flush=True)
stop.wait()
memoryd.shutdown()
"""


class _Writer:
    """A child process writing to the store in ``path``; its stdout lines are kept."""

    def __init__(self, path: Path, *, limit: int = 1 << 40, size: int = 2000) -> None:
        self.err = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by the fixture)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(limit), str(size), "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,))
        self._reader.start()
        wait_until(lambda: self.said("READY") or self.proc.poll() is not None, timeout=60)
        assert self.said("READY"), self.errors()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.strip())

    def said(self, word: str) -> str | None:
        return next((line for line in self.lines if line.startswith(word)), None)

    def errors(self) -> str:
        self.err.seek(0)
        return self.err.read()

    def stop(self) -> None:
        """Close its stdin: it stops writing, closes the store and exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self._reader.join()
        assert self.proc.returncode == 0, self.errors()


@pytest.fixture
def writers() -> Iterator[list[_Writer]]:
    """The writer processes a test started; each stopped after the test."""
    started: list[_Writer] = []
    yield started
    for writer in started:
        if writer.proc.poll() is None:
            writer.proc.kill()
            writer.proc.wait()
        writer.err.close()


def _store(path: Path, conversations: int = 3) -> None:
    """A closed store in ``path`` holding ``conversations`` conversations."""
    store = memoryd.LmdbStore.start(path, name=f"setup:{path}")
    for n in range(conversations):
        store.add(f"s{n}", [messages.user(f"setup {n}")])
    memoryd.shutdown()


def test_check_of_a_store_a_process_writes_refuses_naming_it(
    tmp_path: Path, writers: list[_Writer]
) -> None:
    """While a process writes the store, `memoryd check` reports no damage and no restore
    advice: it refuses with AlreadyStarted, naming the process and the backup to check
    instead; stopped, the same store checks sound."""
    data = tmp_path / "data"
    writers.append(writer := _Writer(data))
    wait_until(lambda: (data / "data.mdb").stat().st_size > 1 << 20, timeout=60)
    pid = writer.proc.pid
    for _ in range(3):
        with pytest.raises(memoryd.AlreadyStarted, match=f"in use by process {pid}") as caught:
            check.check_directory(data)
        assert caught.value.owner_pid == pid
    done = run("check", "--data", str(data), "--json")
    assert done.returncode == CHECK_IN_USE  # neither sound (0) nor damaged (1)
    assert json.loads(done.stdout) == {"sound": None, "in_use_by": pid}  # no report
    assert done.stderr.startswith(f"memoryd: AlreadyStarted: data directory {data} is in use")
    assert f"memoryd backup --data {data} DEST" in done.stderr
    assert "memoryd check --data DEST" in done.stderr
    assert check.RESTORE_ADVICE not in done.stderr
    writer.stop()
    (report,) = check.check_directory(data)
    assert report.sound, report.problems
    assert report.conversations == 8


def test_check_refuses_a_live_named_store_before_reading_any(
    tmp_path: Path, writers: list[_Writer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named store in use refuses the whole check before any store is read, and the
    advice names the store for the backup."""
    data = tmp_path / "data"
    _store(data)
    writers.append(_Writer(data / "stores" / "notes"))
    read: list[Path] = []
    monkeypatch.setattr(check, "check_store", lambda path, **_: read.append(path))
    with pytest.raises(memoryd.AlreadyStarted) as caught:
        check.check_directory(data)
    assert f"memoryd backup --data {data} --store notes DEST" in str(caught.value)
    assert read == []


def test_a_store_started_during_a_check_starts_and_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that starts and writes while the check walks it is not kept from starting
    (its reader table has every slot, though the check opened the environment first), and
    the check keeps nothing it read: it refuses as written while checked."""
    data = tmp_path / "data"
    _store(data, conversations=40)
    (data / "lock.mdb").unlink()  # as in a directory restored from a backup
    monkeypatch.setattr(check, "PROGRESS_EVERY", 5)
    started: list[subprocess.CompletedProcess[str]] = []

    def meanwhile(path: Path, read: int) -> None:
        if not started:  # the check's environment is open: a store starts and writes
            started.append(
                subprocess.run(
                    [sys.executable, "-c", _WRITER, str(path), "0", "10", "1"],
                    input="",
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
            )

    with pytest.raises(memoryd.AlreadyStarted, match="was written while it was checked"):
        check.check_directory(data, progress=meanwhile)
    (done,) = started
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["READY", str(check.MAX_READERS)]
    (report,) = check.check_directory(data)
    assert report.sound, report.problems
    assert report.conversations == 41


def test_a_probe_does_not_keep_a_store_from_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose lock is being probed (held shared) waits the probe out and starts;
    an owner's lock still refuses the next store at once."""
    data = tmp_path / "data"
    _store(data)
    fd = os.open(data / dirlock.LOCK_FILE, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # what `probe` does, caught mid-way
    waits: list[float] = []

    class Clock:
        monotonic = staticmethod(dirlock.time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            waits.append(seconds)
            os.close(fd)  # the probe lets go

    monkeypatch.setattr(dirlock, "time", Clock)
    store = memoryd.LmdbStore.start(data, name="after-probe")
    assert len(waits) == 1
    assert dirlock.probe(data) == (True, os.getpid())
    with pytest.raises(memoryd.AlreadyStarted):
        memoryd.LmdbStore.start(data, name="second")
    store.stop()
    assert dirlock.probe(data) == (False, None)


def test_probe_creates_nothing_and_names_a_live_owner(
    tmp_path: Path, writers: list[_Writer]
) -> None:
    """A directory never locked has no owner and gets no lock file; a writer process is
    named while it runs and not after."""
    data = tmp_path / "data"
    data.mkdir()
    assert dirlock.probe(data) == (False, None)
    assert list(data.iterdir()) == []
    writers.append(writer := _Writer(data, limit=0))
    assert dirlock.probe(data) == (True, writer.proc.pid)
    writer.stop()
    assert dirlock.probe(data) == (False, None)


def test_backups_while_a_process_grows_the_store_past_10_mib_all_succeed(
    tmp_path: Path, writers: list[_Writer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Backups of a store another process grows past 10 MiB (py-lmdb's default map) all
    succeed and check sound, though the writer grows the file by a MiB between the
    opening of each copy's environment and the start of its copy (the window in which
    LMDB finds the snapshot past the map the copy's environment took when it opened)."""
    data = tmp_path / "data"
    writers.append(writer := _Writer(data, limit=64 << 20, size=60_000))
    size = lambda: (data / "data.mdb").stat().st_size  # noqa: E731
    wait_until(lambda: size() > 10 << 20 or writer.said("WROTE"), timeout=60)
    real_open = lmdb.open
    grown: list[int] = []

    def open_then_grow(path: str, **options: Any) -> Any:
        env = real_open(path, **options)
        if path == str(data):
            at_open = size()
            wait_until(lambda: size() > at_open + (1 << 20) or writer.said("WROTE"), timeout=60)
            grown.append(size() - at_open)
        return env

    monkeypatch.setattr(backup_module.lmdb, "open", open_then_grow)
    copies: list[Path] = []
    failures: list[str] = []
    for n in range(4):
        try:
            copies.append(backup(data, tmp_path / f"copy{n}").parent)
        except memoryd.StorageError as exc:
            failures.append(str(exc))
    monkeypatch.undo()
    writer.stop()
    assert failures == []
    assert len(grown) == 4 and min(grown) > 1 << 20, grown  # the writer ran meanwhile
    for copy in copies:
        report = check.check_store(copy)
        assert report.sound, (copy, report.problems)
        assert (copy / "data.mdb").stat().st_size > 10 << 20


def test_a_copy_cut_by_a_resized_map_is_taken_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should LMDB still say MDB_MAP_RESIZED (a writer that is no memoryd store), the
    partial copy goes and the copy is taken again from a new environment."""
    data = tmp_path / "data"
    _store(data)
    real_open = lmdb.open
    opened: list[dict[str, Any]] = []

    class Cut:
        def __init__(self, env: Any) -> None:
            self.env = env

        def copy(self, path: str, **options: Any) -> None:
            self.env.copy(path, **options)  # the partial file LMDB leaves
            raise lmdb.MapResizedError("mdb_env_copy3: MDB_MAP_RESIZED")

        def close(self) -> None:
            self.env.close()

    def cut_once(path: str, **options: Any) -> Any:
        opened.append(options)
        env = real_open(path, **options)
        return Cut(env) if len(opened) == 1 else env

    monkeypatch.setattr(backup_module.lmdb, "open", cut_once)
    copy = backup(data, tmp_path / "copy").parent
    monkeypatch.undo()
    assert len(opened) == 3  # two copies of the source, then the copy's identity
    assert opened[0]["map_size"] >= 1 << 40
    assert check.check_store(copy).sound
