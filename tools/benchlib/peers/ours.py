"""memoryd's LmdbStore, through its public handle only."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from benchlib.peers.base import Peer, ProgressFn
from benchlib.workload import Message

_names = itertools.count(1)
_open_lock = threading.Lock()
_open_stores = 0
_logging_configured = False


def _quiet_logging(memoryd: Any) -> None:
    """Send memoryd's log events to stderr at warning level, once; stdout is the table."""
    global _logging_configured  # noqa: PLW0603 - one process-wide switch
    configure = getattr(getattr(memoryd, "logging", None), "configure", None)
    if configure is None:
        try:
            from memoryd.logging import configure
        except ImportError:
            return
    with _open_lock:
        if not _logging_configured:
            configure(level="warning")
            _logging_configured = True


class OursPeer(Peer):
    """``memoryd.LmdbStore``: durable (fsync before ack), group commit across threads.

    Args:
        populate_batch: messages per ``add`` call when populating a read store.
        populate_threads: concurrent callers when populating, so commits are grouped.
    """

    name: ClassVar[str] = "ours"

    def __init__(self, *, populate_batch: int = 50, populate_threads: int = 16) -> None:
        self._batch = populate_batch
        self._threads = populate_threads
        self._store: Any = None
        self._memoryd: Any = None

    @classmethod
    def probe(cls) -> str | None:
        """Return why memoryd.LmdbStore is unusable, or None."""
        try:
            import memoryd
        except ImportError as exc:
            return f"memoryd: {exc}"
        if not hasattr(memoryd, "LmdbStore"):
            return "memoryd.LmdbStore does not exist yet"
        return None

    def notes(self) -> str:
        """Return the store's configuration."""
        import memoryd

        version = getattr(memoryd, "__version__", "?")
        return (
            f"memoryd {version} LmdbStore.start(dir): durable (fsync before ack), group commit; "
            "add(cid, [msg]) per append; get(cid, limit=n) / get(cid) for reads"
        )

    def setup(self, directory: Path) -> None:
        """Start a store named ``bench-<n>`` on ``directory``."""
        import memoryd

        self._start(memoryd, lambda name: memoryd.LmdbStore.start(str(directory), name=name))

    def _start(self, memoryd: Any, start: Callable[[str], Any]) -> None:
        """Start the store ``start(name)`` returns, counted for `close`."""
        global _open_stores  # noqa: PLW0603 - counts stores across adapters
        _quiet_logging(memoryd)
        self._memoryd = memoryd
        self._store = start(f"bench-{next(_names)}")
        with _open_lock:
            _open_stores += 1

    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """Append one message as one event."""
        self._store.add(cid, [message])

    def read_last(self, cid: str, n: int) -> list[Any]:
        """Return ``get(cid, limit=n)``."""
        return list(self._store.get(cid, limit=n))

    def read_all(self, cid: str) -> list[Any]:
        """Return ``get(cid)``."""
        return list(self._store.get(cid))

    def stats(self) -> Mapping[str, Any] | None:
        """Return ``store.stats()``."""
        return dict(self._store.stats())

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """Add each conversation in ``populate_batch``-message events, many callers at once.

        Each conversation is written by one task, in order; tasks run concurrently so
        the store can group their commits.
        """
        done = 0
        lock = threading.Lock()

        def write(item: tuple[str, list[Message]]) -> None:
            nonlocal done
            cid, messages = item
            for start in range(0, len(messages), self._batch):
                self._store.add(cid, messages[start : start + self._batch])
            with lock:
                done += 1
                progress(done)

        with ThreadPoolExecutor(self._threads, thread_name_prefix="bench-populate") as pool:
            for _ in pool.map(write, conversations):
                pass

    def close(self) -> None:
        """Stop the store; the last one open also shuts memoryd down (next phase: fresh tree)."""
        global _open_stores  # noqa: PLW0603
        if self._store is None:
            return
        try:
            self._store.stop()
        finally:
            self._store = None
            with _open_lock:
                _open_stores -= 1
                last = _open_stores == 0
            if last and self._memoryd is not None:
                self._memoryd.shutdown()
