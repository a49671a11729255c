"""LmdbEngine: one open LMDB environment, its read gate, and the batch writer.

The engine is owned by one store actor: only that actor's thread opens it,
writes to it and closes it. Any thread may read through ``reading()``, with its
own read-only transaction (LMDB's MVCC: readers never wait for the writer). The
read gate lets ``close()`` wait until no reader is inside the environment, so a
restart never frees memory a reader is still using.

Opening checks the data file before trusting it: an open verifies its structure
(unless this process closed that very file unchanged, as on a restart) with
`check.structure_problems` (every page, without handing the file to liblmdb, whose
assertions abort the process on some damaged pages), and every open compares the
environment with the directory's identity file (`memoryd.store.lmdb.identity`), so
a damaged file is refused with `CorruptRecord` instead of aborting the process or
opening empty.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import lmdb
import structlog

from memoryd import codec
from memoryd.errors import (
    CorruptRecord,
    DiskFull,
    EngineBusy,
    EngineClosed,
    MemorydError,
    StorageError,
)
from memoryd.store.lmdb import check, identity, keys, layout
from memoryd.store.lmdb.dirlock import DirLock, fsync_dir, make_dir
from memoryd.store.lmdb.layout import Counters, Dbs, open_dbs
from memoryd.store.lmdb.reads import live_conversations

__all__ = [
    "FULL_MARGIN_BYTES",
    "READER_CHECK_EVERY",
    "TRUSTED_MAX",
    "LmdbEngine",
    "forget_trusted",
    "free_space",
    "low_water",
    "out_of_space",
]

log = structlog.get_logger(__name__)

_MAX_DBS = len(fields(Dbs)) + 1  # every sub-database of `layout.Dbs`, and one spare
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


_CORE_DBS = (
    keys.NAMES_DB,
    keys.EVENTS_DB,
    keys.POSITIONS_DB,
    keys.META_DB,
    keys.IDEMPOTENCY_DB,
    layout.SYS_DB,
)
"""The sub-databases every store of this format has held since it was created (the
``system`` index is not among them: a store last opened before it existed lacks it, and
its conversations are read whole until written again)."""

_trusted: OrderedDict[Path, tuple[int, int, int, int]] = OrderedDict()
"""Data files this process closed itself and has not reopened since, by directory, oldest
close first: inode, size, mtime and a CRC-32 of the meta pages at close. A reopen of an
unchanged file (a restart) skips the page-by-page verification. At most `TRUSTED_MAX`
entries: an entry dropped only costs a full verification at the next open."""
_trusted_lock = threading.Lock()
_META_PAGES_BYTES = 1 << 16  # covers both meta pages at any page size LMDB uses

TRUSTED_MAX = 1024
"""The most closed data files whose signature is remembered (`_trusted`): more than a
daemon's stores (``--max-stores``, 256 by default), so a restart skips verification
unless over a thousand other stores closed since. Each entry costs about 600 bytes."""


def _trust(path: Path, signature: tuple[int, int, int, int]) -> None:
    """Remember the signature of the data file just closed in ``path``. Past
    `TRUSTED_MAX`, entries of directories that are gone (stopped ephemeral stores) go
    first, then the oldest."""
    with _trusted_lock:
        _trusted[path] = signature
        _trusted.move_to_end(path)
        if len(_trusted) <= TRUSTED_MAX:
            return
        for gone in [p for p in _trusted if not (p / check.DATA_FILE).exists()]:
            del _trusted[gone]
        while len(_trusted) > TRUSTED_MAX:
            _trusted.popitem(last=False)


def forget_trusted(path: Path) -> None:
    """Drop what `_trusted` remembers of ``path`` (its directory is being removed)."""
    with _trusted_lock:
        _trusted.pop(path, None)


_full_when_restarted: set[Path] = set()
"""Stores whose last incarnation was restarted by a full disk (a failed meta page write
panics LMDB's environment). The next incarnation starts out refusing writes while the
disk stays full, as the last one did: else, on a disk where every meta page write fails
(a full copy-on-write file system rewrites no block in place), each write would panic
and restart the store again, and reads would wait out each restart."""
_full_lock = threading.Lock()


def _signature(path: Path) -> tuple[int, int, int, int]:
    with open(path / check.DATA_FILE, "rb") as file:
        st = os.fstat(file.fileno())
        metas = zlib.crc32(file.read(2 * _META_PAGES_BYTES))
    return st.st_ino, st.st_size, st.st_mtime_ns, metas


def _refuse(path: Path, problem: str) -> CorruptRecord:
    return CorruptRecord(
        f"store {path} is refused: {problem}. Nothing was changed. Run `memoryd check "
        f"--data {path}` for a report, and restore the directory from a backup "
        "(`memoryd backup` writes a directory to put in its place)"
    )


def _check_structure(path: Path) -> None:
    """Verify ``path/data.mdb`` page by page, unless this process closed it unchanged.

    The entry is taken out: the file is about to be written, and the next close puts
    the new signature back.
    """
    with _trusted_lock:
        if _trusted.pop(path, None) == _signature(path):
            return
    problems = check.structure_problems(path)
    if problems:
        more = len(problems) - 3
        shown = "; ".join(problems[:3]) + (f"; and {more} more" if more > 0 else "")
        raise _refuse(path, f"its data file is damaged ({shown})")


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
        self.build_s = 0.0
        """Seconds spent building the committed write transactions (this incarnation)."""
        self.commit_s = 0.0
        """Seconds spent committing them: LMDB's page writes and, when durable, its two
        flushes (data pages, then the meta page)."""
        with _full_lock:
            self._disk_full = path in _full_when_restarted
            _full_when_restarted.discard(path)
        self._commits_since_reader_check = 0
        self._gate_lock = threading.Lock()
        self._gate = threading.Condition(self._gate_lock)
        """Readers, a map growth and a close meet here; `read` takes its lock directly."""
        self._readers = 0
        self._closing = False
        self._pausing = False
        self.changed = threading.Condition()
        self.last_position = 0
        make_dir(path)
        self._lock = DirLock(path)
        self._lock.acquire()
        try:
            self.identity = self._check_before_open()
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
            self._check_main_db()
            self.dbs = open_dbs(self.env)
            if durable:
                fsync_dir(path)
            self._check_identity()
            self.last_position = self.counters.next_pos - 1
        except BaseException:
            self.env.close()
            self._lock.release()
            raise

    # -- checks at open (owner's thread) -------------------------------------------

    def _check_before_open(self) -> identity.Identity:
        """The directory's identity; the data file verified page by page if it exists.

        A directory without a data file gets a new identity file first, so a data file
        is never without one.
        """
        odd = check.not_regular(self.path)
        if odd:
            raise _refuse(self.path, "; ".join(odd))
        data = self.path / check.DATA_FILE
        self._existed = data.exists() and data.stat().st_size > 0
        known = identity.read(self.path)
        if self._existed:
            if known is None:
                raise _refuse(
                    self.path,
                    f"it has no {identity.FILE_NAME}: it was written by a memoryd older than "
                    f"store format {codec.STORE_FORMAT} (which this one no longer reads: "
                    "export it with that memoryd and import the file here), or the file "
                    "was lost",
                )
            _check_structure(self.path)
            return known
        if known is not None and (known.conversations or known.position):
            raise _refuse(
                self.path,
                f"its data file is missing or empty, but {identity.FILE_NAME} records "
                f"{known.conversations} conversations and position {known.position}",
            )
        if known is None:
            known = identity.Identity.new(codec.STORE_FORMAT)
            identity.write(self.path, known, durable=self.durable)
        return known

    def _check_main_db(self) -> None:
        """Refuse, before anything is written, an old data file that lost its sub-databases."""
        if not self._existed:
            return
        with self.env.begin() as txn:
            missing = [name.decode() for name in _CORE_DBS if txn.get(name) is None]
        if missing and (self.identity.conversations or self.identity.position):
            raise _refuse(
                self.path,
                f"its data file opens without the sub-databases {missing} (the main "
                f"database is damaged), but {identity.FILE_NAME} records "
                f"{self.identity.conversations} conversations",
            )

    def _check_identity(self) -> None:
        """Compare the environment with the identity file; set the counters; a new
        environment gets its format and id."""
        known = self.identity
        with self.env.begin(write=True) as txn:
            stored_format = layout.get(txn, self.dbs.sys, layout.FORMAT)
            if stored_format is None:
                if txn.stat(self.dbs.names)["entries"] or txn.stat(self.dbs.events)["entries"]:
                    raise _refuse(self.path, "its data file has no store format (format 1)")
                layout.put(txn, self.dbs.sys, layout.FORMAT, known.format.to_bytes(8, "big"))
                layout.put(txn, self.dbs.sys, layout.IDENTITY, known.store_id.encode())
                stored_format = known.format.to_bytes(8, "big")
            stored_id = layout.get(txn, self.dbs.sys, layout.IDENTITY)
            self.counters = Counters.load(txn, self.dbs)
        found_format = int.from_bytes(stored_format, "big")
        if found_format != codec.STORE_FORMAT:
            raise _refuse(
                self.path,
                f"its data file has store format {found_format}; this memoryd reads "
                f"format {codec.STORE_FORMAT}",
            )
        if stored_id is None or bytes(stored_id).decode("utf-8", "replace") != known.store_id:
            raise _refuse(
                self.path, f"its data file belongs to another store than {identity.FILE_NAME}"
            )
        conversations = self.counters.kept
        position = self.counters.next_pos - 1
        if conversations < known.conversations or position < known.position:
            raise _refuse(
                self.path,
                f"its data file holds {conversations} conversations up to position "
                f"{position}, but {identity.FILE_NAME} records at least "
                f"{known.conversations} and {known.position}",
            )
        self._note_counters(force=True)

    def _note_counters(self, *, force: bool = False) -> None:
        """Raise the identity file's counters when they doubled (or ``force``). The
        conversations counted are those the store keeps for good (`Counters.kept`)."""
        conversations = self.counters.kept
        position = self.counters.next_pos - 1
        known = self.identity
        if (conversations, position) == (known.conversations, known.position):
            return
        if force or known.outgrown_by(conversations, position):
            grown = known.grown(conversations, position)
            try:
                identity.write(self.path, grown, durable=self.durable)
            except OSError as exc:  # a lower bound left lower: safe, retried later
                log.warning("identity_not_written", path=str(self.path), error=str(exc))
                return
            self.identity = grown

    # -- reading (any thread) ------------------------------------------------

    @contextlib.contextmanager
    def reading(self, *, wait: bool = True) -> Iterator[Any]:
        """A read-only transaction, or ``EngineClosed`` if the engine is going away.

        Args:
            wait: wait while the map grows; False raises `EngineBusy` instead.
        """
        self._admit_reader(wait)
        try:
            try:
                txn = self.env.begin(buffers=False)
            except lmdb.Error as exc:  # a panicked environment: say so as memoryd does
                raise StorageError(f"LMDB read failed in {self.path}: {exc}") from exc
            with txn:
                yield txn
        finally:
            self._release_reader()

    def _admit_reader(self, wait: bool) -> None:
        """Count a reader in, waiting while the map grows (`EngineBusy` if not ``wait``).

        The gate's lock is taken directly (the Condition's own enter and exit are Python
        calls) and waited on through the Condition only when a grow or a close is under
        way: a read is often a few microseconds of LMDB.

        Raises:
            EngineClosed: the engine is closing.
            EngineBusy: the map is growing and ``wait`` is False.
        """
        with self._gate_lock:
            if self._pausing or self._closing:
                if not wait and self._pausing and not self._closing:
                    raise EngineBusy
                self._gate.wait_for(lambda: not self._pausing or self._closing)
                if self._closing:
                    raise EngineClosed
            self._readers += 1

    def _release_reader(self) -> None:
        """Count a reader out; the last one wakes a grow or a close waiting for them."""
        with self._gate_lock:
            self._readers -= 1
            if self._readers == 0 and (self._pausing or self._closing):
                self._gate.notify_all()

    def read(self, fn: Callable[[Any, Dbs], T], *, wait: bool = True) -> T:
        """Run ``fn(txn, dbs)`` in a read-only transaction (any thread).

        Raises:
            EngineClosed: the engine is closing; look up the store's new one.
            EngineBusy: the map is growing and ``wait`` is False.
            StorageError: LMDB failed.
            CorruptRecord: a record read is damaged (the message names it and the store).
        """
        self._admit_reader(wait)  # not `reading`: a generator costs as much as the read
        try:
            try:
                txn = self.env.begin(buffers=False)
            except lmdb.Error as exc:  # a panicked environment (a failed meta page write)
                raise StorageError(f"LMDB read failed in {self.path}: {exc}") from exc
            try:
                return fn(txn, self.dbs)
            except CorruptRecord as exc:
                raise CorruptRecord(f"{exc} (store {self.path})") from None
            except lmdb.Error as exc:
                raise StorageError(f"LMDB read failed in {self.path}: {exc}") from exc
            finally:
                txn.abort()
        finally:
            self._release_reader()

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
                    # open. Refuse the batch, keep the actor: a client filling the disk
                    # cannot exhaust restart intensity.
                    self._disk_full = True
                    log.error("disk_full", path=str(self.path), error=str(exc), free_bytes=free)
                    refusals = self._refuse_full(len(ops), free)
                    if self._panicked():
                        # It was the meta page that failed: nothing was written either
                        # (the other meta page still names the last commit), but LMDB
                        # marked the environment unusable, and every read and write
                        # would fail until it is opened again. The writers get the
                        # `DiskFull` they would have, and the store is restarted.
                        with _full_lock:
                            _full_when_restarted.add(self.path)
                        raise refusals[0][1] from exc
                    return refusals
                raise StorageError(f"LMDB failed in {self.path}: {exc}") from exc
            self.commits += 1
            self._commits_since_reader_check += 1
            self.writes += len(ops)
            self._note_counters()
            return results

    def refuses_writes(self) -> bool:
        """True while a full disk refuses this store's writes: set by a write that found
        it full, and still below `low_water` now (one ``statvfs``, only then). Read from
        any thread, without a write: a hint for callers that would otherwise do work
        whose outcome cannot be recorded (`StoreHandle.refuses_writes`)."""
        if not self._disk_full:
            return False
        try:
            free, size = free_space(self.path)
        except OSError:
            return False
        return free < low_water(size)

    def _refuse_full(self, count: int, free: int) -> list[tuple[bool, Any]]:
        self.disk_full_refusals += count
        error = DiskFull(
            f"store {self.path} cannot write: No space left on device ({free} bytes free "
            "on its file system); nothing was written. Free disk space and retry"
        )
        return [(False, error) for _ in range(count)]

    def _panicked(self) -> bool:
        """True when LMDB marked the environment unusable (``MDB_PANIC``): a failed
        write of a meta page does, and then every transaction fails until it is reopened."""
        try:
            self.env.begin(buffers=False).abort()
        except lmdb.PanicError:
            return True
        except lmdb.Error:
            return False  # some other trouble: the next transaction finds it
        return False

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
        clock = time.perf_counter
        started = clock()
        with self.env.begin(write=True) as txn:
            for op in ops:
                try:
                    results.append((True, op(txn, self.dbs, counters)))
                except (MemorydError, ValueError) as exc:
                    results.append((False, exc))
            counters.save(txn, self.dbs)
            built = clock()
        committed = clock()
        counters.committed()  # the transaction block exited cleanly: it is durable
        self.build_s += built - started
        self.commit_s += committed - built
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
            "txn_build_s": self.build_s,
            "txn_commit_s": self.commit_s,
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
        self._note_counters(force=True)
        try:
            self.env.close()
            _trust(self.path, _signature(self.path))
        finally:
            self._lock.release()
