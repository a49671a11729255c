"""examples/supervised_agents.py runs: a kill mid-run is resumed without a second search."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_supervised_agents_example_runs(tmp_path: Path) -> None:
    """Three agents, a tool, a crash and a restart: the editor's answer arrives, the
    search ran once, and nothing is pending after the restart. Run again on the same
    data directory, the same pipeline runs (the writer asked again) on the researcher's
    remembered history."""
    for remembered in (4, 8):
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "supervised_agents.py"), str(tmp_path / "d")],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            check=False,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            "editor: Approved. Draft: Findings: 3 papers about memory in LLM agents.",
            "search ran 1 time(s)",
            "restarts: 1",
            "pending after restart: 0",
            f"researcher remembers {remembered} messages",
        ]
