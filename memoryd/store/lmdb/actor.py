"""LmdbStoreActor: the store actor of an LMDB-backed store; owns its `LmdbEngine`.

The group commit, answers and hand-back are `StoreActor`'s; this class opens the
environment and turns a batch of write requests into the event-log writes of one
LMDB write transaction (one fsync for a durable store).
"""

from __future__ import annotations

import shutil
from functools import partial
from typing import Any

from memoryd.events import EventKind
from memoryd.store.actor import StoreActor
from memoryd.store.lmdb import writes
from memoryd.store.lmdb.config import LmdbConfig
from memoryd.store.lmdb.engine import LmdbEngine
from memoryd.store.lmdb.layout import Counters, Dbs
from memoryd.store.requests import Add, Clear, Fork, Import, Pop, Record, WriteRequest

__all__ = ["LmdbStoreActor"]

_APPENDED = EventKind.APPENDED.value


class LmdbStoreActor(StoreActor[LmdbConfig, LmdbEngine]):
    """Owns one LMDB environment; the only writer to it.

    Args:
        config: the data directory and map sizes; restarts reuse it.
    """

    def _open_engine(self) -> LmdbEngine:
        """Open the environment (created 0700). Runs in the actor's thread."""
        cfg = self.config
        return LmdbEngine(
            cfg.path, durable=cfg.durable, map_size=cfg.map_size, max_map_size=cfg.max_map_size
        )

    def _write_batch(
        self, engine: LmdbEngine, requests: list[WriteRequest], now: float
    ) -> list[tuple[bool, Any]]:
        """Write the batch in one transaction. Runs in the actor's thread."""
        return engine.write_batch([partial(_apply, request, now) for request in requests])

    def _opened_fields(self) -> dict[str, Any]:
        return {"path": str(self.config.path), "durable": self.config.durable}

    @classmethod
    def discard(cls, config: LmdbConfig) -> None:
        """Delete an ephemeral store's directory once its actor has stopped for good."""
        if config.delete_on_stop:
            shutil.rmtree(config.path, ignore_errors=True)


def _apply(request: WriteRequest, now: float, txn: Any, dbs: Dbs, ctr: Counters) -> Any:
    if isinstance(request, Add):
        version = writes.append(
            txn,
            dbs,
            ctr,
            request.cid,
            kind=_APPENDED,
            messages=request.messages,
            data=None,
            idempotency_key=request.idempotency_key,
            expected_version=request.expected_version,
            now=now,
        )
        if request.then_clear is not None:  # same transaction: both or neither
            writes.clear(txn, dbs, ctr, request.then_clear, now=now)
        return version
    if isinstance(request, Clear):
        return writes.clear(txn, dbs, ctr, request.cid, now=now)
    if isinstance(request, Pop):
        return writes.pop(txn, dbs, ctr, request.cid, now=now)
    if isinstance(request, Fork):
        return writes.fork(
            txn, dbs, ctr, request.source, request.target, at_version=request.at_version, now=now
        )
    if isinstance(request, Record):
        return writes.append(
            txn,
            dbs,
            ctr,
            request.cid,
            kind=request.kind,
            messages=request.messages,
            data=request.data,
            idempotency_key=request.idempotency_key,
            expected_version=request.expected_version,
            now=now,
            supersede=request.supersede,
        )
    if isinstance(request, Import):
        return writes.import_events(txn, dbs, ctr, request.cid, request.events)
    raise TypeError(f"unknown write request {request!r}")
