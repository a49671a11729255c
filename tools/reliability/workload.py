"""Concurrent clients that record a history, crash injectors, and restart-latency probes.

Used in-process: the store runs in this process's memoryd tree, clients are
threads, crashes are ``supervisors.kill`` or ``memoryd.store.actor.fault_hook``.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memoryd
import supervisors
from memoryd import app, messages
from memoryd.store import actor, lookup
from tools.history_check import Op, Report, check
from tools.reliability.writers import KeyedWriters, finished

RETRYABLE = (memoryd.StoreUnavailable, memoryd.StorageError)
"""Errors after which a client retries its write with the same idempotency key."""


@contextlib.contextmanager
def relaxed_intensity(max_restarts: int = 10**6) -> Iterator[None]:
    """Let the stores supervisor restart a store ``max_restarts`` times per 5 s.

    Test-only: the stock intensity (5 in 5 s) would, rightly, give up long before a
    thousand injected crashes. Use around ``LmdbStore.start`` (the tree must be new).
    """
    original = app._start_stores

    def start() -> supervisors.DynamicSupervisor:
        children = [app._child_spec(spec) for spec in lookup.specs()]
        return supervisors.DynamicSupervisor.start(
            name=app.STORES, max_restarts=max_restarts, period_s=5.0, children=children
        )

    memoryd.shutdown()
    app._start_stores = start  # type: ignore[assignment]
    try:
        yield
    finally:
        memoryd.shutdown()
        app._start_stores = original  # type: ignore[assignment]


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class RunStats:
    """What a client run did besides its history."""

    crashes: int = 0
    restart_s: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    gave_up: int = 0
    hung: int = 0

    def p50_p99_ms(self) -> tuple[float, float]:
        """Restart latency p50 and p99 in milliseconds."""
        return percentile(self.restart_s, 0.5) * 1e3, percentile(self.restart_s, 0.99) * 1e3

    def median_ms(self) -> float:
        """Median restart latency in milliseconds (0 when none)."""
        return statistics.median(self.restart_s) * 1e3 if self.restart_s else 0.0


class FaultPlan:
    """A ``fault_hook`` that crashes the store actor at random points, seeded.

    Args:
        store: the store's name (other stores are left alone).
        rate: probability of a crash at each reached point.
        points: which of ``actor.FAULT_POINTS`` may crash.
        seed: the random seed.
        limit: the most crashes to inject.
    """

    def __init__(
        self, store: str, *, rate: float, points: tuple[str, ...], seed: int, limit: int
    ) -> None:
        self.store = store
        self.rate = rate
        self.points = points
        self.limit = limit
        self.injected: dict[str, int] = dict.fromkeys(points, 0)
        self.restart_s: list[float] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._crashed_at: float | None = None

    @property
    def total(self) -> int:
        """Crashes injected so far."""
        return sum(self.injected.values())

    def __call__(self, point: str, name: str) -> None:
        """The hook: maybe raise at ``point`` (runs in the actor's thread)."""
        if name != self.store:
            return
        now = time.monotonic()
        with self._lock:
            crash = point in self.points and self.total < self.limit
            crash = crash and self._rng.random() < self.rate
            if crash:
                self.injected[point] += 1
                if self._crashed_at is None:
                    self._crashed_at = now
            elif point == "init" and self._crashed_at is not None:
                self.restart_s.append(now - self._crashed_at)
                self._crashed_at = None
        if not crash:
            return
        raise RuntimeError(f"injected crash at {point}")


@contextlib.contextmanager
def injecting(hook: Callable[[str, str], None]) -> Iterator[None]:
    """Install ``hook`` as the store actor's fault hook for the block."""
    actor.fault_hook = hook
    try:
        yield
    finally:
        actor.fault_hook = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CrashRun:
    """What ``write_through_crashes`` saw.

    Attributes:
        plan: the fault plan, with its counts and restart latencies.
        report: the history check of every write against the final logs.
        slowest_s: the longest single call, in seconds.
        hung: writer threads that did not finish once told to stop.
    """

    plan: FaultPlan
    report: Report
    slowest_s: float
    hung: int


def write_through_crashes(
    path: Path,
    *,
    name: str,
    crashes: int,
    seed: int,
    call_timeout_s: float = 5.0,
    timeout_s: float | None = None,
    join_s: float = 15.0,
) -> CrashRun:
    """Eight keyed writers on one store through ``crashes`` injected actor crashes.

    The store starts at ``path`` under a relaxed restart intensity; a ``FaultPlan``
    seeded with ``seed`` crashes its actor at random fault points (a quarter of the
    points reached). Writers share four conversations and retry a failed write with
    its key up to 100 times. The writers stop once ``crashes`` crashes were
    injected (or ``timeout_s`` passed), and their history is checked.

    Args:
        path: the store's data directory.
        name: the store's name.
        crashes: how many crashes to inject.
        seed: the fault plan's random seed.
        call_timeout_s: the store's call deadline.
        timeout_s: the longest wait for the crashes (None: no limit).
        join_s: how long each writer is given to finish once told to stop.

    Returns:
        The plan, the history check and the writers' figures.
    """
    plan = FaultPlan(name, rate=0.25, points=actor.FAULT_POINTS, seed=seed, limit=crashes)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with relaxed_intensity():
        store = memoryd.LmdbStore.start(path, name=name, call_timeout_s=call_timeout_s)
        writers = KeyedWriters(
            store, writers=8, cids=4, retry_on=RETRYABLE, attempts=100, join_s=join_s
        )
        with injecting(plan), writers:
            while plan.total < crashes and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.05)
        final = writers.contents()
    return CrashRun(
        plan=plan,
        report=check(writers.history(), final),
        slowest_s=writers.slowest_s,
        hung=writers.hung,
    )


def kill_and_time(name: str, timeout: float = 10.0) -> float:
    """``supervisors.kill`` the store, wait for its new engine; seconds taken (or -1)."""
    old = lookup.engine(name)
    started = time.monotonic()
    if not supervisors.kill(name, "soak"):
        return -1.0
    deadline = started + timeout
    while time.monotonic() < deadline:
        engine = lookup.wait_for_engine(name, 0.05)
        if engine is not None and engine is not old and not engine.closed:
            return time.monotonic() - started
        time.sleep(0.0005)
    return -1.0


def run_clients(
    store: Any,
    *,
    clients: int = 8,
    ops_per_client: int = 500,
    cids: int = 4,
    read_ratio: float = 0.5,
    seed: int = 0,
    kill_every_s: float | None = None,
    attempts: int = 50,
) -> tuple[list[Op], dict[str, list[str]], RunStats]:
    """Run ``clients`` threads of mixed appends and reads and record every operation.

    Appends use a unique idempotency key and are retried with it after a
    retryable error (``attempts`` times at most). Reads return the keys seen.

    Args:
        store: a started store handle.
        clients: client threads.
        ops_per_client: operations per client.
        cids: conversations shared by all clients.
        read_ratio: the share of reads.
        seed: random seed.
        kill_every_s: if set, a thread ``supervisors.kill``s the store at this mean interval.
        attempts: the most tries of one append.

    Returns:
        The history, the final log of each conversation, and run statistics.
    """
    stats = RunStats()
    ops: list[Op] = []
    lock = threading.Lock()
    stop = threading.Event()
    names = [f"conv-{i}" for i in range(cids)]

    def note(error: BaseException) -> None:
        with lock:
            kind = type(error).__name__
            stats.errors[kind] = stats.errors.get(kind, 0) + 1

    def client(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        mine: list[Op] = []
        for i in range(ops_per_client):
            cid = rng.choice(names)
            if rng.random() < read_ratio:
                start = time.monotonic()
                try:
                    seen = tuple(m["content"] for m in store.get(cid))
                except RETRYABLE as exc:
                    note(exc)
                    continue
                mine.append(finished("read", f"c{n}", cid, start, True, seen=seen))
                continue
            key = f"c{n}-{i}"
            start = time.monotonic()
            ok = False
            for _ in range(attempts):
                try:
                    store.add(cid, [messages.user(key)], idempotency_key=key)
                except RETRYABLE as exc:
                    note(exc)
                    continue
                ok = True
                break
            if not ok:
                with lock:
                    stats.gave_up += 1
            mine.append(finished("append", f"c{n}", cid, start, ok, key=key))
        with lock:
            ops.extend(mine)

    def killer() -> None:
        rng = random.Random(seed)
        assert kill_every_s is not None
        while not stop.wait(rng.expovariate(1.0 / kill_every_s)):
            took = kill_and_time(store.name)
            if took >= 0:
                with lock:
                    stats.crashes += 1
                    stats.restart_s.append(took)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    kthread = threading.Thread(target=killer, daemon=True) if kill_every_s else None
    for t in threads:
        t.start()
    if kthread is not None:
        kthread.start()
    for t in threads:
        t.join(600)
        if t.is_alive():
            stats.hung += 1
    stop.set()
    if kthread is not None:
        kthread.join(30)
    final = {cid: [m["content"] for m in store.get(cid)] for cid in names}
    return ops, final, stats
