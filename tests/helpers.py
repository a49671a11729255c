"""Helpers shared by the test suite (no store fakes live here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memoryd.testing._threads import Worker

__all__ = ["Worker", "kill9_when", "wait_until"]

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 2.0,
    *,
    interval: float = 0.005,
    message: str | None = None,
) -> T:
    """Poll ``predicate`` until it returns a truthy value or ``timeout`` seconds pass.

    Args:
        predicate: called repeatedly; its first truthy result is returned.
        timeout: the deadline, in seconds from the call.
        interval: pause between polls.
        message: what to say when the deadline passes.

    Returns:
        The first truthy value the predicate returned.

    Raises:
        AssertionError: the predicate stayed falsy until the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(message or f"condition not met within {timeout} s: {predicate!r}")
        time.sleep(interval)


def kill9_when(module: str, *args: str, ready: Callable[[], object], timeout: float = 30) -> None:
    """Run ``python -m module args...`` from the repository's root, wait until ``ready()``
    holds while it lives, then kill it with SIGKILL.

    Raises:
        AssertionError: the child exited first (with its stderr), or was not killed.
    """
    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: ready() or child.poll() is not None, timeout=timeout)
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        if child.stderr:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL
