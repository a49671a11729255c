"""`memoryd.cli.output`: what the command prints for people and for programs."""

from __future__ import annotations

import io
import json
import sys

import pytest

from memoryd.cli.output import Output, import_line, progress, show_events, show_messages
from memoryd.events import Change
from memoryd.export import ImportSummary


def change(position: int, count: int) -> Change:
    messages = tuple({"role": "user", "content": str(i)} for i in range(count))
    return Change(
        position=position,
        conversation_id="c1",
        version=position,
        kind="appended",
        messages=messages,
        timestamp=1.0,
        idempotency_key=None,
        data=None,
    )


def test_messages_show_role_content_and_tool_calls() -> None:
    """``role: content``; non-str content as JSON; tool calls after the content."""
    out = io.StringIO()
    call = {"id": "t1", "function": {"name": "lookup", "arguments": '{"q": 1}'}}
    show_messages(
        [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": [{"type": "text", "text": "x"}]},
        ],
        out,
    )
    assert out.getvalue().splitlines() == [
        "user: hello",
        'assistant: [tool call t1: lookup({"q": 1})]',
        'user: [{"type": "text", "text": "x"}]',
    ]


def test_events_show_version_kind_and_count() -> None:
    """One line per wire event."""
    out = io.StringIO()
    show_events(
        [
            {"version": 1, "kind": "appended", "messages": [{}]},
            {"version": 2, "kind": "appended", "messages": [{}, {}]},
            {"version": 3, "kind": "cleared", "messages": []},
        ],
        out,
    )
    assert out.getvalue() == (
        "v1 appended 1 message\nv2 appended 2 messages\nv3 cleared 0 messages\n"
    )


def test_emit_writes_json_or_lets_the_human_writer_write() -> None:
    """JSON mode writes one document a line; text mode calls the writer given."""
    as_json, as_text = io.StringIO(), io.StringIO()
    Output(True, as_json).emit({"version": 1}, lambda o: o.write("never\n"))
    Output(False, as_text).emit({"version": 1}, lambda o: o.write("version 1\n"))
    assert json.loads(as_json.getvalue()) == {"version": 1}
    assert as_text.getvalue() == "version 1\n"


def test_a_change_is_one_line_in_either_mode() -> None:
    """Text: position, id, version, kind and a counted noun; JSON: the wire change."""
    text, as_json = io.StringIO(), io.StringIO()
    Output(False, text).change(change(7, 1))
    Output(False, text).change(change(8, 2))
    Output(True, as_json).change(change(7, 1))
    assert text.getvalue() == "7 c1 v7 appended 1 message\n8 c1 v8 appended 2 messages\n"
    wire = json.loads(as_json.getvalue())
    assert (wire["position"], wire["conversation_id"], wire["version"]) == (7, "c1", 7)


def test_the_import_line_names_each_conflict_with_its_reason() -> None:
    """Counts always; then each refused conversation with why (at most ten, then how
    many more). The reasons used to be thrown away: only the ids were listed."""
    plain = ImportSummary(imported=3, present=1, events_written=5)
    assert import_line(plain) == (
        "imported 3 conversations (5 writes), 1 already present, 0 conflicts\n"
    )
    troubled = ImportSummary(
        imported=1,
        events_written=1,
        conflicts=["a", "b"],
        reasons={"a": "is at version 7, past the file's last version 5"},
    )
    assert import_line(troubled) == (
        "imported 1 conversations (1 writes), 0 already present, 2 conflicts "
        "(nothing of those was written):\n"
        "  'a': is at version 7, past the file's last version 5\n"
        "  'b': it changed since the export\n"
    )
    many = ImportSummary(conflicts=[f"c{n}" for n in range(12)])
    assert import_line(many).splitlines()[-1] == "  ... and 2 more (--json lists them all)"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_bar_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off a terminal there is no progress callback at all."""
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress("exporting", 10) is None


def test_progress_on_a_terminal_draws_a_bar_or_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A known total draws a 30-wide bar; an unknown one a bare count."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bar, count = progress("exporting", 10), progress("importing", None)
    assert bar is not None and count is not None
    bar(5)
    count(7)
    assert terminal.getvalue() == f"\rexporting [{'#' * 15}{'.' * 15}] 5/10\rimporting 7"
