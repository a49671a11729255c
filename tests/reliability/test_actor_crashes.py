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

from pathlib import Path

import pytest

import memoryd
import supervisors
from memoryd import app, messages
from memoryd.store import actor, lookup
from tests.helpers import wait_until
from tools.reliability.workload import injecting, percentile, write_through_crashes

CRASHES = 1000
CALL_TIMEOUT_S = 5.0
SEED = 20251130


def test_a_thousand_injected_crashes_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """8 writers through 1,000 crashes: no hang, no loss, no duplicate; latency printed."""
    print(f"actor-crash seed {SEED}")
    run = write_through_crashes(
        tmp_path / "db",
        name="crashy",
        crashes=CRASHES,
        seed=SEED,
        call_timeout_s=CALL_TIMEOUT_S,
        timeout_s=150,
        join_s=CALL_TIMEOUT_S * 3,
    )
    plan, report = run.plan, run.report
    p50, p99 = percentile(plan.restart_s, 0.5) * 1e3, percentile(plan.restart_s, 0.99) * 1e3
    print(
        f"crashes {plan.injected} acknowledged {report.acknowledged} "
        f"restart p50 {p50:.2f} ms p99 {p99:.2f} ms slowest call {run.slowest_s:.3f} s"
    )
    assert run.hung == 0, "a writer hung"
    assert plan.total == CRASHES
    assert all(plan.injected[p] > 0 for p in actor.FAULT_POINTS)
    assert run.slowest_s <= CALL_TIMEOUT_S + 1.0
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
    assert lookup.engine("doomed") is not None
