"""The floor row of ``tools/bench_agents.py`` measures what it says; no speed is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from benchlib.journal_floor import floor_on_off  # noqa: E402


def test_the_floor_commits_a_record_per_step_and_per_run_with_the_journal_on() -> None:
    """Two rounds of 3 threads x 4 runs x 5 steps: the journal-on files hold 6 records a
    run (5 steps, 1 turn), written in fewer transactions than records (grouped), and
    both sides report a rate."""
    floor = floor_on_off(3, 4, 5, 0.0002, 2)
    assert floor.records_on == 2 * 3 * 4 * (5 + 1)
    assert 0 < floor.commits_on < floor.records_on
    assert floor.on > 0 and floor.off > 0
