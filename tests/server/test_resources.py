"""The daemon's resources under bad and many clients: memory, file descriptors, LMDB readers.

Also: a crash-looping store never takes the daemon down. Everything runs against a
real ``memoryd serve`` process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from tests.helpers import wait_until
from tests.server.daemon import Daemon

MiB = 1 << 20
ADD = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    """A fresh daemon for each test, on its Unix socket: no test sees another's load."""
    with Daemon().start() as running:
        yield running


def pid_of(daemon: Daemon) -> int:
    assert daemon.proc is not None
    return daemon.proc.pid


def status_kib(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` field in KiB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def reset_peak_rss(pid: int) -> None:
    """Reset VmHWM to the current RSS, so it measures the peak from now on (Linux >= 4.0)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def unix_socket(daemon: Daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(60)
    sock.connect(daemon.unix)
    return sock


def read_status(sock: socket.socket) -> int | None:
    """The status of the answer on ``sock``, or None when the daemon closed it without one."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return None
    return int(data.split()[1]) if data.startswith(b"HTTP/1.1 ") else None


def head(cid: str, length: int) -> bytes:
    return (
        f"POST /v1/conversations/{cid}/messages HTTP/1.1\r\nhost: localhost\r\n"
        f"content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    ).encode()


# --------------------------------------------------------------------------- size caps


@pytest.mark.parametrize(
    ("announced", "expect_413"),
    [pytest.param(1 << 30, True, id="1GiB-over-cap"), pytest.param(60 * MiB, False, id="60MiB")],
)
def test_200_clients_announcing_huge_bodies_do_not_grow_memory(
    daemon: Daemon, announced: int, expect_413: bool
) -> None:
    """200 clients announce huge bodies and trickle bytes: RSS grows under 50 MB, nothing written.

    Over the cap each gets 413 from its Content-Length alone; under it the daemon
    buffers only what was sent, and forgets it when the client hangs up.
    """
    pid = pid_of(daemon)
    daemon.connect().add("warm", [{"role": "user", "content": "x"}])
    fds_before = open_fds(pid)
    rss_before = status_kib(pid, "VmRSS")
    reset_peak_rss(pid)
    socks = [unix_socket(daemon) for _ in range(200)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(head(f"huge-{i}", announced) + b'{"messages": [')
        for _ in range(3):
            for sock in socks:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    sock.sendall(b" " * 8)
        if expect_413:
            statuses = Counter(read_status(sock) for sock in socks)
            assert set(statuses) <= {413, None}, statuses
            assert statuses[413] > 0, statuses
        else:
            # every connection is accepted and waiting for its body (the warm-up
            # client's own connection may or may not still be counted in fds_before)
            wait_until(lambda: open_fds(pid) >= fds_before + 199, timeout=30)
        peak = status_kib(pid, "VmHWM")
    finally:
        for sock in socks:
            sock.close()
    growth_mb = (peak - rss_before) / 1024
    print(f"announced {announced} bytes x 200: peak RSS growth {growth_mb:.1f} MB")
    assert growth_mb < 50
    store = daemon.connect()
    assert all(store.version(f"huge-{i}") == 0 for i in range(200))
    wait_until(lambda: open_fds(pid) <= fds_before + 4, timeout=30)


def test_a_chunked_body_over_the_cap_gets_413_and_writes_nothing() -> None:
    """Without a Content-Length the cap is enforced while reading: 413, no write, still serving."""
    daemon = Daemon(extra=("--fault-injection",)).start()
    try:
        sock = unix_socket(daemon)
        with sock:
            sock.sendall(
                b"POST /v1/conversations/chunked/messages HTTP/1.1\r\nhost: localhost\r\n"
                b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            chunk = b"x" * MiB
            try:
                for _ in range(66):  # 66 MiB, over the 64 MiB default cap
                    sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sock.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert read_status(sock) == 413
        assert daemon.connect().version("chunked") == 0
    finally:
        daemon.close()


# --------------------------------------------------------------------------- supervision


def test_a_crash_looping_store_never_takes_the_daemon_down() -> None:
    """200 crashes of the default store, far past every restart intensity: the store is
    restarted with backoff, the daemon stays up, and it writes again afterwards."""
    daemon = Daemon(extra=("--fault-injection",)).start()
    try:
        assert daemon.proc is not None
        crashes = 0
        while crashes < 200:
            with unix_socket(daemon) as sock:
                sock.sendall(
                    b"POST /v1/stores/memoryd.default/crash HTTP/1.1\r\nhost: localhost\r\n"
                    b"connection: close\r\ncontent-length: 0\r\n\r\n"
                )
                if read_status(sock) == 200:
                    crashes += 1
            assert daemon.proc.poll() is None, "the daemon exited"
        assert daemon.connect().add("after", [{"role": "user", "content": "x"}]) == 1
        assert daemon.proc.poll() is None
        assert not any("supervision_tree_stopped" in line for line in daemon.stderr_lines)
    finally:
        daemon.close()


# --------------------------------------------------------------------------- many connections


async def _one_client(
    path: str, i: int, connected: list[int], count: int, gate: asyncio.Event
) -> tuple[int, int | None]:
    cid = f"conv-{i % 200}"
    reader, writer = await asyncio.open_unix_connection(path, limit=1 << 20)
    try:
        connected.append(i)
        if len(connected) == count:
            gate.set()  # every connection is open on the client side
        await gate.wait()
        writer.write(
            f"POST /v1/conversations/{cid}/messages HTTP/1.1\r\nhost: localhost\r\n"
            f"content-type: application/json\r\ncontent-length: {len(ADD)}\r\n\r\n".encode()
            + ADD
        )
        await writer.drain()
        line = await reader.readline()
        status = int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None
        return i, status
    finally:
        writer.close()


async def _many_clients(path: str, count: int) -> list[tuple[int, int | None]]:
    """``count`` connections, all open before any sends its request."""
    gate = asyncio.Event()
    connected: list[int] = []
    tasks = [_one_client(path, i, connected, count, gate) for i in range(count)]
    return list(await asyncio.wait_for(asyncio.gather(*tasks), timeout=120))


def test_a_thousand_concurrent_connections_release_their_fds_and_readers(daemon: Daemon) -> None:
    """1,000 connections over 200 conversations: each add lands once, fds and readers return."""
    pid = pid_of(daemon)
    store = daemon.connect()
    store.add("warm", [{"role": "user", "content": "x"}])
    fds_before = open_fds(pid)
    results = asyncio.run(_many_clients(daemon.unix, 1000))
    statuses = Counter(status for _, status in results)
    print(f"1000 connections: statuses {dict(statuses)}")
    assert set(statuses) <= {200, 503}, statuses
    assert statuses[200] >= 900, statuses
    acked = Counter(f"conv-{i % 200}" for i, status in results if status == 200)
    for cid, count in acked.items():
        assert store.version(cid) == count
    wait_until(lambda: open_fds(pid) <= fds_before + 4, timeout=30)
    print(f"daemon fds: before {fds_before}, after {open_fds(pid)}")
    env = lmdb.open(str(daemon.data), readonly=True, lock=True, max_dbs=8, create=False)
    try:
        table = env.readers().splitlines()
        with env.begin() as txn:  # a slot is still free for a new reader
            assert txn.stat()["entries"] >= 0
    finally:
        env.close()
    slots = [row for row in table[1:] if row.strip()]
    print(f"LMDB reader slots in use: {len(slots)} of 512")
    assert len(slots) <= 64
