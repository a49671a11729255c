"""Moving conversations between stores with `memoryd export` / `memoryd import`: every
backend's export imports exactly into every other, and a file an import would refuse is
refused before its first write, with a reason."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd
from memoryd.errors import ExportFormatError
from memoryd.export import export_jsonl, import_jsonl, read_export
from memoryd.messages import MAX_CONVERSATION_ID_BYTES, assistant, system, tool, tool_call, user
from memoryd.store.handle import StoreHandle
from tests.redis_servers import RedisServer
from tests.server.daemon import Daemon

Factory = Callable[[], StoreHandle]
_ENVELOPE = len(json.dumps(user(""), separators=(",", ":")))
"""The bytes of a user message around its content, as compact JSON."""
_LONG_ID = "é" * (MAX_CONVERSATION_ID_BYTES // 2)


def _populate(store: StoreHandle) -> None:
    """Everything a store holds: many conversations, clears, summaries, memos, system
    messages, tool calls, forks, pops, keys, Unicode, the largest message, the longest
    id, versions after clears, and a run journal in flight."""
    for i in range(12):
        store.add(f"many/{i:02d}", [user(f"q{i}"), assistant(f"a{i}")], idempotency_key=f"k{i}")
    store.add("cleared", [user("gone")], idempotency_key="k-gone")
    store.add("cleared", [user("gone too")])
    store.clear("cleared")
    store.add("again", [user("one")])
    store.clear("again")
    store.add("again", [user("two")], idempotency_key="k-two")
    store.add("sum", [system("Be terse."), user("q1"), assistant("a1")])
    store.record(
        "sum", "compacted", messages=[system("q1 asked")], data={"replaces": {"from": 1, "to": 1}}
    )
    store.record("facts", "memo", data={"memo": "likes tea", "n": [1, 2.5, None, True]})
    store.record("facts", "memo", data={"memo": "ü"}, idempotency_key="memo-2")
    call = tool_call("call_1", "weather", {"city": "Oslo"})
    store.add("tools", [user("weather?"), assistant(tool_calls=[call]), tool("call_1", "rain")])
    store.fork("tools", "forked", at_version=1)
    store.add("forked", [user("after the fork")])
    store.add("pops", [user("a"), user("b")])
    store.pop("pops")
    text = "e\u0301 a\u0308 שלום مرحبا 👩‍👩‍👧 🇳🇴 nul:\x00:end \u2028"
    store.add("uni/😀\u202e", [user(text), assistant(text)])
    store.add(_LONG_ID, [user("x" * (store.max_message_bytes - _ENVELOPE))])
    store.add("memoryd.run/in-flight", [user("a run's step")])


def _state(store: StoreHandle) -> dict[str, Any]:
    """Every exported conversation: version, events and the history at each version."""
    cids = store.conversations(include_empty=True)
    found = {}
    for cid in cids:
        events = store.events(cid)
        version = store.version(cid)
        histories = [store.get(cid, at_version=v) for v in range(events[0].version, version + 1)]
        found[cid] = (version, events, histories)
    return found


def _export(store: StoreHandle, path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        export_jsonl(store, out)
    return path


def _lines(path: Path) -> list[str]:
    """The file's lines, split at line ends only (not at U+2028, as `str.splitlines` does)."""
    with open(path, encoding="utf-8", newline="") as handle:
        return list(handle)


def _written(store: StoreHandle) -> list[str]:
    return store.conversations(include_empty=True)


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    with Daemon().start() as running:
        yield running


@pytest.fixture
def backends(
    tmp_path: Path, redis_server: RedisServer, daemon: Daemon
) -> Iterator[dict[str, Factory]]:
    """A new empty store of each backend, per call."""
    count = itertools.count()
    opened: list[StoreHandle] = []

    def opening(make: Callable[[str], StoreHandle]) -> Factory:
        def factory() -> StoreHandle:
            store = make(f"rt{next(count)}-{tmp_path.name}")
            opened.append(store)
            return store

        return factory

    yield {
        "lmdb": opening(lambda n: memoryd.LmdbStore.start(tmp_path / n, name=n)),
        "redis": opening(lambda n: memoryd.RedisStore.start(redis_server.url, prefix=n, name=n)),
        "daemon": opening(lambda n: memoryd.connect(daemon.address, store=n)),
    }
    for store in opened:
        store.stop()


@pytest.fixture
def store() -> Iterator[StoreHandle]:
    store = memoryd.EphemeralStore.start(name="roundtrip")
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    """An export of `_populate`'s store."""
    source = memoryd.EphemeralStore.start(name="roundtrip-source")
    try:
        _populate(source)
        return _export(source, tmp_path / "export.jsonl")
    finally:
        source.stop()


def test_every_backend_imports_every_others_export_exactly(
    backends: dict[str, Factory], tmp_path: Path
) -> None:
    """LMDB → Redis → daemon → LMDB and back: events, versions, timestamps, keys and past
    histories arrive unchanged, a second import writes nothing, and keys still dedupe."""
    for first, second in (("lmdb", "redis"), ("redis", "daemon"), ("daemon", "lmdb")):
        source, target = backends[first](), backends[second]()
        _populate(source)
        path = _export(source, tmp_path / f"{first}-{second}.jsonl")
        done = import_jsonl(target, path)
        assert (done.imported, done.conflicts) == (len(_state(source)), [])
        assert _state(target) == _state(source)
        again = import_jsonl(target, path)
        assert (again.present, again.events_written, again.imported) == (done.imported, 0, 0)
        assert target.add("many/03", [user("retry")], idempotency_key="k3") == 1
        back = backends[first]()
        assert import_jsonl(back, _export(target, tmp_path / f"back-{first}.jsonl")).conflicts == []
        assert _state(back) == _state(source)


def test_run_journals_in_flight_stay_out_of_an_export(dump: Path) -> None:
    """A run journal (``memoryd.run/``) holding steps is not exported."""
    assert "memoryd.run/" not in dump.read_text(encoding="utf-8")


def test_an_export_taken_while_writers_write_is_whole_per_conversation(
    store: StoreHandle, tmp_path: Path
) -> None:
    """Each conversation of an export taken under writes is a valid log that agrees with
    the store's, and the header says the export is a per-conversation cut."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for n in itertools.count():
                if stop.is_set():
                    return
                cid = f"c{n % 5}"
                store.add(cid, [user(f"{worker}-{n}")])
                if n % 7 == worker:
                    store.clear(cid)
                if n % 5 == worker:
                    store.pop(cid)
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    writers = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for writer in writers:
        writer.start()
    try:
        paths = [_export(store, tmp_path / f"e{n}.jsonl") for n in range(10)]
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert failures == []
    for path in paths:
        assert json.loads(_lines(path)[0])["cut"] == "per-conversation"
        for cid, events in read_export(path):
            final = {event.version: event for event in store.events(cid)}
            assert all(final.get(e.version, e) == e for e in events if e.version >= min(final))


def test_a_cleared_marker_is_refused_over_a_conversation_holding_memos(
    store: StoreHandle, dump: Path
) -> None:
    """A log starting with a cleared marker past the next version would delete the
    target's memos: a conflict, with its reason, and the memos stay."""
    store.record("cleared", "memo", data={"memo": "the target's own"})
    before = store.events("cleared")
    done = import_jsonl(store, dump)
    assert done.conflicts == ["cleared"]
    assert "memo" in done.reasons["cleared"]
    assert store.events("cleared") == before


def test_an_import_over_a_conversation_that_moved_on_says_why(
    store: StoreHandle, dump: Path
) -> None:
    """A conversation past the file's version, and one holding other events, are refused
    with a reason each, and neither is written."""
    import_jsonl(store, dump)
    store.add("sum", [user("moved on")])
    other = memoryd.EphemeralStore.start(name="roundtrip-other")
    try:
        other.add("tools", [user("theirs")])
        mine = other.events("tools")
        done = import_jsonl(other, dump)
        assert done.conflicts == ["tools"]
        assert "version 1" in done.reasons["tools"]
        assert other.events("tools") == mine
    finally:
        other.stop()
    again = import_jsonl(store, dump)
    assert again.conflicts == ["sum"]
    assert "past the file's last version" in again.reasons["sum"]
    assert store.get("sum")[-1] == user("moved on")


def _file(tmp_path: Path, *events: dict[str, Any]) -> Path:
    lines = [{"format": "memoryd-export", "schema": 1}]
    lines += [
        {"conversation_id": cid, "version": 1, "kind": "appended", "messages": [user(cid)],
         "timestamp": 1.5, "idempotency_key": None, "data": None}
        for cid in ("a", "b")
    ]  # fmt: skip
    lines += list(events)
    lines.append({"end": True, "conversations": len(lines) - 1, "events": len(lines) - 1})
    path = tmp_path / "made.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        pytest.param({"messages": [user("y" * 2000)]}, "the limit is 1024", id="message-size"),
        pytest.param({"idempotency_key": "k" * 300}, "idempotency_key", id="long-key"),
        pytest.param({"idempotency_key": ""}, "idempotency_key", id="empty-key"),
        pytest.param(
            {"kind": "memo", "messages": [], "data": {"x": "y" * 2000}}, "data", id="data"
        ),
        pytest.param({"version": 2**53 + 1, "kind": "cleared", "messages": []}, "past 2", id="ver"),
    ],
)
def test_a_line_the_target_would_refuse_is_refused_before_any_write(
    tmp_path: Path, fields: dict[str, Any], problem: str
) -> None:
    """Sizes over the target's limit, bad keys or data, versions past 2**53: the line is
    named and nothing of the file is written."""
    line = {"conversation_id": "z", "version": 1, "kind": "appended",
            "messages": [user("z")], "timestamp": 1.5, **fields}  # fmt: skip
    path = _file(tmp_path, line)
    small = memoryd.EphemeralStore.start(name="roundtrip-small", max_message_bytes=1024)
    try:
        with pytest.raises(ExportFormatError, match=problem) as caught:
            import_jsonl(small, path)
        assert caught.value.line == 4
        assert _written(small) == []
    finally:
        small.stop()


def test_a_run_journal_line_is_refused(store: StoreHandle, tmp_path: Path) -> None:
    """An import never writes a ``memoryd.run/`` journal (exports never hold one)."""
    journal = {"conversation_id": "memoryd.run/planted", "version": 1, "kind": "appended",
               "messages": [user("step")], "timestamp": 1.5}  # fmt: skip
    path = _file(tmp_path, journal)
    with pytest.raises(ExportFormatError, match="bookkeeping"):
        import_jsonl(store, path)
    with pytest.raises(ExportFormatError, match="bookkeeping"):
        list(read_export(path))
    assert store.version("memoryd.run/planted") == 0
    assert _written(store) == []


def test_an_end_line_counting_other_conversations_is_refused(
    store: StoreHandle, dump: Path, tmp_path: Path
) -> None:
    """A hand-edited trailer whose conversation count is wrong is named, nothing written."""
    lines = _lines(dump)
    end = json.loads(lines[-1])
    lines[-1] = json.dumps({**end, "conversations": end["conversations"] + 1}) + "\n"
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ExportFormatError, match="conversations"):
        import_jsonl(store, path)
    with pytest.raises(ExportFormatError, match="conversations"):
        list(read_export(path))
    assert _written(store) == []


@pytest.mark.parametrize("cut", [1, 10], ids=["end-line", "event-line"])
def test_a_file_cut_mid_line_is_said_to_be_truncated(
    store: StoreHandle, dump: Path, tmp_path: Path, cut: int
) -> None:
    """A file that stops inside a line is reported as truncated, not as bad JSON."""
    lines = _lines(dump)
    kept = len(lines) - cut
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(lines[:kept]) + lines[kept][:12], encoding="utf-8")
    for read in (lambda: import_jsonl(store, path), lambda: list(read_export(path))):
        with pytest.raises(ExportFormatError, match="truncated") as caught:
            read()
        assert caught.value.line == kept + 1
    assert _written(store) == []


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda ls: [ls[0], ls[2], ls[1], *ls[3:]], id="swapped"),
        pytest.param(lambda ls: [*ls[:3], ls[2], *ls[3:]], id="duplicated"),
        pytest.param(lambda ls: [*ls[:2], *ls[3:]], id="gap"),
    ],
)
def test_a_hand_edited_log_is_refused_before_any_write(
    store: StoreHandle, tmp_path: Path, edit: Callable[[list[str]], list[str]]
) -> None:
    """Lines of a conversation swapped, repeated or dropped: named, nothing written."""
    source = memoryd.EphemeralStore.start(name="roundtrip-edit")
    try:
        for i in range(3):
            source.add("a", [user(str(i))])
        lines = _lines(_export(source, tmp_path / "e.jsonl"))
    finally:
        source.stop()
    path = tmp_path / "edited.jsonl"
    path.write_text("".join(edit(lines)), encoding="utf-8")
    with pytest.raises(ExportFormatError):
        import_jsonl(store, path)
    assert _written(store) == []


def test_a_header_whose_schema_is_true_is_refused(store: StoreHandle, tmp_path: Path) -> None:
    """``"schema": true`` is not schema 1."""
    path = tmp_path / "bool.jsonl"
    path.write_text('{"format":"memoryd-export","schema":true}\n{"end":true,"events":0}\n')
    with pytest.raises(ExportFormatError, match="schema"):
        import_jsonl(store, path)
