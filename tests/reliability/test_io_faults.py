"""I/O faults (libfiu), a full disk (tmpfs) and a capped map.

Each faulted writer runs under ``fiu-run -x``; the fault is armed once the store
is open. A failed commit is never acknowledged, the store actor crashes and
reopens (fsync EIO is never retried in place), and every acknowledged write is
there after the run, exactly once, at its version; the data file passes the
offline audit.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memoryd
from memoryd import messages
from memoryd.store import lookup
from tests.helpers import wait_until
from tools.reliability import fiu_run
from tools.reliability.verify import verify

FDATASYNC = "posix/io/sync/fdatasync"
PWRITE = "posix/io/rw/pwrite"
WRITES = f"{PWRITE},posix/io/rw/pwritev,posix/io/rw/writev"
ALL_WRITES = f"{FDATASYNC},{WRITES}"
K = 3


@pytest.mark.parametrize("point", [FDATASYNC, PWRITE])
def test_failing_the_nth_call_is_never_acknowledged_and_loses_nothing(
    tmp_path: Path, point: str
) -> None:
    """For N = 1..K: the N-th call fails with EIO; that write errors, the rest survive."""
    for n in range(1, K + 1):
        out = fiu_run.run(tmp_path / f"n{n}", point, "nth", n, errno.EIO, 6)
        assert out.problems == [], (n, out.problems)
        assert out.faults, f"call {n} of {point} was never reached"
        faulted = out.faults[0][1]
        assert (faulted, "StorageError") in out.errors, (n, out.errors)
        assert len(out.acked) == 6
        assert out.stored == 6


def test_random_write_and_sync_failures_lose_no_acknowledged_write(tmp_path: Path) -> None:
    """5 % of fdatasync/pwrite/pwritev/writev calls fail; every ACK survives once."""
    out = fiu_run.run(tmp_path / "rand", ALL_WRITES, "random", 0.05, errno.EIO, 150, seed=7)
    assert out.problems == []
    assert len(out.faults) >= 3
    assert len(out.acked) == 150


def test_an_fsync_error_crashes_the_actor_instead_of_retrying(tmp_path: Path) -> None:
    """One fdatasync EIO: StorageError, and the next write goes to a new incarnation."""
    out = fiu_run.run(tmp_path / "eio", FDATASYNC, "nth", 1, errno.EIO, 2)
    assert out.problems == []
    assert out.errors == [("k00000", "StorageError")]
    assert out.acked == {"k00000": 1, "k00001": 2}


def test_no_space_at_any_write_of_a_commit_refuses_it_and_reads_go_on(tmp_path: Path) -> None:
    """For N = 1..6: the N-th write call (data pages by writev/pwritev, the meta page by
    pwrite) fails with ENOSPC. That add gets `DiskFull`, once, and a read made right
    after works. When it was the meta page, LMDB marked the environment unusable (every
    later transaction raised ``lmdb.PanicError``, reads included, and the retry got
    `StorageError`): the store now restarts on a fresh one. Nothing acknowledged is lost."""
    pages = set()
    for n in range(1, 7):
        out = fiu_run.run(tmp_path / f"n{n}", WRITES, "nth", n, errno.ENOSPC, 3)
        assert out.problems == [], (n, out.problems)
        [(point, key)] = out.faults
        pages.add(point)
        assert out.errors == [(key, "DiskFull")], (n, out.errors)
        assert out.read_errors == [], (n, out.read_errors)
        assert out.acked == {"k00000": 1, "k00001": 2, "k00002": 3}
    assert PWRITE in pages, "no meta page write was failed"


def test_a_full_copy_on_write_disk_restarts_the_store_once_not_at_every_write(
    small_disk: Path,
) -> None:
    """On a full copy-on-write file system every meta page write fails (no block is
    rewritten in place), and each failure panics LMDB's environment. The first restarts
    the store; the next incarnation knows the disk was full and refuses writes without
    touching the file while it stays full. Before, every write restarted the store
    again: 30 writes, 8 incarnations, and reads waited out each restart's backoff."""
    child = ["-m", "tools.reliability.fiu_full_meta", str(small_disk / "db"), "30"]
    proc = subprocess.run(
        [fiu_run.fiu_run(), "-x", "-f", "", sys.executable, *child],
        check=False,
        cwd=fiu_run.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line.split() for line in proc.stdout.splitlines()]
    assert [w for w in lines if w[0] == "META"] == [["META", "1"]], "one meta page write fails"
    assert [w for w in lines if w[0] == "ENGINE"] == [["ENGINE", "1"], ["ENGINE", "2"]]
    assert [w for w in lines if w[0] == "ERR"] == [["ERR", str(i), "DiskFull"] for i in range(30)]
    assert [w for w in lines if w[0] == "READERR"] == []
    assert [w for w in lines if w[0] == "ACK"] == [["ACK", "30", "21"]]  # space back
    store = memoryd.LmdbStore.start(small_disk / "db", name="cow-audit")
    contents = [m["content"] for m in store.get("c")]
    store.stop()
    assert contents == [f"before{i}" for i in range(20)] + ["after"]
    assert verify(small_disk / "db") == []


@pytest.mark.parametrize(
    ("message_bytes", "cause"),
    [(3000, "ENOSPC: no byte of a write fit"), (8000, "EIO: a write cut short")],
)
def test_a_full_disk_gives_disk_full_keeps_reads_and_loses_nothing(
    small_disk: Path, message_bytes: int, cause: str
) -> None:
    """A full disk, whichever error LMDB reports: `DiskFull` naming the cause, the same
    incarnation serves reads, refuses further writes without touching the file, and
    writes again once space is freed; nothing acknowledged is lost."""
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (1 << 20))
    store = memoryd.LmdbStore.start(small_disk / "db", name="full", map_size=1 << 22)
    engine = wait_until(lambda: lookup.engine("full"))
    acked: list[str] = []
    error: memoryd.StorageError | None = None
    for i in range(400):
        key = f"k{i}"
        try:
            store.add("c", [messages.user(key + "x" * message_bytes)], idempotency_key=key)
        except memoryd.StorageError as exc:
            error = exc
            break
        acked.append(key)
    assert error is not None, "the disk never filled"
    assert isinstance(error, memoryd.DiskFull), (cause, error)
    assert "No space left on device" in str(error)
    assert lookup.engine("full") is engine, "a full disk must not crash the store"
    commits, size = engine.commits, (small_disk / "db" / "data.mdb").stat().st_size
    for i in range(50):  # far past any restart intensity: refused, never a crash
        with pytest.raises(memoryd.DiskFull):
            store.add("c", [messages.user(f"refused{i}")])
    assert lookup.engine("full") is engine
    assert engine.commits == commits
    assert (small_disk / "db" / "data.mdb").stat().st_size == size
    assert store.stats()["disk_full"] is True
    assert store.refuses_writes() is True  # the hint agents read before a tool step
    assert [m["content"][: len(k)] for m, k in zip(store.get("c"), acked, strict=True)] == acked
    filler.unlink()
    assert store.refuses_writes() is False  # space is back: no write needed to tell
    store.add("c", [messages.user("after")], idempotency_key="after")
    contents = [m["content"] for m in store.get("c")]
    assert [c.split("x")[0] for c in contents[:-1]] == acked
    assert contents[-1] == "after"
    assert store.stats()["disk_full"] is False
    assert lookup.engine("full") is engine


def test_a_map_at_its_cap_refuses_writes_without_a_crash(tmp_path: Path) -> None:
    """max_map_size: StorageError saying what to do; the actor lives; reads work; a restart
    with a larger cap writes again with everything kept."""
    store = memoryd.LmdbStore.start(
        tmp_path / "db", name="capped", map_size=1 << 16, max_map_size=1 << 18
    )
    engine = wait_until(lambda: lookup.engine("capped"))
    acked = []
    with pytest.raises(memoryd.StorageError, match="max_map_size") as info:
        for i in range(1000):
            store.add("c", [messages.user(f"{i}" + "y" * 2000)])
            acked.append(i)
    assert "nothing was written" in str(info.value)
    assert lookup.engine("capped") is engine, "the actor restarted"
    assert engine.map_growths >= 1
    assert len(store.get("c")) == len(acked) > 0
    with pytest.raises(memoryd.StorageError):
        store.add("c", [messages.user("z" * 4000)])
    assert os.stat(tmp_path / "db" / "data.mdb").st_size <= 1 << 18
    store.stop()  # LMDB copies on write: even a clear needs pages, so raise the cap
    bigger = memoryd.LmdbStore.start(
        tmp_path / "db", name="capped", map_size=1 << 16, max_map_size=1 << 22
    )
    bigger.add("c", [messages.user("after")])
    assert len(bigger.get("c")) == len(acked) + 1
