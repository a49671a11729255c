#!/usr/bin/env python3
"""Redis benchmark: RedisStore against plain redis-py RPUSH and LmdbStore, as ratios.

Starts its own redis-server on a free loopback port (AOF in a temp directory on /work's
disk), then measures durable appends of one message with 1 and 8 writer threads:

    rpush    redis-py RPUSH of the encoded message to one list per conversation
    redis    memoryd.RedisStore.add (Lua script: idempotency, version check, feed)
    lmdb     memoryd.LmdbStore.add (fsync per group commit) on the same disk

Every Redis peer runs against the same server with the same ``appendfsync`` setting.
The peers take turns, ``--rounds`` times (a shared machine's disk and CPUs drift), and
the table shows each peer's median round. Target: RedisStore within 1.5x of RPUSH's
throughput.

    python tools/bench_redis.py                  # `make bench` runs this too
    python tools/bench_redis.py --appends 500 --fsync everysec
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

import redis  # noqa: E402

import memoryd  # noqa: E402
from memoryd import codec  # noqa: E402
from tests.redis_servers import RedisServer  # noqa: E402

TARGET = 1.5
Writer = Callable[[int, int], None]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=2000, help="timed appends per run")
    parser.add_argument("--writers", default="1,8", help="comma-separated writer counts")
    parser.add_argument(
        "--fsync", default="always", choices=("always", "everysec", "no"), help="appendfsync"
    )
    parser.add_argument("--rounds", type=int, default=3, help="turns each peer takes")
    parser.add_argument("--dir", type=Path, help="scratch directory (default: under /work)")
    parser.add_argument("--strict", action="store_true", help="exit 1 if the target is missed")
    return parser.parse_args(argv)


def measure(write: Writer, writers: int, appends: int) -> tuple[float, float]:
    """Run ``appends`` calls of ``write(thread, i)`` over ``writers`` threads.

    Returns:
        Appends per second and the median latency in microseconds.
    """
    per = max(1, appends // writers)
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(writers + 1)

    def run(t: int) -> None:
        mine: list[float] = []
        barrier.wait()
        for i in range(per):
            started = time.perf_counter()
            write(t, i)
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(writers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return per * writers / elapsed, statistics.median(latencies) * 1e6


def message(t: int, i: int) -> dict[str, str]:
    """The appended message: a short user turn."""
    return {"role": "user", "content": f"writer {t} says hello number {i}, how are you today?"}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    args = parse_args(argv)
    base = args.dir or Path(tempfile.mkdtemp(prefix="bench-redis-", dir=REPO_ROOT.parent))
    base.mkdir(parents=True, exist_ok=True)
    server = RedisServer(base / "redis")
    server.start()
    try:
        client = server.client()
        client.config_set("appendfsync", args.fsync)
        pool = redis.Redis(host="127.0.0.1", port=server.port, max_connections=64)
        rows: list[tuple[str, int, float, float]] = []
        for writers in [int(w) for w in args.writers.split(",")]:
            run = f"w{writers}"

            def rpush(t: int, i: int, run: str = run) -> None:
                record = codec.pack_event_fields(
                    version=i + 1, kind="appended", messages=[message(t, i)], timestamp=time.time()
                )
                pool.rpush(f"rpush:{run}:{t}", record)

            store = memoryd.RedisStore.start(
                server.url,
                prefix=f"bench-{run}",
                cluster=False,
                require_durable=args.fsync == "always",
            )
            lmdb = memoryd.LmdbStore.start(base / f"lmdb-{run}")

            def ours(t: int, i: int, store: memoryd.RedisStore = store, run: str = run) -> None:
                store.add(f"{run}-{t}", [message(t, i)])

            def local(t: int, i: int, lmdb: memoryd.LmdbStore = lmdb, run: str = run) -> None:
                lmdb.add(f"{run}-{t}", [message(t, i)])

            peers: tuple[tuple[str, Writer], ...] = (
                ("rpush", rpush),
                ("redis", ours),
                ("lmdb", local),
            )
            for _, write in peers:
                measure(write, writers, max(writers, args.appends // 10))  # warm up
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in peers}
            for _ in range(max(1, args.rounds)):
                for name, write in peers:
                    runs[name].append(measure(write, writers, args.appends))
            for name, _ in peers:
                rates = sorted(rate for rate, _ in runs[name])
                p50s = sorted(p50 for _, p50 in runs[name])
                middle = len(rates) // 2
                rows.append((name, writers, rates[middle], p50s[middle]))
            memoryd.shutdown()
        pool.close()
        client.close()
    finally:
        server.stop()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)

    print(
        f"\nappends of one message, appendfsync {args.fsync}, {args.appends} per run, "
        f"median of {max(1, args.rounds)} rounds"
    )
    print(f"{'peer':<8}{'writers':>8}{'appends/s':>12}{'p50 us':>10}{'rpush/peer':>12}")
    missed = False
    for name, writers, rate, p50 in rows:
        peer = next(r for n, w, r, _ in rows if n == "rpush" and w == writers)
        ratio = peer / rate
        print(f"{name:<8}{writers:>8}{rate:>12.0f}{p50:>10.0f}{ratio:>12.2f}")
        if name == "redis" and ratio > TARGET:
            missed = True
    verdict = "missed" if missed else "met"
    print(f"\ntarget: RedisStore within {TARGET}x of RPUSH throughput: {verdict}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
