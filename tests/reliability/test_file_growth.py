"""The data file under append/clear churn: bounded beside readers, reclaimed after a long one.

A writer process (``tools/reliability/churn.py``: memoryd's ``LmdbEngine``, each
add and each clear its own commit, no fsync so CI can afford 20,000 cycles) runs
cycles while a separate reader process reads the same directory. "Live data" is
every page of every database; the rest of the file is LMDB's free list.

LMDB cannot reuse a page freed after the snapshot of a reader that is still
open: a reader that holds ONE transaction makes the file grow with every commit,
without bound, until it ends; then the pages are reused and the file stops
growing (it does not shrink: a compacting backup does that).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.reliability.procs import Churn, Reader

CYCLES = 20_000
CHUNK = 5_000
PAGE = 4096
# Pages one add or clear commit copies (and so frees): about 8 measured (a held reader
# pins ~64 KiB per cycle of two commits); twice that as the bound, checked below.
PAGES_PER_COMMIT = 16


@pytest.fixture
def churn(tmp_path: Path) -> Iterator[Churn]:
    writer = Churn(tmp_path / "d")
    yield writer
    writer.close()


def _ratio(report: dict[str, int]) -> float:
    return report["file_bytes"] / report["live_bytes"]


def test_append_clear_cycles_beside_a_polling_reader_keep_the_file_within_twice_the_live_data(
    churn: Churn, tmp_path: Path
) -> None:
    """20,000 cycles beside a reader polling every 1 ms: file <= 2x live + its longest window.

    The reader's transactions are short, but one preempted for a few milliseconds
    (this writer commits every ~0.1 ms) keeps the pages of every commit made
    meanwhile, and the file keeps that high-water mark until the live data grows
    into it. So the bound is 2x the live data plus the pages of the most commits
    made during one reader transaction (the reader measures that window itself).
    """
    reader = Reader(tmp_path / "d", hold=False, poll_ms=1.0)
    try:
        for _ in range(CYCLES // CHUNK):
            report = churn.cycles(CHUNK)
            print(
                f"{report['cycles']} cycles: file {report['file_bytes']} B, "
                f"live {report['live_bytes']} B, ratio {_ratio(report):.2f}"
            )
        polled = reader.stop()
    finally:
        reader.kill()
    window = polled["longest_window"]
    print(f"reader: {polled['transactions']} transactions, longest window {window} commits")
    # The reader ran beside the writer: how many transactions depends on how fast this
    # machine cycles (20,000 cycles take 1 to 10 s), so only ask for a real overlap.
    assert polled["transactions"] >= 100
    assert report["file_bytes"] <= 2 * report["live_bytes"] + window * PAGES_PER_COMMIT * PAGE


def test_a_reader_holding_one_transaction_pins_pages_until_it_ends(
    churn: Churn, tmp_path: Path
) -> None:
    """The file grows with every commit while one transaction is held, and not after it ends."""
    warm = churn.cycles(1_000)
    reader = Reader(tmp_path / "d", hold=True)
    try:
        pinned = churn.cycles(1_000)
        grown = pinned["file_bytes"] - warm["file_bytes"]
        # far more than the live data added: every commit's copied pages are kept
        assert grown > 10 * (pinned["live_bytes"] - warm["live_bytes"])
        commits = pinned["commits"] - warm["commits"]
        assert commits * PAGE < grown <= commits * PAGES_PER_COMMIT * PAGE
        reader.end()
        released = churn.cycles(1)
        after = churn.cycles(CHUNK)
    finally:
        reader.kill()
    print(
        f"held reader: {warm['file_bytes']} B -> {pinned['file_bytes']} B over 1,000 cycles; "
        f"after it ended, {CHUNK} cycles: {released['file_bytes']} B -> {after['file_bytes']} B "
        f"(live {after['live_bytes']} B)"
    )
    assert after["file_bytes"] == released["file_bytes"]
