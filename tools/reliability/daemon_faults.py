"""A real ``memoryd serve`` under disk faults: a full disk, and a flaky disk (libfiu).

``disk_full(root)`` mounts a small tmpfs, fills it beside the daemon's data directory
and writes until the daemon answers `memoryd.DiskFull`, keeps writing while the disk
stays full, frees the space and writes again. ``flaky_disk(root, seconds)`` runs the
daemon under ``fiu-run -x`` and, through ``fiu-ctrl``, fails 5 % of its
fdatasync/pwrite/pwritev/writev calls with EIO for ``seconds`` while a client writes
with idempotency keys; then clears the fault and measures how long until a write is
acknowledged again. Both then audit: every acknowledged write is there once, and the
daemon never exited. Used by ``tests/reliability/test_daemon_disk.py`` and ``tools/soak.py``.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import memoryd
from memoryd import messages

__all__ = ["FLAKY_POINTS", "DaemonRun", "disk_full", "flaky_disk", "health", "serve"]

FLAKY_POINTS = (
    "posix/io/sync/fdatasync",
    "posix/io/rw/pwrite",
    "posix/io/rw/pwritev",
    "posix/io/rw/writev",
)
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class DaemonRun:
    """What a faulted daemon did."""

    acked: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    refused_full: int = 0
    unhealthy_seen: bool = False
    exited: int | None = None
    recovery_s: float = 0.0
    stored: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing acknowledged was lost or doubled and the daemon stayed up."""
        return not self.problems and self.exited is None


class _Served:
    def __init__(self, proc: subprocess.Popen[str], sock: Path) -> None:
        self.proc = proc
        self.sock = sock
        self.stderr: list[str] = []

    @property
    def address(self) -> str:
        return f"unix://{self.sock}"


@contextmanager
def serve(data: Path, prefix: tuple[str, ...] = ()) -> Iterator[_Served]:
    """A ``memoryd serve --data data`` process (under ``prefix``), stopped on exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    cmd = [*prefix, sys.executable, "-m", "memoryd.cli", "serve", "--data", str(data)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    served = _Served(proc, data / "memoryd.sock")
    errors = proc.stderr
    threading.Thread(target=lambda: served.stderr.extend(errors), daemon=True).start()
    line = proc.stdout.readline()
    if not line.startswith("memoryd ready"):
        proc.kill()
        proc.wait(30)
        raise RuntimeError(f"the daemon did not start: {line!r} {''.join(served.stderr)[-2000:]}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    try:
        yield served
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(30)


def health(sock: Path) -> tuple[int, dict[str, object]]:
    """``GET /healthz`` on the Unix socket: the status and the JSON body."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(sock))
        conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body or b"{}")


def _audit(run: DaemonRun, store: memoryd.RemoteStore, cid: str) -> None:
    keys = [m["content"] for m in store.get(cid)]
    run.stored = len(keys)
    if len(keys) != len(set(keys)):
        run.problems.append("a key is stored twice")
    position = {key: i + 1 for i, key in enumerate(keys)}
    for key, version in run.acked.items():
        if key not in position:
            run.problems.append(f"acknowledged {key} lost")
        elif position[key] != version:
            run.problems.append(f"{key} acknowledged at {version}, stored at {position[key]}")


def disk_full(root: Path, *, size: str = "4m", refusals: int = 50) -> DaemonRun:
    """A daemon on a ``size`` tmpfs (needs root) filled to the brim, then freed."""
    mount = root / "small"
    mount.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    run = DaemonRun()
    try:
        with serve(mount / "d") as daemon:
            store = memoryd.connect(daemon.address)
            filler = mount / "filler"
            free = os.statvfs(mount).f_bavail * os.statvfs(mount).f_frsize
            filler.write_bytes(b"\0" * max(free - (1 << 20), 0))
            i = 0
            while True:
                key = f"k{i:05d}"
                try:
                    run.acked[key] = store.add("c", [messages.user(key + "x" * 8000)])
                except memoryd.DiskFull:
                    break
                i += 1
                if i > 10_000:
                    run.problems.append("the disk never filled")
                    return run
            for n in range(refusals):
                try:
                    store.add("c", [messages.user(f"refused{n}")])
                    run.problems.append("a write was accepted on a full disk")
                except memoryd.DiskFull:
                    run.refused_full += 1
            if health(daemon.sock)[0] != 200:
                run.problems.append("/healthz is not 200 while only the disk is full")
            filler.unlink()
            freed = time.monotonic()
            run.acked["after"] = store.add("c", [messages.user("after")])
            run.recovery_s = time.monotonic() - freed
            run.acked = {k.split("x")[0]: v for k, v in run.acked.items()}
            _audit_keys(run, store)
            run.exited = daemon.proc.poll()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
    return run


def _audit_keys(run: DaemonRun, store: memoryd.RemoteStore) -> None:
    contents = [m["content"].split("x")[0] for m in store.get("c")]
    run.stored = len(contents)
    position = {key: i + 1 for i, key in enumerate(contents)}
    if len(position) != len(contents):
        run.problems.append("a key is stored twice")
    for key, version in run.acked.items():
        if position.get(key) != version:
            run.problems.append(f"{key} acknowledged at {version}, stored at {position.get(key)}")


def _fiu_ctrl(pid: int, base: Path, commands: list[str]) -> None:
    args = ["fiu-ctrl", "-f", str(base)]
    for command in commands:
        args += ["-c", command]
    subprocess.run([*args, str(pid)], check=True, timeout=30)


def flaky_disk(root: Path, seconds: float, probability: float = 0.05) -> DaemonRun:
    """A daemon whose disk fails ``probability`` of its writes and syncs for ``seconds``."""
    root.mkdir(parents=True, exist_ok=True)
    base = root / "fiu"  # fiu-run's control pipes: fiu-<pid>.in / .out
    run = DaemonRun()
    with serve(root / "d", ("fiu-run", "-x", "-f", str(base))) as daemon:
        store = memoryd.connect(daemon.address, timeout=30.0)
        pid = daemon.proc.pid
        _fiu_ctrl(
            pid,
            base,
            [
                f"enable_random name={p},probability={probability},failinfo={errno.EIO}"
                for p in FLAKY_POINTS
            ],
        )
        ends = time.monotonic() + seconds
        i = 0
        while time.monotonic() < ends and daemon.proc.poll() is None:
            key = f"k{i:06d}"
            try:
                run.acked[key] = store.add("c", [messages.user(key)], idempotency_key=key)
                i += 1
            except (memoryd.StorageError, memoryd.StoreUnavailable) as exc:
                run.errors[type(exc).__name__] = run.errors.get(type(exc).__name__, 0) + 1
                if health(daemon.sock)[0] == 503:
                    run.unhealthy_seen = True
        _fiu_ctrl(pid, base, [f"disable name={p}" for p in FLAKY_POINTS])
        cleared = time.monotonic()
        while daemon.proc.poll() is None:
            key = f"k{i:06d}"
            try:
                run.acked[key] = store.add("c", [messages.user(key)], idempotency_key=key)
                break
            except (memoryd.StorageError, memoryd.StoreUnavailable):
                if time.monotonic() - cleared > 60:
                    run.problems.append("no write acknowledged within 60 s of the fault clearing")
                    break
        run.recovery_s = time.monotonic() - cleared
        if daemon.proc.poll() is None and health(daemon.sock)[0] != 200:
            run.problems.append("/healthz is not 200 after the fault cleared")
        run.exited = daemon.proc.poll()
        if run.exited is None:
            _audit(run, store, "c")
        else:
            run.problems.append(f"the daemon exited with {run.exited}")
    return run
