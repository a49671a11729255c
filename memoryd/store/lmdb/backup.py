"""Online backups: a consistent copy of a store's LMDB environment while writers run.

The copy is taken from one read-only transaction (LMDB's MVCC snapshot), so it
holds exactly the writes committed before that transaction began, and writers
are never blocked. The copy is compacted (free pages dropped), fsynced, and its
directory and the directory's parent are fsynced before ``backup`` returns.
The copy gets its own identity file (`memoryd.store.lmdb.identity`), so the backup
directory, put in place of a damaged store's directory, opens as that store.

A store open in another process (a daemon) is copied through an environment of this
process whose map is as large as the writer's may ever grow (`_COPY_MAP_BYTES`): LMDB
refuses a read transaction whose snapshot reaches past the reader's own map
(``MDB_MAP_RESIZED``), and a writer that grows the file during the copy would else fail
the backup. Should it happen anyway (a writer that is no memoryd store), the copy is
started again, a few times.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import lmdb

from memoryd import codec
from memoryd.errors import EngineClosed, StorageError
from memoryd.store import lookup
from memoryd.store.lmdb import identity, keys, layout
from memoryd.store.lmdb.check import MAX_READERS, not_regular
from memoryd.store.lmdb.config import DEFAULT_MAX_MAP_SIZE
from memoryd.store.lmdb.dirlock import DATA_FILE, fsync_dir, make_dir
from memoryd.store.lmdb.engine import LmdbEngine

__all__ = ["backup"]

_MAX_DBS = 16
_COPY_MAP_BYTES = DEFAULT_MAX_MAP_SIZE
"""The map of the environment a closed (or other process's) store is copied through: a
store's map never grows past this, so its snapshots always fit. Read-only, it costs
address space only; the file is never extended."""
_COPY_ATTEMPTS = 3


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _running_engine(source: Any) -> LmdbEngine | None:
    """The live engine of a store handle or of a data directory open in this process."""
    name = None if isinstance(source, str | os.PathLike) else getattr(source, "name", None)
    if isinstance(name, str):
        engine = lookup.engine(name)
        if not isinstance(engine, LmdbEngine):
            raise StorageError(
                f"store {name!r} is not a running LMDB store; back up its directory instead"
            )
        return engine
    real = Path(os.path.realpath(os.fspath(source)))
    for engine in lookup.engines():
        if isinstance(engine, LmdbEngine) and engine.path == real and not engine.closed:
            return engine
    return None


def backup(source: Any, dest: str | os.PathLike[str]) -> Path:
    """Write a consistent, compacted copy of a store into the new directory ``dest``.

    Safe while the store is written to: the copy is one snapshot (every write
    acknowledged before the call is in it; later ones may be). The copy opens
    as a store with ``LmdbStore.start(dest)``.

    Args:
        source: a running LMDB-backed store handle (``LmdbStore``/``EphemeralStore``),
            or the path of a data directory (running in this process, in another
            process, or closed).
        dest: the directory to create; it must not exist or be empty.

    Returns:
        The path of the copied data file (``dest/data.mdb``).

    Raises:
        StorageError: the source is not a store, ``dest`` is not empty, or LMDB failed.
    """
    target = Path(os.path.realpath(os.fspath(dest)))
    if target.exists() and any(target.iterdir()):
        raise StorageError(f"backup destination {target} is not empty; choose a new directory")
    created = not target.exists()
    try:
        make_dir(target)  # in the try: an interrupt as it returns leaves no empty copy
        engine = _running_engine(source)
        if engine is not None:
            _copy_running(engine, target)
        else:
            _copy_closed(Path(os.fspath(source)), target)
        data = target / DATA_FILE
        os.chmod(data, 0o600)
        _fsync(data)
        identity.write(target, _identity_of_copy(target))
    except BaseException as exc:
        _remove_partial(target, created)  # a failed backup leaves no half copy behind
        if isinstance(exc, lmdb.Error):
            raise StorageError(f"backup to {target} failed: {exc}") from exc
        raise
    fsync_dir(target)
    fsync_dir(target.parent)
    return data


def _remove_partial(target: Path, created: bool) -> None:
    """Remove what a failed backup wrote: ``target`` itself when it made it, else its
    contents (it was empty before)."""
    if created:
        shutil.rmtree(target, ignore_errors=True)
        return
    for entry in target.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _identity_of_copy(target: Path) -> identity.Identity:
    """The identity of the copy in ``target``: its store's id and its own counters."""
    env = lmdb.open(str(target), readonly=True, max_dbs=_MAX_DBS, create=False, lock=False)
    try:
        sys_db = env.open_db(layout.SYS_DB, create=False)
        names = env.open_db(keys.NAMES_DB, create=False)
        positions = env.open_db(keys.POSITIONS_DB, create=False)
        with env.begin() as txn:
            store_id = layout.get(txn, sys_db, layout.IDENTITY)
            conversations = layout.kept_conversations(txn, names, sys_db)
            cursor = txn.cursor(db=positions)
            position = keys.decode_position_key(cursor.key()) if cursor.last() else 0
    finally:
        env.close()
    if store_id is None:
        raise StorageError(f"the copy in {target} holds no store id; its source is no store")
    return identity.Identity(
        store_id=bytes(store_id).decode(),
        format=codec.STORE_FORMAT,
        conversations=conversations,
        position=position,
    )


def _copy_running(engine: LmdbEngine, target: Path) -> None:
    try:
        with engine.reading() as txn:
            engine.env.copy(str(target), compact=True, txn=txn)
    except EngineClosed:
        raise StorageError(f"store at {engine.path} closed during the backup; try again") from None


def _copy_closed(path: Path, target: Path) -> None:
    odd = not_regular(path)
    if odd:
        raise StorageError(f"{path} cannot be backed up: {'; '.join(odd)}")
    if not (path / DATA_FILE).exists():
        raise StorageError(f"{path} holds no LMDB data file; nothing to back up")
    for attempt in range(1, _COPY_ATTEMPTS + 1):
        env = lmdb.open(
            str(path),
            readonly=True,
            max_dbs=_MAX_DBS,
            create=False,
            lock=True,
            map_size=_COPY_MAP_BYTES,
            max_readers=MAX_READERS,
        )
        try:
            env.copy(str(target), compact=True)
            return
        except lmdb.MapResizedError:
            if attempt == _COPY_ATTEMPTS:
                raise
            # a writer grew past even this map: a new environment maps the file as it is
            (target / DATA_FILE).unlink(missing_ok=True)  # LMDB creates the copy exclusively
        finally:
            env.close()
