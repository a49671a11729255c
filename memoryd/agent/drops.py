"""The journals of failed runs that this process could not drop, to drop later.

A run that raises drops its journal (`memoryd.agent.journal.RunJournal.discard`), so a
later recovery does not commit a turn whose caller was told it failed. When the drop
fails too (a full disk refuses every write, a store stops answering), the run would
stay pending for good, and a recovery would finish it beside the caller's retry. Such
a run is noted here with its journal's version; the next run of this process on that
store, and every listing of its pending runs, drop it once the store takes writes
again: claimed first, compare-and-set on that version, so a run that someone resumed
or claimed since (the same ``request_id`` called again, another process) is left to
them.

The notes live as long as the process: a run noted here whose process dies stays
pending in its store (``memoryd runs`` lists it, orphaned; ``--discard`` drops it).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.store.handle import StoreHandle

__all__ = ["MAX_UNDROPPED", "UNDROPPED", "Undropped"]

MAX_UNDROPPED = 10_000
"""At most this many runs are noted per store; past it the oldest note is forgotten (its
run stays pending in the store, as it would without the note)."""


class Undropped:
    """Run ids, with their journals' versions, per store (thread-safe)."""

    def __init__(self, limit: int = MAX_UNDROPPED) -> None:
        self._lock = threading.Lock()
        self._runs: dict[StoreHandle, dict[str, int]] = {}
        self._limit = limit

    def __bool__(self) -> bool:
        """True while some run waits to be dropped (one check on every run's start)."""
        return bool(self._runs)

    def note(self, store: StoreHandle, run_id: str, version: int) -> None:
        """Note that ``run_id``'s journal, at ``version``, is to be dropped."""
        with self._lock:
            runs = self._runs.setdefault(store, {})
            runs.pop(run_id, None)
            runs[run_id] = version
            while len(runs) > self._limit:
                del runs[next(iter(runs))]

    def of(self, store: StoreHandle) -> dict[str, int]:
        """The runs noted for ``store`` (a copy), oldest first."""
        with self._lock:
            return dict(self._runs.get(store, {}))

    def forget(self, store: StoreHandle, run_id: str) -> None:
        """Forget ``run_id``: dropped, or someone else's now."""
        with self._lock:
            runs = self._runs.get(store)
            if runs is not None:
                runs.pop(run_id, None)
                if not runs:
                    del self._runs[store]


UNDROPPED = Undropped()
"""This process's notes."""
