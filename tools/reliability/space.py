"""How much of an LMDB data file is live data, read offline (no lock, no reader slot).

``space(directory)`` opens ``data.mdb`` read-only without the lock file, like
``verify.py``, and counts the pages of the main database and of every named
sub-database (branch, leaf and overflow pages): that is the live data. The rest
of the file is free pages (LMDB's free list, reusable by later writes) and the
two meta pages. Read it while the writer is idle, or accept a figure one commit old.

``readers(directory)`` lists the pids in the reader table (through the lock
file, read-only: it takes no slot of its own until a transaction begins).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lmdb

from tools.reliability.verify import named_dbs

__all__ = ["Space", "live_bytes", "readers", "space"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Space:
    """Sizes of one data file, in bytes."""

    file_bytes: int
    live_bytes: int
    page_size: int

    @property
    def ratio(self) -> float:
        """The file's size over the live data's (1.0 is a file of nothing but live pages)."""
        return self.file_bytes / max(self.live_bytes, self.page_size)


def _pages(stat: Any) -> int:
    return int(stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"])


def live_bytes(env: lmdb.Environment, txn: lmdb.Transaction) -> int:
    """The bytes of every page of the main and named databases, seen from ``txn``."""
    pages = _pages(txn.stat())
    for _, db in named_dbs(env, txn):
        pages += _pages(txn.stat(db))
    return int(pages * env.stat()["psize"])


def space(directory: Path) -> Space:
    """The file size and the live data of ``directory/data.mdb``.

    Do not call it in a process that has the environment open (LMDB forbids a
    second handle); ``churn.py`` measures its own environment with ``live_bytes``.
    """
    data = directory / "data.mdb"
    env = lmdb.open(str(data), subdir=False, readonly=True, lock=False, max_dbs=64)
    try:
        with env.begin(buffers=False) as txn:
            live = live_bytes(env, txn)
        page_size = int(env.stat()["psize"])
    finally:
        env.close()
    return Space(file_bytes=os.stat(data).st_size, live_bytes=live, page_size=page_size)


def readers(directory: Path) -> list[int]:
    """The pids holding slots in the environment's reader table."""
    env = lmdb.open(str(directory), readonly=True, lock=True, max_dbs=64, create=False)
    try:
        table = env.readers().splitlines()
    finally:
        env.close()
    pids = []
    for row in table[1:]:
        fields = row.split()
        if fields and fields[0].isdigit():
            pids.append(int(fields[0]))
    return pids
