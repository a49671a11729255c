"""Fixtures of the reliability tests: a small real file system to fill."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs root, as CI has); fails clearly when it cannot be mounted."""
    mount = tmp_path / "small"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a 2 MiB tmpfs (run as root): {proc.stderr.strip()}")
    try:
        yield mount
    finally:
        memoryd.shutdown()
        subprocess.run(["umount", "-l", str(mount)], check=False)
