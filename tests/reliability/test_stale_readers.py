"""A reader process SIGKILLed inside a read transaction does not pin pages forever.

Its slot stays in the lock file with the snapshot it held, and LMDB keeps every
page freed after that snapshot. The store's engine clears dead readers' slots
(``reader_check``) at open, every ``READER_CHECK_EVERY`` commits and before
growing a full map; here against a real daemon (durable, fsync per commit) that
stays up across the kill, so only the periodic check can clear the slot.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memoryd.store.lmdb.engine import READER_CHECK_EVERY
from tests.server.daemon import Daemon
from tools.reliability.procs import Reader
from tools.reliability.space import readers, space

MESSAGE = [{"role": "user", "content": "x" * 200}]


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    running = Daemon(extra=()).start()
    yield running
    running.close()


def _cycles(store: object, count: int) -> None:
    for i in range(count):
        cid = f"c{i % 4}"
        store.add(cid, MESSAGE)  # type: ignore[attr-defined]
        store.clear(cid)  # type: ignore[attr-defined]


def test_a_reader_killed_in_a_transaction_is_cleared_and_the_file_stops_growing(
    daemon: Daemon,
) -> None:
    """SIGKILL a reader holding a transaction: its slot is cleared, the pages are reused."""
    store = daemon.connect()
    _cycles(store, 100)
    reader = Reader(daemon.data, hold=True)
    try:
        assert reader.pid in readers(daemon.data)
        before = space(daemon.data).file_bytes
        _cycles(store, 200)
        pinned = space(daemon.data).file_bytes
        assert pinned - before > 200 * 4096, "a held reader should pin the freed pages"
    finally:
        reader.kill()
    assert reader.pid in readers(daemon.data), "a SIGKILLed reader leaves its slot behind"
    # two cycles are four commits: this many cycles pass the check at least once
    _cycles(store, READER_CHECK_EVERY // 2 + 2)
    assert reader.pid not in readers(daemon.data)
    cleared = space(daemon.data)
    _cycles(store, 300)
    after = space(daemon.data)
    print(
        f"file: {before} B before the reader, {pinned} B after 200 cycles pinned, "
        f"{cleared.file_bytes} B once cleared, {after.file_bytes} B after 300 more "
        f"(live {after.live_bytes} B)"
    )
    assert after.file_bytes == cleared.file_bytes
    assert any("stale_readers_cleared" in line for line in daemon.stderr_lines)
