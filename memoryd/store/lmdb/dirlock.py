"""One owner per data directory: an OS file lock that dies with its process.

``fcntl.flock`` locks belong to an open file description, so a second opener in
the same process is refused too, and a crashed (even SIGKILLed) owner never
blocks the next one: the kernel drops the lock with the process.

The owner holds the lock exclusively. `probe` tells whether a directory has an owner
(``memoryd check`` refuses a live store) by taking the lock shared for an instant; a
store starting meanwhile waits that instant out instead of failing (`DirLock.acquire`
fails only while the lock cannot be had even shared, i.e. while an owner holds it).

The directory itself is created durably (`make_dir`): every directory created on
the way and the parent it was created in are fsynced, so a power cut after the
first acknowledged write cannot take the directory away.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from memoryd.errors import AlreadyStarted

__all__ = [
    "DATA_FILE",
    "LMDB_LOCK_FILE",
    "LOCK_FILE",
    "DirLock",
    "fsync_dir",
    "make_dir",
    "probe",
]

LOCK_FILE = "memoryd.lock"

DATA_FILE = "data.mdb"
"""LMDB's data file in a store's directory (named here, where nothing imports lmdb)."""

LMDB_LOCK_FILE = "lock.mdb"
"""LMDB's reader table in a store's directory."""


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: Path) -> None:
    """Create ``path`` and any missing parents (0700), each made durable in its parent.

    Every directory created here is fsynced (its own entries so far) and so is the
    directory it was created in, before this returns; an existing ``path`` costs a
    ``stat``.
    """
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    if not missing:
        return
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for created in reversed(missing):
        fsync_dir(created)
        fsync_dir(created.parent)


class DirLock:
    """An exclusive lock on ``directory/memoryd.lock`` holding the owner's pid."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise.

        Raises:
            AlreadyStarted: another process (or another store in this one) owns the
                directory; the error names the owner's pid when it can be read.
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            _lock_exclusive(fd)
        except BlockingIOError:
            owner = _read_pid(fd)
            os.close(fd)
            who = "this process" if owner == os.getpid() else f"process {owner}"
            raise AlreadyStarted(
                f"data directory {self.path.parent} is in use by {who}; "
                "stop that store first, or use another directory",
                owner_pid=owner,
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)  # a failed pid write must not leave the directory locked
            raise
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


_PROBE_WAIT_S = 2.0
"""How long `DirLock.acquire` waits for probes to let go of a lock no owner holds (a
probe holds it for the time of two system calls)."""


def _lock_exclusive(fd: int) -> None:
    """Take the exclusive lock of ``fd``, waiting out probes but never an owner.

    Raises:
        BlockingIOError: an owner holds the lock (or probes held it past `_PROBE_WAIT_S`).
    """
    deadline = time.monotonic() + _PROBE_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            # Only probes hold it if it can be had shared: they let go at once.
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # raises while an owner holds it
            fcntl.flock(fd, fcntl.LOCK_UN)
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.001)


def probe(directory: Path) -> tuple[bool, int | None]:
    """Whether a process owns ``directory`` now (a store is open on it), and its pid.

    Nothing is created, and the lock is held (shared) only for an instant: a store
    starting meanwhile waits it out (`DirLock.acquire`) rather than fail. The answer is
    only true of that instant: a store may start right after.

    Returns:
        ``(True, pid)`` while an owner holds the lock (``pid`` None when it cannot be
        read), else ``(False, None)``.

    Raises:
        OSError: the lock file exists but cannot be opened.
    """
    try:
        # O_NONBLOCK: a FIFO in the lock file's place must not hang the probe
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return False, None  # never opened as a store by a memoryd that locks
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, _read_pid(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False, None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
