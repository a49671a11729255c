"""When to commit a batch: the group-commit policy. Pure: the caller passes the time in.

A commit costs one fsync however many writes it carries, so a batch should hold
every writer that is about to write. Writers answered by one commit come back a
moment later; without waiting for them, concurrent writers split into groups
that alternate (two groups of four instead of one of eight). The policy knows
which writers were active in the last few commits and holds a batch back until
they have all arrived, or until no write has come for a short linger, so a writer
that went quiet costs at most one linger. The linger counts from the latest write,
not the first: writers that share one interpreter lock come back one after another,
and eight of them may take longer than one linger to all arrive, while each comes
well within one of the one before. Cutting such a batch short leaves the rest to run
their code while the actor builds and commits, each slowing the other, and the next
batch is cut short the same way. A batch waits at most one linger per expected
writer. A single writer never waits.

Why not let concurrent writers split into groups whose commits overlap the other
group's Python (the classic pipelined group commit)? Measured: py-lmdb lets go of the
interpreter lock around every put, get and cursor step. Beside a thread running
Python, some puts then wait for the lock until that thread lets go, up to the 5 ms
switch interval (1 to 58 puts of 2,000 in two runs), where alone a put takes 0.6 us
(`make bench` prints both, from ``tools/benchlib/lmdb_gil.py``). In the 8-run journal
benchmark with no hold (``max_linger_s=0``), a batch of two took 1.9 ms to build while
the other writers ran; built while its writers wait, a batch of eight takes about
0.25 ms. Without the hold the benchmark commits twice as often at the same rate.

Writer identities are only hints (a server's worker threads rotate between
requests of one client), so the count expected is also capped by the most
writes seen outstanding at once (committed plus queued when a commit ended).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable

__all__ = ["GroupCommit"]


class GroupCommit:
    """Decides whether the pending writes should be committed now.

    Args:
        max_linger_s: the longest a batch is held back for the next expected write.
        memory: how many recent commits define the set of active writers.

    Raises:
        ValueError: a negative linger or a memory below 1.
    """

    def __init__(self, *, max_linger_s: float = 0.001, memory: int = 3) -> None:
        if max_linger_s < 0:
            raise ValueError(f"max_linger_s must be >= 0, not {max_linger_s!r}")
        if memory < 1:
            raise ValueError(f"memory must be >= 1, not {memory!r}")
        self.max_linger_s = max_linger_s
        self._recent: deque[frozenset[Hashable]] = deque(maxlen=memory)
        self._concurrency: deque[int] = deque(maxlen=memory)
        self._last_commit_s = max_linger_s
        self._expected = 0

    def expected(self) -> int:
        """How many distinct writers were active in the recent commits."""
        return self._expected

    def _count_expected(self) -> int:
        active: set[Hashable] = set()
        for writers in self._recent:
            active |= writers
        peak = max(self._concurrency, default=len(active))
        return min(len(active), peak)

    def ready(self, pending: Iterable[Hashable], *, waited_s: float, held_s: float = 0.0) -> bool:
        """True if the batch should be committed now.

        Args:
            pending: the writers with a write in the batch.
            waited_s: how long since the latest write arrived (since the batch's
                first write arrived, or its wait began, if none came after).
            held_s: how long since the batch's first write arrived (or its wait
                began); past `hold_limit` the batch is committed, whatever comes.
        """
        count = len(pending) if isinstance(pending, set | frozenset) else len(set(pending))
        if count == 0:
            return False
        if count >= self._expected:
            return True
        return waited_s >= self.linger() or held_s >= self.hold_limit()

    def linger(self) -> float:
        """How long a batch waits for its next write: ``max_linger_s``, or the last
        commit's duration if shorter (waiting longer than a commit takes costs more than
        a second commit)."""
        return min(self.max_linger_s, self._last_commit_s)

    def hold_limit(self) -> float:
        """The longest a batch is held in all: one linger per expected writer. Writes
        arriving one after another keep a batch waiting only so long (a thread sending
        writes without waiting for them counts as one writer however many it sends)."""
        return self.linger() * max(self._expected, 1)

    def committed(
        self, writers: Iterable[Hashable], *, duration_s: float, waiting: int = 0
    ) -> None:
        """Record a commit.

        Args:
            writers: who had a write in it.
            duration_s: how long it took.
            waiting: writes already queued when it ended (they arrived during it).
        """
        batch = frozenset(writers)
        self._recent.append(batch)
        self._concurrency.append(len(batch) + max(waiting, 0))
        self._last_commit_s = max(duration_s, 0.0)
        self._expected = self._count_expected()
