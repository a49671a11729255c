"""Driving the ``churn.py`` writer and ``reader.py`` reader processes from a test or a soak."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


class Churn:
    """A writer process running append/clear cycles on ``data`` (its own LmdbEngine)."""

    def __init__(self, data: Path, *, durable: bool = False) -> None:
        self.proc = _spawn(
            "tools.reliability.churn", str(data), *(["--durable"] if durable else [])
        )
        self.last = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the churn process exited with {self.proc.wait(10)}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def cycles(self, count: int) -> dict[str, Any]:
        """Run ``count`` more cycles; returns the report (cycles, file_bytes, live_bytes...)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"cycles {count}\n")
        self.proc.stdin.flush()
        self.last = self._answer()
        return self.last

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Reader:
    """A reader process on ``data``: ``hold=True`` keeps one read transaction open."""

    def __init__(self, data: Path, *, hold: bool, poll_ms: float = 1.0) -> None:
        mode = ["--hold"] if hold else ["--poll-ms", str(poll_ms)]
        self.proc = _spawn("tools.reliability.reader", str(data), *mode)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().strip()
        assert first in ("holding", "polling"), first

    @property
    def pid(self) -> int:
        return self.proc.pid

    def end(self) -> None:
        """End the held transaction cleanly and exit."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("end\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ended"
        self.proc.wait(10)

    def stop(self) -> dict[str, int]:
        """Stop a polling reader; returns its ``transactions`` and ``longest_window``."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("end\n")
        self.proc.stdin.flush()
        report: dict[str, int] = json.loads(self.proc.stdout.readline())
        self.proc.wait(10)
        return report

    def kill(self) -> None:
        """SIGKILL, whatever it is doing (a held transaction's slot stays behind)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
