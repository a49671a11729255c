"""Per-conversation locks: runs on one conversation in one process take turns."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

__all__ = ["active_runs", "conversation_lock", "run_active"]

_guard = threading.Lock()
_locks: dict[Hashable, tuple[threading.Lock, int]] = {}
_active: set[str] = set()


@contextmanager
def conversation_lock(key: Hashable) -> Iterator[None]:
    """Hold the process-wide lock of ``key`` (created on demand, dropped when unused).

    Args:
        key: Identifies the conversation (store name and conversation id).

    Yields:
        Nothing; the lock is held inside the ``with`` block.
    """
    with _guard:
        lock, users = _locks.get(key, (threading.Lock(), 0))
        _locks[key] = (lock, users + 1)
    try:
        with lock:
            yield
    finally:
        with _guard:
            lock, users = _locks[key]
            if users == 1:
                del _locks[key]
            else:
                _locks[key] = (lock, users - 1)


@contextmanager
def run_active(run_id: str) -> Iterator[None]:
    """Mark a run as running in this process for the ``with`` block.

    Args:
        run_id: The run id.

    Yields:
        Nothing.

    Raises:
        ValueError: The run is already running in this process.
    """
    with _guard:
        if run_id in _active:
            raise ValueError(
                f"run {run_id} is still running in this process; resume only runs whose "
                "process died"
            )
        _active.add(run_id)
    try:
        yield
    finally:
        with _guard:
            _active.discard(run_id)


def active_runs() -> frozenset[str]:
    """The ids of the runs running in this process now."""
    with _guard:
        return frozenset(_active)
