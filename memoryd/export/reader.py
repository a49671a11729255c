"""Reading an export whole: every line checked, then its conversations one at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from memoryd.errors import ExportFormatError
from memoryd.events import Event, EventKind
from memoryd.export.format import (
    CHUNK,
    check_end,
    check_header,
    check_visible,
    parse_event,
    parse_json,
)

__all__ = ["read_export"]


def read_export(path: str | Path) -> Iterator[tuple[str, list[Event]]]:
    """Check an export file and yield its conversations, one at a time.

    The whole file is checked once before the first conversation is yielded, so a
    bad line is reported before anything is imported. A conversation is held in
    memory whole; `memoryd.export.import_jsonl` reads the file in bounded chunks instead.

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

    Chunks hold at most ``CHUNK`` events of one conversation, in version order.
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
            obj = parse_json(number, text)
            if number == 1:
                check_header(obj)
                continue
            if isinstance(obj, dict) and obj.get("end") is True:
                check_end(number, obj, conversations=len(seen), events=counted)
                ended = True
                continue
            cid, event = parse_event(number, obj)
            counted += 1
            if cid != current:
                if cid in seen:
                    raise ExportFormatError(
                        number, f"conversation {cid!r} appears again after other conversations"
                    )
                check_visible(number, cid)
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
            elif len(batch) >= CHUNK:
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
