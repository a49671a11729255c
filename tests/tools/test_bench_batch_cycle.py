"""The benchmark's batch accounting: one batch's time split by the store's own timers.

``tools/benchlib`` reads ``txn_build_s``/``txn_commit_s`` from ``stats()`` around a timed
run and prints where a group-commit batch's time goes; it asserts no speed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from benchlib.peers.ours import OursPeer  # noqa: E402
from benchlib.report import _cycle_bound, batch_cycle  # noqa: E402
from benchlib.runner import AppendRun, measure_appends, summarize  # noqa: E402
from benchlib.workload import QUICK  # noqa: E402


def test_batch_cycle_splits_a_batch_into_build_commit_and_the_rest() -> None:
    """8 appends/batch at 10,000/s is 800 µs a batch: 50 build + 500 commit + 250 rest."""
    row = {"batch": 8.0, "per_second": 10_000.0, "build_us": 50.0, "commit_us": 500.0}
    text = batch_cycle(row)
    assert text is not None
    assert "every 800 µs" in text
    assert "transaction 50 µs" in text
    assert "flushes) 500 µs" in text
    assert "the rest (hand-off, answers, writers' own code) 250 µs" in text


def test_batch_cycle_is_none_without_the_store_timers() -> None:
    """A peer whose stats() has no timers (or no commits) gets no line, never a made-up one."""
    assert batch_cycle({"batch": 8.0, "per_second": 1000.0}) is None
    assert batch_cycle({"batch": None, "per_second": 1000.0, "build_us": 1, "commit_us": 1}) is None


def test_cycle_bound_compares_the_needed_cycle_with_the_measured_commit() -> None:
    """A 16,000/s target in batches of 8 needs a batch every 500 µs; a 300 µs commit leaves 200."""
    row = {"batch": 8.0, "per_second": 10_000.0, "commit_us": 300.0}
    text = _cycle_bound("goal", 16_000.0, row)
    assert text is not None
    assert "every 500 µs" in text and "ours takes 800 µs" in text
    assert "leaving 200 µs for what now takes 500 µs" in text
    assert _cycle_bound("goal", 16_000.0, {"batch": 8.0, "per_second": 1.0}) is None


@pytest.mark.parametrize("writers", [1, 4])
def test_a_real_run_reports_its_commit_and_build_time(tmp_path: Path, writers: int) -> None:
    """Appends to a real durable store through the bench's own peer: the run's per-commit
    timers are positive, the time they account for fits inside the run (one actor builds
    and commits, one transaction after another), and the batch line is printed."""
    peer = OursPeer()
    peer.setup(tmp_path / "d")
    try:
        run = measure_appends(peer, QUICK, writers, ["a", "b"], per_writer=30)
        assert isinstance(run, AppendRun) and run.commits
        result = summarize(writers, [run])
        assert result.build_us is not None and result.build_us > 0
        assert result.commit_us is not None and result.commit_us > 0
        assert (result.build_us + result.commit_us) * run.commits <= run.seconds * 1e6
        row = {
            "batch": result.batch,
            "per_second": result.per_second,
            "build_us": result.build_us,
            "commit_us": result.commit_us,
        }
        text = batch_cycle(row)
        assert text is not None and "every" in text
    finally:
        peer.close()
