"""The benchmark's disk-wait count: what it reads from a trace, and what it finds in real runs.

``tools/benchlib/syscalls.py`` counts, per append, the sync calls and the writes through
an ``O_DSYNC`` descriptor that a peer makes; it asserts no speed.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from benchlib.syscalls import SYNC_WRITES, count_waits, waits_per_append  # noqa: E402

_TRACE = """\
7 1.000 openat(AT_FDCWD, "/d/data.mdb", O_RDWR|O_CREAT, 0600) = 4
7 1.001 openat(AT_FDCWD, "/d/data.mdb", O_WRONLY|O_DSYNC|O_CLOEXEC <unfinished ...>
8 1.002 write(1, "log", 3) = 3
7 1.003 <... openat resumed>) = 5
7 1.004 pwrite64(4, "page", 4096, 8192) = 4096
7 1.005 fdatasync(4) = 0
7 1.006 pwrite64(5, "meta", 120, 32) = 120
8 1.007 fsync(6 <unfinished ...>
7 1.008 close(5) = 0
8 1.009 <... fsync resumed>) = 0
7 1.010 openat(AT_FDCWD, "/d/other", O_WRONLY) = 5
7 1.011 pwrite64(5, "plain", 5, 0) = 5
"""


def test_waits_are_syncs_and_writes_through_a_synchronous_descriptor() -> None:
    """Sync calls count by name (an interrupted call once, when it resumes); a write counts
    only while its descriptor is one opened O_DSYNC, not after the number is reused."""
    assert count_waits(_TRACE) == {"fdatasync": 1, SYNC_WRITES: 1, "fsync": 1}


def test_an_lmdb_commit_waits_twice_and_a_store_without_fsync_never(tmp_path: Path) -> None:
    """Traced for real: one synced py-lmdb commit per append is an fdatasync and a meta
    page written O_DSYNC; memoryd's EphemeralStore makes no disk wait at all."""
    raw = waits_per_append("raw-lmdb", tmp_path)
    assert raw.per_kind == {"fdatasync": 1.0, SYNC_WRITES: 1.0}
    assert raw.total == 2.0
    bare = waits_per_append("ours-nosync", tmp_path)
    assert bare.total == 0
    assert list(tmp_path.iterdir()) == []
