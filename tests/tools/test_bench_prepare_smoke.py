"""tools/bench_prepare.py runs end to end and reads only the window's tail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_prepare_quick_run_fetches_only_the_window() -> None:
    """A small run prints the table; the windowed provider fetched 20 messages, not 300."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "bench_prepare.py"),
            "--messages",
            "300",
            "--window",
            "20",
            "--quick",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "fetched 20, sent 20" in done.stdout
    assert "fetched 300, sent 20" in done.stdout
    assert "langchain trim_messages" in done.stdout
