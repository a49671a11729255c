"""Starting the child program `tests.agents._child` as a real process, and the crash the
process tests share: instances blocked mid-run in a process that the test then kills."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import wait_until

__all__ = ["child", "crashing"]

ROOT = Path(__file__).resolve().parents[2]


def child(*args: str) -> subprocess.Popen[str]:
    """``python -m tests.agents._child ARGS`` from the repository's root."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.agents._child", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def crashing(store_spec: str, effects: Path) -> subprocess.Popen[str]:
    """A child process running instances ``w/k0`` and ``w/k1`` on ``store_spec``, once
    both are blocked in step 2 of 4 (steps 0 and 1 recorded)."""
    process = child("crash", store_spec, str(effects), "2")
    wait_until(
        lambda: (
            len(list(effects.parent.glob(f"{effects.name}.*.blocked"))) == 2
            or process.poll() is not None
        ),
        timeout=60,
    )
    assert process.poll() is None, process.communicate()[1]
    return process
