"""What only the Redis store's ``import_events`` must show: one script, all or nothing.

The contract (`memoryd.testing.ImportContract`) runs against Redis in
`tests/store/redis/test_contract.py`; these tests add what is particular to Redis: a
conflicting or out-of-date import writes nothing, a chunk of 1,500 events is one
request, a Cluster feeds only what an import wrote, and ``memoryd export`` /
``memoryd import`` round-trip between two daemons on the Redis backend. The
servers are real ``redis-server`` processes (``appendfsync always``).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd import codec
from memoryd.events import Event, replay
from memoryd.store.redis import scripts as redis_scripts
from memoryd.store.redis.batch import Batch
from memoryd.store.redis.plan import Plan
from tests.redis_servers import RedisCluster, RedisServer
from tests.server.daemon import Daemon

_stores = itertools.count()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def event(
    version: int, kind: str, messages: list[dict[str, Any]] | None = None, **fields: Any
) -> Event:
    fields.setdefault("timestamp", 1_700_000_000.5 + version)
    return Event(version=version, kind=kind, messages=tuple(messages or ()), **fields)


def long_log(n: int, *, clear_at: int | None = None) -> list[Event]:
    """``n`` events: appends (every 10th keyed), memos, pops, and a clear at ``clear_at``."""
    log: list[Event] = []
    for v in range(1, n + 1):
        if v == clear_at:
            log.append(event(v, "cleared"))
        elif v % 7 == 0:
            log.append(event(v, "memo", data={"memo": f"m{v}", "n": [v, 0.5, None]}))
        elif v % 11 == 0 and replay(log):
            log.append(event(v, "popped", [replay(log)[-1]]))
        else:
            key = f"k-{v}" if v % 10 == 0 else None
            log.append(
                event(v, "appended", [user(f"{v}-a"), user(f"{v}-b" * 50)], idempotency_key=key)
            )
    return log


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a single redis-server, then of a three-master Cluster."""
    if request.param == "server":
        server: RedisServer = request.getfixturevalue("redis_server")
        yield server.url
        memoryd.shutdown()
        server.flush()
    else:
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        yield cluster.url
        memoryd.shutdown()
        cluster.flush()


def start(url: str, prefix: str | None = None, **options: Any) -> memoryd.RedisStore:
    prefix = prefix or f"imp-{uuid.uuid4().hex[:8]}"
    return memoryd.RedisStore.start(url, prefix=prefix, name=f"imp-{next(_stores)}", **options)


def test_an_import_whose_later_event_conflicts_writes_nothing(url: str) -> None:
    """Events 1-5 stored; an import of 1-1000 whose event 4 differs writes none of 6-1000."""
    store = start(url)
    log = long_log(1000)
    assert store.import_events("c", log[:5]) == 5
    feed = store.tail(limit=100_000)
    other = event(4, "appended", [user("not the stored one")])
    attempt = [*log[:3], other, *log[4:]]
    with pytest.raises(memoryd.ConflictError, match="at version 4"):
        store.import_events("c", attempt)
    assert store.events("c") == log[:5]
    assert store.version("c") == 5
    assert store.tail(limit=100_000) == feed
    assert store.get("c") == replay(log[:5])
    # The idempotency key of event 10, which was not written, is not recorded either.
    assert store.add("c", [user("new")], idempotency_key="k-10") == 6


def test_an_import_of_1500_events_is_one_request(url: str) -> None:
    """1,500 events with keys, memos, pops and a clear at 700 go in one script call."""
    store = start(url)
    log = long_log(1500, clear_at=700)
    before = store.stats()
    assert store.import_events("c", log) == 1500
    after = store.stats()
    assert after["commits"] - before["commits"] == 1
    assert after["appends"] - before["appends"] == 1
    assert store.events("c") == log[699:]  # the clear at 700 deleted what came before
    assert store.version("c") == 1500
    assert store.get("c") == replay(log)
    assert store.get("c", limit=3) == replay(log)[-3:]
    changes = [c.event for c in store.tail(limit=100_000) if c.conversation_id == "c"]
    assert changes == log[699:]
    assert store.import_events("c", log) == 1500
    assert store.events("c") == log[699:]
    assert store.stats()["commits"] == after["commits"]  # nothing sent: all present
    assert store.add("c", [user("again")], idempotency_key="k-1200") == 1200
    assert store.add("c", [user("again")], idempotency_key="k-10") == 10  # before the clear
    assert store.version("c") == 1500


def test_a_log_starting_at_a_late_cleared_marker_feeds_only_its_events(url: str) -> None:
    """A cleared marker at version 1,000,000 gives the feed two positions, not a million."""
    store = start(url)
    log = [event(1_000_000, "cleared"), event(1_000_001, "appended", [user("after")])]
    assert store.import_events("c", log) == 1_000_001
    changes = store.tail(limit=100)
    assert [c.event for c in changes] == log
    assert [c.position for c in changes] == [1, 2]
    assert store.stats()["last_position"] == 2
    assert store.add("c", [user("next")]) == 1_000_002
    assert [c.position for c in store.tail(after=2)] == [3]


def test_an_import_overtaken_by_another_daemons_write_is_planned_again(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store writes version 1 after the import was planned and before it was sent:
    the script refuses the out-of-date plan, the import is planned again and conflicts,
    and none of its events is written."""
    prefix = f"race-{uuid.uuid4().hex[:8]}"
    mine, theirs = start(redis_server.url, prefix), start(redis_server.url, prefix)
    sent = Batch._send
    overtaken: list[int] = []

    def send_late(batch: Batch, plans: list[Plan]) -> Any:
        if plans[0].kind == "import" and not overtaken:
            overtaken.append(theirs.add("c", [user("theirs")]))
        return sent(batch, plans)

    monkeypatch.setattr(Batch, "_send", send_late)
    log = [event(1, "appended", [user("mine")]), event(2, "appended", [user("mine too")])]
    try:
        with pytest.raises(memoryd.ConflictError, match="at version 1"):
            mine.import_events("c", log)
        assert overtaken == [1]
        assert [e.messages for e in mine.events("c")] == [(user("theirs"),)]
        assert [c.messages for c in mine.tail()] == [(user("theirs"),)]
        assert mine.add("c", [user("after")]) == 2  # the writer's view was dropped
    finally:
        memoryd.shutdown()
        redis_server.flush()


def test_the_import_script_writes_nothing_on_an_out_of_date_base(
    redis_server: RedisServer,
) -> None:
    """IMPORT sent with a base version the conversation has left answers stale, untouched."""
    prefix = f"stale-{uuid.uuid4().hex[:8]}"
    store = start(redis_server.url, prefix)
    store.add("c", [user("a")], idempotency_key="k-a")
    keys = redis_scripts.import_keys(prefix, "c", cluster=False)
    words: list[Any] = []
    for e in (event(1, "cleared"), event(2, "appended", [user("b")], idempotency_key="k-b")):
        words += (
            e.version,
            str(e.kind),
            len(e.messages),
            codec.pack_event(e),
            e.idempotency_key or "",
        )
    client = redis_server.client()
    try:
        raw = client.eval(
            redis_scripts.IMPORT, len(keys), *keys, "tok", 0, 1, 1, "1", "63", 256, "", 0, *words
        )
        assert [raw[0], *(int(x) for x in raw[1:])] == [b"stale", 1, 1, 1]
        assert client.hget(keys[2], "k-b") is None
    finally:
        client.close()
    assert store.version("c") == 1
    assert store.get("c") == [user("a")]
    assert [c.version for c in store.tail()] == [1]
    memoryd.shutdown()


# -- the CLI between two daemons on the Redis backend ----------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


@pytest.fixture
def two_redis(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    source = RedisServer(tmp_path / "source").start()
    target = RedisServer(tmp_path / "target").start()
    yield source, target
    source.stop()
    target.stop()


def test_cli_export_and_import_between_redis_backed_daemons(
    two_redis: tuple[RedisServer, RedisServer], tmp_path: Path
) -> None:
    """`memoryd export` from a daemon on one Redis, `memoryd import` into a daemon on
    another: the same events (timestamps, keys, kinds) and the same export; again: nothing."""
    source_redis, target_redis = two_redis
    source = Daemon(extra=("--backend", source_redis.url)).start()
    target = Daemon(extra=("--backend", target_redis.url)).start()
    try:
        remote = source.connect()
        for c in range(5):
            for e in range(30):
                key = f"k{e}" if e % 4 == 0 else None
                remote.add(f"conv-{c}", [user(f"{c}/{e}"), user("x" * e)], idempotency_key=key)
            remote.pop(f"conv-{c}")
        remote.record("conv-0", "memo", data={"memo": "likes tea"})
        remote.fork("conv-1", "fork-1")
        remote.add("reset", [user("gone")])
        remote.clear("reset")
        remote.add("reset", [user("kept")], idempotency_key="r")
        remote.add("emptied", [user("gone")])
        remote.clear("emptied")
        first, second, third = (tmp_path / f"{n}.jsonl" for n in (1, 2, 3))
        done = cli("export", "--address", source.address, "--out", str(first))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"conversations": 8, "events": 5 * 31 + 1 + 1 + 2 + 1}
        done = cli("import", str(first), "--address", target.address)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert (summary["imported"], summary["conflicts"]) == (8, [])
        assert cli("export", "--address", target.address, "--out", str(second)).returncode == 0
        assert second.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")
        imported = target.connect()
        for cid in remote.conversations(include_empty=True):
            assert imported.events(cid) == remote.events(cid)
        feed = imported.tail(limit=100_000)
        again = cli("import", str(first), "--address", target.address)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["present"] == 8
        assert json.loads(again.stdout)["events_written"] == 0
        assert imported.tail(limit=100_000) == feed
        assert cli("export", "--address", target.address, "--out", str(third)).returncode == 0
        assert third.read_text(encoding="utf-8") == first.read_text(encoding="utf-8")
        assert imported.add("reset", [user("kept")], idempotency_key="r") == 3
    finally:
        source.close()
        target.close()
        memoryd.shutdown()
