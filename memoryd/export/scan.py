"""One read of an export file, for an import: every line checked, and each conversation
sorted into present (the store holds it already: its lines are not decoded) or to import
(decoded and kept up to a memory budget, or read again from the file when written)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from memoryd import messages as msgs
from memoryd._json_values import loads
from memoryd.errors import ExportFormatError
from memoryd.events import Event, EventKind
from memoryd.export.format import (
    CHUNK,
    CHUNK_BYTES,
    check_end,
    check_header,
    check_visible,
    parse_event,
    parse_json,
)
from memoryd.store.handle import StoreHandle
from memoryd.store.importing import same_event

__all__ = ["Pending", "Scan", "chunk_ends", "chunks"]

_HEAD = '{"conversation_id":'
_VERSION = ',"version":'
_NUMBER = re.compile(r"[0-9]{1,19}(?=[,}])")
_DECODER = json.JSONDecoder()
_CACHE_BYTES = 16 * 2**20
"""How many bytes of lines of the conversations to write an import keeps decoded while it
reads (decoded, about 2.7 times as many bytes of memory); the conversations past it are
read again from the file when they are written."""


@dataclass(slots=True)
class Pending:
    """A conversation of the file to hand to the store: its events, or where they are,
    and where its chunks end (``ends``: the index past each chunk's last event)."""

    cid: str
    start: int
    first_line: int
    count: int
    events: list[Event] | None
    ends: list[int]


class Scan:
    """One read of an export file: checks it, and sorts its conversations into those the
    store holds already (present) and those to import.

    A conversation is present when the store's version equals the file's last version
    and the stored last event is the file's last event (kind, messages, data, timestamp
    and idempotency key): its other lines are only checked for their conversation id and
    version, not decoded. Any other conversation has every line decoded and checked, and
    is imported (continued, or refused as a conflict) exactly as it reads.

    A line's conversation id and version are first read off its text (the first of each
    key); decoded, a line holds the last of a key given twice. A line whose decoded id or
    version is not the one read off its text is refused, naming the line, so the lines
    are sorted and written by the values they are decoded to.

    Args:
        store: the target store.
        chunk_bytes: the most bytes of lines of one conversation written at once
            (`CHUNK_BYTES`); an event larger than this is written alone.
    """

    def __init__(self, store: StoreHandle, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.store = store
        self.chunk_bytes = chunk_bytes
        self.pending: list[Pending] = []
        self.present: list[str] = []
        self._cached = 0
        self._seen: set[str] = set()
        self._cid: str | None = None
        self._lines: list[str] = []
        self._sizes: list[int] = []  # the bytes of each of ``_lines`` in the file
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
                    check_header(parse_json(number, text))
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
                        self._sizes.append(len(raw))
                        counted += 1
                        continue
                head = _head(text)
                if head is None:
                    obj = parse_json(number, text)
                    if isinstance(obj, dict) and obj.get("end") is True:
                        self._finish()  # the last conversation's lines come first
                        check_end(number, obj, conversations=len(self._seen), events=counted)
                        ended = True
                        continue
                    cid, event = parse_event(number, obj)
                    head = cid, event.version, ""
                counted += 1
                self._line(number, at, text, head)
                self._sizes.append(len(raw))
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
            check_visible(number, cid)
            if version != 1:
                _, first = parse_event(number, parse_json(number, text))
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
            self._sizes = []
        elif version != self._previous + 1:
            self._out_of_order(number, version)
        self._previous = version
        self._lines.append(text)

    def _finish(self) -> None:
        """Sort the conversation just read: present, or to import (decoded and checked)."""
        cid, lines, sizes = self._cid, self._lines, self._sizes
        if cid is None:
            return
        self._cid, self._lines, self._sizes = None, [], []
        last_version = self._previous  # the versions read off the lines' text run on by one
        first_version = last_version - len(lines) + 1
        last_number = self._first_line + len(lines) - 1
        try:
            found, last = parse_event(last_number, loads(lines[-1]))
        except ValueError:  # ExportFormatError too: reported below, in line order
            pass
        else:
            if found == cid and last.version == last_version and self._holds(cid, last):
                self.present.append(cid)
                return
        limit = self.store.max_message_bytes
        events: list[Event] = []
        for number, text in enumerate(lines, start=self._first_line):
            found, event = parse_event(number, parse_json(number, text), max_bytes=limit)
            _check_read_as_scanned(number, (cid, first_version + len(events)), found, event)
            events.append(event)
        size = sum(sizes)
        keep = self._cached + size <= _CACHE_BYTES
        self._cached += size if keep else 0
        self.pending.append(
            Pending(
                cid,
                self._start,
                self._first_line,
                len(events),
                events if keep else None,
                chunk_ends(sizes, max_bytes=self.chunk_bytes),
            )
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


def _check_read_as_scanned(number: int, scanned: tuple[str, int], cid: str, event: Event) -> None:
    """Refuse line ``number`` when, decoded, it is not of the conversation and version
    read off its text (``scanned``): a key given twice, of which the text's reading took
    the first and JSON keeps the last.

    Raises:
        ExportFormatError: naming the line and both readings.
    """
    if (cid, event.version) == scanned:
        return
    raise ExportFormatError(
        number,
        f"the line starts with conversation {scanned[0]!r} at version {scanned[1]}, but "
        f"decoded it is conversation {cid!r} at version {event.version}: a key given twice "
        "(JSON readers differ on which one counts); give each key once",
    )


def chunk_ends(sizes: list[int], *, max_bytes: int, max_events: int = CHUNK) -> list[int]:
    """Where a conversation's chunks end: the index past each chunk's last line. Pure.

    A chunk holds at most ``max_events`` lines and at most ``max_bytes`` bytes of them,
    but always at least one line (a line larger than ``max_bytes`` goes alone).

    Args:
        sizes: the bytes of each line, in order.
        max_bytes: the most bytes of a chunk.
        max_events: the most lines of a chunk.

    Returns:
        The ends, ascending; the last is ``len(sizes)``.
    """
    ends: list[int] = []
    start = held = 0
    for index, size in enumerate(sizes):
        if index > start and (index - start >= max_events or held + size > max_bytes):
            ends.append(index)
            start, held = index, 0
        held += size
    if sizes:
        ends.append(len(sizes))
    return ends


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


def chunks(
    path: str | Path, pending: list[Pending], *, max_bytes: int
) -> Iterator[tuple[Pending, list[Event]]]:
    """Each pending conversation's events in the chunks `Scan` cut (`chunk_ends`: at most
    ``CHUNK`` events and ``CHUNK_BYTES`` bytes of lines), in file order; those not kept
    decoded are read again from the file one chunk at a time (and checked against
    ``max_bytes`` again, as `Scan` did)."""
    with open(path, "rb") as handle:
        for item in pending:
            events = item.events
            if events is None:
                handle.seek(item.start)
            at = 0
            for end in item.ends:
                if events is None:
                    chunk = [
                        parse_event(
                            number,
                            parse_json(number, handle.readline().decode("utf-8")),
                            max_bytes=max_bytes,
                        )[1]
                        for number in range(item.first_line + at, item.first_line + end)
                    ]
                else:
                    chunk = events[at:end]
                yield item, chunk
                at = end
