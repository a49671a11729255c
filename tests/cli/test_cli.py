"""The memoryd command: human output on a TTY, JSON in a pipe; --data; tail -f; export/import."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from tests.helpers import Worker
from tests.server.daemon import Daemon


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "memoryd.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
        check=False,
    )


def run_on_tty(*args: str) -> str:
    """Run the CLI with stdout a terminal; returns what it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd.cli", *args],
        stdout=follower,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=_env(),
    )
    os.close(follower)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(60)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    running = Daemon().start()
    yield running
    running.close()


def test_add_and_get_in_a_pipe_print_json(daemon: Daemon) -> None:
    """Piped output is JSON: add prints the version, get the messages."""
    added = run("add", "pipe", "--role", "user", "--content", "hello", "--address", daemon.address)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout) == {"version": 1}
    got = run("--address", daemon.address, "get", "pipe")
    assert json.loads(got.stdout) == [{"role": "user", "content": "hello"}]


def test_on_a_terminal_output_is_for_people(daemon: Daemon) -> None:
    """On a TTY, get prints 'role: content' lines and stats 'key: value' lines."""
    daemon.connect().add("tty", [{"role": "user", "content": "hi there"}])
    assert run_on_tty("get", "tty", "--address", daemon.address) == "user: hi there\n"
    assert "conversations: " in run_on_tty("stats", "--address", daemon.address)
    assert json.loads(run_on_tty("get", "tty", "--json", "--address", daemon.address)) == [
        {"role": "user", "content": "hi there"}
    ]


def test_add_reads_json_messages_from_stdin(daemon: Daemon) -> None:
    """Without --content, add takes a JSON message or list of messages on stdin."""
    batch = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    done = run("add", "stdin", "--address", daemon.address, stdin=json.dumps(batch))
    assert json.loads(done.stdout) == {"version": 1}
    assert daemon.connect().get("stdin") == batch


def test_every_command_works_through_the_daemon(daemon: Daemon) -> None:
    """pop, fork, conversations, version, events, tail, clear and stats answer in JSON."""
    a = ("--address", daemon.address, "--store", "cmds")
    store = daemon.connect(store="cmds")
    store.add("src", [{"role": "user", "content": "1"}, {"role": "user", "content": "2"}])
    assert json.loads(run("pop", "src", *a).stdout) == {"role": "user", "content": "2"}
    assert json.loads(run("fork", "src", "dst", *a).stdout) == {"version": 1}
    assert json.loads(run("conversations", *a).stdout) == ["dst", "src"]
    assert json.loads(run("version", "src", *a).stdout) == {"version": 2}
    assert [e["kind"] for e in json.loads(run("events", "src", *a).stdout)] == [
        "appended",
        "popped",
    ]
    tail = [json.loads(line) for line in run("tail", *a).stdout.splitlines()]
    assert [(c["position"], c["kind"]) for c in tail] == [
        (1, "appended"),
        (2, "popped"),
        (3, "forked"),
    ]
    assert json.loads(run("clear", "dst", *a).stdout) == {"cleared": "dst"}
    assert json.loads(run("stats", *a).stdout)["conversations"] == 1
    assert json.loads(run("conversations", *a).stdout) == ["src"]
    assert json.loads(run("conversations", "--all", *a).stdout) == ["dst", "src"]


def test_errors_are_named_with_a_nonzero_status(daemon: Daemon) -> None:
    """A bad id or message exits 1 naming the error type; nothing is written."""
    bad = run("add", "x\ny", "--content", "hi", "--address", daemon.address)
    assert bad.returncode == 1
    assert "InvalidConversationId" in bad.stderr
    bad = run("add", "ok", "--role", "robot", "--content", "hi", "--address", daemon.address)
    assert bad.returncode == 1
    assert "InvalidMessage" in bad.stderr
    assert daemon.connect().version("ok") == 0
    nowhere = run("get", "c", "--timeout", "0.5", "--address", "unix:///nonexistent/memoryd.sock")
    assert nowhere.returncode == 1
    assert "StoreUnavailable" in nowhere.stderr


def test_tail_follow_prints_changes_as_they_happen(daemon: Daemon) -> None:
    """tail -f keeps running and prints each new change."""
    store = daemon.connect(store="follow")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryd.cli",
            "tail",
            "-f",
            "--address",
            daemon.address,
            "--store",
            "follow",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        line: list[str] = []
        reader = Worker(lambda: line.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        store.add("late", [{"role": "user", "content": "now"}])
        reader.outcome(timeout=60)
        change = json.loads(line[0])
        assert (change["conversation_id"], change["messages"]) == (
            "late",
            [{"role": "user", "content": "now"}],
        )
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)


def test_data_directory_is_used_directly_when_no_daemon_runs(tmp_path: Path) -> None:
    """--data works without a daemon, and falls back to the daemon's socket when one owns it."""
    data = tmp_path / "data"
    assert json.loads(run("add", "c", "--content", "direct", "--data", str(data)).stdout) == {
        "version": 1
    }
    assert json.loads(run("get", "c", "--data", str(data)).stdout)[0]["content"] == "direct"
    short = Daemon()
    owned = Daemon(data=short.data)
    run("add", "c", "--content", "before", "--data", str(owned.data))
    owned.start()
    try:
        got = run("get", "c", "--data", str(owned.data))
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout) == [{"role": "user", "content": "before"}]
    finally:
        owned.close()
        short.close()


@pytest.mark.parametrize(
    "command",
    [
        ["get", "c"],
        ["version", "c"],
        ["events", "c"],
        ["conversations"],
        ["stats"],
        ["tail"],
        ["export"],
        ["runs"],
        ["runs", "--discard", "r1"],
    ],
)
def test_a_read_of_a_missing_data_directory_or_store_is_refused_and_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    """A mistyped --data or --store is said (UnknownStore, status 1), as a daemon says
    it, instead of being created and read as empty; a write still creates the store."""
    missing = tmp_path / "dta"
    done = run(*command, "--data", str(missing))
    assert done.returncode == 1
    assert f"UnknownStore: no memoryd data directory at '{missing}'" in done.stderr
    assert not missing.exists()
    data = tmp_path / "data"
    assert run("add", "c", "--content", "x", "--data", str(data)).returncode == 0
    done = run(*command, "--data", str(data), "--store", "notes")
    assert done.returncode == 1
    assert f"data directory '{data}' has no store 'notes'" in done.stderr
    assert not (data / "stores").exists()
    written = run("add", "c", "--content", "n", "--data", str(data), "--store", "notes")
    assert written.returncode == 0, written.stderr
    assert json.loads(run("version", "c", "--data", str(data), "--store", "notes").stdout) == {
        "version": 1
    }


def _populate(path: Path, conversations: int, events: int, per_event: int) -> None:
    """Fill a store: appends (some keyed) and a pop per conversation, then memo and
    compacted events, forks, and conversations whose live log starts with a clear."""
    store = memoryd.LmdbStore.start(path, name="populate")
    errors: list[BaseException] = []

    def fill(part: int) -> None:
        try:
            for c in range(part, conversations, 8):
                for e in range(events):
                    batch = [
                        {"role": "user", "content": f"c{c} e{e} m{m} \u00e9"}
                        for m in range(per_event)
                    ]
                    store.add(
                        f"conv-{c:04d}", batch, idempotency_key=f"k{e}" if e % 3 == 0 else None
                    )
                store.pop(f"conv-{c:04d}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=fill, args=(p,)) for p in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for c in range(0, conversations, 50):
        store.record(f"conv-{c:04d}", "memo", data={"memo": f"m{c}", "n": [1, 2.5, None]})
        summary = {"role": "system", "content": f"summary {c}"}
        store.record(f"conv-{c:04d}", "compacted", messages=[summary], data={"to": 5})
    for c in range(0, conversations, 100):
        store.fork(f"conv-{c:04d}", f"fork-{c:04d}")
        store.add(f"fork-{c:04d}", [{"role": "assistant", "content": "forked"}])
    for c in range(5):
        store.add(f"reset-{c}", [{"role": "user", "content": "gone"}])
        store.add(f"reset-{c}", [{"role": "user", "content": "gone too"}])
        store.clear(f"reset-{c}")
        store.add(f"reset-{c}", [{"role": "user", "content": "kept"}], idempotency_key="r")
    for c in range(3):  # cleared, nothing after: only the marker is left
        store.add(f"emptied-{c}", [{"role": "user", "content": "gone"}])
        store.clear(f"emptied-{c}")
    for c in range(2):  # memo events only, as long-term memory keeps its records
        store.record(f"memory-{c}", "memo", data={"record": c})
        store.record(f"memory-{c}", "memo", data={"record": c, "updated": True})
    memoryd.shutdown()


def _by_conversation(changes: list[Any]) -> dict[str, list[Any]]:
    """The change feed split per conversation, each in feed order, as plain events."""
    out: dict[str, list[Any]] = {}
    for change in changes:
        out.setdefault(change.conversation_id, []).append(change.event)
    return out


def _assert_same_stores(source_path: Path, target_path: Path) -> None:
    """Every conversation's events agree field by field, timestamps included, and the
    change feed lists each conversation's events in the same order."""
    source = memoryd.LmdbStore.start(source_path, name="compare-source")
    target = memoryd.LmdbStore.start(target_path, name="compare-target")
    try:
        cids = source.conversations(include_empty=True)
        assert len(cids) == 515
        assert len(source.conversations()) == 510
        assert target.conversations(include_empty=True) == cids
        assert target.conversations() == source.conversations()
        for cid in cids:
            expected = source.events(cid)
            got = target.events(cid)
            assert len(got) == len(expected), cid
            for mine, theirs in zip(got, expected, strict=True):
                assert mine.version == theirs.version, cid
                assert mine.kind == theirs.kind, cid
                assert mine.messages == theirs.messages, cid
                assert mine.timestamp == theirs.timestamp, cid
                assert mine.idempotency_key == theirs.idempotency_key, cid
                assert mine.data == theirs.data, cid
            assert target.get(cid) == source.get(cid)
            assert target.version(cid) == source.version(cid)
        kinds = {e.kind for cid in cids for e in source.events(cid)}
        assert kinds == {"appended", "popped", "memo", "compacted", "forked", "cleared"}
        assert source.events("reset-0")[0].kind == "cleared"
        source_feed = _by_conversation(source.tail(limit=1_000_000))
        target_feed = target.tail(limit=1_000_000)
        assert [c.position for c in target_feed] == sorted(c.position for c in target_feed)
        assert _by_conversation(target_feed) == source_feed
    finally:
        memoryd.shutdown()


def test_export_import_round_trip_of_100k_messages(tmp_path: Path) -> None:
    """100,000 messages export, import and export again identically, every event kind and
    timestamp included; a second import changes nothing."""
    source, target = tmp_path / "source", tmp_path / "target"
    _populate(source, conversations=500, events=20, per_event=10)
    first, second, third = tmp_path / "1.jsonl", tmp_path / "2.jsonl", tmp_path / "3.jsonl"
    done = run("export", "--data", str(source), "--out", str(first))
    assert done.returncode == 0, done.stderr
    # 500 conversations of 21 events, 2 more events on 10 of them, 5 forks of 2 events,
    # 5 cleared-then-written conversations of 2 live events, 3 cleared ones of 1 (the
    # marker) and 2 memo-only ones of 2: conversations without messages are exported too.
    expected_events = 500 * 21 + 20 + 10 + 10 + 3 + 4
    assert json.loads(done.stdout) == {"conversations": 515, "events": expected_events}
    imported = run("import", str(first), "--data", str(target))
    assert imported.returncode == 0, imported.stderr
    summary = json.loads(imported.stdout)
    assert summary["imported"] == 515
    assert summary["events_written"] == expected_events
    assert summary["conflicts"] == []
    run("export", "--data", str(target), "--out", str(second))
    rows = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
    # 100,000 appended + 500 popped; 10 summaries; 5 forks of 199 + 1; 5 kept.
    assert sum(len(r.get("messages", ())) for r in rows) == 100_500 + 10 + 5 * 200 + 5
    assert rows[0]["store"] == "memoryd.default"
    assert second.read_text() == first.read_text()
    _assert_same_stores(source, target)
    again = run("import", str(first), "--data", str(target))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) | {"present": 515} == json.loads(again.stdout)
    assert json.loads(again.stdout)["events_written"] == 0
    run("export", "--data", str(target), "--out", str(third))
    assert third.read_text() == second.read_text()


def test_import_reports_a_conversation_that_moved_on_as_a_conflict(tmp_path: Path) -> None:
    """A conversation whose log differs from the file's is reported and left as it is."""
    source, target = tmp_path / "source", tmp_path / "target"
    for data, text in ((source, "theirs"), (target, "mine")):
        run("add", "c", "--content", text, "--data", str(data))
    run("add", "d", "--content", "d", "--data", str(source))
    export = tmp_path / "e.jsonl"
    run("export", "--data", str(source), "--out", str(export))
    done = run("import", str(export), "--data", str(target))
    assert done.returncode == 1
    assert json.loads(done.stdout)["conflicts"] == ["c"]
    assert json.loads(done.stdout)["imported"] == 1
    assert json.loads(run("get", "c", "--data", str(target)).stdout)[0]["content"] == "mine"


def _event_line(cid: str, role: str) -> str:
    message = {"role": role, "content": "x"}
    event = {"version": 1, "kind": "appended", "messages": [message], "timestamp": 1.0}
    return json.dumps({"conversation_id": cid, **event})


@pytest.mark.parametrize(
    ("lines", "line_no", "needle"),
    [
        pytest.param(['{"format": "other"}'], 1, "not a memoryd export", id="no-header"),
        pytest.param(['{"format": "memoryd-export", "schema": 9}'], 1, "schema", id="schema"),
        pytest.param(["HEADER", "{bad json"], 2, "not valid JSON", id="bad-json"),
        pytest.param(
            ["HEADER", "[" * 100_000 + "]" * 100_000], 2, "nests too deeply", id="deep-json"
        ),
        pytest.param(
            [
                "HEADER",
                _event_line("c", "robot"),
            ],
            2,
            "role",
            id="bad-message",
        ),
        pytest.param(
            [
                "HEADER",
                _event_line("", "user"),
            ],
            2,
            "conversation id",
            id="bad-cid",
        ),
        pytest.param(
            [
                "HEADER",
                _event_line("c", "user"),
            ],
            3,
            "truncated",
            id="no-end",
        ),
    ],
)
def test_import_reports_the_bad_line_and_writes_nothing(
    tmp_path: Path, lines: list[str], line_no: int, needle: str
) -> None:
    """A bad file is refused before any write, naming the line."""
    header = '{"format": "memoryd-export", "schema": 1, "store": "x"}'
    good = _event_line("good", "user")
    body = [header if line == "HEADER" else line for line in lines]
    if body[0] == header:
        body.insert(1, good)
        line_no += 1
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(body) + "\n")
    done = run("import", str(path), "--data", str(tmp_path / "t"))
    assert done.returncode == 1
    assert f"line {line_no}" in done.stderr
    assert needle.lower() in done.stderr.lower()
    assert json.loads(run("conversations", "--data", str(tmp_path / "t")).stdout) == []


def test_a_data_directory_a_daemon_serves_on_another_socket_names_the_way_to_it(
    tmp_path: Path,
) -> None:
    """``--data DIR`` of a daemon serving DIR on a socket of its own (``serve --socket``)
    cannot be opened (the daemon holds it); the error says it is a memoryd daemon and
    gives the ``--address`` that reaches it (it said only "stop that store first")."""
    for n, given in enumerate((("--socket", "{}"), ("--socket={}",))):
        sock = tmp_path / f"elsewhere{n}.sock"
        args = tuple(word.format(sock) for word in given)
        with Daemon(tmp_path / f"d{n}", extra=args) as daemon:
            daemon.start()
            done = run("--data", str(tmp_path / f"d{n}"), "get", "c")
            assert done.returncode == 1
            assert f"reach it with --address unix://{sock}" in done.stderr
            reached = run("--address", f"unix://{sock}", "--json", "get", "c")
            assert reached.returncode == 0, reached.stderr
