"""kill -9 at random moments loses no acknowledged write and leaves a sound data file.

A writer process (``_writer.py``) appends three-message events with idempotency keys and
prints ``ACK <key> <version>`` after each acknowledged add. The test SIGKILLs it at a random
moment, checks the data file offline, reopens the store in this process and checks that every
acknowledged key is there exactly once and no event is torn, then starts the next writer on
the same directory, which resumes after the last acknowledged key (so a write that committed
without its ACK is retried with the same key, and must not be duplicated).
"""

from __future__ import annotations

import os
import random
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import lmdb
import pytest

import memoryd

try:  # py-lmdb >= 3.0 ships an offline verifier; older versions get a read-only walk
    from lmdb import verify as lmdb_verify
except ImportError:  # pragma: no cover - depends on the installed py-lmdb
    lmdb_verify = None

WRITER = Path(__file__).with_name("_writer.py")
CONVERSATION = "kill9"
CYCLES = 20
READY_TIMEOUT = 30.0
ACK_LINE = re.compile(r"ACK (m(\d{7})) (\d+)\n")
LMDB_MAGIC = 0xBEEFC0DE


@dataclass
class WriterOutput:
    """Collects the writer's stdout lines on a thread of its own."""

    stream: IO[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.stream:
            self.lines.append(line)
            if line == "READY\n":
                self.ready.set()

    def acks(self) -> list[tuple[str, int, int]]:
        """(key, sequence, version) for every complete ACK line."""
        found = []
        for line in self.lines:
            match = ACK_LINE.fullmatch(line)
            if match:
                found.append((match[1], int(match[2]), int(match[3])))
        return found


def run_writer_until_killed(
    path: Path, first: int, delay: float, wait_ready: bool, log: Path
) -> WriterOutput:
    """Start a writer, SIGKILL it ``delay`` seconds after it is ready (or after spawn)."""
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(path), str(first)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        output = WriterOutput(proc.stdout)
        try:
            if wait_ready and not output.ready.wait(READY_TIMEOUT):
                pytest.fail(f"writer not ready after {READY_TIMEOUT} s:\n{log.read_text()}")
            time.sleep(delay)  # the random kill moment, not a synchronisation
            proc.send_signal(signal.SIGKILL)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            output.thread.join(timeout=30)
    assert proc.returncode == -signal.SIGKILL, (
        f"writer exited by itself with {proc.returncode}:\n{log.read_text()}"
    )
    return output


def lmdb_data_files(path: Path) -> list[Path]:
    """Every LMDB data file under ``path`` (by name, or by the meta page's magic number)."""
    found = []
    for candidate in sorted(path.rglob("*")):
        if not candidate.is_file() or "lock" in candidate.name:
            continue
        with candidate.open("rb") as f:
            head = f.read(64)
        magic = any(
            len(head) >= offset + 4 and struct.unpack_from("=I", head, offset)[0] == LMDB_MAGIC
            for offset in (16, 24)
        )
        if candidate.name == "data.mdb" or magic:
            found.append(candidate)
    return found


def check_data_file_offline(data_file: Path) -> None:
    """Audit a closed data file: lmdb.verify when py-lmdb has it, else a read-only full walk."""
    if lmdb_verify is None:
        walk_every_key(data_file)
        return
    if data_file.stat().st_size == 0:
        return  # created but never initialised: LMDB starts such a file afresh
    problems = lmdb_verify.verify(str(data_file), subdir=False)
    assert problems == [], f"{data_file}: {problems}"


def walk_every_key(data_file: Path) -> None:
    """Fallback for py-lmdb < 3: open read-only without a lock file and read every record."""
    env = lmdb.open(
        str(data_file), subdir=False, readonly=True, lock=False, max_dbs=256, create=False
    )
    try:
        with env.begin() as txn:
            names = [key for key, _ in txn.cursor()]
            for key, value in txn.cursor():
                assert isinstance(value, bytes), key
            for name in names:
                try:
                    db = env.open_db(name, txn=txn, create=False)
                except lmdb.Error:
                    continue  # a plain record of the main database, not a sub-database
                for key, value in txn.cursor(db=db):
                    assert isinstance(key, bytes)
                    assert isinstance(value, bytes)
    finally:
        env.close()


def check_store(path: Path, acked: dict[str, int]) -> int:
    """Reopen the store; every ACKed key is there once, at its version, and nothing is torn.

    Returns the number of events in the conversation.
    """
    store = memoryd.LmdbStore.start(str(path))
    try:
        history = [m["content"] for m in store.get(CONVERSATION)]
        events = store.events(CONVERSATION)
        version = store.version(CONVERSATION)
    finally:
        store.stop()

    assert len(history) % 3 == 0, "a torn write: history is not whole events"
    keys = [history[i].split("#")[0] for i in range(0, len(history), 3)]
    for i, key in enumerate(keys):
        assert history[3 * i : 3 * i + 3] == [f"{key}#0", f"{key}#1", f"{key}#2"], key
    assert keys == [f"m{n:07d}" for n in range(len(keys))], "keys missing or duplicated"
    assert version == len(events) == len(keys)
    assert [e.version for e in events] == list(range(1, version + 1))
    for event, key in zip(events, keys, strict=True):
        assert event.idempotency_key == key
        assert [m["content"] for m in event.messages] == [f"{key}#0", f"{key}#1", f"{key}#2"]
    for key, acked_version in acked.items():
        assert key in keys, f"acknowledged write {key} lost"
        assert keys.index(key) + 1 == acked_version, f"{key} acknowledged at another version"
    return version


@pytest.mark.slow
def test_kill9_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """20 writers SIGKILLed at random moments: every ACKed key survives once, none torn."""
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    print(f"kill9 seed {seed}")
    path = tmp_path / "data"
    acked: dict[str, int] = {}
    next_sequence = 0
    for cycle in range(CYCLES):
        wait_ready = cycle % 5 != 4  # every fifth writer may die while still starting up
        output = run_writer_until_killed(
            path,
            next_sequence,
            delay=rng.uniform(0.05, 0.5),
            wait_ready=wait_ready,
            log=tmp_path / f"writer-{cycle}.log",
        )
        for key, sequence, version in output.acks():
            assert acked.setdefault(key, version) == version, f"{key} acknowledged twice"
            next_sequence = max(next_sequence, sequence + 1)

        data_files = lmdb_data_files(path)
        assert data_files or not acked, "acknowledged writes but no LMDB data file"
        for data_file in data_files:
            check_data_file_offline(data_file)
        if data_files:
            committed = check_store(path, acked)
            assert committed >= len(acked)
    assert acked, "no writer acknowledged anything before it was killed"
