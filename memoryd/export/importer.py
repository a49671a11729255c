"""Importing an export: checked whole first, then written in parallel, idempotently."""

from __future__ import annotations

import functools
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.errors import ConflictError
from memoryd.events import Event, EventKind
from memoryd.export.format import Progress
from memoryd.export.scan import Scan, chunks
from memoryd.store.handle import StoreHandle

__all__ = ["ImportSummary", "import_jsonl"]


@dataclass(kw_only=True, slots=True)
class ImportSummary:
    """What an import did, per conversation.

    ``skipped_events`` is always 0 now that every kind of event is imported; it is
    kept so existing readers of the summary do not break. ``reasons`` says, for each
    conversation of ``conflicts``, why it was refused (nothing of it was written).
    """

    imported: int = 0
    present: int = 0
    events_written: int = 0
    skipped_events: int = 0
    conflicts: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)


_Chunk = tuple[list[Event] | None, bool]
"""``(events, last)`` handed to a conversation's worker; None events: reading stopped."""
_Outcome = tuple[str, int, str]
_RECORDS = frozenset({EventKind.MEMO.value, EventKind.COMPACTED.value})


def _records_lost(store: StoreHandle, cid: str, version: int, head: Event) -> str | None:
    """Why ``head`` may not start the import of ``cid`` (at ``version``), or None.

    A log that starts with a cleared marker past the next version continues a
    conversation holding no messages, and the marker deletes the events before it: on
    a conversation whose log holds memos or summaries (long-term memory keeps its
    records there), those would be lost unseen, so it is refused as a conflict.
    """
    if version == 0 or head.kind != EventKind.CLEARED or head.version <= version + 1:
        return None
    kept = sum(1 for event in store.events(cid) if event.kind in _RECORDS)
    if not kept:
        return None
    return (
        f"the import starts {cid!r} with a cleared marker at version {head.version}, which "
        f"would delete the {kept} memo/compacted event(s) of its log (at version "
        f"{version}); nothing was imported. Import into another conversation id or store"
    )


def _import_one(store: StoreHandle, cid: str, chunks: queue.Queue[_Chunk]) -> _Outcome:
    """Import one conversation's chunks, in order, with `StoreHandle.import_events`.

    Always takes every chunk up to the last (so the reader never blocks on this
    conversation), even after a conflict or an error.

    Returns:
        ``(outcome, events written, why)``: ``imported``, ``present`` or ``conflict``,
        and for a conflict, why.
    """
    version = store.version(cid)
    written = 0
    last_version = 0
    reason: str | None = None
    failure: BaseException | None = None
    while True:
        chunk, last = chunks.get()
        if chunk is None:
            break
        if reason is None and failure is None:
            try:
                if not last_version:
                    reason = _records_lost(store, cid, version, chunk[0])
                if reason is None:
                    after = store.import_events(cid, chunk)
            except ConflictError as exc:
                reason = str(exc)
            except BaseException as exc:  # handed back once the queue is drained
                failure = exc
            else:
                if reason is None:
                    written += sum(1 for event in chunk if event.version > version)
                    version = after
        last_version = chunk[-1].version
        if last:
            break
    if failure is not None:
        raise failure
    if reason is None and version != last_version:
        reason = (
            f"{cid!r} is at version {version}, past the file's last version "
            f"{last_version}: the store's log runs past the file's; nothing was imported"
        )
    if reason is not None:
        return "conflict", written, reason
    return ("imported" if written else "present"), written, ""


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
    1,000 events and 8 MiB of lines (so a long conversation of large messages goes to
    a daemon in requests well under its body limit), in order, and in parallel (one
    worker per conversation, so concurrent writers share fsyncs).

    Args:
        store: the target store.
        path: the export file.
        workers: conversations imported at once.
        progress: called with the number of conversations handled so far.

    Returns:
        What was imported, found present, or refused as a conflict.

    Raises:
        ExportFormatError: a bad line, such as one giving its conversation id or version
            twice (nothing has been written).
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
            outcome, written, reason = future.result()
            summary.events_written += written
            if outcome == "conflict":
                summary.conflicts.append(cid)
                summary.reasons[cid] = reason
            else:
                setattr(summary, outcome, getattr(summary, outcome) + 1)
            if progress is not None:
                progress(handled)

    futures: list[Future[_Outcome]] = []
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memoryd-import") as pool:
        open_queue: queue.Queue[_Chunk] | None = None
        sent = 0
        try:
            for item, chunk in chunks(path, scan.pending, max_bytes=store.max_message_bytes):
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
