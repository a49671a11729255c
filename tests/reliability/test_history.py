"""Consistency under concurrency: 8 clients' histories checked against the final logs."""

from __future__ import annotations

from pathlib import Path

import memoryd
from tools.history_check import Op, check
from tools.reliability.workload import relaxed_intensity, run_clients

SEED = 424242


def test_eight_clients_without_crashes_see_a_linearizable_log(tmp_path: Path) -> None:
    """8 threads x 300 mixed ops: exactly once, prefixes, RYW, monotonic, real-time order."""
    store = memoryd.LmdbStore.start(tmp_path / "db", name="hist")
    ops, final, stats = run_clients(store, clients=8, ops_per_client=300, seed=SEED)
    report = check(ops, final)
    print(f"history seed {SEED}: {report.operations} ops, {report.acknowledged} acknowledged")
    assert stats.hung == 0 and stats.gave_up == 0
    assert report.problems() == []
    assert report.acknowledged > 800 and report.reads > 800


def test_eight_clients_through_repeated_kills_see_a_linearizable_log(tmp_path: Path) -> None:
    """The same, while the store actor is killed every ~20 ms; restart latency printed."""
    with relaxed_intensity():
        store = memoryd.LmdbStore.start(tmp_path / "db", name="hist")
        ops, final, stats = run_clients(
            store, clients=8, ops_per_client=400, seed=SEED, kill_every_s=0.02
        )
    report = check(ops, final)
    p50, p99 = stats.p50_p99_ms()
    print(f"kills {stats.crashes} restart p50 {p50:.2f} ms p99 {p99:.2f} ms errors {stats.errors}")
    assert stats.hung == 0 and stats.gave_up == 0
    assert stats.crashes >= 10
    assert report.problems() == []


def _op(kind: str, client: str, start: float, end: float, **kw: object) -> Op:
    return Op(kind=kind, client=client, cid="c", start=start, end=end, ok=True, **kw)  # type: ignore[arg-type]


def test_checker_reports_each_kind_of_violation() -> None:
    """The checker is not blind: lost, duplicated, stale, non-monotonic, out of order."""
    ops = [
        _op("append", "a", 0, 1, key="k1"),
        _op("append", "a", 2, 3, key="k2"),
        _op("append", "b", 2, 3, key="lost"),
        _op("read", "b", 4, 5, seen=("k1",)),  # stale: k2 acknowledged at 3
        _op("read", "a", 6, 7, seen=("k2",)),  # not a prefix
        _op("read", "b", 1.5, 1.6, seen=("k1",)),
        _op("read", "b", 1.7, 1.8, seen=()),  # non-monotonic and stale
    ]
    report = check(ops, {"c": ["k2", "k1", "k1"]})
    assert report.lost and report.duplicated and report.stale_reads
    assert report.not_prefix and report.non_monotonic and report.out_of_order
    clean = check([*ops[:2], _op("read", "b", 4, 5, seen=("k1", "k2"))], {"c": ["k1", "k2"]})
    assert clean.ok
