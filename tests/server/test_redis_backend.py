"""Stateless daemons over one Redis: any daemon answers any conversation; SIGKILL loses none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import memoryd
from memoryd.server.stores import redis_prefix
from tests.client._writer import read_acks
from tests.helpers import wait_until
from tests.redis_servers import RedisServer
from tests.server.daemon import Daemon, serve_refused
from tests.server.writers import assert_each_ack_stored_once, start_writers

CLIENTS = 4
PER_CLIENT = 150


@pytest.fixture
def redis_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_two_daemons_serve_the_same_conversations(redis_server: RedisServer) -> None:
    """A write through one daemon is read through the other, with the same versions."""
    a = Daemon(extra=("--backend", redis_server.url)).start()
    b = Daemon(extra=("--backend", redis_server.url)).start()
    try:
        via_a, via_b = a.connect(), b.connect()
        assert via_a.add("shared", [memoryd.messages.user("from a")]) == 1
        assert via_b.add("shared", [memoryd.messages.user("from b")], expected_version=1) == 2
        assert [m["content"] for m in via_a.get("shared")] == ["from a", "from b"]
        with pytest.raises(memoryd.ConflictError):
            via_a.add("shared", [memoryd.messages.user("stale")], expected_version=1)
        notes_a = memoryd.connect(a.address, store="notes")
        notes_b = memoryd.connect(b.address, store="notes")
        notes_a.add("n", [memoryd.messages.user("named store")])
        assert [m["content"] for m in notes_b.get("n")] == ["named store"]
        assert via_b.get("n") == []  # stores stay apart under their own prefixes
    finally:
        a.close()
        b.close()
        memoryd.shutdown()


def test_a_sigkilled_daemon_loses_and_duplicates_nothing(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Clients on two daemons; one daemon is SIGKILLed and restarted mid-run."""
    a = Daemon(extra=("--backend", redis_server.url)).start()
    b = Daemon(extra=("--backend", redis_server.url)).start()
    try:
        acks = [tmp_path / f"acks-{c}" for c in range(CLIENTS)]
        clients = start_writers([a.address, b.address], "r", PER_CLIENT, acks)
        wait_until(
            lambda: all(len(read_acks(p)) >= PER_CLIENT // 3 for p in acks),
            timeout=120,
            message="clients did not get going",
        )
        a.restart()  # SIGKILL, then a fresh, stateless daemon on the same Redis
        for proc in clients:
            assert proc.wait(timeout=180) == 0
        assert_each_ack_stored_once(b.connect(), "r", PER_CLIENT, acks)
    finally:
        a.close()
        b.close()
        memoryd.shutdown()


def test_bad_backend_urls_are_refused_before_serving(tmp_path: Path) -> None:
    """`--backend` takes a Redis URL; anything else is a usage error naming the flag."""
    done = serve_refused(tmp_path / "d", "--backend", "postgres://x")
    assert done.returncode == 2
    assert "--backend must be a redis://" in done.stderr


def test_store_prefixes_are_stable_and_bounded() -> None:
    """Every daemon derives the same prefix for a store name, at most 64 characters."""
    assert redis_prefix("memoryd.default") == "memoryd"
    assert redis_prefix("notes") == "memoryd:notes"
    long_name = "n" * 64
    assert redis_prefix(long_name) == redis_prefix(long_name)
    assert len(redis_prefix(long_name)) <= 64
    assert redis_prefix(long_name) != redis_prefix("n" * 63 + "m")


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_redis_without_an_aof_is_refused_by_serve(tmp_path: Path) -> None:
    """`memoryd serve --backend` on a Redis with appendonly no exits 1 with the reason
    and the flag that accepts it."""
    server = RedisServer(tmp_path / "redis", durable=("--appendonly", "no", "--save", ""))
    server.start()
    try:
        done = serve("--data", str(tmp_path / "d"), "--backend", server.url)
    finally:
        server.stop()
    assert done.returncode == 1
    assert "appendonly is 'no'" in done.stderr
    assert "--redis-not-durable" in done.stderr


def test_serve_with_redis_not_durable_serves_and_warns(tmp_path: Path) -> None:
    """`--redis-not-durable` starts the daemon on such a Redis, with a redis_not_durable
    warning in its log, and it serves."""
    server = RedisServer(tmp_path / "redis", durable=("--appendonly", "no", "--save", ""))
    server.start()
    daemon = Daemon(extra=("--backend", server.url, "--redis-not-durable")).start()
    try:
        assert daemon.connect().add("c", [memoryd.messages.user("a")]) == 1
        wait_until(lambda: daemon.events("redis_not_durable"), timeout=10)
        assert daemon.events("redis_not_durable")[0]["level"] == "warning"
    finally:
        daemon.close()
        server.stop()
        memoryd.shutdown()


def test_redis_not_durable_without_a_backend_is_a_usage_error(tmp_path: Path) -> None:
    """The flag only means something with --backend."""
    done = serve("--data", str(tmp_path / "d"), "--redis-not-durable")
    assert done.returncode == 2
    assert "--redis-not-durable applies to a Redis backend only" in done.stderr


def test_the_command_line_on_the_data_directory_goes_through_its_redis_daemon(
    redis_server: RedisServer,
) -> None:
    """``memoryd --data DIR`` on a directory a Redis-backed daemon serves goes through
    its socket, as for an LMDB one: reads see the daemon's store, a write lands there,
    and no second store is made in DIR."""
    daemon = Daemon(extra=("--backend", redis_server.url)).start()
    try:
        daemon.connect().add("c", [memoryd.messages.user("via the daemon")])

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "memoryd.cli", "--data", str(daemon.data), *args],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )

        read = cli("get", "c")
        assert read.returncode == 0, read.stderr
        assert "via the daemon" in read.stdout
        wrote = cli("add", "c", "--content", "via --data")
        assert wrote.returncode == 0, wrote.stderr
        assert [m["content"] for m in daemon.connect().get("c")] == [
            "via the daemon",
            "via --data",
        ]
        assert not (daemon.data / "data.mdb").exists()
    finally:
        daemon.close()
        memoryd.shutdown()
