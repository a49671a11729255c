"""Test actors and helpers for the supervisors tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from supervisors import Exit, SupervisedActor


class Journal:
    """A thread-safe list of (event, actor id) tuples, shared by test actors."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: list[tuple[str, str]] = []

    def add(self, event: str, who: str) -> None:
        with self._lock:
            self.entries.append((event, who))

    def of(self, event: str) -> list[str]:
        with self._lock:
            return [who for kind, who in self.entries if kind == event]

    def count(self, event: str, who: str) -> int:
        return self.of(event).count(who)


class FakeClock:
    """A monotonic clock that only moves when told."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Worker(SupervisedActor):
    """Records init/terminate in a journal; can be told to fail or to exit."""

    def __init__(
        self,
        journal: Journal,
        wid: str,
        *,
        name: str | None = None,
        fail_init: Callable[[], bool] | None = None,
        init_delay_s: float = 0.0,
    ) -> None:
        super().__init__(name=name)
        self.journal = journal
        self.wid = wid
        self.fail_init = fail_init
        self.init_delay_s = init_delay_s
        self.exits: list[Exit] = []

    def init(self) -> None:
        if self.init_delay_s:
            time.sleep(self.init_delay_s)
        if self.fail_init is not None and self.fail_init():
            self.journal.add("init_failed", self.wid)
            raise RuntimeError(f"{self.wid} refuses to start")
        self.journal.add("init", self.wid)

    def terminate(self, exit: Exit) -> None:
        self.journal.add("terminate", self.wid)
        self.journal.add(f"exit:{exit.kind.value}", self.wid)

    def ping(self) -> str:
        return f"pong:{self.wid}"

    def boom(self) -> None:
        """An ask handler that crashes the actor on purpose."""
        error = ValueError(f"{self.wid} broke")
        self.crash(error)
        raise error

    def raise_only(self) -> None:
        """An ask handler that raises without crashing (Pykka keeps the actor)."""
        raise ValueError("handled")

    def quit(self) -> None:
        """Stop normally from inside."""
        self.stop()


def worker_spec(journal: Journal, wid: str, **kwargs: Any) -> Any:
    """A ChildSpec for a registered Worker named ``wid``."""
    from supervisors import ChildSpec

    spec_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in ("restart", "shutdown_s")}
    return ChildSpec(
        id=wid, start=lambda: Worker.start(journal, wid, name=wid, **kwargs), **spec_kwargs
    )


def wait_until(pred: Callable[[], Any], timeout: float = 5.0, interval: float = 0.002) -> Any:
    """Poll ``pred`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {pred}")
        time.sleep(interval)


class Slow(SupervisedActor):
    """A registered actor whose init() or terminate() waits for a gate (at most
    ``wait_s``); records ``init`` and ``exit:<kind>`` in a journal."""

    def __init__(
        self,
        journal: Journal,
        name: str,
        *,
        init_gate: threading.Event | None = None,
        stop_gate: threading.Event | None = None,
        wait_s: float = 5.0,
    ) -> None:
        super().__init__(name=name)
        self.journal = journal
        self.init_gate = init_gate
        self.stop_gate = stop_gate
        self.wait_s = wait_s

    def init(self) -> None:
        if self.init_gate is not None:
            self.init_gate.wait(self.wait_s)
        self.journal.add("init", self.name or "")

    def terminate(self, exit: Exit) -> None:
        if self.stop_gate is not None:
            self.stop_gate.wait(self.wait_s)
        self.journal.add(f"exit:{exit.kind.value}", self.name or "")
