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

Import reads the file once and checks it whole (reporting the line number of
anything bad) before it writes anything. A conversation the store holds already (same
version, same last event) is counted as present from its last line alone: its other
lines are checked for their conversation id and version only, not decoded, so
re-importing a file that is fully present writes nothing and costs little more than
reading it. The other conversations are decoded and checked, kept decoded up to 16 MiB
of lines (past that, read again when written), and written exactly as they are, with
`StoreHandle.import_events`, in chunks of at most 1,000 events: same versions,
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
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TextIO

from memoryd import messages as msgs
from memoryd.errors import ConflictError, ExportFormatError
from memoryd.events import Event, EventKind
from memoryd.protocol import event_to_wire
from memoryd.store.handle import StoreHandle
from memoryd.store.importing import same_event

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


_HEAD = '{"conversation_id":'
_VERSION = ',"version":'
_NUMBER = re.compile(r"[0-9]{1,19}(?=[,}])")
_DECODER = json.JSONDecoder()
_CACHE_BYTES = 16 * 2**20
"""How many bytes of lines of the conversations to write an import keeps decoded while it
reads (decoded, about 2.7 times as many bytes of memory); the conversations past it are
read again from the file when they are written."""


@dataclass(slots=True)
class _Pending:
    """A conversation of the file to hand to the store: its events, or where they are."""

    cid: str
    start: int
    first_line: int
    count: int
    events: list[Event] | None


class _Scan:
    """One read of an export file: checks it, and sorts its conversations into those the
    store holds already (present) and those to import.

    A conversation is present when the store's version equals the file's last version
    and the stored last event is the file's last event (kind, messages, data, timestamp
    and idempotency key): its other lines are only checked for their conversation id and
    version, not decoded. Any other conversation has every line decoded and checked, and
    is imported (continued, or refused as a conflict) exactly as it reads.
    """

    def __init__(self, store: StoreHandle) -> None:
        self.store = store
        self.pending: list[_Pending] = []
        self.present: list[str] = []
        self._cached = 0
        self._seen: set[str] = set()
        self._cid: str | None = None
        self._lines: list[str] = []
        self._start = 0
        self._first_line = 0
        self._previous = 0
        self._prefix = ""  # how the current conversation's lines start, up to the version

    def read(self, path: str | Path) -> None:
        """Read and check the whole file.

        Raises:
            ExportFormatError: naming the first bad line found.
        """
        counted = 0
        ended = False
        number = 0
        offset = 0
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                at, offset = offset, offset + len(raw)
                if ended:
                    raise ExportFormatError(number, "nothing may follow the end line")
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ExportFormatError(number, f"not UTF-8: {exc}") from None
                if number == 1:
                    _check_header(_json(number, text))
                    continue
                if self._prefix and text.startswith(self._prefix):
                    # The next line of the conversation being read, as export_jsonl wrote it.
                    next_version = _NUMBER.match(text, len(self._prefix))
                    if next_version is not None:
                        version = int(next_version.group())
                        if version != self._previous + 1:
                            self._out_of_order(number, version)
                        self._previous = version
                        self._lines.append(text)
                        counted += 1
                        continue
                head = _head(text)
                if head is None:
                    obj = _json(number, text)
                    if isinstance(obj, dict) and obj.get("end") is True:
                        if obj.get("events") != counted:
                            raise ExportFormatError(
                                number,
                                f"the end line counts {obj.get('events')} events; found {counted}",
                            )
                        ended = True
                        continue
                    cid, event = _parse_event(number, obj)
                    head = cid, event.version, ""
                counted += 1
                self._line(number, at, text, head)
            if number == 0:
                raise ExportFormatError(1, "the file is empty")
            if not ended:
                raise ExportFormatError(
                    number + 1, "the end line is missing: the file is truncated"
                )
        self._finish()

    def _out_of_order(self, number: int, version: int) -> NoReturn:
        raise ExportFormatError(
            number,
            f"version {version} follows version {self._previous}; "
            "a conversation's versions increase by one",
        )

    def _line(self, number: int, at: int, text: str, head: tuple[str, int, str]) -> None:
        cid, version, self._prefix = head
        if cid != self._cid:
            if cid in self._seen:
                raise ExportFormatError(
                    number, f"conversation {cid!r} appears again after other conversations"
                )
            if version != 1:
                _, first = _parse_event(number, _json(number, text))
                if first.kind != EventKind.CLEARED:
                    raise ExportFormatError(
                        number,
                        f"conversation {cid!r} starts at version {version} with a "
                        f"{first.kind!r} event; a log starts at version 1 or with a cleared "
                        "marker",
                    )
            self._finish()
            self._seen.add(cid)
            self._cid, self._lines, self._start, self._first_line = cid, [], at, number
        elif version != self._previous + 1:
            self._out_of_order(number, version)
        self._previous = version
        self._lines.append(text)

    def _finish(self) -> None:
        """Sort the conversation just read: present, or to import (decoded and checked)."""
        cid, lines = self._cid, self._lines
        if cid is None:
            return
        self._cid, self._lines = None, []
        last_number = self._first_line + len(lines) - 1
        try:
            _, last = _parse_event(last_number, json.loads(lines[-1]))
        except ValueError:  # ExportFormatError too: reported below, in line order
            pass
        else:
            if self._holds(cid, last):
                self.present.append(cid)
                return
        events = [
            _parse_event(number, _json(number, text))[1]
            for number, text in enumerate(lines, start=self._first_line)
        ]
        size = sum(len(text) for text in lines)
        keep = self._cached + size <= _CACHE_BYTES
        self._cached += size if keep else 0
        self.pending.append(
            _Pending(cid, self._start, self._first_line, len(events), events if keep else None)
        )

    def _holds(self, cid: str, last: Event) -> bool:
        """Whether the store's log of ``cid`` ends with ``last``, at the same version."""
        if self.store.version(cid) != last.version:
            return False
        stored = self.store.events(cid, after=last.version - 1)
        return (
            len(stored) == 1
            and same_event(stored[0], last)
            and stored[0].timestamp == last.timestamp
            and stored[0].idempotency_key == last.idempotency_key
        )


def _head(text: str) -> tuple[str, int, str] | None:
    """``(conversation id, version, the line's start up to the version)`` read off an
    exported line without decoding the rest; None when the line does not start as
    `export_jsonl` writes it."""
    if not text.startswith(_HEAD):
        return None
    try:
        cid, end = _DECODER.raw_decode(text, len(_HEAD))
    except ValueError:
        return None
    if not isinstance(cid, str) or not text.startswith(_VERSION, end):
        return None
    number = _NUMBER.match(text, end + len(_VERSION))
    if number is None:
        return None
    try:
        checked = msgs.validate_conversation_id(cid)
    except ValueError:
        return None
    return checked, int(number.group()), text[: end + len(_VERSION)]


def _json(number: int, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ExportFormatError(number, f"not valid JSON: {exc}") from None


def _check_header(obj: Any) -> None:
    if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(1, f"not a memoryd export (no '{EXPORT_FORMAT}' header)")
    if obj.get("schema") != EXPORT_SCHEMA:
        raise ExportFormatError(
            1,
            f"export schema {obj.get('schema')!r}; this memoryd reads schema {EXPORT_SCHEMA}",
        )


def _chunks(path: str | Path, pending: list[_Pending]) -> Iterator[tuple[_Pending, list[Event]]]:
    """Each pending conversation's events in chunks of at most ``_CHUNK``, in file order;
    those not kept decoded are read again from the file."""
    with open(path, "rb") as handle:
        for item in pending:
            events = item.events
            if events is None:
                handle.seek(item.start)
                events = [
                    _parse_event(number, _json(number, handle.readline().decode("utf-8")))[1]
                    for number in range(item.first_line, item.first_line + item.count)
                ]
            for at in range(0, len(events), _CHUNK):
                yield item, events[at : at + _CHUNK]


def import_jsonl(
    store: StoreHandle,
    path: str | Path,
    *,
    workers: int = 8,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import an export file into ``store``; idempotent.

    The file is read once, and checked whole before the first write. A conversation
    the store holds already (same version, same last event) is counted as present
    without decoding its events, so re-importing a file that is fully present writes
    nothing and reads little more than the file's bytes. The other conversations'
    events are written exactly (`StoreHandle.import_events`), in chunks of at most
    1,000 events, in order, and in parallel (one worker per conversation, so
    concurrent writers share fsyncs).

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
    scan = _Scan(store)
    scan.read(path)  # check every line before the first write
    summary = ImportSummary(present=len(scan.present))
    lock = threading.Lock()
    slots = threading.BoundedSemaphore(workers * 2)
    handled = len(scan.present)
    if progress is not None and handled:
        progress(handled)

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

    futures: list[Future[_Outcome]] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memoryd-import") as pool:
        open_queue: queue.Queue[_Chunk] | None = None
        sent = 0
        try:
            for item, chunk in _chunks(path, scan.pending):
                if open_queue is None:
                    slots.acquire()
                    open_queue = queue.Queue(maxsize=2)
                    sent = 0
                    future = pool.submit(_import_one, store, item.cid, open_queue)
                    future.add_done_callback(functools.partial(record, item.cid))
                    futures.append(future)
                    futures = [f for f in futures if not f.done() or f.exception() is not None]
                sent += len(chunk)
                last = sent == item.count
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
