"""What the ``memoryd`` command prints: JSON for programs, text for people.

An `Output` writes each result as one JSON document (``--json``, or stdout not
a terminal) or as lines for people; the functions here write those lines.
Progress bars go to stderr, and only when it is a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO

from memoryd.protocol import change_to_wire

if TYPE_CHECKING:
    from memoryd.events import Change
    from memoryd.export import ImportSummary

__all__ = ["Output", "import_line", "progress", "show_events", "show_messages"]


class Output:
    """Where a command's results go.

    Args:
        as_json: write JSON (one document a line) instead of text for people.
        out: the stream written to.
    """

    def __init__(self, as_json: bool, out: TextIO) -> None:
        self.json = as_json
        self.out = out

    def emit(self, value: Any, human: Callable[[TextIO], object]) -> None:
        """Write ``value`` as JSON, or let ``human`` write it for people."""
        if self.json:
            self.out.write(json.dumps(value, ensure_ascii=False) + "\n")
        else:
            human(self.out)

    def change(self, change: Change) -> None:
        """Write one change of the feed: a JSON line, or position, id, version, kind, count."""
        if self.json:
            self.out.write(json.dumps(change_to_wire(change), ensure_ascii=False) + "\n")
        else:
            self.out.write(
                f"{change.position} {change.conversation_id} v{change.version} {change.kind} "
                f"{_count(len(change.messages), 'message')}\n"
            )


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        text += (
            f" [tool call {call.get('id')}: {function.get('name')}({function.get('arguments')})]"
        )
    return text.strip()


def show_messages(found: Iterable[dict[str, Any]], out: TextIO) -> None:
    """Write each message as ``role: content`` (tool calls shown after the content)."""
    for message in found:
        out.write(f"{message.get('role')}: {_content(message)}\n")


def show_events(found: Iterable[dict[str, Any]], out: TextIO) -> None:
    """Write each wire event as ``vVERSION KIND N messages``."""
    out.writelines(
        f"v{e['version']} {e['kind']} {_count(len(e['messages']), 'message')}\n" for e in found
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_REASONS_SHOWN = 10
"""The most refused conversations an import's report names, each with its reason."""


def import_line(summary: ImportSummary) -> str:
    """What an import did, in one line for people, then one line per refused
    conversation (at most `_REASONS_SHOWN`) saying why."""
    conflicts = summary.conflicts
    lines = [
        f"imported {summary.imported} conversations ({summary.events_written} writes), "
        f"{summary.present} already present, {len(conflicts)} conflicts"
        + (" (nothing of those was written):" if conflicts else "")
    ]
    for cid in conflicts[:_REASONS_SHOWN]:
        lines.append(f"  {cid!r}: {summary.reasons.get(cid, 'it changed since the export')}")
    if len(conflicts) > _REASONS_SHOWN:
        lines.append(f"  ... and {len(conflicts) - _REASONS_SHOWN} more (--json lists them all)")
    return "\n".join(lines) + "\n"


def progress(label: str, total: int | None) -> Callable[[int], None] | None:
    """A progress bar on stderr (a bare count when ``total`` is unknown), or None off a terminal."""
    if not sys.stderr.isatty():
        return None

    def show(done: int) -> None:
        if total:
            width = 30
            filled = min(width, done * width // max(total, 1))
            sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        else:
            sys.stderr.write(f"\r{label} {done}")
        sys.stderr.flush()

    return show
