"""Ids never handed out before, in any thread or process: a random nonce and a counter.

An `IdSource` draws its nonce (random bytes, in hex) on first use and then only
counts: ``PREFIX`` + nonce + ``.`` + counter in hex. No system call per id, and
short ids (a 16-byte nonce makes ids of about 40 characters after the prefix).

* Threads: the counter is an `itertools.count`, whose ``next`` is atomic, so no
  two calls in one process get the same number, whichever nonce they pair it with.
* Processes: nonces are random (128 bits by default), so two processes do not
  share one.
* Fork: a forked child inherits its parent's nonce and counter, so it would
  repeat the ids the parent makes next; every source draws a new nonce in the
  child before its first id there.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["IdSource"]

_forks = 0
"""How many forks lie between the first process and this one (0 in the first)."""


def _count_fork() -> None:
    global _forks  # noqa: PLW0603 - one count per process, bumped in a forked child
    _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_count_fork)


class IdSource:
    """A thread-safe, fork-safe source of unique ids.

    Args:
        prefix: the start of every id.
        nonce_bytes: random bytes in the nonce (its hex is twice as long).

    Raises:
        ValueError: ``nonce_bytes`` below 8 (too few to keep processes apart).
    """

    def __init__(self, prefix: str = "", *, nonce_bytes: int = 16) -> None:
        if nonce_bytes < 8:
            raise ValueError(f"nonce_bytes must be at least 8, not {nonce_bytes}")
        self.prefix = prefix
        self._nonce_bytes = nonce_bytes
        self._head: tuple[int, str] | None = None  # (fork count when drawn, prefix + nonce + ".")
        self._counter = itertools.count()

    def next(self) -> str:
        """A new id: this process's nonce and the next number of the counter."""
        head = self._head
        if head is None or head[0] != _forks:
            # Threads racing here may each draw a nonce; their numbers still differ.
            head = self._head = (_forks, f"{self.prefix}{os.urandom(self._nonce_bytes).hex()}.")
        return f"{head[1]}{next(self._counter):x}"
