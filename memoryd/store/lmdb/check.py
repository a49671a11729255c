"""Offline verification of a store's data directory: every page, then every record.

`structure_problems` walks every page of ``data.mdb`` with py-lmdb's pure-Python
verifier (`lmdb.verify`), which never hands the file to liblmdb: a damaged page that
would trip one of liblmdb's assertions (and abort the whole process) is reported here
instead. It also checks that the two meta pages hold consecutive transaction ids, since
a flipped bit in the newer one's id would make LMDB silently pick the older snapshot.

`record_problems` then opens the environment read-only and checks every value's
checksum and every cross-reference: names ↔ metadata ↔ events ↔ positions, idempotency
records, counters, the system-message index (each entry is the system message at its
ordinal of the conversation's live history, and each indexed conversation has every
one), and the identity file (`memoryd.store.lmdb.identity`).
`check_directory` runs both on a data directory and on each named store under
``stores/``; ``memoryd check --data DIR`` prints its report.

The check is offline: `check_directory` refuses a store that a process has open (its
directory lock is held) with `AlreadyStarted`, and one that was written while it was
checked, instead of reporting damage that is not there (see `check_directory`).
"""

from __future__ import annotations

import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import lmdb
from lmdb import verify as lmdb_verify

from memoryd import codec
from memoryd.errors import AlreadyStarted, CorruptRecord
from memoryd.events import walk_back
from memoryd.messages import is_system
from memoryd.store.lmdb import identity, keys, layout
from memoryd.store.lmdb.dirlock import DATA_FILE, LMDB_LOCK_FILE, probe

__all__ = [
    "DATA_FILE",
    "MAX_READERS",
    "RESTORE_ADVICE",
    "StoreReport",
    "check_directory",
    "check_store",
    "not_regular",
    "record_problems",
    "structure_problems",
]

"""The LMDB data file inside a store's directory."""

RESTORE_ADVICE = (
    "To restore a damaged store: stop the daemon, move the store's directory aside, and "
    "put a backup directory (written by `memoryd backup --data DIR DEST`) in its place, "
    "identity.json included; then run `memoryd check --data DIR` again. Writes made after "
    "the backup are lost unless they are re-imported from an export (`memoryd import`)."
)
"""What ``memoryd check`` says to do about damage."""

MAX_READERS = 512
"""The reader slots of an environment opened here, as `LmdbEngine` opens its own: the
first process to open an environment sizes its reader table (``lock.mdb``) for every
later one, so a check or backup opening it first with fewer slots would leave a store
started meanwhile short of readers for its whole life."""

_verify = cast(Callable[..., list[str]], lmdb_verify.verify)  # py-lmdb leaves it untyped
_MAX_PROBLEMS = 50
_MAX_DBS = 16
_META_TXNID = struct.Struct("=Q")
_META_PSIZE = struct.Struct("=I")
_META_HEADER = 16  # page header of an LMDB 0.9 meta page
_TXNID_OFFSET = _META_HEADER + 24 + 2 * 48 + 8
_PSIZE_OFFSET = _META_HEADER + 24


@dataclass(slots=True)
class StoreReport:
    """What checking one store's directory found.

    Attributes:
        path: the store's directory.
        problems: one line per problem found (at most a few dozen are listed).
        conversations: conversations found (0 when the records were not read).
        events: event records found.
    """

    path: Path
    problems: list[str] = field(default_factory=list)
    conversations: int = 0
    events: int = 0

    @property
    def sound(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


_LMDB_FILES = (DATA_FILE, LMDB_LOCK_FILE)


def not_regular(directory: Path) -> list[str]:
    """The LMDB files of ``directory`` that exist but are not regular files (a FIFO, a
    device, a directory): opening one would wait for ever or fail deep inside LMDB.

    Returns:
        One line per such file; empty when there is none.
    """
    problems = []
    for name in _LMDB_FILES:
        path = directory / name
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"{path} cannot be read: {exc}")
            continue
        if not stat.S_ISREG(mode):
            kind = (
                "directory"
                if stat.S_ISDIR(mode)
                else "FIFO"
                if stat.S_ISFIFO(mode)
                else "special file"
            )
            problems.append(f"{path} is a {kind}, not a regular file")
    return problems


def structure_problems(directory: Path) -> list[str]:
    """Every structural problem of ``directory/data.mdb``, read without liblmdb.

    Returns:
        One line per problem; empty when every page is sound.
    """
    path = directory / DATA_FILE
    try:
        problems = [str(p) for p in _verify(str(directory), subdir=True)]
    except lmdb_verify.VerifyError as exc:
        return [f"{path}: {exc}"]
    except OSError as exc:
        return [f"{path} cannot be read: {exc}"]
    problems.extend(_meta_problems(path))
    return [p if p.startswith(str(path)) else f"{path}: {p}" for p in problems]


def _meta_txnids(path: Path) -> tuple[int, int] | str:
    """The transaction ids of the two meta pages, or what keeps them from being read."""
    with open(path, "rb") as file:
        first = file.read(_TXNID_OFFSET + _META_TXNID.size)
        if len(first) < _TXNID_OFFSET + _META_TXNID.size:
            return "the first meta page is truncated"
        (psize,) = _META_PSIZE.unpack_from(first, _PSIZE_OFFSET)
        file.seek(psize)
        second = file.read(_TXNID_OFFSET + _META_TXNID.size)
    if len(second) < _TXNID_OFFSET + _META_TXNID.size:
        return "the second meta page is truncated"
    (txn0,) = _META_TXNID.unpack_from(first, _TXNID_OFFSET)
    (txn1,) = _META_TXNID.unpack_from(second, _TXNID_OFFSET)
    return txn0, txn1


def _meta_problems(path: Path) -> list[str]:
    """The two meta pages must hold consecutive transaction ids (LMDB writes them in
    turn), or the newer one's id is damaged and LMDB would open an older snapshot."""
    txnids = _meta_txnids(path)
    if isinstance(txnids, str):
        return [txnids]
    txn0, txn1 = txnids
    if abs(txn0 - txn1) != 1 and (txn0, txn1) != (0, 0):
        return [
            f"the meta pages hold transaction ids {txn0} and {txn1}, which are not "
            "consecutive: one is damaged, and the snapshot LMDB would open is not the last"
        ]
    return []


Progress = Callable[[Path, int], None]
"""Told the store's directory and how many records were read, every `PROGRESS_EVERY`."""

PROGRESS_EVERY = 10_000
"""Records read between two calls of a `Progress`."""


def record_problems(
    directory: Path, report: StoreReport | None = None, *, progress: Progress | None = None
) -> StoreReport:
    """Check every record of a structurally sound store (see `structure_problems`).

    Args:
        directory: the store's directory.
        report: a report to add to (a new one by default).
        progress: told how far the walk is (a long check on a terminal shows it).

    Returns:
        The report, with ``conversations`` and ``events`` counted.
    """
    report = report if report is not None else StoreReport(directory)
    known = _identity(directory, report)
    try:
        env = lmdb.open(
            str(directory),
            readonly=True,
            max_dbs=_MAX_DBS,
            create=False,
            lock=True,
            max_readers=MAX_READERS,
        )
    except lmdb.Error as exc:
        report.problems.append(f"{directory / DATA_FILE} cannot be opened: {exc}")
        return report
    try:
        with env.begin() as txn:
            missing = [
                name.decode()
                for name in (*keys.SUB_DATABASES, layout.SYS_DB)
                if txn.get(name) is None
            ]
            # A store last opened before the index existed has no ``system`` sub-database:
            # its conversations are read whole until written again, which is sound.
            indexed = txn.get(layout.SYSTEM_DB) is not None
        if missing:
            report.problems.append(
                f"the data file lacks the sub-databases {missing} (its main database is "
                "damaged, or it is no memoryd store)"
            )
            return report
        dbs = layout.Dbs(
            names=env.open_db(keys.NAMES_DB, create=False),
            events=env.open_db(keys.EVENTS_DB, create=False),
            positions=env.open_db(keys.POSITIONS_DB, create=False),
            meta=env.open_db(keys.META_DB, create=False),
            idem=env.open_db(keys.IDEMPOTENCY_DB, create=False),
            sys=env.open_db(layout.SYS_DB, create=False),
            system=env.open_db(layout.SYSTEM_DB, create=False) if indexed else None,
        )
        with env.begin() as txn:
            _Walk(txn, dbs, report, known, progress=progress).run()
    except lmdb.Error as exc:
        report.problems.append(f"LMDB failed while reading {directory / DATA_FILE}: {exc}")
    finally:
        env.close()
    return report


def _identity(directory: Path, report: StoreReport) -> identity.Identity | None:
    try:
        known = identity.read(directory)
    except CorruptRecord as exc:
        report.problems.append(str(exc))
        return None
    if known is None:
        report.problems.append(
            f"{directory / identity.FILE_NAME} is missing: the store cannot prove the "
            "data file is its own (it was written before store format "
            f"{codec.STORE_FORMAT}, or the file was lost)"
        )
    return known


class _Walk:
    """One pass over every sub-database, cross-checking as it goes."""

    def __init__(
        self,
        txn: Any,
        dbs: layout.Dbs,
        report: StoreReport,
        known: identity.Identity | None,
        *,
        progress: Progress | None = None,
    ) -> None:
        self.progress = progress
        self.read = 0
        self.txn = txn
        self.dbs = dbs
        self.report = report
        self.known = known
        self.names: dict[str, int] = {}
        self.metas: dict[int, layout.Meta] = {}
        self.histories: dict[int, list[dict[str, Any]]] = {}
        """Each conversation's live history, when its events are all there."""
        self.unlogged_from = 1 << 64
        self.unlogged_events = 0
        """Events of unlogged hidden conversations: no position names them."""

    def problem(self, text: str) -> None:
        if len(self.report.problems) < _MAX_PROBLEMS:
            self.report.problems.append(text)
        elif len(self.report.problems) == _MAX_PROBLEMS:
            self.report.problems.append("... and more problems (only the first are listed)")

    def items(self, db: Any, what: str) -> Iterator[tuple[bytes, Any]]:
        """Each (key, value) of ``db`` whose checksum holds; the others are problems."""
        for raw_key, raw in self.txn.cursor(db=db):
            self.read += 1
            if self.progress is not None and self.read % PROGRESS_EVERY == 0:
                self.progress(self.report.path, self.read)
            key = bytes(raw_key)
            try:
                yield key, codec.unseal(key, raw)
            except CorruptRecord as exc:
                self.problem(f"{self.describe(what, key)}: {exc}")

    def describe(self, what: str, key: bytes) -> str:
        """Name an entry: an event by its conversation and version, others by key."""
        if what == "event" and len(key) == keys.EVENT_KEY_SIZE:
            conv, version = keys.decode_event_key(key)
            meta = self.metas.get(conv)
            owner = f"conversation {meta.cid!r}" if meta else f"conversation number {conv}"
            return f"event {version} of {owner}"
        return f"{what} entry {key!r}"

    def run(self) -> None:
        self.sys()
        self.names_and_meta()
        events = self.events()
        self.positions(events)
        self.idempotency()
        self.system_index()
        self.report.conversations = len(self.metas)
        self.report.events = events

    def sys(self) -> None:
        values = dict(self.items(self.dbs.sys, "store counter"))
        found_format = values.get(layout.FORMAT)
        if found_format is None or int.from_bytes(found_format, "big") != codec.STORE_FORMAT:
            self.problem(f"the data file does not hold store format {codec.STORE_FORMAT}")
        store_id = values.get(layout.IDENTITY)
        if self.known is not None and (
            store_id is None or bytes(store_id).decode("utf-8", "replace") != self.known.store_id
        ):
            self.problem(f"the data file belongs to another store than {identity.FILE_NAME}")
        live = values.get(layout.LIVE)
        self.live = 0 if live is None else int.from_bytes(live, "big")
        unlogged = values.get(layout.UNLOGGED_FROM)
        # absent: no conversation is unlogged yet (a store not written since it knew it)
        self.unlogged_from = 1 << 64 if unlogged is None else int.from_bytes(unlogged, "big")

    def names_and_meta(self) -> None:
        for key, value in self.items(self.dbs.names, "name"):
            try:
                cid = keys.decode_name_key(key)
                self.names[cid] = keys.decode_conv_num(value)
            except ValueError as exc:
                self.problem(f"name entry {key!r}: {exc}")
        for key, value in self.items(self.dbs.meta, "metadata"):
            try:
                conv = keys.decode_conv_num(key)
                version, first, count, cid = codec.unpack_meta(value)
            except (ValueError, CorruptRecord) as exc:
                self.problem(f"metadata entry {key!r}: {exc}")
                continue
            self.metas[conv] = layout.Meta(conv, version, first, count, cid)
            if self.names.get(cid) != conv:
                self.problem(f"conversation {cid!r}: its metadata has no matching name entry")
        for cid, conv in self.names.items():
            if conv not in self.metas:
                self.problem(f"conversation {cid!r}: its name entry has no metadata")
        live = sum(1 for meta in self.metas.values() if meta.count > 0)
        if live != self.live:
            self.problem(f"the store counts {self.live} live conversations; {live} hold messages")
        if self.known is not None and len(self.names) < self.known.conversations:
            self.problem(
                f"the data file holds {len(self.names)} conversations; "
                f"{identity.FILE_NAME} records at least {self.known.conversations}"
            )

    def events(self) -> int:
        seen: dict[int, list[tuple[int, str, list[dict[str, Any]]]]] = {}
        total = 0
        for key, value in self.items(self.dbs.events, "event"):
            total += 1
            try:
                conv, version = keys.decode_event_key(key)
            except ValueError as exc:
                self.problem(f"event entry {key!r}: {exc}")
                continue
            meta = self.metas.get(conv)
            where = f"event {version} of conversation number {conv}"
            if meta is None:
                self.problem(f"{where}: its conversation has no metadata")
                continue
            where = f"event {version} of conversation {meta.cid!r}"
            try:
                event = codec.unpack_event(value)
            except CorruptRecord as exc:
                self.problem(f"{where}: {exc}")
                continue
            if event.version != version:
                self.problem(f"{where}: its record holds version {event.version}")
            if not meta.first <= version <= meta.version:
                self.problem(f"{where}: outside the live versions {meta.first}-{meta.version}")
            seen.setdefault(conv, []).append((version, event.kind, list(event.messages)))
            if layout.unlogged(conv, meta.cid, self.unlogged_from):
                self.unlogged_events += 1
        for conv, meta in self.metas.items():
            found = seen.get(conv, [])
            wanted = meta.version - meta.first + 1 if meta.version else 0
            if len(found) != wanted:
                self.problem(
                    f"conversation {meta.cid!r}: {len(found)} event records for "
                    f"versions {meta.first}-{meta.version}"
                )
                continue
            newest_first = [(kind, messages) for _, kind, messages in reversed(found)]
            history = walk_back(newest_first, None)
            if len(history) != meta.count:
                self.problem(
                    f"conversation {meta.cid!r}: its metadata counts {meta.count} messages; "
                    f"its events hold {len(history)}"
                )
                continue
            self.histories[conv] = history
        return total

    def positions(self, events: int) -> None:
        referenced = 0
        last = 0
        for key, value in self.items(self.dbs.positions, "position"):
            try:
                last = keys.decode_position_key(key)
                conv, version = keys.decode_event_key(value)
            except ValueError as exc:
                self.problem(f"position entry {key!r}: {exc}")
                continue
            meta = self.metas.get(conv)
            if meta is None:
                self.problem(f"position {last}: names conversation number {conv}, unknown")
                continue
            if layout.unlogged(conv, meta.cid, self.unlogged_from):
                self.problem(f"position {last}: names {meta.cid!r}, which takes no positions")
                continue
            stored = self.txn.get(bytes(value), db=self.dbs.events) is not None
            if stored:
                referenced += 1
            elif version >= meta.first:
                self.problem(
                    f"position {last}: names event {version} of {meta.cid!r}, which is missing"
                )
        logged = events - self.unlogged_events
        if referenced != logged:
            self.problem(
                f"{logged} event records of conversations with positions, but {referenced} "
                "positions name one"
            )
        if self.known is not None and last < self.known.position:
            self.problem(
                f"the change feed ends at position {last}; {identity.FILE_NAME} records "
                f"at least {self.known.position}"
            )

    def idempotency(self) -> None:
        for key, value in self.items(self.dbs.idem, "idempotency"):
            try:
                conv, name = keys.decode_idempotency_key(key)
            except ValueError as exc:
                self.problem(f"idempotency entry {key!r}: {exc}")
                continue
            meta = self.metas.get(conv)
            version = int.from_bytes(value, "big")
            if meta is None or not 0 < version <= meta.version:
                self.problem(
                    f"idempotency key {name!r} names version {version} of conversation "
                    f"number {conv}, which does not exist"
                )

    def system_index(self) -> None:
        """Every index entry is the system message at its ordinal of the live history,
        and a conversation marked indexed has an entry for each of its system messages
        (entries of a conversation without the marker are never read, but are still
        checked)."""
        if self.dbs.system is None:
            return
        marked: set[int] = set()
        entries: dict[int, dict[int, Any]] = {}
        for key, value in self.items(self.dbs.system, "system-message index"):
            size = len(key)
            if size not in (keys.U64_SIZE, 2 * keys.U64_SIZE):
                self.problem(f"system-message index entry {key!r}: a key of {size} bytes")
                continue
            conv = int.from_bytes(key[: keys.U64_SIZE], "big")
            meta = self.metas.get(conv)
            if meta is None:
                self.problem(
                    f"system-message index entry {key!r}: names conversation number "
                    f"{conv}, which has no metadata"
                )
                continue
            if size == keys.U64_SIZE:
                marked.add(conv)
                if len(value):
                    self.problem(f"conversation {meta.cid!r}: its index marker holds a value")
                continue
            ordinal = int.from_bytes(key[keys.U64_SIZE :], "big")
            try:
                entries.setdefault(conv, {})[ordinal] = codec.unpack_value(value)
            except CorruptRecord as exc:
                self.problem(f"system-message index entry {ordinal} of {meta.cid!r}: {exc}")
        for conv in sorted(marked | entries.keys()):
            self._index_matches(self.metas[conv], entries.get(conv, {}), conv in marked)

    def _index_matches(self, meta: layout.Meta, found: dict[int, Any], marked: bool) -> None:
        """One conversation's index entries against its live history."""
        where = f"conversation {meta.cid!r}: system-message index"
        history = self.histories.get(meta.conv)
        for ordinal, message in sorted(found.items()):
            if ordinal >= meta.count:
                self.problem(f"{where} entry {ordinal} is past its {meta.count} messages")
            elif not isinstance(message, dict) or not is_system(message):
                self.problem(f"{where} entry {ordinal} holds no system message")
            elif history is not None and history[ordinal] != message:
                self.problem(f"{where} entry {ordinal} differs from the message at {ordinal}")
        if not marked or history is None:
            return
        wanted = [i for i, message in enumerate(history) if is_system(message)]
        missing = [i for i in wanted if i not in found]
        if missing:
            shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            self.problem(f"{where} lacks the system messages at {shown}")


def check_store(directory: Path, *, progress: Progress | None = None) -> StoreReport:
    """Verify one store's directory: its pages, then (if they are sound) its records."""
    report = StoreReport(directory)
    report.problems.extend(not_regular(directory))
    if report.problems:
        return report
    if not (directory / DATA_FILE).exists():
        report.problems.append(f"{directory} holds no {DATA_FILE}")
        return report
    report.problems.extend(structure_problems(directory))
    if report.problems:
        return report  # reading a structurally damaged file could abort the process
    return record_problems(directory, report, progress=progress)


def check_directory(data: Path, *, progress: Progress | None = None) -> list[StoreReport]:
    """Verify a data directory offline: its default store and every named store under
    ``stores/``.

    A store in use is refused, not checked. The pages are read with plain file reads
    (`structure_problems`, so a damaged page cannot abort the process in liblmdb), and a
    writer rewrites free pages and moves the tree's root while they are read: a sound
    store being written looks damaged (pages reachable twice, counts that disagree), and
    the advice to restore a backup would lose every write since. Checking a snapshot
    instead would mean handing the file to liblmdb (a compacted copy) before it is
    known to be sound, and a second copy of the store on disk; the refusal names the two
    commands that do it safely (`memoryd backup`, then `memoryd check` of the copy).
    So a store whose directory lock a process holds is refused before anything is read,
    and a store whose data file changed while it was checked (a store started meanwhile,
    or a writer that takes no memoryd lock) is refused after: its findings are not kept.
    The lock is only probed (`dirlock.probe`): a store starting during the check is not
    kept from starting.

    Args:
        data: The data directory.
        progress: Told how far each store's walk is.

    Returns:
        One report per store found (none for an empty directory).

    Raises:
        AlreadyStarted: a store of ``data`` is open in a process (``owner_pid`` names it
            when it can be read), or was written while it was checked.
    """
    directories: list[tuple[Path, str | None]] = []
    if (data / DATA_FILE).exists() or (data / identity.FILE_NAME).exists():
        directories.append((data, None))
    stores = data / "stores"
    if stores.is_dir():
        for directory in sorted(stores.iterdir()):
            if directory.is_dir():
                directories.append((directory, directory.name))
    for directory, name in directories:
        _refuse_if_open(data, directory, name)
    reports = []
    for directory, name in directories:
        before = _file_state(directory)
        report = check_store(directory, progress=progress)
        if _file_state(directory) != before:
            _refuse_if_open(data, directory, name)
            raise AlreadyStarted(
                f"data directory {directory} was written while it was checked, so what the "
                f"check read is no evidence either way. {_offline(data, name)}"
            )
        reports.append(report)
    return reports


def _offline(data: Path, name: str | None) -> str:
    """What to do instead of checking a live store."""
    store = "" if name is None else f" --store {name}"
    return (
        "`memoryd check` verifies a store offline: stop the process using it, or check a "
        f"backup: `memoryd backup --data {data}{store} DEST` (safe while it runs), then "
        "`memoryd check --data DEST`"
    )


def _refuse_if_open(data: Path, directory: Path, name: str | None) -> None:
    """Raise `AlreadyStarted` when a process holds ``directory``'s lock."""
    held, pid = probe(directory)
    if held:
        who = "a process" if pid is None else f"process {pid}"
        raise AlreadyStarted(
            f"data directory {directory} is in use by {who} (a running store). "
            f"{_offline(data, name)}",
            owner_pid=pid,
        )


def _file_state(directory: Path) -> tuple[int, int, int, tuple[int, int] | str] | None:
    """What changes when ``directory/data.mdb`` is written: its inode, size, mtime and
    meta pages' transaction ids (a commit raises one); None when it is no regular
    file (nothing is opened then: a FIFO would block)."""
    path = directory / DATA_FILE
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            return None
        txnids = _meta_txnids(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, txnids
