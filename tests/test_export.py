"""`memoryd.export`: an import reads the file once, writes nothing for a conversation the
store holds already, and imports or refuses every other one exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd.errors import ExportFormatError
from memoryd.export import export_jsonl, import_jsonl, scan
from memoryd.store.handle import StoreHandle


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


@pytest.fixture
def source() -> Iterator[StoreHandle]:
    """A store of three conversations: 5, 3 and 1 events (one of them cleared)."""
    store = memoryd.EphemeralStore.start(name="export-source")
    for i in range(5):
        store.add("a", [_user(f"a{i}")], idempotency_key=f"ka{i}")
    for i in range(3):
        store.add("b/ünïcode", [_user(f"b{i}")])
    store.add("c", [_user("c0")])
    store.clear("c")
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def dump(source: StoreHandle, tmp_path: Path) -> Path:
    path = tmp_path / "export.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        export_jsonl(source, out)
    return path


@pytest.fixture
def target(tmp_path: Path) -> Iterator[StoreHandle]:
    store = memoryd.LmdbStore.start(tmp_path / "target", name="export-target")
    try:
        yield store
    finally:
        store.stop()


def _writes(store: StoreHandle) -> tuple[int, int]:
    stats = store.stats()
    return int(stats["commits"]), int(stats["fsyncs"])


def test_a_reimport_of_a_present_export_writes_nothing(dump: Path, target: StoreHandle) -> None:
    """Importing the same file again commits nothing and fsyncs nothing: all present."""
    first = import_jsonl(target, dump)
    assert (first.imported, first.present, first.conflicts) == (3, 0, [])
    before = _writes(target)
    again = import_jsonl(target, dump)
    assert _writes(target) == before
    assert (again.imported, again.present, again.events_written, again.conflicts) == (0, 3, 0, [])


def test_a_reimport_reports_every_conversation_to_progress(dump: Path, target: StoreHandle) -> None:
    """Present conversations count as handled, like imported ones."""
    import_jsonl(target, dump)
    seen: list[int] = []
    import_jsonl(target, dump, progress=seen.append)
    assert seen[-1] == 3


def test_a_conversation_holding_part_of_the_file_is_continued(
    source: StoreHandle, dump: Path, target: StoreHandle
) -> None:
    """A conversation at an earlier version of the same log gets the rest written."""
    target.import_events("a", source.events("a")[:2])
    done = import_jsonl(target, dump)
    total = sum(len(source.events(cid)) for cid in ("a", "b/ünïcode", "c"))
    assert (done.imported, done.events_written, done.conflicts) == (3, total - 2, [])
    assert target.events("a") == source.events("a")


def test_a_conversation_whose_last_event_differs_is_a_conflict(
    dump: Path, target: StoreHandle
) -> None:
    """Same version, another history: refused, and the store keeps its own."""
    for i in range(5):
        target.add("a", [_user(f"other{i}")])
    done = import_jsonl(target, dump)
    assert done.conflicts == ["a"]
    assert [m["content"] for m in target.get("a")] == [f"other{i}" for i in range(5)]


def test_conversations_not_kept_decoded_are_read_again_from_the_file(
    monkeypatch: pytest.MonkeyPatch, source: StoreHandle, dump: Path, target: StoreHandle
) -> None:
    """Past the decoded-events budget, the events are read again when they are written."""
    monkeypatch.setattr(scan, "_CACHE_BYTES", 0)
    done = import_jsonl(target, dump)
    assert (done.imported, done.conflicts) == (3, [])
    for cid in ("a", "b/ünïcode", "c"):
        assert target.events(cid) == source.events(cid)


def test_lines_written_in_another_key_order_import_the_same(
    source: StoreHandle, dump: Path, target: StoreHandle, tmp_path: Path
) -> None:
    """A hand-made file (keys in another order) is read in full and imports exactly."""
    lines = dump.read_text(encoding="utf-8").splitlines()
    shuffled = [lines[0]] + [
        json.dumps(dict(reversed(json.loads(line).items()))) for line in lines[1:-1]
    ]
    path = tmp_path / "shuffled.jsonl"
    path.write_text("\n".join([*shuffled, lines[-1]]) + "\n", encoding="utf-8")
    assert import_jsonl(target, path).imported == 3
    assert target.events("a") == source.events("a")
    assert import_jsonl(target, dump).present == 3


def test_a_bad_message_of_a_new_conversation_is_reported_by_line_before_any_write(
    dump: Path, target: StoreHandle, tmp_path: Path
) -> None:
    """The first bad line of a conversation to import is named, and nothing is written."""
    lines = dump.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[3])
    bad["messages"] = [{"role": "nobody", "content": "x"}]
    lines[3] = json.dumps(bad, separators=(",", ":"))
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match="line 4"):
        import_jsonl(target, path)
    assert target.conversations(include_empty=True) == []


def test_versions_out_of_order_are_reported_on_the_fast_path(
    dump: Path, target: StoreHandle, tmp_path: Path
) -> None:
    """A skipped version in lines as export_jsonl writes them is still refused, by line."""
    lines = dump.read_text(encoding="utf-8").splitlines()
    del lines[3]  # a's version 3
    path = tmp_path / "gap.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ExportFormatError, match=r"line 4.*version 4 follows version 2"):
        import_jsonl(target, path)
