"""The export file's format: its header, its event lines and their checks.

A line is one JSON object. The header names the format and its schema; an event line
holds a conversation id and one event's wire fields (`memoryd.protocol.event_to_wire`);
the trailer counts what came before it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memoryd import messages as msgs
from memoryd._json_values import loads
from memoryd.errors import ExportFormatError
from memoryd.events import Event

__all__ = [
    "CHUNK",
    "EXPORT_FORMAT",
    "EXPORT_SCHEMA",
    "Progress",
    "check_header",
    "json_line",
    "parse_event",
    "parse_json",
]

EXPORT_FORMAT = "memoryd-export"
EXPORT_SCHEMA = 1
CHUNK = 1000
"""The most events of one conversation read, or written, at once."""
_EVENT_FIELDS = frozenset(
    {"conversation_id", "version", "kind", "messages", "timestamp", "idempotency_key", "data"}
)

Progress = Callable[[int], None]
"""A progress callback: called with a running count."""


def json_line(obj: Any) -> str:
    """One line of the file: compact JSON, UTF-8 as is, no NaN."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def parse_json(number: int, text: str) -> Any:
    """Decode line ``number``.

    Raises:
        ExportFormatError: The line is not valid JSON.
    """
    try:
        return loads(text)
    except ValueError as exc:
        raise ExportFormatError(number, f"not valid JSON: {exc}") from None


def check_header(obj: Any) -> None:
    """Check the first line.

    Raises:
        ExportFormatError: Not a memoryd export, or another schema.
    """
    if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(1, f"not a memoryd export (no '{EXPORT_FORMAT}' header)")
    if obj.get("schema") != EXPORT_SCHEMA:
        raise ExportFormatError(
            1,
            f"export schema {obj.get('schema')!r}; this memoryd reads schema {EXPORT_SCHEMA}",
        )


def parse_event(number: int, obj: Any) -> tuple[str, Event]:
    """Check the decoded event line ``number`` and build its event.

    Returns:
        ``(conversation id, event)``.

    Raises:
        ExportFormatError: Naming what is wrong with the line.
    """
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
