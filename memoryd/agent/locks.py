"""Per-conversation locks: runs on one conversation in one process take turns.

A run marks itself active (`run_active`: one run id runs once at a time in a process)
and holds its conversation's lock (`conversation_lock`: created on demand, dropped when
unused); `run_turn` does both, one after the other. A conversation's lock entry is kept
under the guard of its stripe, and the active runs need no guard, so runs on different
conversations do not queue on a lock of the whole process. They are plain
context-manager objects, not generators, as every run enters and leaves them; an event
loop's run (`Agent.arun`) enters them with ``async with``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Hashable
from types import TracebackType
from typing import Any

__all__ = ["active_runs", "conversation_lock", "run_active", "run_turn"]

POLL_MIN_S = 0.0002
"""An event loop's run finding its conversation's lock held tries again after this..."""
POLL_MAX_S = 0.01
"""...and after twice as long each time, up to this."""

_STRIPES = 64
_guards = tuple(threading.Lock() for _ in range(_STRIPES))
"""Each conversation's entry in `_locks` is made, counted and dropped under the guard
of its stripe (its key's hash modulo `_STRIPES`), so runs on different conversations
seldom share a guard. A single guard for every run makes concurrent callers queue on
it: a thread the interpreter switches out while holding it stalls every other (eight
callers measured at a third of their rate)."""

_active: dict[str, object] = {}
"""The runs running in this process, each to its claim's token. A claim is one
``setdefault`` (a single dict operation on a str key, which the interpreter does at
once), and only the claim's owner removes its token, so neither needs a guard."""


def _guard(key: Hashable) -> threading.Lock:
    """The guard of ``key``'s stripe."""
    return _guards[hash(key) % _STRIPES]


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


def _claim_run(run_id: str) -> object:
    """Mark ``run_id`` active; its token, for `_release_run`."""
    token = object()
    if _active.setdefault(run_id, token) is not token:
        raise _running(run_id)
    return token


def _release_run(run_id: str, token: object) -> None:
    """Unmark ``run_id``, claimed with ``token``."""
    if _active.get(run_id) is token:
        del _active[run_id]


def _join(key: Hashable) -> threading.Lock:
    """Count one more user of ``key``'s lock, made on demand."""
    with _guard(key):
        entry = _locks.get(key)
        if entry is None:
            entry = _locks[key] = _Entry()
        entry.users += 1
        return entry.lock


def _leave(key: Hashable) -> None:
    """Count one user of ``key``'s lock less, dropping it when unused."""
    with _guard(key):
        entry = _locks[key]
        entry.users -= 1
        if not entry.users:
            del _locks[key]


async def _exit_async(
    self: Any,
    kind: type[BaseException] | None,
    error: BaseException | None,
    trace: TracebackType | None,
) -> None:
    """The ``__aexit__`` of the context managers below: ``async with`` leaves as
    ``with`` does (releasing never waits)."""
    self.__exit__(kind, error, trace)


class run_turn:  # noqa: N801 (used like the function-style context managers beside it)
    """Mark run ``run_id`` active and hold the lock of ``key`` for the ``with`` block.

    Args:
        run_id: The run id.
        key: Identifies the conversation (store name and conversation id).

    Raises:
        ValueError: On entry, when the run is already running in this process.
    """

    __slots__ = ("_conversation", "_run_id", "_token")

    def __init__(self, run_id: str, key: Hashable) -> None:
        self._run_id = run_id
        self._conversation = conversation_lock(key)

    def __enter__(self) -> None:
        token = self._token = _claim_run(self._run_id)
        try:
            self._conversation.__enter__()
        except BaseException:
            _release_run(self._run_id, token)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._conversation.__exit__(kind, error, trace)
        _release_run(self._run_id, self._token)

    async def __aenter__(self) -> None:
        """`__enter__` from an event loop: the lock is waited for without blocking it."""
        token = self._token = _claim_run(self._run_id)
        try:
            await self._conversation.__aenter__()
        except BaseException:
            _release_run(self._run_id, token)
            raise

    __aexit__ = _exit_async


class conversation_lock:  # noqa: N801 (a context manager named like the function it was)
    """Hold the process-wide lock of ``key`` (created on demand, dropped when unused).

    Args:
        key: Identifies the conversation (store name and conversation id).
    """

    __slots__ = ("_key", "_lock")

    def __init__(self, key: Hashable) -> None:
        self._key = key

    def __enter__(self) -> None:
        lock = self._lock = _join(self._key)
        try:
            lock.acquire()
        except BaseException:
            _leave(self._key)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._lock.release()
        _leave(self._key)

    async def __aenter__(self) -> None:
        """`__enter__` from an event loop, never blocking it.

        The lock is shared with threads' runs, so it cannot be awaited: it is tried,
        and tried again after a pause that doubles up to `POLL_MAX_S` while another
        run holds it. No worker thread waits on it: a run holding it may need one.
        """
        lock = self._lock = _join(self._key)
        try:
            pause = POLL_MIN_S
            while not lock.acquire(blocking=False):
                await asyncio.sleep(pause)
                pause = min(pause * 2, POLL_MAX_S)
        except BaseException:
            _leave(self._key)
            raise

    __aexit__ = _exit_async


class run_active:  # noqa: N801 (a context manager named like the function it was)
    """Mark a run as running in this process for the ``with`` block.

    Args:
        run_id: The run id.

    Raises:
        ValueError: On entry, when the run is already running in this process.
    """

    __slots__ = ("_run_id", "_token")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id

    def __enter__(self) -> None:
        self._token = _claim_run(self._run_id)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        _release_run(self._run_id, self._token)


def active_runs() -> frozenset[str]:
    """The ids of the runs running in this process now."""
    return frozenset(_active.copy())
