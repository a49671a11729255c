"""Per-conversation locks: runs on one conversation in one process take turns.

A run marks itself active (`run_active`: one run id runs once at a time in a process)
and holds its conversation's lock (`conversation_lock`: created on demand, dropped when
unused); `run_turn` does both with one pass through the registry's guard on the way in
and one on the way out. They are plain context-manager objects, not generators, as
every run enters and leaves them.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from types import TracebackType

__all__ = ["active_runs", "conversation_lock", "run_active", "run_turn"]

_guard = threading.Lock()
_active: set[str] = set()


class _Entry:
    """A conversation's lock and how many runs hold it or wait for it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


_locks: dict[Hashable, _Entry] = {}


def _running(run_id: str) -> ValueError:
    """The error for a run that is already running in this process."""
    return ValueError(
        f"run {run_id} is still running in this process; resume only runs whose process died"
    )


def _claim_run(run_id: str) -> None:
    """Mark ``run_id`` active (call under ``_guard``)."""
    if run_id in _active:
        raise _running(run_id)
    _active.add(run_id)


def _join(key: Hashable) -> threading.Lock:
    """Count one more user of ``key``'s lock, made on demand (call under ``_guard``)."""
    entry = _locks.get(key)
    if entry is None:
        entry = _locks[key] = _Entry()
    entry.users += 1
    return entry.lock


def _leave(key: Hashable) -> None:
    """Count one user of ``key``'s lock less, dropping it when unused (under ``_guard``)."""
    entry = _locks[key]
    entry.users -= 1
    if not entry.users:
        del _locks[key]


class run_turn:  # noqa: N801 (used like the function-style context managers beside it)
    """Mark run ``run_id`` active and hold the lock of ``key`` for the ``with`` block.

    Args:
        run_id: The run id.
        key: Identifies the conversation (store name and conversation id).

    Raises:
        ValueError: On entry, when the run is already running in this process.
    """

    __slots__ = ("_key", "_lock", "_run_id")

    def __init__(self, run_id: str, key: Hashable) -> None:
        self._run_id = run_id
        self._key = key

    def __enter__(self) -> None:
        run_id, key = self._run_id, self._key
        with _guard:  # `_claim_run` and `_join` in one pass, inline: every run comes here
            if run_id in _active:
                raise _running(run_id)
            entry = _locks.get(key)
            if entry is None:
                entry = _locks[key] = _Entry()
            entry.users += 1
            _active.add(run_id)
        lock = self._lock = entry.lock
        try:
            lock.acquire()
        except BaseException:
            with _guard:
                _leave(key)
                _active.discard(run_id)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._lock.release()
        key = self._key
        with _guard:  # `_leave`, inline
            entry = _locks[key]
            entry.users -= 1
            if not entry.users:
                del _locks[key]
            _active.discard(self._run_id)


class conversation_lock:  # noqa: N801 (a context manager named like the function it was)
    """Hold the process-wide lock of ``key`` (created on demand, dropped when unused).

    Args:
        key: Identifies the conversation (store name and conversation id).
    """

    __slots__ = ("_key", "_lock")

    def __init__(self, key: Hashable) -> None:
        self._key = key

    def __enter__(self) -> None:
        with _guard:
            lock = self._lock = _join(self._key)
        try:
            lock.acquire()
        except BaseException:
            with _guard:
                _leave(self._key)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._lock.release()
        with _guard:
            _leave(self._key)


class run_active:  # noqa: N801 (a context manager named like the function it was)
    """Mark a run as running in this process for the ``with`` block.

    Args:
        run_id: The run id.

    Raises:
        ValueError: On entry, when the run is already running in this process.
    """

    __slots__ = ("_run_id",)

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id

    def __enter__(self) -> None:
        with _guard:
            _claim_run(self._run_id)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with _guard:
            _active.discard(self._run_id)


def active_runs() -> frozenset[str]:
    """The ids of the runs running in this process now."""
    with _guard:
        return frozenset(_active)
