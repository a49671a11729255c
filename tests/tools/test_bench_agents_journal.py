"""The journal rows of ``tools/bench_agents.py`` measure what they say; no speed is asserted.

The rows compare the same 10-step agent runs with the journal on and off, on a durable
LMDB store, with the benchmark's instant model or one that takes a set time to answer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import bench_agents  # noqa: E402

RUNS = 3


def assert_k_plus_one(fsyncs_per_run: float) -> None:
    """11 fsyncs per 10-step run (k + 1), and one more in all: the instance's lease,
    taken at its activation by the first run."""
    total = round(fsyncs_per_run * RUNS)
    assert RUNS * (bench_agents.STEPS + 1) <= total <= RUNS * (bench_agents.STEPS + 1) + 1


def test_a_run_at_a_time_pays_one_synced_commit_per_step_and_one_for_its_turn() -> None:
    """With the journal on, one run at a time: k + 1 fsyncs per run."""
    measured = bench_agents.journal_on_off(1, RUNS, 1)
    assert measured.on > 0 and measured.off > 0
    assert measured.rounds == ((measured.on, measured.off),)  # one round: its own totals
    assert_k_plus_one(measured.fsyncs)


def test_the_latency_row_waits_for_its_model_on_both_sides() -> None:
    """A model answering in 1 ms makes every run take at least its 11 answers' time, with
    the journal on and off: neither side can run more than 1 / 11 ms runs a second."""
    latency = bench_agents.MODEL_LATENCY_S
    measured = bench_agents.journal_on_off(1, RUNS, 1, latency_s=latency)
    ceiling = 1 / ((bench_agents.STEPS + 1) * latency)
    assert 0 < measured.on <= ceiling and 0 < measured.off <= ceiling
    assert_k_plus_one(measured.fsyncs)


def test_the_on_off_row_shows_the_round_with_the_median_ratio() -> None:
    """The row's two rates come from one round, the one whose on/off ratio is the median;
    a round slowed on one side only (0.2) moves the total-over-total ratio, not the row."""
    rounds = ((40.0, 100.0), (10.0, 50.0), (45.0, 100.0), (50.0, 250.0), (90.0, 200.0))
    measured = bench_agents.OnOff(on=1.0, off=1.0, fsyncs=11.0, rounds=rounds)
    assert measured.median_round() == (40.0, 100.0)  # ratios .2 .2 .4 .45 .45: the middle
    assert measured.spread() == (0.2, 0.45)
    even = bench_agents.OnOff(on=1.0, off=1.0, fsyncs=11.0, rounds=rounds[:4])
    assert even.median_round() == (40.0, 100.0)  # .2 .2 .4 .45: the upper middle one


def test_the_event_loop_row_runs_its_runs_as_coroutines_of_one_loop() -> None:
    """Runs of `AgentSystem.acall` with the journal on pay k + 1 fsyncs each, one at a
    time, with the model's ``acomplete`` and the async tool awaited on the loop."""
    measured = bench_agents.journal_on_off(1, RUNS, 1, steps=bench_agents.loop_steps)
    assert measured.on > 0 and measured.off > 0
    assert_k_plus_one(measured.fsyncs)
    assert bench_agents.astep.awaitable


def test_eight_runs_on_one_loop_share_their_fsyncs() -> None:
    """Eight coroutines' journal writes are grouped: far fewer than 11 fsyncs a run."""
    rate, fsyncs = bench_agents.loop_steps(8, 2, journal=True)
    assert rate > 0
    assert fsyncs < bench_agents.STEPS + 1


def test_the_anchor_runs_a_round_after_each_round_and_counts_total_over_total() -> None:
    """DBOS's rounds alternate with memoryd's: on, off, anchor, on, off, anchor; its rate
    is its runs over its time in all rounds (here 6 runs in 0.3 + 0.1 s: 15 runs/s)."""
    order: list[str] = []

    def steps(workers: int, runs: int, *, journal: bool, latency_s: float) -> tuple[float, float]:
        order.append("on" if journal else "off")
        return 100.0, 11.0

    rates = iter([10.0, 30.0])

    def anchor(workers: int, runs: int) -> float:
        order.append(f"anchor {workers}x{runs}")
        return next(rates)

    measured = bench_agents.journal_on_off(1, 4, 2, steps=steps, anchor=anchor, anchor_runs=3)
    assert order == ["on", "off", "anchor 1x3"] * 2
    assert measured.anchor == 15.0
    assert bench_agents.journal_on_off(1, 4, 1, steps=steps).anchor is None


def test_the_bare_journal_makes_one_record_a_step_durable_and_memoryd_none() -> None:
    """The bare-journal side: 2 threads x 3 runs of 10 steps, after one warm-up run, put
    70 records in the bare file, grouped into at most as many fsynced transactions;
    memoryd's own store journals nothing (one turn commit a run at most, plus the
    instances' leases)."""
    bare = bench_agents.bare_journal(2, RUNS)
    assert bare.rate > 0
    assert bare.records == (2 * RUNS + 1) * bench_agents.STEPS
    assert 0 < bare.commits <= bare.records
    assert bare.store_fsyncs <= 1 + 2 / (2 * RUNS)


def test_the_own_thread_log_holds_a_record_for_every_step() -> None:
    """Two callers: every step of every run (the warm-up run's too) appended one record
    to a file of its thread's own, and the rate is reported."""
    log = bench_agents.own_log_journal(2, RUNS)
    assert log.rate > 0
    assert log.records == (2 * RUNS + 1) * bench_agents.STEPS


def test_one_writer_at_a_time_commits_each_bare_record_alone() -> None:
    """One thread: each of its steps' records is a transaction of its own (no one to
    group with), counted over the timed runs only (the warm-up run is left out)."""
    bare = bench_agents.bare_journal(1, RUNS)
    assert bare.commits == RUNS * bench_agents.STEPS
    assert bare.records == (RUNS + 1) * bench_agents.STEPS


def test_the_bare_journal_runs_in_each_round_after_its_off_side() -> None:
    """With ``bare``, each round runs on, off, bare, then the anchor; the bare row is the
    round with the median bare/off ratio, each against its own round's off, and memoryd
    against the bare journal is the median of the rounds' on/bare ratios."""
    order: list[str] = []
    on_off = iter([(30.0, 100.0), (20.0, 40.0), (45.0, 50.0)])
    current: list[tuple[float, float]] = []

    def steps(workers: int, runs: int, *, journal: bool, latency_s: float) -> tuple[float, float]:
        order.append("on" if journal else "off")
        if journal:
            current[:] = [next(on_off)]
            return current[0][0], 11.0
        return current[0][1], 1.0

    bares = iter([40.0, 10.0, 30.0])

    def bare(workers: int, runs: int) -> float:
        order.append("bare")
        return next(bares)

    logs = iter([50.0, 30.0, 25.0])

    def log(workers: int, runs: int) -> float:
        order.append("log")
        return next(logs)

    def anchor(workers: int, runs: int) -> float:
        order.append("anchor")
        return 5.0

    measured = bench_agents.journal_on_off(
        8, 2, 3, steps=steps, anchor=anchor, anchor_runs=1, bare=bare, log=log
    )
    assert order == ["on", "off", "bare", "log", "anchor"] * 3
    assert measured.bare == (40.0, 10.0, 30.0)
    # bare/off: 0.4, 0.25, 0.6 -> the median round is the first: (40, 100)
    assert measured.bare_median_round() == (40.0, 100.0)
    # on/bare: 0.75, 2.0, 1.5 -> 1.5
    assert measured.on_vs_bare() == 1.5
    assert measured.log == (50.0, 30.0, 25.0)
    # log/off: 0.5, 0.75, 0.5 -> sorted (a stable sort keeps the tie's order), the middle
    # one is the third round: (25, 50)
    assert measured.log_median_round() == (25.0, 50.0)
    # on/log: 0.6, 0.667, 1.8 -> 0.667
    assert measured.on_vs_log() == pytest.approx(20 / 30)
    halves = measured.middle_halves()
    # on/off: 0.3, 0.5, 0.9; inclusive quartiles of three values: 0.4 and 0.7
    assert halves["on"] == pytest.approx((0.4, 0.7))
    assert halves["bare"] == pytest.approx((0.325, 0.5))
    assert halves["log"] == pytest.approx((0.5, 0.625))
    without = bench_agents.journal_on_off(1, 2, 1, steps=lambda *a, **k: (1.0, 1.0))
    assert without.bare == () and without.log == ()
    assert without.middle_halves() == {}
