"""The daemon's own memory stays flat under a mixed load (CI size; the soak runs 10 minutes).

A real ``memoryd serve``; 8 client threads do adds, gets, tails, version reads,
listings, pops and clears over 500 conversations for ``SECONDS``. The figure is
the daemon's ``RssAnon`` (heap, stacks, buffers), not ``VmRSS``: the latter also
counts the pages of the memory-mapped LMDB file, which grow with the data and
belong to the page cache. The bounds are generous (CI machines are noisy); the
figures are printed, and ``tools/soak_resources.py`` holds the long run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.server.daemon import Daemon
from tools.reliability.mixed_load import mixed_load

SECONDS = float(os.environ.get("MEMORYD_MEMORY_SECONDS", "30"))
GROWTH_LIMIT_MB = 25.0


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = Daemon(extra=()).start()
    yield running
    running.close()


def test_the_daemons_memory_is_flat_under_a_mixed_load(daemon: Daemon) -> None:
    """After the warm-up the daemon's RssAnon grows by under 25 MB; every call succeeds."""
    assert daemon.proc is not None
    report = mixed_load(daemon.address, daemon.proc.pid, seconds=SECONDS)
    print(report.summary())
    print(f"operations: {dict(report.operations)}")
    assert report.errors == [], report.errors[:5]
    assert sum(report.operations.values()) > 1000
    assert (report.end_kib - report.warm_kib) / 1024 < GROWTH_LIMIT_MB
    assert (report.peak_kib - report.warm_kib) / 1024 < 2 * GROWTH_LIMIT_MB
    assert daemon.proc.poll() is None
