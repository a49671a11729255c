"""Benchmark the daemon against durable Redis, measured in the same run.

* appends: 8 client processes each appending one message per call, through the
  daemon over TCP and over its Unix socket, vs 8 processes doing RPUSH against
  redis-server with ``appendonly yes`` and ``appendfsync always`` (the durable
  Redis setup a user would pick instead);
* reads: ``get(limit=50)`` p50 over HTTP vs ``LRANGE key -50 -1``;
* the floor of the HTTP stack: the same 8 processes POSTing an add's body (and
  GETting a 50-message answer) to an ASGI app that answers at once, on uvicorn as
  the daemon runs it, each rate right after the daemon's matching one; the daemon's
  rates are also shown as a share of this floor, appends and gets over ``--rounds``
  alternating rounds (each round's share, and their median);
* the daemon's group commit: mean batch and fsyncs per append, from its stats;
* where the CPU goes: one client process profiled (cProfile) and, when py-spy is
  installed, the daemon sampled, both broken down by layer per append.

Prints a table and the ratios (ours / Redis; higher is better for rates, lower
for latencies). Without redis-server (or the redis package) the Redis rows read
"not installed".

Usage: python tools/bench_daemon.py [--adds 400] [--reads 2000]
(a short run: --adds 100 --reads 300)
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLIENTS = 8
TOKEN = "bench-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- workers


Span = tuple[float, float, float]  # started, ended, CPU seconds of the client process


def _memoryd_writer(args: tuple[str, str | None, int, int, Any]) -> Span:
    import memoryd

    address, token, worker, adds, barrier = args
    store = memoryd.connect(address, token=token)
    store.version("warm")
    barrier.wait()
    cpu = time.process_time()
    started = time.monotonic()
    for i in range(adds):
        store.add(f"bench-{worker}", [{"role": "user", "content": f"message {i} " + "x" * 100}])
    return started, time.monotonic(), time.process_time() - cpu


def _memoryd_reader(args: tuple[str, str | None, int, int, Any]) -> Span:
    import memoryd

    address, token, _, reads, barrier = args
    store = memoryd.connect(address, token=token)
    store.get("reads", limit=50)
    barrier.wait()
    cpu = time.process_time()
    started = time.monotonic()
    for _ in range(reads):
        store.get("reads", limit=50)
    return started, time.monotonic(), time.process_time() - cpu


def _profiled_writer(args: tuple[str, str | None, int, int, str, Any]) -> Span:
    """`_memoryd_writer` with its appends (only) under cProfile, dumped to ``args[4]``."""
    import cProfile

    import memoryd

    address, token, worker, adds, dump, barrier = args
    store = memoryd.connect(address, token=token)
    store.version("warm")
    barrier.wait()
    profile = cProfile.Profile(time.process_time)  # CPU, not waits
    cpu = time.process_time()
    started = time.monotonic()
    profile.enable()
    for i in range(adds):
        store.add(f"bench-{worker}", [{"role": "user", "content": f"message {i} " + "x" * 100}])
    profile.disable()
    span = started, time.monotonic(), time.process_time() - cpu
    profile.dump_stats(dump)
    return span


def _redis_writer(args: tuple[int, int, int, Any]) -> Span:
    import redis

    port, worker, adds, barrier = args
    r = redis.Redis(port=port)
    r.ping()
    barrier.wait()
    cpu = time.process_time()
    started = time.monotonic()
    for i in range(adds):
        r.rpush(f"bench-{worker}", f'{{"role":"user","content":"message {i} {"x" * 100}"}}')
    return started, time.monotonic(), time.process_time() - cpu


_EMPTY_APP = """
import json
FIFTY = json.dumps({"messages": [{"role": "user", "content": f"m{i} " + "y" * 100}
                                 for i in range(50)]}).encode()
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    body = FIFTY if scope["method"] == "GET" else b'{"version":1}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
"""


def _floor_writer(args: tuple[str, int, int, Any]) -> Span:
    """POSTs an add's body to an ASGI app that answers at once: the HTTP stack alone."""
    import json

    from memoryd.client._http import HttpTransport

    base, worker, adds, barrier = args
    http = HttpTransport(base, uds=None, headers={"content-type": "application/json"})
    barrier.wait()
    cpu = time.process_time()
    started = time.monotonic()
    for i in range(adds):
        body = {"messages": [{"role": "user", "content": f"message {i} " + "x" * 100}]}
        http.request(
            "POST",
            f"/v1/conversations/bench-{worker}/messages",
            content=json.dumps(body).encode(),
            timeout=30,
        )
    return started, time.monotonic(), time.process_time() - cpu


def _floor_reader(args: tuple[str, int, int, Any]) -> Span:
    """GETs a 50-message answer from an ASGI app that answers at once."""
    from memoryd.client._http import HttpTransport

    base, _, reads, barrier = args
    http = HttpTransport(base, uds=None, headers={"accept": "application/json"})
    barrier.wait()
    cpu = time.process_time()
    started = time.monotonic()
    for _ in range(reads):
        http.request("GET", "/v1/conversations/reads/messages?limit=50", timeout=30)
    return started, time.monotonic(), time.process_time() - cpu


def _start_empty_app(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """uvicorn (httptools, uvloop: as the daemon runs it) serving `_EMPTY_APP`."""
    (root / "empty_app.py").write_text(_EMPTY_APP)
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--app-dir",
            str(root),
            "empty_app:app",
            "--port",
            str(port),
            "--http",
            "httptools",
            "--loop",
            "uvloop",
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not _came_up(proc, lambda: socket.create_connection(("127.0.0.1", port), 1).close()):
        raise SystemExit("uvicorn did not start")
    return proc, f"http://127.0.0.1:{port}"


def _came_up(
    proc: subprocess.Popen[Any], probe: Any, errors: Any = OSError, wait_s: float = 20.0
) -> bool:
    """Call ``probe()`` until it stops raising ``errors`` (True), or kill ``proc`` after
    ``wait_s`` (False)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            probe()
            return True
        except errors:
            if time.monotonic() > deadline:
                proc.kill()
                return False
            time.sleep(0.05)


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds a process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Rate:
    """Appends per second, and CPU microseconds per append on each side."""

    per_s: float
    client_us: float
    server_us: float


def _rate(fn: Any, jobs: list[tuple[Any, ...]], adds: int, server_pid: int) -> Rate:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(len(jobs))
        with ctx.Pool(len(jobs)) as pool:
            before = _cpu_s(server_pid)
            spans = pool.map(fn, [(*job, barrier) for job in jobs])
            server = _cpu_s(server_pid) - before
    elapsed = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    total = len(jobs) * adds
    client = sum(cpu for _, _, cpu in spans)
    return Rate(total / elapsed, client / total * 1e6, server / total * 1e6)


def _pooled(rounds: list[Rate]) -> Rate:
    """Rounds of the same work as one: the rate over their total time, the CPU per operation
    over all their operations."""
    return Rate(
        len(rounds) / sum(1 / r.per_s for r in rounds),
        statistics.fmean(r.client_us for r in rounds),
        statistics.fmean(r.server_us for r in rounds),
    )


def _shares(ours: list[Rate], floor: list[Rate]) -> list[float]:
    """Each round's share of the floor: memoryd's rate over the floor's right after it."""
    return [o.per_s / f.per_s for o, f in zip(ours, floor, strict=True)]


def _listed(values: list[float]) -> str:
    return "[" + " ".join(f"{v:.2f}" for v in values) + "]"


def _store_path_worker(adds: int) -> float:
    """In a fresh process: CPU µs per append of 8 threads appending to an `EphemeralStore`."""
    import threading

    import memoryd
    from memoryd.logging import configure

    configure(level="warning")
    store = memoryd.EphemeralStore.start()
    message = [memoryd.messages.user("bench " + "x" * 100)]

    def write(worker: int) -> None:
        for _ in range(adds):
            store.add(f"c{worker}", message)

    write(CLIENTS)  # warm: a conversation of its own
    threads = [threading.Thread(target=write, args=(w,)) for w in range(CLIENTS)]
    cpu = time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    used = time.process_time() - cpu
    memoryd.shutdown()
    return used / (CLIENTS * adds) * 1e6


def _store_path_cpu(adds: int) -> float:
    """CPU µs per append of memoryd's store path alone, without the disk or HTTP.

    Eight threads append to an `EphemeralStore` (the same handle, actor, group commit
    and LMDB layout, no fsync) in a child process: what the daemon's own work costs
    at the least, whatever its HTTP layer and disk.
    """
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return float(pool.apply(_store_path_worker, (adds,)))


def _durable_worker(adds: int) -> tuple[float, float, float]:
    """In a fresh process: 8 threads appending to a durable `LmdbStore` (fsync on, no HTTP).

    Returns ``(appends/s, ms per commit, appends per commit)``.
    """
    import threading

    import memoryd
    from memoryd.logging import configure

    configure(level="warning")
    root = Path(tempfile.mkdtemp(prefix="md-bench-ceiling-", dir="/tmp"))
    try:
        store = memoryd.LmdbStore.start(root / "data", name="bench-ceiling")
        message = [memoryd.messages.user("bench " + "x" * 100)]
        store.add("warm", message)
        before = int(store.stats()["fsyncs"])

        def write(worker: int) -> None:
            for _ in range(adds):
                store.add(f"c{worker}", message)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(CLIENTS)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        commits = max(int(store.stats()["fsyncs"]) - before, 1)
        memoryd.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = CLIENTS * adds
    return total / elapsed, elapsed / commits * 1e3, total / commits


def _durable_ceiling(adds: int) -> tuple[float, float, float]:
    """The rate the disk allows: `_durable_worker` in a child process.

    With one append in flight per client, an append waits for the commit that carries
    it (two fdatasyncs: ``sync=True, metasync=True``), so no daemon in front of this store
    can append faster than ``CLIENTS`` appends per commit time.
    """
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        rate, ms, batch = pool.apply(_durable_worker, (adds,))
        return float(rate), float(ms), float(batch)


# --------------------------------------------------------------------------- daemon


def _start_daemon(root: Path) -> tuple[subprocess.Popen[str], str, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryd.cli",
            "serve",
            "--data",
            str(root / "data"),
            "--listen",
            f"127.0.0.1:{port}",
            "--token",
            TOKEN,
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    words = proc.stdout.readline().split()
    if not words or words[0] != "memoryd":
        proc.kill()
        raise SystemExit("the daemon did not start")
    return proc, words[2], words[3]


def _memoryd_reads(address: str, samples: int) -> tuple[float, float]:
    """``(p50 seconds, client CPU µs)`` of one ``get(limit=50)`` through the daemon."""
    import memoryd

    store = memoryd.connect(address, token=TOKEN)
    for i in range(4):
        store.add(
            "reads", [{"role": "user", "content": f"m{i}-{j} " + "y" * 100} for j in range(50)]
        )
    store.get("reads", limit=50)  # warm: the connection is open
    times = []
    cpu = time.process_time()
    for _ in range(samples):
        started = time.perf_counter()
        store.get("reads", limit=50)
        times.append(time.perf_counter() - started)
    used = time.process_time() - cpu
    return statistics.median(times), used / samples * 1e6


# --------------------------------------------------------------------------- where the CPU goes


def _layer(path: str, name: str) -> str:
    """The layer a profiled function belongs to, by its file (or builtin's name)."""
    if "memoryd/client" in path:
        return "memoryd client"
    if "memoryd/server" in path:
        return "memoryd server (routes, calls)"
    if "memoryd/store" in path:
        return "memoryd store (handle, actor, LMDB)"
    if "memoryd/" in path:
        return "memoryd core (check, codec)"
    if "supervisors/" in path or "pykka/" in path or "threading.py" in path:
        return "threads, actors, locks"
    if "uvicorn/" in path or "httptools" in path or "asyncio/" in path or "uvloop" in path:
        return "HTTP server (uvicorn, loop)"
    if "starlette/" in path:
        return "starlette"
    if "json" in path or "msgpack" in path:
        return "json / msgpack"
    if (
        "socket" in path
        or "selectors" in path
        or any(call in name for call in ("recv", "send", "poll", "select", "connect"))
    ):
        return "socket system calls"
    return "other"


def _client_breakdown(profile: Path, appends: int) -> dict[str, float]:
    """CPU µs per append by layer, from one client process's cProfile dump."""
    import pstats

    stats: Any = pstats.Stats(str(profile)).stats
    layers: dict[str, float] = {}
    for (path, _, name), (_, _, tottime, _, _) in stats.items():
        layer = _layer(path, name)
        layers[layer] = layers.get(layer, 0.0) + tottime / appends * 1e6
    return layers


_IDLE = ("Condition.wait", "epoll", "select (selectors", "_worker (concurrent")


def _server_breakdown(samples: Path, rate_hz: int, appends: int) -> dict[str, float]:
    """CPU µs per append by layer, from py-spy's raw samples of the daemon (idle left out)."""
    layers: dict[str, float] = {}
    for line in samples.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        leaf = frames[-1]
        if not count.isdigit() or any(mark in leaf for mark in _IDLE):
            continue
        path = leaf[leaf.rfind("(") + 1 :]
        if "engine.py" in path and "_run" in leaf:
            layer = "LMDB commit and fsync"
        elif "runners.py" in path:
            layer = "event loop in C (uvloop, with its waits)"
        else:
            layer = _layer(path, leaf)
        layers[layer] = layers.get(layer, 0.0) + int(count) / rate_hz / appends * 1e6
    return layers


def _profiled_round(root: Path, address: str, adds: int, daemon_pid: int) -> list[str]:
    """One more append round, profiled on both sides; the breakdown's printed lines."""
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    rate_hz = 250
    sampler = None
    samples = root / "server.raw"
    if spy is not None:
        sampler = subprocess.Popen(
            [
                spy,
                "record",
                "-p",
                str(daemon_pid),
                "-r",
                str(rate_hz),
                "-f",
                "raw",
                "--threads",
                "--nonblocking",
                "-o",
                str(samples),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # py-spy attaches
    jobs = [
        (address, TOKEN, w + 2 * CLIENTS, adds, str(root / f"client{w}.prof"))
        for w in range(CLIENTS)
    ]
    _rate(_profiled_writer, jobs, adds, daemon_pid)
    lines = ["client (cProfile CPU time, one of 8 processes; profiling inflates every figure):"]
    client = _client_breakdown(root / "client0.prof", adds)
    lines += [
        f"  {layer:40} {us:>8.1f} us" for layer, us in sorted(client.items(), key=lambda kv: -kv[1])
    ]
    if sampler is None:
        lines.append("server: py-spy not installed (pip install py-spy)")
        return lines
    sampler.send_signal(signal.SIGINT)
    sampler.wait(60)
    if not samples.exists():
        lines.append("server: py-spy could not attach (ptrace not permitted?)")
        return lines
    server = _server_breakdown(samples, rate_hz, adds * CLIENTS)
    lines.append(f"server (py-spy at {rate_hz} Hz, idle waits left out; fsync waits included):")
    lines += [
        f"  {layer:40} {us:>8.1f} us" for layer, us in sorted(server.items(), key=lambda kv: -kv[1])
    ]
    return lines


def _wall_s(argv: list[str], runs: int = 5) -> float:
    """Median wall time of running ``argv`` to the end (output discarded).

    The commands run as an installed package would: with compiled bytecode (cached
    under a temporary ``PYTHONPYCACHEPREFIX`` by a first, unmeasured run), even when
    this process was started with ``PYTHONDONTWRITEBYTECODE``.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    times = []
    for run in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env
        )
        if run:  # the first run compiles the bytecode
            times.append(time.perf_counter() - started)
    return statistics.median(times)


_PYCACHE = tempfile.mkdtemp(prefix="md-bench-pycache-")


def _cli_start(address: str, runs: int = 5) -> tuple[float, float]:
    """``(memoryd get seconds, python -c pass seconds)``, medians, measured side by side."""
    command = [sys.executable, "-m", "memoryd.cli", "--address", address, "--token", TOKEN]
    get = _wall_s([*command, "get", "reads", "--limit", "50", "--json"], runs)
    bare = _wall_s([sys.executable, "-c", "pass"], runs)
    return get, bare


def _cli_start_rounds(rounds: int = 3, runs: int = 11) -> None:
    """Print the ``cli-start`` row alone: ``memoryd get`` against a daemon vs ``python -c pass``.

    Each round takes the median of ``runs`` runs of each command, side by side; the row
    shows every round's ratio and the median round.
    """
    import memoryd

    root = Path(tempfile.mkdtemp(prefix="md-bench-", dir="/tmp"))
    daemon, _unix, http = _start_daemon(root)
    try:
        store = memoryd.connect(http, token=TOKEN)
        store.add("reads", [{"role": "user", "content": f"m{j} " + "y" * 100} for j in range(50)])
        results = [_cli_start(http, runs) for _ in range(rounds)]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        shutil.rmtree(root, ignore_errors=True)
    ratios = sorted(get / bare for get, bare in results)
    get_ms = statistics.median(get for get, _ in results) * 1e3
    bare_ms = statistics.median(bare for _, bare in results) * 1e3
    print(
        f"cli-start: memoryd get {get_ms:.0f} ms, python -c pass {bare_ms:.0f} ms "
        f"(medians of {rounds} rounds x {runs} runs); ratio per round "
        + ", ".join(f"{r:.2f}x" for r in ratios)
        + f"; median {statistics.median(ratios):.2f}x (target <= 3x)"
    )


def _commits(address: str) -> tuple[int, int, float, float]:
    """The daemon's default store's ``(appends, fsyncs, txn_build_s, txn_commit_s)`` so far."""
    import memoryd

    stats = memoryd.connect(address, token=TOKEN).stats()
    return (
        int(stats["appends"]),
        int(stats["fsyncs"]),
        float(stats["txn_build_s"]),
        float(stats["txn_commit_s"]),
    )


# --------------------------------------------------------------------------- redis


def _start_redis(root: Path) -> tuple[subprocess.Popen[bytes], int] | None:
    binary = shutil.which("redis-server")
    try:
        import redis
    except ImportError:
        return None
    if binary is None:
        return None
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--dir",
            str(root),
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    up = _came_up(proc, redis.Redis(port=port).ping, redis.ConnectionError)
    return (proc, port) if up else None


def _redis_reads(port: int, samples: int) -> float:
    import redis

    r = redis.Redis(port=port)
    for i in range(200):
        r.rpush("reads", f'{{"role":"user","content":"m{i} {"y" * 100}"}}')
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        r.lrange("reads", -50, -1)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=400, help="appends per client process")
    parser.add_argument(
        "--reads",
        type=int,
        default=2000,
        help="get(limit=50) samples of the one-client p50, and reads per process of the rates",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="alternating rounds of memoryd and its floor for the append and get shares",
    )
    parser.add_argument(
        "--only", choices=["cli-start"], help="run one row alone (cli-start: 3 rounds)"
    )
    args = parser.parse_args()
    if args.only == "cli-start":
        _cli_start_rounds()
        return
    root = Path(tempfile.mkdtemp(prefix="md-bench-", dir="/tmp"))
    daemon, unix, http = _start_daemon(root)
    redis_proc = None
    empty: subprocess.Popen[bytes] | None = None
    try:
        # the floor runs beside the daemon, each of its rates measured right after the
        # daemon's matching one: a share compares rates of the same moment
        empty, empty_url = _start_empty_app(root)
        jobs_unix = [(unix, None, w + CLIENTS, args.adds) for w in range(CLIENTS)]
        floor_jobs = [(empty_url, w, args.adds) for w in range(CLIENTS)]
        tcp_rounds: list[Rate] = []
        floor_rounds: list[Rate] = []
        appended = fsyncs = 0
        build_s = commit_s = 0.0
        for turn in range(args.rounds):
            jobs_tcp = [(http, TOKEN, w + turn * CLIENTS, args.adds) for w in range(CLIENTS)]
            before = _commits(http)
            tcp_rounds.append(_rate(_memoryd_writer, jobs_tcp, args.adds, daemon.pid))
            after = _commits(http)
            appended += after[0] - before[0]
            fsyncs += after[1] - before[1]
            build_s += after[2] - before[2]
            commit_s += after[3] - before[3]
            floor_rounds.append(_rate(_floor_writer, floor_jobs, args.adds, empty.pid))
        over_tcp, floor = _pooled(tcp_rounds), _pooled(floor_rounds)
        over_unix = _rate(_memoryd_writer, jobs_unix, args.adds, daemon.pid)
        get_p50, get_client_us = _memoryd_reads(http, args.reads)
        # every process reads --reads times: a rate (and the CPU read from /proc in
        # clock ticks) over a fraction of a second would be mostly noise
        reads_per = max(args.reads, 50)
        get_rounds: list[Rate] = []
        floor_get_rounds: list[Rate] = []
        for _ in range(args.rounds):
            get_rounds.append(
                _rate(
                    _memoryd_reader,
                    [(http, TOKEN, w, reads_per) for w in range(CLIENTS)],
                    reads_per,
                    daemon.pid,
                )
            )
            floor_get_rounds.append(
                _rate(
                    _floor_reader,
                    [(empty_url, w, reads_per) for w in range(CLIENTS)],
                    reads_per,
                    empty.pid,
                )
            )
        gets, floor_gets = _pooled(get_rounds), _pooled(floor_get_rounds)
        empty.terminate()
        empty.wait(30)
        empty = None
        breakdown = _profiled_round(root, http, args.adds, daemon.pid)
        cli_get, bare = _cli_start(http)
        store_us = _store_path_cpu(args.adds)
        ceiling, commit_ms, ceiling_batch = _durable_ceiling(args.adds)
        started = _start_redis(root)
        theirs: Rate | None = None
        lrange_p50: float | None = None
        if started is not None:
            redis_proc, port = started
            theirs = _rate(
                _redis_writer,
                [(port, w, args.adds) for w in range(CLIENTS)],
                args.adds,
                redis_proc.pid,
            )
            lrange_p50 = _redis_reads(port, args.reads)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)
        if empty is not None:
            empty.terminate()
            empty.wait(30)
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)

    def ratio(ours: float, theirs: float | None) -> str:
        return "not installed" if theirs is None else f"{ours / theirs:.2f}x"

    missing = "not installed"
    print(f"memoryd daemon vs redis-server (appendonly yes, appendfsync always), {CLIENTS} clients")
    print(f"{'measure':44} {'memoryd':>12} {'redis':>14} {'ratio':>14}")
    redis_rate = theirs.per_s if theirs is not None else None
    rows = [
        ("appends/s, 8 processes, TCP", over_tcp),
        ("appends/s, 8 processes, Unix socket", over_unix),
    ]
    for label, ours in rows:
        shown = f"{redis_rate:.0f}" if redis_rate is not None else missing
        print(f"{label:44} {ours.per_s:>12.0f} {shown:>14} {ratio(ours.per_s, redis_rate):>14}")
    shown = f"{lrange_p50 * 1e6:.0f} us" if lrange_p50 is not None else missing
    print(
        f"{'get(limit=50) p50 over HTTP vs LRANGE':44} {get_p50 * 1e6:>9.0f} us {shown:>14} "
        f"{ratio(get_p50, lrange_p50):>14}"
    )
    print(
        "append ratio = memoryd rate / redis rate (target >= 1.0x); "
        "read ratio = memoryd p50 / redis p50 (target <= 2.0x)"
    )
    # Where the time goes: both sides are CPU-bound on a small machine, so the CPU
    # each append costs (client processes, and the server process) explains the rates.
    # The empty app is the floor of the HTTP stack alone: the same POSTs, answered at once.
    print(f"{'POSTs/s to an empty ASGI app on uvicorn, TCP':44} {floor.per_s:>12.0f}")
    print(f"{'GETs/s (50 messages) from it, 8 processes':44} {floor_gets.per_s:>12.0f}")
    print(f"{'get(limit=50)/s, memoryd, 8 processes, TCP':44} {gets.per_s:>12.0f}")
    append_shares = _shares(tcp_rounds, floor_rounds)
    get_shares = _shares(get_rounds, floor_get_rounds)
    print(
        f"\nshare of the HTTP floor (memoryd rate / empty app's rate, each round's floor "
        f"right after memoryd's; median of {args.rounds} alternating rounds [each round]; "
        f"targets >= 0.5x appends, >= 0.7x gets):\n"
        f"  appends, TCP {statistics.median(append_shares):.2f}x {_listed(append_shares)}   "
        f"appends, Unix socket {over_unix.per_s / floor.per_s:.2f}x\n"
        f"  get(limit=50) {statistics.median(get_shares):.2f}x {_listed(get_shares)}"
    )
    print(
        f"fsync-bound ceiling ({CLIENTS} threads on a durable LmdbStore, no HTTP, same run): "
        f"{ceiling:.0f} appends/s = {ceiling / floor.per_s:.2f}x the floor "
        f"({commit_ms:.2f} ms per commit, {ceiling_batch:.1f} appends per commit)"
    )
    print(
        f"memoryd get wall time {cli_get * 1e3:.0f} ms, python -c pass {bare * 1e3:.0f} ms: "
        f"{cli_get / bare:.1f}x (target <= 3x)"
    )
    print(
        f"group commit (TCP round): mean batch {appended / max(fsyncs, 1):.1f} appends, "
        f"{fsyncs / max(appended, 1):.3f} fsyncs per append"
    )
    tcp_s = sum(CLIENTS * args.adds / r.per_s for r in tcp_rounds)
    print(
        f"store actor (TCP rounds, its own timers): {commit_s / max(fsyncs, 1) * 1e6:.0f} µs "
        f"committing each batch (page writes and flushes), {build_s / max(fsyncs, 1) * 1e6:.0f}"
        f" µs building it; committing {commit_s / tcp_s:.0%} and building "
        f"{build_s / tcp_s:.0%} of the rounds' time"
    )
    cpus = os.cpu_count() or 1
    cpu_per_add = over_tcp.client_us + over_tcp.server_us
    bound = cpus / cpu_per_add * 1e6
    print(
        f"CPU bound of the appends (TCP): {cpu_per_add:.0f} µs of CPU an append (client "
        f"{over_tcp.client_us:.0f} + server {over_tcp.server_us:.0f}) on {cpus} CPUs allow at "
        f"most {bound:.0f} appends/s = {bound / floor.per_s:.2f}x the floor, with every CPU "
        f"busy all the time, commits included (measured: {over_tcp.per_s / bound:.0%} of it)"
    )
    print(f"\nCPU per append (us; {os.cpu_count()} CPUs)      client      server")
    cpu_rows = [
        ("memoryd, TCP", over_tcp),
        ("memoryd, Unix socket", over_unix),
        ("empty ASGI app on uvicorn, TCP", floor),
    ]
    if theirs is not None:
        cpu_rows.append(("redis-server + redis-py", theirs))
    for label, row in cpu_rows:
        print(f"{label:36} {row.client_us:>10.0f} {row.server_us:>11.0f}")
    print(f"{'CPU per get(limit=50), one client, TCP':36} {get_client_us:>10.0f}")
    print("\nCPU per get(limit=50), 8 processes (us)    client      server       total")
    for label, row in (("memoryd, TCP", gets), ("empty ASGI app on uvicorn, TCP", floor_gets)):
        total = row.client_us + row.server_us
        print(f"{label:36} {row.client_us:>10.0f} {row.server_us:>11.0f} {total:>11.0f}")
    cpu_shares = [
        (floor.client_us + floor.server_us) / (ours.client_us + ours.server_us)
        for ours, floor in zip(get_rounds, floor_get_rounds, strict=True)
    ]
    cpu_share = (floor_gets.client_us + floor_gets.server_us) / (gets.client_us + gets.server_us)
    print(
        f"  get share of the floor by CPU per get (floor / memoryd, all rounds' CPU): "
        f"{cpu_share:.2f}x {_listed(cpu_shares)}; the machine's CPUs bound both rates, so "
        "the rates' share tends to it when nothing else runs"
    )
    add_cpu = [o.client_us / f.client_us for o, f in zip(tcp_rounds, floor_rounds, strict=True)]
    get_cpu = [o.client_us / f.client_us for o, f in zip(get_rounds, floor_get_rounds, strict=True)]
    print(
        f"client CPU per operation / the floor client's (median of {args.rounds} rounds "
        f"[each round]): add {statistics.median(add_cpu):.2f}x {_listed(add_cpu)} "
        f"(target <= 1.5x), get(limit=50) {statistics.median(get_cpu):.2f}x "
        f"{_listed(get_cpu)} (target <= 1.3x)"
    )
    print("\nwhere an append's CPU goes (profiled round, us per append):")
    for line in breakdown:
        print(line)
    if redis_rate is not None:
        # The append target as a CPU budget: at Redis's rate the machine's CPUs give each
        # append at most this much CPU in all processes together; the HTTP floor takes
        # its share whatever the app does, and memoryd's store path needs at least its own.
        budget = (os.cpu_count() or 1) * 1e6 / redis_rate
        http = floor.client_us + floor.server_us
        print(
            f"\nCPU budget of an append at 1.0x Redis ({redis_rate:.0f}/s on "
            f"{os.cpu_count()} CPUs): {budget:.0f} us; the HTTP floor takes {http:.0f}, "
            f"memoryd's store path without fsync or HTTP {store_us:.0f} "
            f"(8 threads on an EphemeralStore): {budget - http - store_us:+.0f} us left"
        )


if __name__ == "__main__":
    main()
