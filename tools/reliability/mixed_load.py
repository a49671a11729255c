"""A mixed load on a running daemon while its resident memory is sampled.

``mixed_load(address, pid, seconds=...)`` runs client threads, each with its own
connection, doing adds, gets, tails, version reads, conversation listings, pops
and clears across many conversations, and samples the daemon's memory
(``RssAnon`` of ``/proc/PID/status``: its own memory, without the pages of the
memory-mapped data file; ``VmRSS`` is sampled beside it) at a fixed period. The
report gives it at the end of the warm-up (the first fifth of the run), at the
end, its peak, and the slope of a least-squares line through the samples after
the warm-up.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import memoryd
from memoryd import messages

__all__ = ["LoadReport", "mixed_load", "rss_kib", "slope_per_minute"]

# operation weights: writes dominate, as in an agent appending turns
_MIX = (("add", 40), ("get", 25), ("tail", 10), ("version", 8), ("list", 5), ("pop", 4))
_CLEAR_EVERY = 50  # a client clears the conversation it just wrote every ~50 ops


def rss_kib(pid: int, field: str = "RssAnon") -> int:
    """A resident-memory field of ``/proc/PID/status`` in KiB.

    ``RssAnon`` (the default) is the process's own memory: heap, stacks, buffers.
    ``VmRSS`` adds ``RssFile``, which includes the pages of the LMDB data file the
    daemon has touched through its memory map: they grow with the data, belong to
    the page cache, and the kernel reclaims them under pressure.
    """
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def slope_per_minute(samples: list[tuple[float, int]]) -> float:
    """The least-squares slope of ``(seconds, kib)`` samples, in KiB per minute."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in samples)
    return cov / var * 60.0


@dataclass(kw_only=True)
class LoadReport:
    """What the load did and how the daemon's memory moved (KiB)."""

    seconds: float
    operations: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    samples: list[tuple[float, int]] = field(default_factory=list)
    vm_rss_kib: list[int] = field(default_factory=list)
    warm_kib: int = 0
    end_kib: int = 0
    peak_kib: int = 0
    slope_kib_per_min: float = 0.0

    def summary(self) -> str:
        """One line of figures."""
        total = sum(self.operations.values())
        rate = total / max(self.seconds, 1e-9)
        slope = self.slope_kib_per_min / 1024
        return (
            f"{total} operations in {self.seconds:.0f} s ({rate:.0f}/s), "
            f"{len(self.errors)} errors; daemon RssAnon after warm-up "
            f"{self.warm_kib / 1024:.1f} MB, end {self.end_kib / 1024:.1f} MB, "
            f"peak {self.peak_kib / 1024:.1f} MB, slope {slope:+.2f} MB/min; "
            f"VmRSS (with the mapped data file) {self.vm_rss_kib[0] / 1024:.1f} -> "
            f"{self.vm_rss_kib[-1] / 1024:.1f} MB"
        )


def _client(
    address: str,
    seed: int,
    conversations: int,
    stop: threading.Event,
    ops: Counter[str],
    errors: list[str],
    lock: threading.Lock,
) -> None:
    rng = random.Random(seed)
    store = memoryd.connect(address, timeout=60.0)
    names = [name for name, _ in _MIX]
    weights = [weight for _, weight in _MIX]
    done: Counter[str] = Counter()
    text = "x" * rng.randint(50, 2000)
    try:
        while not stop.is_set():
            cid = f"load-{rng.randrange(conversations)}"
            op = rng.choices(names, weights)[0]
            try:
                if op == "add":
                    store.add(cid, [messages.user(text), messages.assistant(text[:100])])
                    if rng.randrange(_CLEAR_EVERY) == 0:
                        store.clear(cid)
                        done["clear"] += 1
                elif op == "get":
                    store.get(cid, limit=20)
                elif op == "tail":
                    store.tail(after=max(0, rng.randrange(1 << 16)), limit=50)
                elif op == "version":
                    store.version(cid)
                elif op == "list":
                    store.conversations(prefix="load-1", limit=50)
                else:
                    store.pop(cid)
            except memoryd.MemorydError as exc:
                with lock:
                    errors.append(f"{op}: {type(exc).__name__}: {exc}")
            done[op] += 1
    finally:
        store.close()
        with lock:
            ops.update(done)


def mixed_load(
    address: str,
    pid: int,
    *,
    seconds: float,
    clients: int = 8,
    conversations: int = 500,
    sample_every_s: float = 1.0,
    seed: int = 0,
    progress: bool = False,
) -> LoadReport:
    """Run the load for ``seconds`` against the daemon at ``address`` (process ``pid``).

    Args:
        address: the daemon's address (``unix://...``).
        pid: the daemon's process id, for its RSS.
        seconds: how long to run.
        clients: client threads, each with its own connection.
        conversations: how many conversations the load spreads over.
        sample_every_s: the RSS sampling period.
        seed: the clients' random seed.
        progress: print a line a minute.

    Returns:
        The figures.
    """
    report = LoadReport(seconds=seconds)
    stop = threading.Event()
    lock = threading.Lock()
    threads = [
        threading.Thread(
            target=_client,
            args=(address, seed + n, conversations, stop, report.operations, report.errors, lock),
            daemon=True,
        )
        for n in range(clients)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    next_minute = 60.0
    while (elapsed := time.monotonic() - started) < seconds:
        report.samples.append((elapsed, rss_kib(pid)))
        report.vm_rss_kib.append(rss_kib(pid, "VmRSS"))
        if progress and elapsed >= next_minute:
            anon, total = report.samples[-1][1] / 1024, report.vm_rss_kib[-1] / 1024
            print(
                f"  {elapsed:.0f} s: daemon RssAnon {anon:.1f} MB, VmRSS {total:.1f} MB", flush=True
            )
            next_minute += 60.0
        stop.wait(sample_every_s)
    stop.set()
    for thread in threads:
        thread.join(120)
    report.samples.append((time.monotonic() - started, rss_kib(pid)))
    report.vm_rss_kib.append(rss_kib(pid, "VmRSS"))
    steady = [(t, v) for t, v in report.samples if t >= seconds / 5]
    report.warm_kib = steady[0][1]
    report.end_kib = report.samples[-1][1]
    report.peak_kib = max(v for _, v in report.samples)
    report.slope_kib_per_min = slope_per_minute(steady)
    return report
