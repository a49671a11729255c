"""LmdbEngine: one open LMDB environment, its read gate, and the batch writer.

The engine is owned by one store actor: only that actor's thread opens it,
writes to it and closes it. Any thread may read through ``reading()``, with its
own read-only transaction (LMDB's MVCC: readers never wait for the writer). The
read gate lets ``close()`` wait until no reader is inside the environment, so a
restart never frees memory a reader is still using.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import structlog

from memoryd.errors import DiskFull, EngineBusy, EngineClosed, MemorydError, StorageError
from memoryd.store.lmdb.dirlock import DirLock, fsync_dir, make_dir
from memoryd.store.lmdb.layout import Counters, Dbs, open_dbs
from memoryd.store.lmdb.reads import live_conversations

__all__ = [
    "FULL_MARGIN_BYTES",
    "READER_CHECK_EVERY",
    "LmdbEngine",
    "free_space",
    "low_water",
    "out_of_space",
]

log = structlog.get_logger(__name__)

_MAX_DBS = 8
_MAX_MAP_BYTES = 1 << 44  # 16 TiB of address space: growth stops here
# A reader process killed while holding a read transaction leaves its slot in the lock
# file, and LMDB keeps every page freed after that reader's snapshot until the slot is
# cleared: the data file would grow under writes forever. The writer clears dead
# readers' slots at open, every this many commits, and before growing a full map, so a
# dead reader pins at most this many commits' worth of pages.
READER_CHECK_EVERY = 64


class _MapAtCap(Exception):
    """The map is full and may not grow: the batch is refused, the environment is sound."""


FULL_MARGIN_BYTES = 1 << 20
"""A file system with less free space than this (or than 1/64 of its size, if smaller)
is full: a write that failed there failed for want of space, and writes are refused
without an attempt until the free space is back above it."""

_IO_ERRORS = (os.strerror(errno.ENOSPC), os.strerror(errno.EIO))


def free_space(path: Path) -> tuple[int, int]:
    """The bytes this process may still write on ``path``'s file system, and its size.

    Root may write into the blocks reserved for it, so root counts them as free.
    """
    st = os.statvfs(path)
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize, st.f_blocks * st.f_frsize


def low_water(size: int) -> int:
    """Below how many free bytes a file system of ``size`` bytes counts as full."""
    return min(FULL_MARGIN_BYTES, size // 64)


def out_of_space(exc: Exception, free: int, size: int) -> bool:
    """True when an LMDB write error is a full disk rather than a failing device.

    LMDB reports ENOSPC only when not one byte of a write fit; a write cut short by
    the disk filling up is reported as EIO, exactly like a device fault. The two are
    told apart by the free space left: a short write leaves (next to) none.

    Args:
        exc: the error LMDB raised while committing.
        free: free bytes on the file system now (`free_space`).
        size: the file system's size in bytes.
    """
    if isinstance(exc, lmdb.PanicError):
        return False
    text = str(exc)
    if getattr(exc, "errno", None) == errno.ENOSPC or _IO_ERRORS[0] in text:
        return True
    return _IO_ERRORS[1] in text and free < low_water(size)


Op = Callable[[Any, Dbs, Counters], Any]
T = TypeVar("T")


class LmdbEngine:
    """An open environment. Open, write and close only from the owning actor's thread."""

    def __init__(
        self, path: Path, *, durable: bool, map_size: int, max_map_size: int = _MAX_MAP_BYTES
    ) -> None:
        self.path = path
        self.durable = durable
        self.max_map_size = min(max_map_size, _MAX_MAP_BYTES)
        self.commits = 0
        self.writes = 0
        self.held_batches = 0
        """Batches the group-commit policy held back for expected writers (actor's count)."""
        self.map_growths = 0
        self.stale_readers_cleared = 0
        self.disk_full_refusals = 0
        """Writes refused because the disk was full (this incarnation)."""
        self._disk_full = False
        self._commits_since_reader_check = 0
        self._gate = threading.Condition()
        self._readers = 0
        self._closing = False
        self._pausing = False
        self.changed = threading.Condition()
        self.last_position = 0
        make_dir(path)
        self._lock = DirLock(path)
        self._lock.acquire()
        try:
            self.env = lmdb.open(
                str(path),
                map_size=map_size,
                subdir=True,
                max_dbs=_MAX_DBS,
                sync=durable,
                metasync=durable,
                writemap=False,
                map_async=False,
                mode=0o600,
                max_readers=512,
                create=True,
            )
        except BaseException:
            self._lock.release()
            raise
        try:
            self._clear_stale_readers()
            self.dbs = open_dbs(self.env)
            if durable:
                fsync_dir(path)
            with self.env.begin() as txn:
                self.counters = Counters.load(txn, self.dbs)
            self.last_position = self.counters.next_pos - 1
        except BaseException:
            self.env.close()
            self._lock.release()
            raise

    # -- reading (any thread) ------------------------------------------------

    @contextlib.contextmanager
    def reading(self, *, wait: bool = True) -> Iterator[Any]:
        """A read-only transaction, or ``EngineClosed`` if the engine is going away.

        Args:
            wait: wait while the map grows; False raises `EngineBusy` instead.
        """
        with self._gate:
            if not wait and self._pausing and not self._closing:
                raise EngineBusy
            self._gate.wait_for(lambda: not self._pausing or self._closing)
            if self._closing:
                raise EngineClosed
            self._readers += 1
        try:
            with self.env.begin(buffers=False) as txn:
                yield txn
        finally:
            with self._gate:
                self._readers -= 1
                if self._readers == 0:
                    self._gate.notify_all()

    def read(self, fn: Callable[[Any, Dbs], T], *, wait: bool = True) -> T:
        """Run ``fn(txn, dbs)`` in a read-only transaction (any thread).

        Raises:
            EngineClosed: the engine is closing; look up the store's new one.
            EngineBusy: the map is growing and ``wait`` is False.
            StorageError: LMDB failed.
        """
        with self.reading(wait=wait) as txn:
            try:
                return fn(txn, self.dbs)
            except lmdb.Error as exc:
                raise StorageError(f"LMDB read failed in {self.path}: {exc}") from exc

    @property
    def closed(self) -> bool:
        """True once ``close()`` has begun."""
        return self._closing

    def wait_for_change(self, after: int, timeout: float) -> None:
        """Block until a position above ``after`` is committed, the engine closes, or timeout."""
        with self.changed:
            self.changed.wait_for(
                lambda: self.last_position > after or self._closing, timeout=timeout
            )

    # -- writing (owner's thread) ----------------------------------------------

    def write_batch(self, ops: Sequence[Op]) -> list[tuple[bool, Any]]:
        """Run every op in ONE write transaction and commit it (one fsync when durable).

        Each op's refusal (a ``MemorydError`` or ``ValueError`` raised before it
        wrote anything) becomes its own ``(False, error)`` result; the others commit.
        Every ``READER_CHECK_EVERY`` commits, and before a full map is grown, the
        slots of reader processes that died holding a transaction are cleared, so
        the pages they pinned are reused. A full map is grown and the whole batch
        retried; a full map that may not grow (``max_map_size``) refuses every op
        with ``StorageError`` and keeps the environment (nothing was written; reads
        are unaffected). A full disk (`out_of_space`) refuses every op with
        `DiskFull` and keeps the environment too; until the file system has free
        space above `low_water` again, later batches are refused without a write.

        Returns:
            ``(True, value)`` or ``(False, error)`` per op, in order.

        Raises:
            StorageError: LMDB failed; nothing in the batch may be assumed committed.
        """
        if self._disk_full and (held := self._still_full(len(ops))) is not None:
            return held
        if self._commits_since_reader_check >= READER_CHECK_EVERY:
            self._clear_stale_readers()
        while True:
            try:
                results = self._run(ops)
            except lmdb.MapFullError:
                if self._clear_stale_readers():
                    continue  # pages a dead reader pinned are free again: retry first
                try:
                    self._grow()
                except _MapAtCap as full:
                    refused = StorageError(str(full))
                    return [(False, refused) for _ in ops]
                continue
            except lmdb.Error as exc:
                free, size = free_space(self.path)
                if out_of_space(exc, free, size):
                    # The disk filled during the commit's data-page writes, before its
                    # meta page: nothing was written, the last committed snapshot is
                    # intact and LMDB aborted the transaction, so the environment stays
                    # open (a failure that did leave it unusable surfaces as PanicError
                    # next time, and crashes the store then). Refuse the batch, keep the
                    # actor: a client filling the disk cannot exhaust restart intensity.
                    self._disk_full = True
                    log.error("disk_full", path=str(self.path), error=str(exc), free_bytes=free)
                    return self._refuse_full(len(ops), free)
                raise StorageError(f"LMDB failed in {self.path}: {exc}") from exc
            self.commits += 1
            self._commits_since_reader_check += 1
            self.writes += len(ops)
            return results

    def _refuse_full(self, count: int, free: int) -> list[tuple[bool, Any]]:
        self.disk_full_refusals += count
        error = DiskFull(
            f"store {self.path} cannot write: No space left on device ({free} bytes free "
            "on its file system); nothing was written. Free disk space and retry"
        )
        return [(False, error) for _ in range(count)]

    def _still_full(self, count: int) -> list[tuple[bool, Any]] | None:
        """Refusals while the disk stays full (one ``statvfs``, no write), or None."""
        try:
            free, size = free_space(self.path)
        except OSError:
            return None  # let the write find out
        if free < low_water(size):
            return self._refuse_full(count, free)
        self._disk_full = False
        log.info("disk_space_back", path=str(self.path), free_bytes=free)
        return None

    def _clear_stale_readers(self) -> int:
        """Free the reader slots of processes that died in a read transaction.

        Returns:
            How many slots were cleared.
        """
        self._commits_since_reader_check = 0
        try:
            cleared = int(self.env.reader_check())
        except lmdb.Error as exc:
            log.warning("reader_check_failed", path=str(self.path), error=str(exc))
            return 0
        if cleared:
            self.stale_readers_cleared += cleared
            log.warning("stale_readers_cleared", path=str(self.path), readers=cleared)
        return cleared

    def _run(self, ops: Sequence[Op]) -> list[tuple[bool, Any]]:
        results: list[tuple[bool, Any]] = []
        counters = self.counters.copy()
        with self.env.begin(write=True) as txn:
            for op in ops:
                try:
                    results.append((True, op(txn, self.dbs, counters)))
                except (MemorydError, ValueError) as exc:
                    results.append((False, exc))
            counters.save(txn, self.dbs)
        counters.committed()  # the transaction block exited cleanly: it is durable
        self.counters = counters
        position = counters.next_pos - 1
        with self.changed:
            self.last_position = position
            self.changed.notify_all()
        return results

    def _grow(self) -> None:
        current = self.env.info()["map_size"]
        if current >= self.max_map_size:
            raise _MapAtCap(
                f"store {self.path} is full: its LMDB map is at its cap of {current} bytes "
                "(max_map_size); nothing was written. Free space (clear conversations) or "
                "restart the store with a larger max_map_size"
            )
        new = min(current * 2, self.max_map_size)
        # LMDB may remap: no transaction of this process may be open, readers included.
        with self._gate:
            self._pausing = True
            drained = self._gate.wait_for(lambda: self._readers == 0, timeout=30.0)
        try:
            if not drained:
                raise StorageError(f"cannot grow the map of {self.path}: readers did not finish")
            self.env.set_mapsize(new)
        finally:
            with self._gate:
                self._pausing = False
                self._gate.notify_all()
        self.map_growths += 1
        log.info("map_grown", path=str(self.path), map_size=new)

    def stats(self) -> dict[str, Any]:
        """Counters of this incarnation and sizes of the environment."""
        with self.reading() as txn:
            events = txn.stat(self.dbs.events)["entries"]
            names = txn.stat(self.dbs.names)["entries"]
            live = live_conversations(txn, self.dbs)
            info = self.env.info()
            stat = self.env.stat()
        used = (info["last_pgno"] + 1) * stat["psize"]
        return {
            "path": str(self.path),
            "durable": self.durable,
            "conversations": live,
            "conversations_ever": names,
            "events": events,
            "last_position": self.last_position,
            "map_size": info["map_size"],
            "used_bytes": used,
            "map_growths": self.map_growths,
            "commits": self.commits,
            "held_batches": self.held_batches,
            "fsyncs": self.commits if self.durable else 0,
            "appends": self.writes,
            "disk_full": self._disk_full,
            "disk_full_refusals": self.disk_full_refusals,
        }

    # -- closing (owner's thread) ------------------------------------------------

    def close(self, reader_grace_s: float = 5.0) -> None:
        """Refuse new readers, wait for current ones, close the environment, unlock."""
        with self._gate:
            self._closing = True
            drained = self._gate.wait_for(lambda: self._readers == 0, timeout=reader_grace_s)
        with self.changed:
            self.changed.notify_all()
        if not drained:
            log.warning("readers_still_open_at_close", path=str(self.path), readers=self._readers)
        try:
            self.env.close()
        finally:
            self._lock.release()
