"""Where the benchmark writes, and what file system that is."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

#: File systems where fsync costs nothing, so durable figures would be meaningless.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs"})


def filesystem_of(path: Path) -> str:
    """Return the type of the file system holding ``path`` (from /proc/mounts), or "?"."""
    target = os.path.realpath(path)
    best, kind = "", "?"
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, kind = point, fields[2]
    except OSError:
        return "?"
    return kind


def default_base_dir(repo_root: Path) -> Path:
    """Return a scratch directory on the same disk as the repository.

    The system temp directory is used when it is on the repository's device and not in
    memory; otherwise ``<repo>/build/bench`` (ignored by git).
    """
    tmp = Path(tempfile.gettempdir())
    try:
        same_disk = tmp.stat().st_dev == repo_root.stat().st_dev
    except OSError:
        same_disk = False
    if same_disk and filesystem_of(tmp) not in MEMORY_FILESYSTEMS:
        return tmp
    fallback = repo_root / "build" / "bench"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def thread_round_trip_us(rounds: int = 5000) -> float:
    """p50 µs of a bare hand-over between two Python threads and back (lock ping-pong).

    A store write crosses to the store actor's thread and back once, so this is the
    floor that a single writer pays on top of the commit; printed beside the figures
    because it varies widely between machines (virtual CPUs wake slowly).
    """
    import threading
    import time

    there, back = threading.Lock(), threading.Lock()
    there.acquire()
    back.acquire()

    def echo() -> None:
        for _ in range(rounds):
            there.acquire()
            back.release()

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    samples: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        there.release()
        back.acquire()
        samples.append(time.perf_counter() - started)
    thread.join()
    samples.sort()
    return samples[len(samples) // 2] * 1e6
