"""Actor crashes: 1,000 injected crashes at random points of the store actor.

The store actor's test-only ``fault_hook`` raises at ``before_commit`` (the batch
is never attempted), ``after_commit`` (committed, nobody answered yet) and
``init`` (the restart itself fails once more). Eight writers append with
idempotency keys and retry typed errors with the same key. Every call returns a
result or a typed error within its deadline, every acknowledged write is stored
exactly once, and with the stock restart intensity a store that cannot start
escalates to the top supervisor, whose end makes calls fail fast.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import memoryd
import supervisors
from memoryd import app, messages
from memoryd.store import actor, engines
from tests.helpers import wait_until
from tools.history_check import Op, check
from tools.reliability.workload import FaultPlan, injecting, relaxed_intensity

CRASHES = 1000
CALL_TIMEOUT_S = 5.0
SEED = 20251130


def test_a_thousand_injected_crashes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """8 writers through 1,000 crashes: no hang, no loss, no duplicate; latency printed."""
    print(f"actor-crash seed {SEED}")
    plan = FaultPlan(
        "crashy",
        rate=0.25,
        points=actor.FAULT_POINTS,
        seed=SEED,
        limit=CRASHES,
    )
    ops: list[Op] = []
    lock = threading.Lock()
    slowest = [0.0]
    stop = threading.Event()
    with relaxed_intensity():
        store = memoryd.LmdbStore.start(
            tmp_path / "db", name="crashy", call_timeout_s=CALL_TIMEOUT_S
        )

        def writer(n: int) -> None:
            i = 0
            while not stop.is_set():
                key = f"w{n}-{i}"
                first = time.monotonic()
                for _ in range(100):
                    start = time.monotonic()
                    try:
                        store.add(f"c{n % 4}", [messages.user(key)], idempotency_key=key)
                        ok = True
                    except (memoryd.StorageError, memoryd.StoreUnavailable):
                        ok = False
                    took = time.monotonic() - start
                    with lock:
                        slowest[0] = max(slowest[0], took)
                    if ok:
                        break
                with lock:
                    ops.append(
                        Op(
                            kind="append",
                            client=f"w{n}",
                            cid=f"c{n % 4}",
                            start=first,
                            end=time.monotonic(),
                            ok=ok,
                            key=key,
                        )
                    )
                i += 1

        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(8)]
        with injecting(plan):
            for t in threads:
                t.start()
            wait_until(lambda: plan.total >= CRASHES, timeout=150, interval=0.05)
            stop.set()
            for t in threads:
                t.join(CALL_TIMEOUT_S * 3)
        assert not any(t.is_alive() for t in threads), "a writer hung"
        final = {f"c{k}": [m["content"] for m in store.get(f"c{k}")] for k in range(4)}
    report = check(ops, final)
    p50 = sorted(plan.restart_s)[len(plan.restart_s) // 2] * 1e3
    p99 = sorted(plan.restart_s)[int(len(plan.restart_s) * 0.99)] * 1e3
    print(
        f"crashes {plan.injected} acknowledged {report.acknowledged} "
        f"restart p50 {p50:.2f} ms p99 {p99:.2f} ms slowest call {slowest[0]:.3f} s"
    )
    assert plan.total == CRASHES
    assert all(plan.injected[p] > 0 for p in actor.FAULT_POINTS)
    assert slowest[0] <= CALL_TIMEOUT_S + 1.0
    assert report.problems() == []
    assert report.acknowledged > CRASHES


def test_a_store_that_cannot_restart_escalates_to_the_top_and_calls_fail_fast(
    tmp_path: Path,
) -> None:
    """Stock intensity: stores supervisor (5 / 5 s), then the root (3 / 5 s) give up."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="doomed")
    store.add("c", [messages.user("kept")])
    root = supervisors.whereis(app.ROOT)
    assert root is not None

    def always(point: str, name: str) -> None:
        if point == "init" and name == "doomed":
            raise RuntimeError("injected: cannot start")

    with injecting(always):
        supervisors.kill("doomed")
        wait_until(lambda: not root.is_alive(), timeout=30, message="the root never gave up")
        # "not running" at once: the tree gave up, so nothing waits for the deadline
        with pytest.raises(memoryd.StoreUnavailable, match="is not running"):
            store.get("c")
        with pytest.raises(memoryd.StoreUnavailable, match="is not running"):
            store.add("c", [messages.user("refused")])
    memoryd.shutdown()
    again = memoryd.LmdbStore.start(tmp_path / "db", name="doomed")
    assert [m["content"] for m in again.get("c")] == ["kept"]
    assert engines.lookup("doomed") is not None
