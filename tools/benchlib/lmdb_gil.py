"""What a py-lmdb put costs beside a busy Python thread, against alone.

py-lmdb lets go of the interpreter lock around every put, get and cursor step. Alone,
that costs nothing; beside a thread that is running Python, the other thread takes the
lock at such a moment, and the putter gets it back only once that thread lets go: when
it blocks, or when the interpreter's switch interval (5 ms) forces it to. That is why a
store actor builds its batch while the batch's writers wait for it, not while they run
(`memoryd.store.group_commit`).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import lmdb

__all__ = ["PutCost", "put_cost"]

_STALL_S = 0.001


@dataclass(frozen=True)
class PutCost:
    """``Transaction.put`` of a small record, alone and beside a busy thread."""

    alone_us: float
    """Mean microseconds per put with no other thread running."""
    beside_busy_us: float
    """Mean microseconds per put while another thread runs pure Python."""
    stalls: int
    """Puts beside the busy thread that took over a millisecond (waits for the lock)."""
    longest_ms: float
    """The longest of them, in milliseconds."""
    count: int
    """Puts on each side."""
    switch_interval_ms: float
    """The interpreter's switch interval, in milliseconds."""


def _puts(env: lmdb.Environment, start: int, count: int) -> list[float]:
    clock = time.perf_counter
    took = []
    with env.begin(write=True) as txn:
        for n in range(start, start + count):
            began = clock()
            txn.put(n.to_bytes(8, "big"), b"r" * 100)
            took.append(clock() - began)
    return took


def put_cost(count: int = 2000) -> PutCost:
    """Time ``count`` puts alone, then ``count`` more beside a busy thread.

    Args:
        count: puts on each side.
    """
    path = tempfile.mkdtemp(prefix="lmdb-gil-")
    stop = threading.Event()
    running = threading.Event()

    def busy() -> None:
        running.set()
        n = 0
        while not stop.is_set():
            n += 1

    try:
        env = lmdb.open(path, map_size=1 << 28, sync=False)
        try:
            alone = _puts(env, 0, count)
            thread = threading.Thread(target=busy, daemon=True)
            thread.start()
            try:
                running.wait()
                beside = _puts(env, count, count)
            finally:
                stop.set()
                thread.join()
        finally:
            env.close()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    stalled = [took for took in beside if took > _STALL_S]
    return PutCost(
        alone_us=sum(alone) / count * 1e6,
        beside_busy_us=sum(beside) / count * 1e6,
        stalls=len(stalled),
        longest_ms=max(beside) * 1e3,
        count=count,
        switch_interval_ms=sys.getswitchinterval() * 1e3,
    )
