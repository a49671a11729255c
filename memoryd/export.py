"""Export and import: schema-versioned JSONL of events, streamed.

An export is one header line, one line per event, one trailer line::

    {"format": "memoryd-export", "schema": 1, "store": "memoryd.default"}
    {"conversation_id": "c", "version": 1, "kind": "appended", "messages": [...],
     "timestamp": 1717000000.5, "idempotency_key": null, "data": null}
    ...
    {"end": true, "conversations": 2, "events": 17}

It walks the store one conversation at a time, so memory stays bounded by the
largest conversation whatever the store's size. A conversation's events are
contiguous and in version order; conversations holding no messages are left out.

Import first checks every line (reporting the line number of anything bad) and
writes nothing unless the whole file is valid. It then replays each
conversation through the store API: appends (with their idempotency keys),
clears and pops as they were; a fork as a clear (when needed) and an append
of the forked history. Importing is idempotent: a conversation whose history
already equals the file's is left alone, an empty one (never written, or
cleared) is written, and one holding other messages is reported as a conflict
and not touched (after an interrupted import, clear those and import again).
Commit timestamps are the import's own; the store API offers no way to write a
past one. ``compacted`` and ``memo`` events
change no history and cannot be written through the store API: they are counted
as skipped.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from memoryd import messages as msgs
from memoryd.events import Event, EventKind, replay
from memoryd.store.handle import StoreHandle
from memoryd.wire import event_to_wire

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_SCHEMA",
    "ExportFormatError",
    "ExportSummary",
    "ImportSummary",
    "export_jsonl",
    "import_jsonl",
    "read_export",
]

EXPORT_FORMAT = "memoryd-export"
EXPORT_SCHEMA = 1
_EVENT_FIELDS = frozenset(
    {"conversation_id", "version", "kind", "messages", "timestamp", "idempotency_key", "data"}
)
_PAGE = 500

Progress = Callable[[int], None]


class ExportFormatError(ValueError):
    """A line of an export file is not valid; the message names the line."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportSummary:
    """What an export wrote."""

    conversations: int
    events: int


@dataclass(kw_only=True, slots=True)
class ImportSummary:
    """What an import did, per conversation."""

    imported: int = 0
    present: int = 0
    events_written: int = 0
    skipped_events: int = 0
    conflicts: list[str] = field(default_factory=list)


def _line(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def export_jsonl(
    store: StoreHandle, out: TextIO, *, progress: Progress | None = None
) -> ExportSummary:
    """Write every conversation's events to ``out`` as JSONL.

    Args:
        store: any store handle (local or remote).
        out: a text stream.
        progress: called with the number of events written so far, once per page.

    Returns:
        The counts written (also in the trailer line).
    """
    out.write(_line({"format": EXPORT_FORMAT, "schema": EXPORT_SCHEMA, "store": store.name}))
    conversations = events = 0
    after: str | None = None
    while page := store.conversations(after=after, limit=_PAGE):
        for cid in page:
            for event in store.events(cid):
                out.write(_line({"conversation_id": cid, **event_to_wire(event)}))
                events += 1
            conversations += 1
        after = page[-1]
        if progress is not None:
            progress(events)
    out.write(_line({"end": True, "conversations": conversations, "events": events}))
    return ExportSummary(conversations=conversations, events=events)


# --------------------------------------------------------------------------- reading


def _parse_event(number: int, obj: Any) -> tuple[str, Event]:
    if not isinstance(obj, dict):
        raise ExportFormatError(number, "an event line must be a JSON object")
    unknown = set(obj) - _EVENT_FIELDS
    if unknown:
        raise ExportFormatError(number, f"unknown fields {sorted(unknown)}")
    missing = {"conversation_id", "version", "kind", "messages", "timestamp"} - set(obj)
    if missing:
        raise ExportFormatError(number, f"missing fields {sorted(missing)}")
    try:
        cid = msgs.validate_conversation_id(obj["conversation_id"])
        raw = obj["messages"]
        if not isinstance(raw, list):
            raise ValueError("messages must be a list")
        checked = [msgs.validate(m, max_bytes=None) for m in raw]
        stamp = obj["timestamp"]
        event = Event(
            version=obj["version"],
            kind=obj["kind"],
            messages=tuple(checked),
            timestamp=float(stamp)
            if isinstance(stamp, int) and not isinstance(stamp, bool)
            else stamp,
            idempotency_key=obj.get("idempotency_key"),
            data=obj.get("data"),
        )
    except ValueError as exc:
        raise ExportFormatError(number, str(exc)) from None
    return cid, event


def read_export(path: str | Path) -> Iterator[tuple[str, list[Event]]]:
    """Check an export file and yield its conversations, one at a time.

    The whole file is checked once before the first conversation is yielded, so a
    bad line is reported before anything is imported.

    Args:
        path: the export file.

    Yields:
        ``(conversation_id, events)`` in file order.

    Raises:
        ExportFormatError: naming the first bad line.
        OSError: the file cannot be read.
    """
    for _ in _walk(path):
        pass
    yield from _walk(path)


def _walk(path: str | Path) -> Iterator[tuple[str, list[Event]]]:
    seen: set[str] = set()
    current: str | None = None
    batch: list[Event] = []
    counted = 0
    ended = False
    with open(path, encoding="utf-8") as handle:
        number = 0
        for number, text in enumerate(handle, start=1):
            if ended:
                raise ExportFormatError(number, "nothing may follow the end line")
            try:
                obj = json.loads(text)
            except ValueError as exc:
                raise ExportFormatError(number, f"not valid JSON: {exc}") from None
            if number == 1:
                if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
                    raise ExportFormatError(
                        1, f"not a memoryd export (no '{EXPORT_FORMAT}' header)"
                    )
                if obj.get("schema") != EXPORT_SCHEMA:
                    raise ExportFormatError(
                        1,
                        f"export schema {obj.get('schema')!r}; this memoryd reads schema "
                        f"{EXPORT_SCHEMA}",
                    )
                continue
            if isinstance(obj, dict) and obj.get("end") is True:
                if obj.get("events") != counted:
                    raise ExportFormatError(
                        number, f"the end line counts {obj.get('events')} events; found {counted}"
                    )
                ended = True
                continue
            cid, event = _parse_event(number, obj)
            counted += 1
            if cid != current:
                if cid in seen:
                    raise ExportFormatError(
                        number, f"conversation {cid!r} appears again after other conversations"
                    )
                if current is not None:
                    yield current, batch
                seen.add(cid)
                current, batch = cid, []
            elif batch and event.version <= batch[-1].version:
                raise ExportFormatError(
                    number, f"version {event.version} follows version {batch[-1].version}"
                )
            batch.append(event)
        if number == 0:
            raise ExportFormatError(1, "the file is empty")
        if not ended:
            raise ExportFormatError(number + 1, "the end line is missing: the file is truncated")
    if current is not None:
        yield current, batch


# --------------------------------------------------------------------------- importing

_Write = tuple[str, tuple[dict[str, Any], ...], str | None]


def _plan(events: list[Event]) -> tuple[list[_Write], int]:
    """The writes that rebuild ``events`` on an empty conversation, and the events skipped."""
    writes: list[_Write] = []
    length = skipped = 0
    for event in events:
        kind = event.kind
        if kind == EventKind.APPENDED:
            writes.append((kind, event.messages, event.idempotency_key))
            length += len(event.messages)
        elif kind in (EventKind.CLEARED, EventKind.POPPED):
            if length:
                writes.append((kind, (), None))
                length = 0 if kind == EventKind.CLEARED else length - 1
        elif kind == EventKind.FORKED:
            if length:
                writes.append((EventKind.CLEARED, (), None))
            if event.messages:
                writes.append((EventKind.APPENDED, event.messages, event.idempotency_key))
            length = len(event.messages)
        else:
            skipped += 1
    return writes, skipped


def _import_one(store: StoreHandle, cid: str, events: list[Event]) -> tuple[str, int, int]:
    writes, skipped = _plan(events)
    current = store.get(cid)
    if current == replay(events):
        return "present", 0, skipped
    if current:
        return "conflict", 0, skipped
    for kind, messages, key in writes:
        if kind == EventKind.APPENDED:
            store.add(cid, list(messages), idempotency_key=key)
        elif kind == EventKind.CLEARED:
            store.clear(cid)
        else:
            store.pop(cid)
    return "imported", len(writes), skipped


def import_jsonl(
    store: StoreHandle,
    path: str | Path,
    *,
    workers: int = 8,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an export file into ``store``; idempotent.

    Conversations are imported in parallel (one worker per conversation at a time,
    so each conversation's writes keep their order and concurrent writers share
    fsyncs).

    Args:
        store: the target store.
        path: the export file.
        workers: conversations imported at once.
        progress: called with the number of conversations handled so far.

    Returns:
        What was imported, found present, or refused as a conflict.

    Raises:
        ExportFormatError: a bad line (nothing has been written).
    """
    summary = ImportSummary()
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(workers * 2)
    handled = 0

    def record(cid: str, future: Future[tuple[str, int, int]]) -> None:
        nonlocal handled
        slots.release()
        with lock:
            handled += 1
            outcome, written, skipped = future.result()
            summary.events_written += written
            summary.skipped_events += skipped
            if outcome == "conflict":
                summary.conflicts.append(cid)
            else:
                setattr(summary, outcome, getattr(summary, outcome) + 1)
            if progress is not None:
                progress(handled)

    futures: list[Future[tuple[str, int, int]]] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memoryd-import") as pool:
        for cid, events in read_export(path):
            slots.acquire()
            future = pool.submit(_import_one, store, cid, events)
            future.add_done_callback(functools.partial(record, cid))
            futures.append(future)
            futures = [f for f in futures if not f.done() or f.exception() is not None]
    for future in futures:
        future.result()
    summary.conflicts.sort()
    return summary
