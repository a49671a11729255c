"""LmdbStore and EphemeralStore: handles on LMDB-backed store actors.

Writes go to the owning actor (group commit, fsync before the answer). Reads
skip the actor, like an ETS ``protected`` table: the caller's thread opens its
own read-only transaction on the store's current environment, so a read costs
no actor round trip and never waits for the writer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from memoryd._deadline import until
from memoryd.errors import EngineBusy, EngineClosed
from memoryd.events import Change, Event
from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES
from memoryd.store import lookup
from memoryd.store.actor_handle import ActorStoreHandle
from memoryd.store.config import DEFAULT_CALL_TIMEOUT_S
from memoryd.store.handle import INLINE_READ_LIMIT, WouldWait, would_wait
from memoryd.store.lmdb import reads
from memoryd.store.lmdb.actor import LmdbStoreActor
from memoryd.store.lmdb.config import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE, LmdbConfig
from memoryd.store.lmdb.engine import LmdbEngine, forget_trusted
from memoryd.store.lmdb.layout import Dbs, meta_of
from memoryd.store.spec import Backend, StoreSpec

__all__ = ["EPHEMERAL", "LMDB", "EphemeralStore", "LmdbStore"]

T = TypeVar("T")
_POLL_S = 0.05


class _LmdbHandle(ActorStoreHandle):
    """Shared implementation of the LMDB-backed handles: reads skip the actor.

    Args:
        spec: the store's spec; its config is an `LmdbConfig`.

    Raises:
        TypeError: the spec's config is not an `LmdbConfig`.
    """

    config_type = LmdbConfig

    def __init__(self, spec: StoreSpec[Any]) -> None:
        super().__init__(spec)
        assert isinstance(spec.config, LmdbConfig)
        self._path = spec.config.path

    @property
    def path(self) -> Path:
        """The data directory."""
        return self._path

    def _engine(self, deadline: float) -> LmdbEngine:
        engine: LmdbEngine = super()._engine(deadline)
        return engine

    def reads_inline(self, records: int | None) -> bool:
        """True for at most `INLINE_READ_LIMIT` records while the environment is open."""
        if records is None or not 0 <= records <= INLINE_READ_LIMIT:
            return False
        engine = lookup.engine(self.name)
        return engine is not None and not engine.closed

    def _read(self, fn: Callable[[Any, Dbs], T]) -> T:
        if would_wait():  # an inline read: now or never
            engine = lookup.engine(self.name)
            if engine is None or engine.closed:
                raise WouldWait(f"store {self.name!r} is restarting")
            try:
                value: T = engine.read(fn, wait=False)
            except (EngineClosed, EngineBusy):
                raise WouldWait(f"store {self.name!r} is restarting or growing") from None
            return value
        deadline = until(self.call_timeout_s)
        while True:
            engine = self._engine(deadline)
            try:
                return engine.read(fn)
            except EngineClosed:
                continue

    # -- backend hooks ----------------------------------------------------------------

    def _get(self, cid: str, limit: int | None, at_version: int | None) -> list[dict[str, Any]]:
        def read(txn: Any, dbs: Dbs) -> list[dict[str, Any]]:
            meta = meta_of(txn, dbs, cid, index=False)
            return reads.history(txn, dbs, meta, limit=limit, at_version=at_version, cid=cid)

        return self._read(read)

    def _get_system(self, cid: str, limit: int) -> list[dict[str, Any]]:
        def read(txn: Any, dbs: Dbs) -> list[dict[str, Any]]:
            return reads.history_with_system(txn, dbs, meta_of(txn, dbs, cid), limit)

        return self._read(read)

    def _version(self, cid: str) -> int:
        def read(txn: Any, dbs: Dbs) -> int:
            meta = meta_of(txn, dbs, cid, index=False)
            return 0 if meta is None else meta.version

        return self._read(read)

    def _events(self, cid: str, after: int, limit: int | None) -> list[Event]:
        return self._read(
            lambda txn, dbs: reads.events(txn, dbs, meta_of(txn, dbs, cid), after, limit)
        )

    def _conversations(
        self, prefix: str, after: str | None, limit: int | None, include_empty: bool
    ) -> list[str]:
        return self._read(
            lambda txn, dbs: reads.conversations(
                txn, dbs, prefix=prefix, after=after, limit=limit, include_empty=include_empty
            )
        )

    def _tail(self, after: int, limit: int, timeout: float) -> list[Change]:
        wait_until = time.monotonic() + timeout
        while True:
            deadline = until(self.call_timeout_s)
            engine = self._engine(deadline)
            seen = engine.last_position
            try:
                changes = engine.read(
                    lambda txn, dbs: reads.tail(txn, dbs, after=after, limit=limit)
                )
            except EngineClosed:
                continue
            remaining = wait_until - time.monotonic()
            if changes or remaining <= 0:
                return changes
            engine.wait_for_change(seen, remaining)

    def stats(self) -> dict[str, Any]:
        """Counts and sizes: conversations, events, map size, fsyncs, appends, batch size."""
        deadline = until(self.call_timeout_s)
        while True:
            engine = self._engine(deadline)
            try:
                out = engine.stats()
            except EngineClosed:
                continue
            out["name"] = self.name
            out["kind"] = self.kind
            out["recreated_empty"] = lookup.recreated_empty(self.name)
            commits = out["commits"]
            out["mean_batch"] = out["appends"] / commits if commits else 0.0
            return out


class LmdbStore(_LmdbHandle):
    """A durable store in an LMDB data directory: nothing is acknowledged before fsync."""

    @classmethod
    def start(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        map_size: int = DEFAULT_MAP_SIZE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        max_batch: int = 1024,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
    ) -> LmdbStore:
        """Start a store actor on ``path`` (created 0700 if missing) under the app's tree.

        Args:
            path: the data directory; one store (and one process) owns it at a time.
            name: the registered name (default ``"lmdb:" + the real path``).
            map_size: initial LMDB map size; it grows by itself when full.
            max_message_bytes: the largest message accepted.
            call_timeout_s: the deadline of every call through this handle.
            max_batch: the most writes committed in one transaction.
            max_map_size: the map never grows past this; a write that needs more
                raises ``StorageError`` and writes nothing, and reads keep working.

        Returns:
            A handle on the running store.

        Raises:
            AlreadyStarted: the name or the directory is in use (names the owner's pid).
            StorageError: the environment could not be opened.
        """
        real = Path(os.path.realpath(os.fspath(path)))
        config = LmdbConfig(
            name=name if name is not None else f"lmdb:{real}",
            path=real,
            durable=True,
            map_size=map_size,
            max_message_bytes=max_message_bytes,
            call_timeout_s=call_timeout_s,
            max_batch=max_batch,
            max_map_size=max_map_size,
        )
        return lookup.start(LMDB, config)


class EphemeralStore(_LmdbHandle):
    """The ETS analogue: the same engine in a private temporary directory, without fsync.

    It survives a crash of its actor (the restarted actor reopens the directory)
    and is deleted when the store is stopped.
    """

    @classmethod
    def start(
        cls,
        *,
        name: str | None = None,
        map_size: int = 1 << 30,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        max_batch: int = 1024,
    ) -> EphemeralStore:
        """Start an ephemeral store.

        Raises:
            AlreadyStarted: the name is in use.
        """
        store_name = name if name is not None else f"ephemeral:{uuid.uuid4().hex[:12]}"
        directory = Path(tempfile.mkdtemp(prefix="memoryd-ephemeral-"))
        config = LmdbConfig(
            name=store_name,
            path=directory,
            durable=False,
            map_size=map_size,
            max_message_bytes=max_message_bytes,
            call_timeout_s=call_timeout_s,
            max_batch=max_batch,
            delete_on_stop=True,
        )
        try:
            return lookup.start(EPHEMERAL, config)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise


class _EphemeralStoreActor(LmdbStoreActor):
    """`LmdbStoreActor` in a directory of its own, removed once it has stopped for good."""

    @classmethod
    def discard(cls, config: LmdbConfig) -> None:
        """Delete the directory, and what this process remembers of its data file: each
        ephemeral store has a new directory, so the entry would never be read again."""
        super().discard(config)
        forget_trusted(config.path)


LMDB = Backend(kind="lmdb", actor=LmdbStoreActor, handle=LmdbStore)
"""The durable LMDB backend: `LmdbStore` handles on `LmdbStoreActor` actors."""

EPHEMERAL = Backend(kind="ephemeral", actor=_EphemeralStoreActor, handle=EphemeralStore)
"""The ephemeral backend: the same actor without fsync, in a directory deleted on stop."""
