"""Writing an export: every conversation's events, one page of conversations at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from memoryd.export.format import CUT, EXPORT_FORMAT, EXPORT_SCHEMA, Progress, json_line
from memoryd.protocol import event_to_wire
from memoryd.store.handle import StoreHandle

__all__ = ["ExportSummary", "export_jsonl"]

_PAGE = 500


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportSummary:
    """What an export wrote."""

    conversations: int
    events: int


def export_jsonl(
    store: StoreHandle, out: TextIO, *, progress: Progress | None = None
) -> ExportSummary:
    """Write every conversation's events to ``out`` as JSONL.

    Each conversation's log is read at once, so it is whole and as of one moment; the
    conversations are read one after another, so with writers at work the export is
    not one snapshot of the store (the header says ``"cut": "per-conversation"``): a
    conversation read late holds writes made after one read early, and a ``forked``
    event may name a source version past the source's exported log.

    Args:
        store: any store handle (local or remote).
        out: a text stream.
        progress: called with the number of events written so far, once per page.

    Returns:
        The counts written (also in the trailer line).
    """
    header = {"format": EXPORT_FORMAT, "schema": EXPORT_SCHEMA, "store": store.name, "cut": CUT}
    out.write(json_line(header))
    conversations = events = 0
    after: str | None = None
    while page := store.conversations(after=after, limit=_PAGE, include_empty=True):
        for cid in page:
            for event in store.events(cid):
                out.write(json_line({"conversation_id": cid, **event_to_wire(event)}))
                events += 1
            conversations += 1
        after = page[-1]
        if progress is not None:
            progress(events)
    out.write(json_line({"end": True, "conversations": conversations, "events": events}))
    return ExportSummary(conversations=conversations, events=events)
