"""Running the `memoryd` command as a user would: a child process, stdout a pipe."""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["run"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe and no MEMORYD_* variables."""
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")},
        check=False,
    )
