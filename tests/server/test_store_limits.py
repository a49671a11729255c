"""Named stores on the daemon: reads never create one, and creation is capped.

Also the smaller promises of the daemon's edge: a feed stream refuses a bad ``after``
before it starts, an import cannot write a version the conversation could never
grow past, and a data directory open to other users is made private.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import memoryd
from memoryd.errors import StoreNotRunning, UnknownStore
from memoryd.store.requests import MAX_IMPORT_VERSION
from tests.server.daemon import Daemon
from tests.server.test_security import raw_request

READS = (
    b"/messages",
    b"/version",
    b"/events",
)
STORE_READS = (
    b"/v1/stores/typo/conversations",
    b"/v1/stores/typo/tail",
    b"/v1/stores/typo/tail/stream",
    b"/v1/stores/typo/stats",
    *(b"/v1/stores/typo/conversations/x" + route for route in READS),
)


@pytest.mark.parametrize("target", STORE_READS)
def test_a_read_of_a_store_that_does_not_exist_is_404_and_creates_nothing(
    daemon: Daemon, target: bytes
) -> None:
    """Every read of a named store that does not exist answers a JSON 404 that says so,
    and no store appears (neither running nor on disk)."""
    status, answer = raw_request(daemon, "GET", target)
    assert status == 404, answer
    assert answer is not None and answer["error"]["type"] == "UnknownStore"
    assert "does not exist" in answer["error"]["message"]
    assert not (daemon.data / "stores" / "typo").exists()
    status, listing = raw_request(daemon, "GET", b"/v1/stores")
    assert "typo" not in [s["name"] for s in (listing or {}).get("stores", [])]


def test_a_strict_client_read_of_a_missing_store_raises_unknown_store(daemon: Daemon) -> None:
    """With ``empty_when_missing=False`` the 404 is `UnknownStore` (a `StoreNotRunning`),
    raised at once, and nothing is created."""
    handle = memoryd.connect(daemon.address, store="missing-one", empty_when_missing=False)
    with pytest.raises(UnknownStore, match="does not exist") as raised:
        handle.get("x")
    assert isinstance(raised.value, StoreNotRunning)
    assert not (daemon.data / "stores" / "missing-one").exists()


def test_a_missing_store_reads_as_empty_until_its_first_write_creates_it(daemon: Daemon) -> None:
    """A `memoryd.connect` handle reads a store the daemon never had as an empty store
    (so an Agent's first turn on a new named store works), creating nothing; its first
    write creates it."""
    handle = daemon.connect(store="fresh-one")
    assert handle.get("c") == []
    assert handle.get("c", limit=5, system=True) == []
    assert handle.version("c") == 0
    assert handle.events("c") == []
    assert handle.conversations() == []
    assert handle.tail(timeout=0.2) == []
    with pytest.raises(UnknownStore, match="does not exist"):  # no figures of it yet
        handle.stats()
    assert not (daemon.data / "stores" / "fresh-one").exists()
    assert handle.add("c", [{"role": "user", "content": "hi"}]) == 1
    assert handle.stats()["appends"] >= 1
    assert handle.get("c") == [{"role": "user", "content": "hi"}]
    assert (daemon.data / "stores" / "fresh-one").exists()


def test_a_write_creates_the_store_and_later_reads_find_it_after_a_restart(
    tmp_path: Path,
) -> None:
    """A write creates a named store; after a daemon restart a read starts it again."""
    with Daemon().start() as daemon:
        daemon.connect(store="notes").add("c", [{"role": "user", "content": "kept"}])
        daemon.restart()
        assert daemon.connect(store="notes").get("c") == [{"role": "user", "content": "kept"}]


def test_creation_past_max_stores_is_a_clear_409_and_creates_nothing() -> None:
    """With ``--max-stores 3`` a write to a fourth store is refused, naming the limit;
    writes to the running ones go on."""
    with Daemon(extra=("--max-stores", "3")).start() as daemon:
        for name in ("s1", "s2", "s3"):
            daemon.connect(store=name).add("c", [{"role": "user", "content": name}])
        status, answer = raw_request(
            daemon,
            "POST",
            b"/v1/stores/s4/conversations/c/messages",
            body=json.dumps({"messages": [{"role": "user", "content": "no"}]}).encode(),
        )
        assert status == 409, answer
        assert answer is not None and "--max-stores 3" in answer["error"]["message"]
        assert not (daemon.data / "stores" / "s4").exists()
        assert daemon.connect(store="s1").add("c", [{"role": "user", "content": "more"}]) == 2


def test_with_1024_files_stores_past_the_budget_are_a_4xx_never_a_500() -> None:
    """Under ``ulimit -n 1024`` the store cap comes from the file budget: 300 writes to
    300 stores get 200 or 409, never a 500, and the Unix socket keeps answering."""
    with Daemon(nofile=1024, extra=("--max-stores", "1000")).start() as daemon:
        [budget] = daemon.events("fd_budget")
        assert budget["max_stores"] < 1000
        body = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()
        statuses = set()
        for i in range(budget["max_stores"] + 20):
            status, _ = raw_request(
                daemon, "POST", f"/v1/stores/n{i}/conversations/c/messages".encode(), body=body
            )
            statuses.add(status)
        assert statuses == {200, 409}
        status, _ = raw_request(daemon, "GET", b"/v1/conversations/c/messages")
        assert status == 200


@pytest.mark.parametrize("after", [b"-1", b"-5"])
def test_a_negative_tail_position_is_a_400_before_any_stream_starts(
    daemon: Daemon, after: bytes
) -> None:
    """``GET /v1/tail/stream?after=-1`` is refused with a JSON 400, not a 200 that aborts."""
    for route in (b"/v1/tail/stream?after=", b"/v1/tail?after="):
        status, answer = raw_request(daemon, "GET", route + after)
        assert status == 400, (route, answer)
        assert answer is not None and "after must be 0 or more" in answer["error"]["message"]


def test_an_import_past_the_version_bound_is_refused_and_the_conversation_stays_writable(
    daemon: Daemon,
) -> None:
    """An import of version 2**64 - 1 is refused with a message naming the bound."""
    event = {
        "version": 2**64 - 1,
        "kind": "appended",
        "messages": [{"role": "user", "content": "x"}],
        "timestamp": 1.0,
        "idempotency_key": None,
        "data": None,
    }
    status, answer = raw_request(
        daemon,
        "POST",
        b"/v1/conversations/huge-version/import",
        body=json.dumps({"events": [event]}).encode(),
    )
    assert status == 400, answer
    assert answer is not None and str(MAX_IMPORT_VERSION) in answer["error"]["message"]
    store = daemon.connect()
    assert store.add("huge-version", [{"role": "user", "content": "y"}]) == 1


def test_a_data_directory_open_to_others_is_made_0700_and_logged(tmp_path: Path) -> None:
    """A data directory created 0755 before the daemon starts is 0700 once it runs."""
    root = Path(os.path.realpath("/tmp")) / f"md-mode-{os.getpid()}"
    data = root / "d"
    data.mkdir(parents=True, mode=0o755)
    os.chmod(data, 0o755)
    try:
        with Daemon(data).start() as daemon:
            assert stat.S_IMODE(data.stat().st_mode) == 0o700
            assert daemon.events("data_directory_made_private")[0]["was"] == "0755"
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_the_cli_prints_the_404_of_a_missing_store(daemon: Daemon) -> None:
    """``memoryd --store typo get x`` says the store does not exist, and creates nothing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    command = ["--store", "typo2", "get", "x"]
    done = subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "--address", daemon.address, *command],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert "store 'typo2' does not exist" in done.stderr
    assert not (daemon.data / "stores" / "typo2").exists()


def test_stopped_stores_are_forgotten_by_the_registry(tmp_path: Path) -> None:
    """Starting and stopping stores of ever new names leaves the registry no bigger: it
    tracks the stores that run, not every name it ever started."""
    from memoryd.server.stores import StoreRegistry
    from memoryd.store import lookup

    registry = StoreRegistry(
        lambda name: memoryd.EphemeralStore.start(name=name),
        max_message_bytes=1 << 20,
        max_stores=2,
    )
    try:
        for n in range(40):
            handle, started = registry.start(f"s{n}", kind="ephemeral")
            assert started
            handle.add("c", [{"role": "user", "content": str(n)}])
            registry.restarts()
            assert registry.running() == [f"s{n}"]
            assert registry.stop(f"s{n}") is True
        assert registry.running() == []
        assert len(registry._names) == 0
        assert [name for name in lookup._opened if name.startswith("s")] == []  # counts go too
        # and a name may come back: a fresh store under it, counted from 0
        registry.start("s3", kind="ephemeral")
        assert registry.restarts() == {"s3": 0}
    finally:
        memoryd.shutdown()
