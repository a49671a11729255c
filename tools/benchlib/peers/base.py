"""The adapter interface every benchmarked store implements."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from benchlib.workload import Message

#: Called with the number of conversations populated so far.
ProgressFn = Callable[[int], None]


class Peer(abc.ABC):
    """One store under test, behind the same five calls.

    An adapter is created per phase, ``setup`` once on a fresh directory, driven from one
    or more threads, then ``close``d. ``append`` must be safe to call from several
    threads at once (each thread appends only to its own conversations).
    """

    #: Name used by ``--only`` and in the table.
    name: ClassVar[str]
    #: Whether the read phases apply to this peer.
    reads: ClassVar[bool] = True
    #: Upper bound on timed reads per kind, for peers whose reads take milliseconds.
    max_reads: ClassVar[int | None] = None

    @classmethod
    def probe(cls) -> str | None:
        """Return what is missing for this peer to run (a package, a class), or None."""
        return None

    @abc.abstractmethod
    def notes(self) -> str:
        """Return this peer's configuration (versions, durability settings) in one line."""

    @abc.abstractmethod
    def setup(self, directory: Path) -> None:
        """Open or create the store in ``directory``, which exists and is empty."""

    @abc.abstractmethod
    def append(self, thread_id: int, cid: str, message: Message) -> None:
        """Durably append one message to conversation ``cid``; return once it is durable."""

    @abc.abstractmethod
    def read_last(self, cid: str, n: int) -> list[Any]:
        """Return the last ``n`` messages of ``cid``, chronological, in the peer's own type."""

    @abc.abstractmethod
    def read_all(self, cid: str) -> list[Any]:
        """Return every message of ``cid``, chronological, in the peer's own type."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release everything ``setup`` and the calls since opened."""

    def populate(
        self, conversations: Iterable[tuple[str, list[Message]]], progress: ProgressFn
    ) -> None:
        """Store many conversations quickly; adapters override this with a bulk path.

        Args:
            conversations: (conversation id, messages) pairs, each id once.
            progress: called now and then with the number of conversations done.
        """
        for done, (cid, messages) in enumerate(conversations, start=1):
            for message in messages:
                self.append(0, cid, message)
            progress(done)

    def end_thread(self, thread_id: int) -> None:
        """Release per-thread resources; called on each writer thread before it exits."""
        return

    def stats(self) -> Mapping[str, Any] | None:
        """Return the store's own counters, or None if it has none."""
        return None

    @staticmethod
    def content(item: Any) -> str:
        """Return the text content of one item returned by ``read_last`` / ``read_all``."""
        return str(item["content"])
