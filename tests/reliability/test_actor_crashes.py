"""Actor crashes: 1,000 injected crashes at random points of the store actor.

The store actor's test-only ``fault_hook`` raises at ``before_commit`` (the batch
is never attempted), ``after_commit`` (committed, nobody answered yet) and
``init`` (the restart itself fails once more). Eight writers append with
idempotency keys and retry typed errors with the same key. Every call returns a
result or a typed error within its deadline, every acknowledged write is stored
exactly once. With the stock settings a store that cannot start is retried with
backoff and never escalates; when the tree does give up, calls fail at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import memoryd
import supervisors
from memoryd import app, messages
from memoryd.store import actor, lookup, requests
from tests.helpers import Worker, wait_until
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


def test_a_store_that_cannot_restart_is_retried_with_backoff_and_comes_back(
    tmp_path: Path,
) -> None:
    """Stock intensity: a store whose restart keeps failing is retried with growing
    pauses, never given up on; the tree and a sibling store live on; calls fail with
    StoreUnavailable within their deadline; once the fault clears it serves again."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="doomed", call_timeout_s=0.5)
    sibling = memoryd.LmdbStore.start(tmp_path / "other", name="sibling")
    store.add("c", [messages.user("kept")])
    root = supervisors.whereis(app.ROOT)
    assert root is not None
    failed: list[str] = []

    def always(point: str, name: str) -> None:
        if point == "init" and name == "doomed":
            failed.append(name)
            raise RuntimeError("injected: cannot start")

    with injecting(always):
        supervisors.kill("doomed")
        wait_until(lambda: len(failed) >= 12, timeout=30, message="restarts stopped")
        assert root.is_alive()
        with pytest.raises(memoryd.StoreUnavailable, match="did not come back"):
            store.get("c")
        with pytest.raises(memoryd.StoreUnavailable):
            store.add("c", [messages.user("refused")])
        sibling.add("s", [messages.user("served")])
    wait_until(lambda: lookup.engine("doomed"), timeout=10, message="never came back")
    assert root.is_alive()
    assert [m["content"] for m in store.get("c")] == ["kept"]
    store.add("c", [messages.user("again")])
    assert [m["content"] for m in sibling.get("s")] == ["served"]


def test_when_the_tree_gives_up_a_call_in_flight_fails_at_once(tmp_path: Path) -> None:
    """The root gives up (its stores supervisor killed past 3 in 5 s) while a write
    waits for its restarting store: the write fails with StoreUnavailable long before
    its 60 s deadline."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="waiting", call_timeout_s=60.0)
    store.add("c", [messages.user("kept")])
    root = supervisors.whereis(app.ROOT)
    assert root is not None
    failed: list[str] = []

    def always(point: str, name: str) -> None:
        if point == "init" and name == "waiting":
            failed.append(name)
            raise RuntimeError("injected: cannot start")

    with injecting(always):
        supervisors.kill("waiting")
        wait_until(lambda: failed, timeout=10)
        writer = Worker(lambda: store.add("c", [messages.user("in flight")]))
        writer.start()
        while root.is_alive():
            supervisors.kill(app.STORES)
            wait_until(lambda: supervisors.whereis(app.STORES) or not root.is_alive(), 10)
        with pytest.raises(memoryd.StoreUnavailable, match="is not running"):
            writer.outcome(timeout=20.0)
    memoryd.shutdown()
    again = memoryd.LmdbStore.start(tmp_path / "db", name="waiting")
    assert [m["content"] for m in again.get("c")] == ["kept"]


@pytest.mark.parametrize("path", ["thread", "loop"])
def test_a_crash_after_the_commit_answers_the_write_and_never_writes_it_twice(
    tmp_path: Path, path: str
) -> None:
    """The actor crashes after a batch committed, before it answered: the write is
    stored, so its writer gets its result, and the handle never sends it again as if
    it had not been attempted (a write without an idempotency key would be stored twice)."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="late-crash")
    crashes: list[str] = []

    def once(point: str, name: str) -> None:
        if point == "after_commit" and name == "late-crash" and not crashes:
            crashes.append(point)
            raise RuntimeError("injected: crash after the commit")

    with injecting(once):
        if path == "thread":
            version = store.add("c", [messages.user("once")])
        else:
            request = requests.add(
                "c",
                [messages.user("once")],
                idempotency_key=None,
                expected_version=None,
                max_bytes=store.max_message_bytes,
            )
            version = asyncio.run(store.submit(request))
    assert crashes == ["after_commit"]
    assert version == 1
    wait_until(lambda: lookup.engine("late-crash"), timeout=10, message="never came back")
    assert [m["content"] for m in store.get("c")] == ["once"]
    store.stop()
