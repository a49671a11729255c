"""What a starting daemon created on disk, so that a start that fails can take it back.

``memoryd serve`` creates its data directory (and any parent missing on the way), then
the default store's files in it, then its Unix socket (which the listener removes
itself when its start fails). A start that fails removes what it made and nothing else:

* the directories this process made: each is made with one ``mkdir``, so a directory
  that existed (or that another process made first) is never counted as ours, and each
  is removed only when it is empty again;
* the LMDB store's files (`STORE_FILES`) that were not in the data directory before,
  only when the store is new (no data file before the start), holds nothing (the
  daemon says so, and its identity file records no write), and only under the
  directory's lock: a store another process opened meanwhile is never touched.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memoryd.errors import AlreadyStarted, MemorydError
from memoryd.store.lmdb import identity
from memoryd.store.lmdb.dirlock import DATA_FILE, LMDB_LOCK_FILE, LOCK_FILE, DirLock, fsync_dir

__all__ = ["STORE_FILES", "StartFootprint", "make_dirs"]


STORE_FILES = (
    DATA_FILE,
    LMDB_LOCK_FILE,
    identity.FILE_NAME,
    identity.FILE_NAME + ".tmp",
    LOCK_FILE,  # last: the lock is released after the others are gone
)
"""The files a new LMDB store creates in its directory."""


def make_dirs(path: Path, made: list[Path]) -> None:
    """Create ``path`` and its missing parents (0700), each fsynced with its parent.

    Args:
        path: the directory to create.
        made: each directory this call creates is appended to it, outermost first, as
            it is made (so a failure half-way still tells what was made).

    Raises:
        NotADirectoryError: ``path`` or one of its parents exists and is not a directory.
        OSError: a directory cannot be created.
    """
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{probe} is not a directory")
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:  # made meanwhile by another process: not ours
            if not directory.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, f"{directory} is not a directory") from None
            continue
        made.append(directory)
        fsync_dir(directory)
        fsync_dir(directory.parent)


class StartFootprint:
    """What a daemon's start made in its data directory; `undo` removes it.

    Args:
        data: the data directory.
        lmdb: the default store lives in ``data`` (False with a Redis backend, whose
            start writes no file).
    """

    def __init__(self, data: Path, *, lmdb: bool) -> None:
        self.data = data
        self.made: list[Path] = []
        """The directories made, outermost first (`make_dirs` fills it)."""
        self._lmdb = lmdb
        self._before: frozenset[str] | None = None

    def note_files(self) -> None:
        """Record which store files the data directory holds before the store starts."""
        self._before = frozenset(name for name in STORE_FILES if (self.data / name).exists())

    def undo(self, *, store_files: bool) -> list[Path]:
        """Remove what the start made; call once the store is closed.

        Args:
            store_files: the store's new files may go (False when another process owns
                the directory, or when the store may hold something).

        Returns:
            What was removed.
        """
        removed: list[Path] = []
        if store_files and self._lmdb and self._before is not None:
            removed += self._remove_new_store()
        for directory in reversed(self.made):
            try:
                directory.rmdir()
            except OSError:  # not empty: something else lives there now; keep it
                break
            removed.append(directory)
        return removed

    def _remove_new_store(self) -> list[Path]:
        """The store's new files, removed under the directory's lock if it holds nothing."""
        before = self._before or frozenset()
        if DATA_FILE in before:
            return []  # the store existed: never ours to remove
        lock = DirLock(self.data)
        try:
            lock.acquire()  # creates the lock file if it was not there: removed below
        except (AlreadyStarted, OSError):
            return []  # another process opened it meanwhile: it is theirs
        try:
            try:
                known = identity.read(self.data)
            except (MemorydError, OSError):
                return []
            if known is not None and (known.conversations or known.position):
                return []  # something was written: keep it
            removed = []
            for name in STORE_FILES:
                path = self.data / name
                if name in before:
                    continue
                try:
                    path.unlink()
                except OSError:  # gone already, or not ours to remove after all
                    continue
                removed.append(path)
            return removed
        finally:
            lock.release()
