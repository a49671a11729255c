"""`benchlib.lmdb_gil` times real puts on both sides of a real busy thread."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from benchlib import lmdb_gil  # noqa: E402


def test_both_sides_are_timed_and_the_busy_thread_is_stopped() -> None:
    """Every put is timed on both sides, the stalls are among them, and no busy thread
    is left running."""
    before = threading.active_count()
    cost = lmdb_gil.put_cost(300)
    assert cost.count == 300
    assert cost.alone_us > 0 and cost.beside_busy_us > 0
    assert 0 <= cost.stalls <= cost.count
    assert cost.longest_ms * 1e3 >= cost.beside_busy_us  # the longest put is above the mean
    assert (cost.stalls > 0) == (cost.longest_ms > 1.0)
    assert threading.active_count() == before
