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
from memoryd.store.requests import (
    HIDDEN_PREFIX,
    MAX_IMPORT_VERSION,
    check_data,
    check_idempotency_key,
)

__all__ = [
    "CHUNK",
    "CHUNK_BYTES",
    "CUT",
    "EXPORT_FORMAT",
    "EXPORT_SCHEMA",
    "Progress",
    "check_end",
    "check_header",
    "check_visible",
    "json_line",
    "parse_event",
    "parse_json",
]

EXPORT_FORMAT = "memoryd-export"
EXPORT_SCHEMA = 1
CUT = "per-conversation"
"""What the header's ``cut`` says an export is: each conversation's log as of one read,
the conversations read one after another while writers may go on writing (not one
snapshot of the whole store)."""
CHUNK = 1000
"""The most events of one conversation read, or written, at once."""
CHUNK_BYTES = 8 * 2**20
"""The most bytes of lines (as the file holds them) of one conversation an import writes
at once. A chunk goes to a daemon as one request body, whose limit is 64 MiB: 8 MiB of
JSON lines stay far under it in any wire encoding (msgpack, or JSON with its escapes,
may take up to about 2.3 times a line's bytes). An event larger than this (one the
store took, so within its limits) is written alone."""
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
        ExportFormatError: The line is not valid JSON (said to be cut short when it is
            the file's last line and has no line end: a truncated file).
    """
    try:
        return loads(text)
    except ValueError as exc:
        if not text.endswith("\n"):
            raise ExportFormatError(
                number, f"the last line is cut short ({exc}): the file is truncated"
            ) from None
        raise ExportFormatError(number, f"not valid JSON: {exc}") from None


def check_header(obj: Any) -> None:
    """Check the first line.

    Raises:
        ExportFormatError: Not a memoryd export, or another schema.
    """
    if not isinstance(obj, dict) or obj.get("format") != EXPORT_FORMAT:
        raise ExportFormatError(1, f"not a memoryd export (no '{EXPORT_FORMAT}' header)")
    schema = obj.get("schema")
    if type(schema) is not int or schema != EXPORT_SCHEMA:
        raise ExportFormatError(
            1,
            f"export schema {obj.get('schema')!r}; this memoryd reads schema {EXPORT_SCHEMA}",
        )


def check_end(number: int, obj: dict[str, Any], *, conversations: int, events: int) -> None:
    """Check the end line ``number`` against what the lines before it held.

    Its ``events`` count is required; its ``conversations`` count (which `export_jsonl`
    always writes) is checked when it is there.

    Raises:
        ExportFormatError: It counts other conversations or other events.
    """
    for name, found in (("events", events), ("conversations", conversations)):
        if name == "conversations" and name not in obj:
            continue
        counted = obj.get(name)
        if type(counted) is not int or counted != found:
            raise ExportFormatError(
                number, f"the end line counts {counted!r} {name}; found {found}"
            )


def check_visible(number: int, cid: str) -> None:
    """Refuse memoryd's own bookkeeping (run journals), which exports never hold.

    Raises:
        ExportFormatError: ``cid`` starts with ``memoryd.run/``.
    """
    if cid.startswith(HIDDEN_PREFIX):
        raise ExportFormatError(
            number,
            f"conversation {cid!r} is memoryd's own bookkeeping (ids starting with "
            f"{HIDDEN_PREFIX!r}, run journals): exports never hold one and an import "
            "does not write one; remove its lines",
        )


def parse_event(number: int, obj: Any, *, max_bytes: int | None = None) -> tuple[str, Event]:
    """Check the decoded event line ``number`` and build its event.

    Args:
        number: the line's number, for the errors.
        obj: the decoded line.
        max_bytes: the target store's ``max_message_bytes``: also check the line as the
            store's import will (sizes, idempotency key, data, version range), so that an
            import refuses the file before its first write; None: only its form.

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
        checked: tuple[dict[str, Any], ...]
        if max_bytes is None:
            checked = tuple(msgs.validate(m, max_bytes=None) for m in raw)
        else:
            checked = msgs.check(raw, max_bytes=max_bytes) if raw else ()
        stamp = obj["timestamp"]
        key = obj.get("idempotency_key")
        data = obj.get("data")
        if max_bytes is not None:
            key = check_idempotency_key(key)
            data = check_data(data, max_bytes)
        event = Event(
            version=obj["version"],
            kind=obj["kind"],
            messages=checked,
            timestamp=float(stamp)
            if isinstance(stamp, int) and not isinstance(stamp, bool)
            else stamp,
            idempotency_key=key,
            data=data,
        )
        if max_bytes is not None and event.version > MAX_IMPORT_VERSION:
            raise ValueError(
                f"version {event.version} is past 2**53 ({MAX_IMPORT_VERSION}), the last "
                "version an import writes"
            )
    except ValueError as exc:
        raise ExportFormatError(number, str(exc)) from None
    return cid, event
