"""Writers for the reliability checks: keyed writer threads and a store with or without fsync.

``KeyedWriters`` runs in-process writer threads that record every write as a
``tools.history_check.Op``; ``open_store`` starts the store a writer process
appends to, durable or not (the negative control).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import memoryd
from memoryd import messages
from memoryd.store import lookup
from memoryd.store.lmdb.config import LmdbConfig
from memoryd.store.lmdb.handle import LMDB
from tools.history_check import Op

__all__ = ["KeyedWriters", "finished", "open_store"]


def finished(kind: str, client: str, cid: str, start: float, ok: bool, **fields: Any) -> Op:
    """An operation that ends now.

    Args:
        kind: ``"append"`` or ``"read"``.
        client: who issued it.
        cid: the conversation.
        start: when the call began (``time.monotonic()``).
        ok: True if it was acknowledged or answered.
        **fields: ``key`` for an append, ``seen`` for a read.

    Returns:
        The ``Op``, with ``end`` set to the current ``time.monotonic()``.
    """
    return Op(kind=kind, client=client, cid=cid, start=start, end=time.monotonic(), ok=ok, **fields)


def open_store(path: str | Path, *, name: str, durable: bool) -> memoryd.StoreHandle:
    """Start an LMDB store at ``path``.

    Args:
        path: the data directory.
        name: the store's name.
        durable: True for ``LmdbStore.start`` (fsync before every acknowledgement);
            False for the same engine opened with ``durable=False``, the negative
            control that must lose acknowledged writes on a power loss.

    Returns:
        The store's handle.
    """
    if durable:
        return memoryd.LmdbStore.start(path, name=name)
    config = LmdbConfig(name=name, path=Path(path), durable=False)
    return lookup.start(LMDB, config)


class KeyedWriters:
    """Writer threads appending keyed messages to one store until the block ends.

    Writer ``n`` appends ``w{n}-0``, ``w{n}-1``, ... to conversation ``c{n % cids}``,
    each message's text also being its idempotency key. A write that raises one of
    ``retry_on`` is tried again with the same key, ``attempts`` times in all; any
    other error ends that writer's thread. Every write is recorded as an append
    ``Op`` (acknowledged or not).

    Args:
        store: a started store handle.
        writers: how many writer threads.
        cids: how many conversations they share (default: one per writer).
        retry_on: the errors after which a write is retried.
        attempts: the most tries of one write.
        join_s: how long leaving the block waits for each thread.
    """

    def __init__(
        self,
        store: Any,
        *,
        writers: int = 4,
        cids: int | None = None,
        retry_on: tuple[type[BaseException], ...] = (),
        attempts: int = 1,
        join_s: float = 10.0,
    ) -> None:
        self.store = store
        self.conversations = [f"c{k}" for k in range(cids or writers)]
        self.slowest_s = 0.0
        """The longest single call so far, in seconds."""
        self.hung = 0
        """Threads still running after leaving the block."""
        self._retry_on = retry_on
        self._attempts = attempts
        self._join_s = join_s
        self._ops: list[Op] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._write, args=(n,), daemon=True) for n in range(writers)
        ]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(self._join_s)
        self.hung = sum(1 for thread in self._threads if thread.is_alive())

    def history(self) -> list[Op]:
        """Every write recorded so far."""
        with self._lock:
            return list(self._ops)

    def acknowledged(self) -> list[str]:
        """The keys acknowledged so far, in the order their writes returned."""
        with self._lock:
            return [op.key for op in self._ops if op.ok]

    def contents(self) -> dict[str, list[str]]:
        """Each conversation's message texts, read from the store now."""
        return {cid: [m["content"] for m in self.store.get(cid)] for cid in self.conversations}

    def _write(self, n: int) -> None:
        cid = self.conversations[n % len(self.conversations)]
        i = 0
        while not self._stop.is_set():
            key = f"w{n}-{i}"
            first, ok = time.monotonic(), False
            for _ in range(self._attempts):
                start = time.monotonic()
                try:
                    self.store.add(cid, [messages.user(key)], idempotency_key=key)
                    ok = True
                except self._retry_on:
                    ok = False
                took = time.monotonic() - start
                with self._lock:
                    self.slowest_s = max(self.slowest_s, took)
                if ok:
                    break
            with self._lock:
                self._ops.append(finished("append", f"w{n}", cid, first, ok, key=key))
            i += 1
