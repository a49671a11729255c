"""The long reliability runs, with one summary table.

    python tools/soak.py [--scale 1.0] [--seed N] [--skip powerloss,...]

Suites: injected actor crashes, 8-client histories with kills, random I/O faults
under libfiu, the hypothesis state machine, corruption trials (bits flipped and pages
zeroed in a data file), redis-server SIGKILLed under unkeyed Redis writes, alone and
as a Cluster's masters (needs redis-server on PATH; ``redis`` in ``--skip`` skips both),
a real daemon on a full disk (``daemon`` in ``--skip`` skips both daemon rows) and on a
disk failing 5 % of its writes for 60 s, a
pre-authentication flood of a real daemon (thousands of TCP connections that never
finish their heads, while Unix-socket clients must be served throughout), and the FUSE
power-loss run with its two negative controls (which must report losses). Exits 1 on
any loss, duplicate, torn event, verifier failure, refused Unix-socket request or blind
control.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import structlog

COLUMNS = (
    "suite",
    "cycles",
    "operations",
    "acknowledged",
    "lost",
    "duplicated",
    "torn",
    "verifier failures",
    "restart p50 ms",
    "restart p99 ms",
    "wrong answers",
    "opened empty",
    "aborts",
    "seconds",
)


def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    logging.getLogger("pykka").setLevel(logging.CRITICAL)


def actor_crashes(crashes: int, seed: int, tmp: Path) -> dict[str, object]:
    """Writers through ``crashes`` injected crashes at every fault point."""
    from tools.reliability.workload import percentile, write_through_crashes

    run = write_through_crashes(tmp / "crash", name="soak", crashes=crashes, seed=seed, join_s=30.0)
    return {
        "cycles": run.plan.total,
        "operations": run.report.operations,
        "acknowledged": run.report.acknowledged,
        "lost": len(run.report.lost),
        "duplicated": len(run.report.duplicated),
        "torn": 0,
        "verifier failures": 0,
        "restart p50 ms": percentile(run.plan.restart_s, 0.5) * 1e3,
        "restart p99 ms": percentile(run.plan.restart_s, 0.99) * 1e3,
        "ok": run.report.ok and run.hung == 0,
    }


def histories(ops_per_client: int, seed: int, tmp: Path) -> dict[str, object]:
    """8 client threads, mixed appends and reads, the actor killed every ~20 ms."""
    import memoryd
    from tools.history_check import check
    from tools.reliability.verify import verify
    from tools.reliability.workload import relaxed_intensity, run_clients

    with relaxed_intensity():
        store = memoryd.LmdbStore.start(tmp / "hist", name="soak-hist")
        ops, final, stats = run_clients(
            store, clients=8, ops_per_client=ops_per_client, seed=seed, kill_every_s=0.02
        )
    report = check(ops, final)
    for line in report.problems():
        print("history:", line)
    p50, p99 = stats.p50_p99_ms()
    failures = len(verify(tmp / "hist"))
    return {
        "cycles": stats.crashes,
        "operations": report.operations,
        "acknowledged": report.acknowledged,
        "lost": len(report.lost),
        "duplicated": len(report.duplicated),
        "torn": 0,
        "verifier failures": failures,
        "restart p50 ms": p50,
        "restart p99 ms": p99,
        "ok": report.ok and stats.hung == 0 and not failures,
    }


def io_faults(cycles: int, seed: int, tmp: Path) -> dict[str, object]:
    """Writers under fiu-run failing 3 % of fdatasync/pwrite/pwritev/writev with EIO."""
    from tools.reliability import fiu_run

    points = "posix/io/sync/fdatasync,posix/io/rw/pwrite,posix/io/rw/pwritev,posix/io/rw/writev"
    totals = {"operations": 0, "acknowledged": 0, "lost": 0, "torn": 0, "verifier failures": 0}
    ok = True
    faults = 0
    for n in range(cycles):
        out = fiu_run.run(tmp / f"fiu{n}", points, "random", 0.03, errno.EIO, 200, seed + n)
        faults += len(out.faults)
        totals["operations"] += len(out.acked) + len(out.errors)
        totals["acknowledged"] += len(out.acked)
        totals["lost"] += sum(1 for p in out.problems if "lost" in p)
        totals["torn"] += out.torn
        totals["verifier failures"] += sum(1 for p in out.problems if "data.mdb" in p)
        if out.problems:
            ok = False
            print("io faults:", out.problems[:3])
    print(f"io faults: {faults} injected failures")
    return {"cycles": cycles, **totals, "duplicated": 0, "ok": ok}


def redis_kills(kills: int, seed: int, tmp: Path, *, cluster: bool = False) -> dict[str, object]:
    """Writers adding and popping without idempotency keys through ``kills`` SIGKILLs of
    redis-server (appendfsync always), each message audited by its id: 4 writers on one
    server, or 6 on a three-master Cluster whose masters are killed in random turn."""
    import memoryd
    from tests.redis_servers import RedisCluster, RedisServer
    from tools.reliability.redis_kills import run

    label = "redis cluster kills" if cluster else "redis kills"
    target = RedisCluster(tmp / "redis-cluster") if cluster else RedisServer(tmp / "redis")
    target.start()
    servers = target.nodes if isinstance(target, RedisCluster) else [target]
    try:
        result = run(
            servers,
            cluster=cluster,
            kills=kills,
            writers=6 if cluster else 4,
            seed=seed,
            call_timeout_s=8.0 if cluster else 5.0,
        )
    finally:
        target.stop()
        memoryd.shutdown()
    for line in result.problems[:3]:
        print(f"{label}:", line)
    return {
        "cycles": result.kills,
        "operations": result.operations,
        "acknowledged": result.acknowledged,
        "lost": result.lost,
        "duplicated": result.duplicated,
        "ok": result.ok,
    }


def daemon_disk_full(tmp: Path) -> dict[str, object]:
    """A real daemon on a 4 MiB tmpfs filled to the brim; then the space is freed."""
    from tools.reliability import daemon_faults

    run = daemon_faults.disk_full(tmp / "full", refusals=200)
    for line in run.problems[:3]:
        print("daemon disk full:", line)
    print(
        f"daemon disk full: {len(run.acked)} acknowledged, {run.refused_full} refused with "
        f"DiskFull, first write after freeing {run.recovery_s * 1e3:.1f} ms, "
        f"daemon exited: {run.exited is not None}"
    )
    return {
        "cycles": 1,
        "operations": len(run.acked) + run.refused_full,
        "acknowledged": len(run.acked),
        "lost": sum(1 for p in run.problems if "lost" in p or "stored at None" in p),
        "duplicated": sum(1 for p in run.problems if "twice" in p),
        "ok": run.ok and run.refused_full == 200,
    }


def daemon_flaky_disk(seconds: float, tmp: Path) -> dict[str, object]:
    """A real daemon under libfiu: 5 % EIO on fdatasync/pwrite/pwritev/writev for ``seconds``."""
    from tools.reliability import daemon_faults

    run = daemon_faults.flaky_disk(tmp / "flaky", seconds)
    for line in run.problems[:3]:
        print("daemon flaky disk:", line)
    print(
        f"daemon flaky disk: {len(run.acked)} acknowledged, errors {run.errors}, 503 seen: "
        f"{run.unhealthy_seen}, first write after the fault cleared "
        f"{run.recovery_s * 1e3:.1f} ms, daemon exited: {run.exited is not None}"
    )
    return {
        "cycles": 1,
        "operations": len(run.acked) + sum(run.errors.values()),
        "acknowledged": len(run.acked),
        "lost": sum(1 for p in run.problems if "lost" in p),
        "duplicated": sum(1 for p in run.problems if "twice" in p),
        "ok": run.ok,
    }


def stateful(examples: int, seed: int) -> dict[str, object]:
    """The hypothesis state machine, ``examples`` examples."""
    from tools.reliability.stateful import run_machine

    ok = True
    try:
        run_machine(seed, examples=examples, steps=20)
    except AssertionError as exc:
        ok = False
        print("stateful:", exc)
    return {"cycles": examples, "ok": ok}


def corruption(trials: int, seed: int, tmp: Path) -> dict[str, object]:
    """Damaged data files: bit flips, zeroed pages and meta-page flips, every answer read."""
    from tools.reliability.corruption import run_trials

    flips = max(80, trials)
    zeros = max(20, trials // 4)
    metas = max(20, trials // 4)
    tally = run_trials(tmp / "corruption", flips=flips, zeros=zeros, metas=metas, seed=seed)
    for failure in tally.failures[:10]:
        print(f"corruption: {failure}")
    return {
        "cycles": tally.trials,
        "operations": tally.reads,
        "verifier failures": tally.wrong,
        "wrong answers": tally.wrong,
        "opened empty": tally.opened_empty,
        "aborts": tally.aborts,
        "refused": tally.refused,
        "ok": tally.ok,
    }


def powerloss(cycles: int, seed: int, tmp: Path) -> list[tuple[str, dict[str, object]]]:
    """FUSE power loss, then the nosync and eatmydata controls (which must lose)."""
    import tools.powerloss as pl

    why = pl.preflight()
    if why is not None:
        print(f"power loss: cannot run here: {why}")
        return [("power loss (FUSE)", {"ok": False})]
    rows = []
    for control in (None, "nosync", "eatmydata"):
        n = cycles if control is None else max(2, cycles // 5)
        started = time.monotonic()
        totals = pl.run(n, control, seed, tmp / f"pl-{control}")
        figures: dict[str, object] = dict(vars(totals))
        figures["seconds"] = time.monotonic() - started
        figures["verifier failures"] = figures.pop("verifier_failures")
        blind = control is not None and totals.lost == 0
        figures["ok"] = (
            not blind
            if control
            else not (totals.lost or totals.duplicated or totals.torn or totals.verifier_failures)
        )
        label = "power loss (FUSE)" if control is None else f"  control: {control} (must lose)"
        rows.append((label, figures))
    return rows


def preauth_flood(connections: int, rounds: int, nofile: int | None) -> dict[str, object]:
    """``connections`` TCP connections per round that send a request line, no token and
    never finish their heads, held while two Unix-socket clients write and read; every
    Unix request must succeed. ``nofile`` limits the daemon's open files (``ulimit -n``)."""
    import resource
    import socket
    import threading

    from tests.server.daemon import Daemon

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, connections + 1024), hard))
    served = failed = held_total = 0
    try:
        with Daemon(tcp=True, nofile=nofile).start() as daemon:
            host, port = daemon.http.rsplit(":", 1)
            for n in range(rounds):
                held = []
                for _ in range(connections):
                    sock = socket.socket()
                    try:
                        sock.connect((host, int(port)))
                        sock.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: localhost\r\n")
                        held.append(sock)
                    except OSError:
                        sock.close()
                held_total += len(held)
                counts = [0, 0]

                def client(k: int, round_: int = n, counts: list[int] = counts) -> None:
                    store = daemon.connect()
                    for i in range(100):
                        try:
                            cid = f"flood-{round_}-{k}"
                            store.add(cid, [{"role": "user", "content": str(i)}])
                            assert len(store.get(cid, limit=1)) == 1
                            counts[0] += 1
                        except Exception:  # every failure counts: none is allowed
                            counts[1] += 1
                    store.close()

                threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                served, failed = served + counts[0], failed + counts[1]
                for sock in held:
                    sock.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(f"pre-auth flood (nofile {nofile}): {held_total} slow-head connections held")
    return {
        "cycles": rounds,
        "operations": served + failed,
        "acknowledged": served,
        "lost": failed,
        "duplicated": 0,
        "ok": failed == 0 and served > 0,
    }


def main() -> None:
    """Run every suite and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size")
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "big"))
    parser.add_argument("--skip", default="", help="comma-separated suite names to skip")
    args = parser.parse_args()
    _quiet()
    skip = set(filter(None, args.skip.split(",")))
    s = args.scale
    print(f"soak seed {args.seed} scale {s}")
    rows: list[tuple[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="memoryd-soak-") as tmpdir:
        tmp = Path(tmpdir)
        plan = [
            ("actor crashes", lambda: actor_crashes(int(5000 * s), args.seed, tmp)),
            ("histories + kills", lambda: histories(int(3000 * s), args.seed, tmp)),
            ("I/O faults (libfiu)", lambda: io_faults(int(20 * s), args.seed, tmp)),
            ("stateful (hypothesis)", lambda: stateful(int(2000 * s), args.seed)),
            ("corruption trials", lambda: corruption(int(80 * s), args.seed, tmp)),
            (
                "Redis kill -9 with unkeyed writes (0 duplicates)",
                lambda: redis_kills(int(100 * s), args.seed, tmp),
            ),
            (
                "Redis Cluster kill -9, unkeyed writes",
                lambda: redis_kills(max(1, int(30 * s)), args.seed, tmp, cluster=True),
            ),
            ("daemon disk full", lambda: daemon_disk_full(tmp)),
            ("daemon flaky disk 5 % EIO", lambda: daemon_flaky_disk(60.0 * s, tmp)),
            ("pre-auth flood (TCP)", lambda: preauth_flood(4200, max(1, int(3 * s)), None)),
            ("pre-auth flood nofile=1024", lambda: preauth_flood(1500, max(1, int(3 * s)), 1024)),
        ]
        for name, fn in plan:
            if name.split()[0].lower() in skip:
                continue
            started = time.monotonic()
            figures = fn()
            figures["seconds"] = time.monotonic() - started
            rows.append((name, figures))
        if "power" not in skip:
            rows += powerloss(int(30 * s), args.seed, tmp)
    _table(rows)
    sys.exit(0 if all(f.get("ok") for _, f in rows) else 1)


def _table(rows: list[tuple[str, dict[str, object]]]) -> None:
    widths = [32] + [max(9, len(c)) for c in COLUMNS[1:]]
    print(" | ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)) + " | ok")
    for name, figures in rows:
        cells = [name.ljust(widths[0])]
        for column, width in zip(COLUMNS[1:], widths[1:], strict=True):
            value = figures.get(column, "-")
            text = f"{value:.1f}" if isinstance(value, float) else str(value)
            cells.append(text.rjust(width))
        print(" | ".join(cells) + f" | {'yes' if figures.get('ok') else 'NO'}")


if __name__ == "__main__":
    main()
