"""Export and import: schema-versioned JSONL of events, streamed.

An export is one header line, one line per event, one trailer line::

    {"format": "memoryd-export", "schema": 1, "store": "memoryd.default"}
    {"conversation_id": "c", "version": 1, "kind": "appended", "messages": [...],
     "timestamp": 1717000000.5, "idempotency_key": null, "data": null}
    ...
    {"end": true, "conversations": 2, "events": 17}

It walks the store one conversation at a time, so memory stays bounded by the
largest conversation whatever the store's size. A conversation's events are
contiguous and in version order. Every conversation with events is exported, also
those holding no messages now: cleared ones, and logs of ``memo`` events only (where
long-term memory keeps its records).

Import first checks every line (reporting the line number of anything bad) and
writes nothing unless the whole file is valid. It then writes each conversation's
events exactly as they are, with `StoreHandle.import_events`, in chunks of at most
1,000 events (so memory stays bounded whatever the file's size): same versions,
kinds, messages, commit timestamps, idempotency keys and data, ``forked``,
``memo`` and ``compacted`` events included. Importing is idempotent: events
already in the store identically are skipped, so a conversation imported before
is left alone (``present``), a new one (or one holding no messages, for a log that
starts with a cleared marker) is written (``imported``), and one whose log differs
from the file's, or runs past it, is reported as a conflict and not touched.
Conversations are written in parallel, so the global change feed (``tail``) keeps
each conversation's order but not the interleaving of the source store.
"""

from __future__ import annotations

import functools
import json
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from memoryd import messages as msgs
from memoryd.errors import ConflictError, ExportFormatError
from memoryd.events import Event, EventKind
from memoryd.protocol import event_to_wire
from memoryd.store.handle import StoreHandle

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
_CHUNK = 1000

Progress = Callable[[int], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportSummary:
    """What an export wrote."""

    conversations: int
    events: int


@dataclass(kw_only=True, slots=True)
class ImportSummary:
    """What an import did, per conversation.

    ``skipped_events`` is always 0 now that every kind of event is imported; it is
    kept so existing readers of the summary do not break.
    """

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
    while page := store.conversations(after=after, limit=_PAGE, include_empty=True):
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
    bad line is reported before anything is imported. A conversation is held in
    memory whole; `import_jsonl` reads the file in bounded chunks instead.

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
    events: list[Event] = []
    for cid, chunk, last in _walk(path):
        events.extend(chunk)
        if last:
            yield cid, events
            events = []


def _walk(path: str | Path) -> Iterator[tuple[str, list[Event], bool]]:
    """Check the file line by line, yielding ``(cid, chunk, last_chunk_of_cid)``.

    Chunks hold at most ``_CHUNK`` events of one conversation, in version order.
    """
    seen: set[str] = set()
    current: str | None = None
    batch: list[Event] = []
    previous = 0
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
                if event.version != 1 and event.kind != EventKind.CLEARED:
                    raise ExportFormatError(
                        number,
                        f"conversation {cid!r} starts at version {event.version} with a "
                        f"{event.kind!r} event; a log starts at version 1 or with a cleared "
                        "marker",
                    )
                if current is not None:
                    yield current, batch, True
                seen.add(cid)
                current, batch = cid, []
            elif event.version != previous + 1:
                raise ExportFormatError(
                    number,
                    f"version {event.version} follows version {previous}; "
                    "a conversation's versions increase by one",
                )
            elif len(batch) >= _CHUNK:
                yield cid, batch, False
                batch = []
            previous = event.version
            batch.append(event)
        if number == 0:
            raise ExportFormatError(1, "the file is empty")
        if not ended:
            raise ExportFormatError(number + 1, "the end line is missing: the file is truncated")
    if current is not None:
        yield current, batch, True


# --------------------------------------------------------------------------- importing

_Chunk = tuple[list[Event] | None, bool]
"""``(events, last)`` handed to a conversation's worker; None events: reading stopped."""
_Outcome = tuple[str, int]


def _import_one(store: StoreHandle, cid: str, chunks: queue.Queue[_Chunk]) -> _Outcome:
    """Import one conversation's chunks, in order, with `StoreHandle.import_events`.

    Always takes every chunk up to the last (so the reader never blocks on this
    conversation), even after a conflict or an error.

    Returns:
        ``(outcome, events written)``: ``imported``, ``present`` or ``conflict``.
    """
    version = store.version(cid)
    written = 0
    last_version = 0
    conflict = False
    failure: BaseException | None = None
    while True:
        chunk, last = chunks.get()
        if chunk is None:
            break
        if not conflict and failure is None:
            try:
                after = store.import_events(cid, chunk)
            except ConflictError:
                conflict = True
            except BaseException as exc:  # handed back once the queue is drained
                failure = exc
            else:
                written += sum(1 for event in chunk if event.version > version)
                version = after
        last_version = chunk[-1].version
        if last:
            break
    if failure is not None:
        raise failure
    if conflict or version != last_version:
        return "conflict", written
    return ("imported" if written else "present"), written


def import_jsonl(
    store: StoreHandle,
    path: str | Path,
    *,
    workers: int = 8,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an export file into ``store``; idempotent.

    Each conversation's events are written exactly (`StoreHandle.import_events`),
    in chunks of at most 1,000 events, in order. Conversations are imported in
    parallel (one worker per conversation, so concurrent writers share fsyncs).

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

    def record(cid: str, future: Future[_Outcome]) -> None:
        nonlocal handled
        slots.release()
        with lock:
            handled += 1
            if future.exception() is not None:
                return
            outcome, written = future.result()
            summary.events_written += written
            if outcome == "conflict":
                summary.conflicts.append(cid)
            else:
                setattr(summary, outcome, getattr(summary, outcome) + 1)
            if progress is not None:
                progress(handled)

    for _ in _walk(path):  # check every line before the first write
        pass
    futures: list[Future[_Outcome]] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memoryd-import") as pool:
        open_queue: queue.Queue[_Chunk] | None = None
        try:
            for cid, chunk, last in _walk(path):
                if open_queue is None:
                    slots.acquire()
                    open_queue = queue.Queue(maxsize=2)
                    future = pool.submit(_import_one, store, cid, open_queue)
                    future.add_done_callback(functools.partial(record, cid))
                    futures.append(future)
                    futures = [f for f in futures if not f.done() or f.exception() is not None]
                open_queue.put((chunk, last))
                if last:
                    open_queue = None
        finally:
            if open_queue is not None:
                open_queue.put((None, True))
    for future in futures:
        future.result()
    summary.conflicts.sort()
    return summary
