"""Writing an export: every conversation's events, one page of conversations at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from memoryd.export.format import EXPORT_FORMAT, EXPORT_SCHEMA, Progress, json_line
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

    Args:
        store: any store handle (local or remote).
        out: a text stream.
        progress: called with the number of events written so far, once per page.

    Returns:
        The counts written (also in the trailer line).
    """
    out.write(json_line({"format": EXPORT_FORMAT, "schema": EXPORT_SCHEMA, "store": store.name}))
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
