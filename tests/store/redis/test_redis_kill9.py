"""redis-server SIGKILLed at random moments under unkeyed adds and pops: no write twice.

The server (or a Cluster's master) runs with ``appendonly yes`` and ``appendfsync
always`` and is restarted on the same port and data directory after each kill; the
store resends what was in flight. `tools.reliability.redis_kills.audit` checks every
conversation's log against what its writer sent and was acknowledged (each message
carries a unique id).
"""

from __future__ import annotations

from pathlib import Path

import memoryd
from memoryd.events import Event
from tests.redis_servers import RedisCluster, RedisServer
from tools.reliability.redis_kills import WriterLog, audit, run


def test_unkeyed_writes_through_sigkills_are_stored_exactly_once(tmp_path: Path) -> None:
    """12 kills under 4 writers adding and popping without idempotency keys: every
    acknowledged add is stored once, every acknowledged pop removed one message, no add
    is stored twice and no pop removed two."""
    server = RedisServer(tmp_path / "redis").start()
    try:
        result = run([server], kills=12, writers=4, seed=7, call_timeout_s=5.0)
    finally:
        server.stop()
        memoryd.shutdown()
    assert result.problems == []
    assert (result.lost, result.duplicated) == (0, 0)
    assert result.reconnects >= 1  # writes were in flight at kills and were resent
    assert result.acknowledged > 0


def test_unkeyed_writes_through_sigkills_of_cluster_masters_are_stored_exactly_once(
    tmp_path: Path,
) -> None:
    """6 kills, each of one of a three-master Cluster's masters picked at random, under 6
    writers adding and popping without idempotency keys (their conversations spread
    over the masters): every acknowledged add is stored once, every acknowledged pop
    removed one message, nothing is stored twice. Each killed master restarts with its
    ``nodes.conf`` and rejoins; the next kill waits until it serves its slots again."""
    cluster = RedisCluster(tmp_path / "cluster").start()
    try:
        result = run(cluster.nodes, cluster=True, kills=6, writers=6, seed=11, call_timeout_s=8.0)
    finally:
        cluster.stop()
        memoryd.shutdown()
    assert result.problems == []
    assert (result.lost, result.duplicated) == (0, 0)
    assert result.reconnects >= 1  # writes were in flight at kills and were resent
    assert result.acknowledged > 0


def _event(version: int, kind: str, *ids: str) -> Event:
    messages = tuple({"role": "user", "content": i} for i in ids)
    return Event(version=version, kind=kind, messages=messages, timestamp=1.0)


def test_the_audit_counts_an_add_stored_twice_and_a_pop_applied_twice() -> None:
    """The checker's negative control: a doubled add, and a pop whose resend removed the
    message before the one it returned, are counted as duplicates; a missing add as lost."""
    log = WriterLog(cid="c", tried={"a", "b", "c"}, added=["a", "b", "c"], popped=["a"])
    events = {
        "c": [
            _event(1, "appended", "a"),
            _event(2, "appended", "b"),
            _event(3, "appended", "b"),
            _event(4, "popped", "b"),
            _event(5, "popped", "a"),
        ]
    }
    found = audit([log], events)
    assert (found.duplicated, found.lost) == (2, 1)
    assert not found.ok


def test_the_audit_lets_a_failed_pop_account_for_one_popped_event() -> None:
    """A pop whose caller got no answer may have been applied once: not a duplicate."""
    log = WriterLog(cid="c", tried={"a", "b"}, added=["a", "b"], popped=[], failed_pops=1)
    events = {
        "c": [_event(1, "appended", "a"), _event(2, "appended", "b"), _event(3, "popped", "b")]
    }
    assert audit([log], events).ok
    log.failed_pops = 0
    assert audit([log], events).duplicated == 1


def test_the_audit_names_a_writer_stopped_by_an_error() -> None:
    """A call that failed with anything but StoreUnavailable is a problem, not a pass."""
    log = WriterLog(cid="c", tried={"a"}, added=["a"], error="StorageError('crashed')")
    found = audit([log], {"c": [_event(1, "appended", "a")]})
    assert found.problems == ["c: a call failed: StorageError('crashed')"]
    assert not found.ok
