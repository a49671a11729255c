"""Importing an export: checked whole first, then written in parallel, idempotently."""

from __future__ import annotations

import functools
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.errors import ConflictError
from memoryd.events import Event
from memoryd.export.format import Progress
from memoryd.export.scan import Scan, chunks
from memoryd.store.handle import StoreHandle

__all__ = ["ImportSummary", "import_jsonl"]


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
    scan = Scan(store)
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
            for item, chunk in chunks(path, scan.pending):
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
