#!/usr/bin/env python3
"""Benchmark: the cost of preparing one LLM call on a long conversation, as ratios.

A 10,000-message conversation (with tool exchanges) in a durable LmdbStore; each
iteration loads and prepares what a window of 50 sends:

* ours: ``DefaultProvider(store, window=50)``: ``history`` (reads only the tail the
  window needs, ``get(limit=...)``) then ``prepare`` (the safe window);
* ours, whole history: the same with ``read_tail=False`` (reads all 10,000);
* LangChain ``trim_messages`` (last 50 messages, ``start_on="human"``) on the same list
  already in memory (its conversion from dicts is not timed).

    python tools/bench_prepare.py             # `make bench`
    python tools/bench_prepare.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import memoryd
from memoryd import DefaultProvider, messages

Message = dict[str, Any]


class CountingStore:
    """Delegates to a real store and counts the messages its reads return."""

    def __init__(self, store: memoryd.StoreHandle) -> None:
        self._store = store
        self.fetched = 0

    def get(self, cid: str, **options: Any) -> list[Message]:
        out = self._store.get(cid, **options)
        self.fetched += len(out)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def make_history(count: int) -> list[Message]:
    """User/assistant turns with a tool exchange every fifth turn."""
    out: list[Message] = []
    turn = 0
    while len(out) < count:
        turn += 1
        out.append(messages.user(f"question {turn}: " + "lorem ipsum " * 8))
        if turn % 5 == 0:
            call = messages.tool_call(f"call_{turn}", "lookup", {"q": f"item {turn}"})
            out.append(messages.assistant(tool_calls=[call]))
            out.append(messages.tool(f"call_{turn}", f"result {turn} " * 6))
        out.append(messages.assistant(f"answer {turn}: " + "dolor sit amet " * 8))
    return out[:count]


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds per call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def langchain_row(history: Sequence[Message], window: int) -> Callable[[], Any] | None:
    """A callable running trim_messages on the history, or None if LangChain is missing."""
    try:
        from langchain_core.messages import convert_to_messages, trim_messages
    except ImportError:
        return None
    converted = convert_to_messages(list(history))

    def run() -> Any:
        return trim_messages(
            converted,
            max_tokens=window,
            token_counter=len,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args(argv)
    repeat = 5 if args.quick else args.repeat
    history = make_history(args.messages)
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-prepare-") as tmp:
        store = memoryd.LmdbStore.start(Path(tmp) / "data", name="bench-prepare")
        try:
            for start in range(0, len(history), 1000):
                store.add("c", history[start : start + 1000])
            rows: list[tuple[str, float, str]] = []
            for label, read_tail in (("ours (window 50)", True), ("ours, whole history", False)):
                counting = CountingStore(store)
                provider = DefaultProvider(counting, args.window, read_tail=read_tail)  # type: ignore[arg-type]

                def run(p: DefaultProvider = provider) -> list[Message]:
                    return p.prepare("c", p.history("c"))

                seconds = timed(run, repeat)
                per_call = counting.fetched // (repeat + 1)
                sent = len(run())
                rows.append((label, seconds, f"fetched {per_call}, sent {sent}"))
            trim = langchain_row(history, args.window)
            if trim is None:
                rows.append(("langchain trim_messages", float("nan"), "not installed"))
            else:
                seconds = timed(trim, repeat)
                rows.append(("langchain trim_messages", seconds, f"in memory, sent {len(trim())}"))
        finally:
            store.stop()
            memoryd.shutdown()
    base = rows[0][1]
    print(f"prepare: {args.messages} messages, window {args.window}, median of {repeat}")
    print(f"{'':28}{'ms/call':>10}{'x ours':>10}  notes")
    for label, seconds, note in rows:
        if seconds != seconds:  # NaN: not measured
            print(f"{label:28}{'-':>10}{'-':>10}  {note}")
        else:
            print(f"{label:28}{seconds * 1e3:10.3f}{seconds / base:10.1f}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
