"""Benchmark import and idempotent re-import of an export, in-process on LMDB.

Builds a store of ``--conversations`` x ``--events`` appended events (one message each),
exports it to JSONL, then per round imports the file into a new durable `LmdbStore`
(the first import) and imports it again into the same store (everything present). Prints
the medians of the rounds, the ratio re-import / first import (target <= 0.1x), and what
the re-import wrote (commits and fsyncs from ``stats()``; both must be 0).

Usage: python tools/bench_import.py [--conversations 1000] [--events 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import memoryd
from memoryd.export import export_jsonl, import_jsonl


def _write_source(root: Path, conversations: int, events: int) -> Path:
    store = memoryd.EphemeralStore.start(name="bench-import-source")
    try:
        text = "y" * 80
        for c in range(conversations):
            cid = f"conv-{c:06d}"
            for e in range(events):
                store.add(
                    cid, [{"role": "user" if e % 2 else "assistant", "content": f"{e} {text}"}]
                )
        path = root / "export.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            export_jsonl(store, out)
        return path
    finally:
        store.stop()


def _round(root: Path, export: Path, number: int) -> tuple[float, float, int, int]:
    """``(first import s, re-import s, commits by the re-import, its fsyncs)``."""
    store = memoryd.LmdbStore.start(root / f"target-{number}", name=f"bench-import-{number}")
    try:
        started = time.perf_counter()
        first = import_jsonl(store, export)
        first_s = time.perf_counter() - started
        assert not first.conflicts, first.conflicts
        before = store.stats()
        started = time.perf_counter()
        again = import_jsonl(store, export)
        again_s = time.perf_counter() - started
        after = store.stats()
        assert again.events_written == 0 and not again.conflicts, again
        return (
            first_s,
            again_s,
            int(after["commits"]) - int(before["commits"]),
            int(after["fsyncs"]) - int(before["fsyncs"]),
        )
    finally:
        store.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50, help="events per conversation")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="md-bench-import-", dir="/tmp"))
    try:
        export = _write_source(root, args.conversations, args.events)
        rounds = [_round(root, export, n) for n in range(args.rounds)]
    finally:
        memoryd.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    first = statistics.median(r[0] for r in rounds)
    again = statistics.median(r[1] for r in rounds)
    ratios = ", ".join(f"{r[1] / r[0]:.3f}x" for r in rounds)
    total = args.conversations * args.events
    print(f"import of a {total:,}-event export ({args.conversations:,} conversations), LMDB:")
    print(f"  first import   {first:8.3f} s   ({total / first:,.0f} events/s)")
    print(f"  re-import      {again:8.3f} s   (everything present)")
    print(
        f"  re-import / first import: median {again / first:.3f}x; per round {ratios} "
        "(target <= 0.1x)"
    )
    print(
        "  written by the re-imports: "
        f"{sum(r[2] for r in rounds)} commits, {sum(r[3] for r in rounds)} fsyncs (must be 0)"
    )


if __name__ == "__main__":
    main()
