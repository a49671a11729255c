"""Import of files an export never writes, or that a daemon could not take in one request:
a line giving its conversation id or version twice is refused before any write, naming
the line; a conversation whose events pass a daemon's body limit goes through it in
chunks bounded by bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import memoryd
from memoryd.errors import ExportFormatError
from memoryd.export import import_jsonl
from memoryd.export.format import CHUNK_BYTES
from memoryd.export.scan import chunk_ends
from memoryd.messages import DEFAULT_MAX_MESSAGE_BYTES
from memoryd.store.handle import StoreHandle
from tests.server.daemon import Daemon

_HEADER = '{"format":"memoryd-export","schema":1,"store":"x","cut":"per-conversation"}'
_DAEMON_BODY_LIMIT = 64 << 20
"""`memoryd.server.config.ServerConfig.max_body_bytes`'s default, which ``serve`` uses."""


def _event(cid: str, version: int, extra: str = "", text: str = "m") -> str:
    return (
        f'{{"conversation_id":{json.dumps(cid)},"version":{version},"kind":"appended",'
        f'"messages":[{{"role":"user","content":{json.dumps(text)}}}],'
        f'"timestamp":1.5,"idempotency_key":null,"data":null{extra}}}'
    )


def _file(path: Path, lines: list[str], *, conversations: int) -> Path:
    end = json.dumps({"end": True, "conversations": conversations, "events": len(lines)})
    path.write_text("\n".join([_HEADER, *lines, end]) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def target(tmp_path: Path) -> Iterator[StoreHandle]:
    store = memoryd.LmdbStore.start(tmp_path / "target", name="hostile-target")
    try:
        yield store
    finally:
        store.stop()


def test_a_repeated_version_key_is_refused_naming_its_line_before_any_write(
    target: StoreHandle, tmp_path: Path
) -> None:
    """Twenty good conversations, then a line whose text says version 2 and whose JSON
    keeps a second "version": 9: refused at that line, nothing of the file written."""
    lines = [_event(f"c{i:02d}", 1) for i in range(20)]
    lines += [_event("z", 1), _event("z", 2, extra=',"version":9')]
    path = _file(tmp_path / "f.jsonl", lines, conversations=21)
    with pytest.raises(ExportFormatError) as caught:
        import_jsonl(target, path, workers=1)
    assert caught.value.line == 23
    assert "version 2" in caught.value.problem and "version 9" in caught.value.problem
    assert "twice" in caught.value.problem
    assert target.conversations(include_empty=True) == []
    assert target.version("c00") == 0


def test_a_repeated_conversation_id_key_is_refused_before_any_write(
    target: StoreHandle, tmp_path: Path
) -> None:
    """A line that starts as conversation "a" and whose JSON keeps a second id "b" is
    refused (it was written into "a"), naming the line."""
    lines = [_event("first", 1), _event("a", 1, extra=',"conversation_id":"b"')]
    path = _file(tmp_path / "f.jsonl", lines, conversations=2)
    with pytest.raises(ExportFormatError) as caught:
        import_jsonl(target, path)
    assert caught.value.line == 3
    assert "'a'" in caught.value.problem and "'b'" in caught.value.problem
    assert target.conversations(include_empty=True) == []
    assert (target.version("a"), target.version("b")) == (0, 0)


def test_a_repeated_key_of_the_same_value_is_taken(target: StoreHandle, tmp_path: Path) -> None:
    """A key given twice with one value reads the same either way: imported."""
    lines = [_event("a", 1, extra=',"version":1')]
    path = _file(tmp_path / "f.jsonl", lines, conversations=1)
    assert import_jsonl(target, path).imported == 1
    assert target.version("a") == 1


def test_chunks_end_at_the_event_count_or_the_byte_bound() -> None:
    """A chunk holds at most ``max_events`` lines and ``max_bytes`` bytes, and at least one
    line: a line past the bound goes alone."""
    assert chunk_ends([], max_bytes=10) == []
    assert chunk_ends([4, 4, 4], max_bytes=10) == [2, 3]
    assert chunk_ends([4, 4, 2], max_bytes=10) == [3]
    assert chunk_ends([30, 1, 1], max_bytes=10) == [1, 3]
    assert chunk_ends([1, 30, 1], max_bytes=10) == [1, 2, 3]
    assert chunk_ends([1] * 5, max_bytes=10, max_events=2) == [2, 4, 5]
    assert CHUNK_BYTES * 4 <= _DAEMON_BODY_LIMIT


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with Daemon().start() as running:
        yield running


def test_a_conversation_past_the_daemons_body_limit_imports_through_it(
    daemon: Daemon, tmp_path: Path
) -> None:
    """66 events of one ~1 MiB message each (every one an add the daemon takes; 66 MiB
    together, past its 64 MiB body limit) import through the daemon whole."""
    text = "z" * (DEFAULT_MAX_MESSAGE_BYTES - 100)
    count = _DAEMON_BODY_LIMIT // len(text) + 2
    lines = [_event("huge", v, text=text) for v in range(1, count + 1)]
    lines.append(_event("small", 1))
    path = _file(tmp_path / "big.jsonl", lines, conversations=2)
    assert path.stat().st_size > _DAEMON_BODY_LIMIT
    store = daemon.connect(store="big")
    summary = import_jsonl(store, path)
    assert (summary.imported, summary.events_written, summary.conflicts) == (2, count + 1, [])
    assert store.version("huge") == count
    assert [len(m["content"]) for m in store.get("huge", limit=2)] == [len(text)] * 2
    assert import_jsonl(store, path).present == 2
