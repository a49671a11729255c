"""The long resource runs: data file size under churn, and the daemon's memory under load.

    python tools/soak_resources.py [--cycles 1000000] [--minutes 10] [--skip growth,memory]

- growth: ``--cycles`` append/clear cycles (``tools/reliability/churn.py``, each
  write its own commit, no fsync) beside a reader process polling every 1 ms; the
  file must end within 2x the live data plus the pages of the commits made during
  the reader's longest transaction (which the reader measures). Then a reader holds
  ONE transaction for 2,000 cycles (the file grows: LMDB's documented limit) and
  ends; 100,000 more cycles must not grow the file (the pinned pages are reused).
- memory: a real ``memoryd serve`` under ``--minutes`` of mixed load (8 clients:
  adds, gets, tails, versions, listings, pops, clears over 500 conversations); prints
  the daemon's RssAnon after the warm-up, at the end, its peak and slope.

Exits 1 when a bound is broken.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.server.daemon import Daemon
from tools.reliability.mixed_load import mixed_load
from tools.reliability.procs import Churn, Reader

MiB = 1 << 20
# pages one add or clear commit copies: about 8 measured; the bound allows twice that
PAGES_PER_COMMIT = 16
# the daemon's own memory may grow by this much after the warm-up, and no faster
MEMORY_GROWTH_LIMIT_MB = 50.0
MEMORY_SLOPE_LIMIT_MB_PER_MIN = 1.0


def growth(cycles: int, tmp: Path) -> list[tuple[str, dict[str, Any], bool]]:
    """The polling-reader run and the held-reader run; one row each."""
    rows = []
    started = time.monotonic()
    churn = Churn(tmp / "growth")
    reader = Reader(tmp / "growth", hold=False, poll_ms=1.0)
    worst = 0.0
    try:
        chunk = max(1, min(100_000, cycles // 10))
        while churn.last["cycles"] < cycles:
            report = churn.cycles(min(chunk, cycles - churn.last["cycles"]))
            ratio = report["file_bytes"] / report["live_bytes"]
            if report["live_bytes"] >= MiB:
                worst = max(worst, ratio)
            print(
                f"  {report['cycles']} cycles: file {report['file_bytes'] / MiB:.1f} MiB, "
                f"live {report['live_bytes'] / MiB:.1f} MiB, ratio {ratio:.2f}",
                flush=True,
            )
        polled = reader.stop()
    finally:
        reader.kill()
    final = churn.last["file_bytes"] / churn.last["live_bytes"]
    window = polled["longest_window"]
    bound = 2 * churn.last["live_bytes"] + window * PAGES_PER_COMMIT * 4096
    rows.append(
        (
            "churn beside a polling reader",
            {
                "cycles": churn.last["cycles"],
                "file MiB": churn.last["file_bytes"] / MiB,
                "live MiB": churn.last["live_bytes"] / MiB,
                "ratio": final,
                "worst ratio": worst,
                "longest reader window (commits)": window,
                "seconds": time.monotonic() - started,
            },
            churn.last["file_bytes"] <= bound,
        )
    )
    started = time.monotonic()
    held = Reader(tmp / "growth", hold=True)
    try:
        before = churn.last
        pinned = churn.cycles(2_000)
        held.end()
        released = churn.cycles(1)
        after = churn.cycles(100_000)
    finally:
        held.kill()
        churn.close()
    rows.append(
        (
            "held reader, then released",
            {
                "cycles": 2_000 + 100_001,
                "file MiB": after["file_bytes"] / MiB,
                "live MiB": after["live_bytes"] / MiB,
                "pinned growth MiB": (pinned["file_bytes"] - before["file_bytes"]) / MiB,
                "growth after release MiB": (after["file_bytes"] - released["file_bytes"]) / MiB,
                "seconds": time.monotonic() - started,
            },
            after["file_bytes"] == released["file_bytes"],
        )
    )
    return rows


def memory(minutes: float) -> list[tuple[str, dict[str, Any], bool]]:
    """The daemon's RssAnon over ``minutes`` of mixed load."""
    daemon = Daemon(extra=()).start()
    try:
        assert daemon.proc is not None
        report = mixed_load(daemon.address, daemon.proc.pid, seconds=minutes * 60, progress=True)
    finally:
        daemon.close()
    print("  " + report.summary())
    growth_mb = (report.end_kib - report.warm_kib) / 1024
    slope = report.slope_kib_per_min / 1024
    ok = (
        not report.errors
        and growth_mb < MEMORY_GROWTH_LIMIT_MB
        and slope < MEMORY_SLOPE_LIMIT_MB_PER_MIN
    )
    return [
        (
            "daemon memory, mixed load",
            {
                "operations": sum(report.operations.values()),
                "errors": len(report.errors),
                "RssAnon warm MB": report.warm_kib / 1024,
                "RssAnon end MB": report.end_kib / 1024,
                "RssAnon peak MB": report.peak_kib / 1024,
                "slope MB/min": slope,
                "VmRSS end MB": report.vm_rss_kib[-1] / 1024,
                "seconds": report.seconds,
            },
            ok,
        )
    ]


def main() -> None:
    """Run the resource suites and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1_000_000)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--skip", default="", help="comma-separated: growth, memory")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    rows: list[tuple[str, dict[str, Any], bool]] = []
    with tempfile.TemporaryDirectory(prefix="memoryd-soak-res-") as tmpdir:
        if "growth" not in skip:
            print(f"growth: {args.cycles} append/clear cycles", flush=True)
            rows += growth(args.cycles, Path(tmpdir))
        if "memory" not in skip:
            print(f"memory: {args.minutes:g} minutes of mixed load", flush=True)
            rows += memory(args.minutes)
    for name, figures, ok in rows:
        cells = ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
        )
        print(f"{name:32} | {'ok' if ok else 'FAILED'} | {cells}")
    sys.exit(0 if rows and all(ok for _, _, ok in rows) else 1)


if __name__ == "__main__":
    main()
