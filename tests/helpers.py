"""Helpers shared by the test suite (no store fakes live here)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import memoryd
from memoryd.testing._threads import Worker

__all__ = ["Overlap", "Worker", "kill9_when", "wait_until"]

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


def python_prints(code: str) -> list[str]:
    """The lines a fresh interpreter prints running ``code`` (``python -c``); it must exit
    with 0 within a minute."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout.splitlines()


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


class Overlap:
    """An ``async def`` tool ``work(key)`` that takes a moment and counts how many of its
    calls were ever under way at once (`most`)."""

    def __init__(self) -> None:
        self.inside = 0
        self.most = 0

        @memoryd.tool
        async def work(key: str = "", n: int = 0) -> str:
            """Work a while.

            Args:
                key: A key.
                n: A step.
            """
            self.inside += 1
            self.most = max(self.most, self.inside)
            await asyncio.sleep(0.01)
            self.inside -= 1
            return f"worked {key or n}"

        self.tool: Any = work


BACKENDS = ("lmdb", "redis", "daemon")
"""The backends a behaviour test runs on, with `backend_store`."""


def backend_store(request: Any, tmp_path: Path, prefix: str) -> Any:
    """A new, empty durable store of the backend ``request.param``: LMDB in ``tmp_path``,
    Redis (the ``redis_server`` fixture) or a daemon (the ``daemon`` fixture, a
    `RemoteStore` of a new named store), named ``<prefix>-<random>``."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    if request.param == "lmdb":
        return memoryd.LmdbStore.start(tmp_path / name, name=name)
    if request.param == "redis":
        return memoryd.RedisStore.start(request.getfixturevalue("redis_server").url, prefix=name)
    return memoryd.connect(request.getfixturevalue("daemon").address, store=name)


def asking(name: str, arguments: str = "{}", *, call_id: str = "c1", **extra: Any) -> Any:
    """A model's assistant reply asking for one tool call, its arguments as raw JSON text
    (for replies a test makes malformed)."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call], **extra}


class Row:
    """A tool's value that cannot be made text: its ``__str__`` (and ``__repr__``) raise."""

    def __str__(self) -> str:
        raise RuntimeError("Row.__str__ failed")

    __repr__ = __str__


class ApiError(Exception):
    """A tool's exception whose message cannot be shown: its ``__str__`` raises."""

    def __str__(self) -> str:
        raise KeyError("message")
