"""A Redis that does not fsync every write is refused, unless the caller accepts it.

Real redis-servers started with ``appendonly no`` or ``appendfsync everysec``: the
store refuses them at start, and refuses to write to a server it reconnects to that
is no longer durable; ``require_durable=False`` starts with a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import memoryd
from memoryd.store.redis import durability
from tests.redis_servers import DURABLE, RedisServer

NO_AOF = ("--appendonly", "no", "--save", "")
EVERYSEC = ("--appendonly", "yes", "--appendfsync", "everysec", "--save", "")


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[RedisServer]]:
    started: list[RedisServer] = []
    yield started
    memoryd.shutdown()
    for server in started:
        server.stop()


def run(servers: list[RedisServer], directory: Path, options: tuple[str, ...]) -> RedisServer:
    server = RedisServer(directory, durable=options).start()
    servers.append(server)
    return server


def test_a_redis_without_an_aof_is_refused_at_start(
    servers: list[RedisServer], tmp_path: Path
) -> None:
    """appendonly no: RedisStore.start raises StorageError naming the setting and the way out."""
    server = run(servers, tmp_path / "r", NO_AOF)
    with pytest.raises(memoryd.StorageError, match="appendonly is 'no'") as caught:
        memoryd.RedisStore.start(server.url)
    assert "appendfsync always" in str(caught.value)
    assert "require_durable=False" in str(caught.value)
    assert memoryd.whereis(f"redis:{server.url}/memoryd") is None


def test_a_redis_fsyncing_every_second_is_refused_at_start(
    servers: list[RedisServer], tmp_path: Path
) -> None:
    """appendfsync everysec may lose the last second in a machine crash: refused too."""
    server = run(servers, tmp_path / "r", EVERYSEC)
    with pytest.raises(memoryd.StorageError, match="appendfsync is 'everysec'"):
        memoryd.RedisStore.start(server.url, cluster=False)


def test_a_redis_without_an_aof_starts_with_a_warning_when_accepted(
    servers: list[RedisServer], tmp_path: Path
) -> None:
    """require_durable=False: the store starts, logs redis_not_durable, and writes."""
    server = run(servers, tmp_path / "r", NO_AOF)
    with capture_logs() as logs:
        store = memoryd.RedisStore.start(server.url, require_durable=False)
    warnings = [e for e in logs if e["event"] == "redis_not_durable"]
    assert warnings and warnings[0]["log_level"] == "warning"
    assert warnings[0]["appendonly"] == "no"
    assert store.add("c", [user("a")]) == 1
    assert store.get("c") == [user("a")]


def test_writes_to_a_server_restarted_without_an_aof_fail_and_are_not_sent(
    servers: list[RedisServer], tmp_path: Path
) -> None:
    """The store's server restarts with appendonly no: writes fail with StorageError and
    nothing reaches Redis; once the server is durable again, writes go through."""
    server = run(servers, tmp_path / "r", DURABLE)
    store = memoryd.RedisStore.start(server.url, call_timeout_s=5.0)
    assert store.add("c", [user("a")]) == 1
    server.kill()
    server.durable = NO_AOF
    server.start()
    with pytest.raises(memoryd.StorageError, match="appendonly is 'no'"):
        store.add("c", [user("b")])
    client = server.client()
    try:
        assert client.dbsize() == 0  # the write was not sent
        client.config_set("appendonly", "yes")
        client.config_set("appendfsync", "always")
    finally:
        client.close()
    assert store.add("c", [user("b")]) == 1  # the restart without an AOF lost "a"


def test_a_store_started_before_its_redis_checks_it_before_the_first_write(
    servers: list[RedisServer], tmp_path: Path
) -> None:
    """Started while Redis is down (cluster=False), the store checks the server it
    reaches before writing: a server without an AOF gets no write."""
    server = RedisServer(tmp_path / "r", durable=NO_AOF)
    servers.append(server)
    store = memoryd.RedisStore.start(server.url, cluster=False, call_timeout_s=5.0)
    server.start()
    with pytest.raises(memoryd.StorageError, match="not durable"):
        store.add("c", [user("a")])
    assert store.version("c") == 0


def test_the_durability_rule() -> None:
    """Durable is appendonly yes with appendfsync always; an unknown policy (CONFIG
    disabled) with an AOF is accepted."""
    assert durability.problem(("yes", "always")) is None
    assert durability.problem(("yes", None)) is None
    assert durability.problem(("no", "always")) == "appendonly is 'no'"
    assert durability.problem(("yes", "no")) == "appendfsync is 'no'"
