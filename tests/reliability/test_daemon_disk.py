"""A real ``memoryd serve`` on a full disk and on a flaky disk: it stays up.

The full disk is a small tmpfs filled to the brim beside the data directory (needs
root, as CI has); the flaky disk is libfiu failing 5 % of the daemon's
fdatasync/pwrite/pwritev/writev calls with EIO (``fiu-run -x``, armed and cleared
with ``fiu-ctrl``). Drivers: ``tools/reliability/daemon_faults.py``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.reliability import daemon_faults


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short directory under /tmp (a Unix socket path must fit in 108 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_full_disk_refuses_writes_with_disk_full_and_the_daemon_stays_up(
    short_tmp: Path,
) -> None:
    """Writes of 8 KB (LMDB reports the short write as EIO) until `DiskFull` over HTTP
    (507), then 50 more, all refused; /healthz stays 200; once the filler is deleted the
    next write is acknowledged; every acknowledged write is there once; no exit."""
    run = daemon_faults.disk_full(short_tmp)
    print(f"acked {len(run.acked)} refused {run.refused_full} recovery {run.recovery_s:.3f} s")
    assert run.problems == []
    assert run.exited is None
    assert run.refused_full == 50
    assert len(run.acked) > 10


def test_a_flaky_disk_never_takes_the_daemon_down_and_it_serves_again(
    short_tmp: Path,
) -> None:
    """5 % EIO for 5 s: writes fail with typed errors, /healthz says 503 while the store
    is down, the daemon never exits; after the fault clears a write is acknowledged and
    /healthz is 200; every acknowledged write is there once, at its version."""
    run = daemon_faults.flaky_disk(short_tmp, seconds=5.0)
    print(
        f"acked {len(run.acked)} errors {run.errors} recovery {run.recovery_s:.3f} s "
        f"unhealthy seen {run.unhealthy_seen}"
    )
    assert run.problems == []
    assert run.exited is None
    assert sum(run.errors.values()) > 0, "no fault was injected"
    assert len(run.acked) > 1
