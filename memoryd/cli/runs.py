"""``memoryd runs``: the unfinished agent runs of a store, and dropping an orphaned one.

An agent run that calls tools keeps a journal in its store until its turn is committed
(`memoryd.agent.journal`). The runs listed here are those journals: the runs going on in
some process, and the orphaned ones, whose process died (or whose lease ran out) before
their turn was committed: an `AgentSystem` started with ``recover="resume"``, or
``Agent.resume``, finishes those. ``--discard RUN_ID`` drops an orphaned run for good;
a run a live process holds is refused.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any, TextIO

from memoryd.agent.journal import RunJournal, RunRecord

if TYPE_CHECKING:
    from memoryd.cli.output import Output
    from memoryd.store.handle import StoreHandle

__all__ = ["run_runs"]


def run_runs(args: argparse.Namespace, store: StoreHandle, out: Output) -> int:
    """List the store's unfinished runs, or discard one (``--discard RUN_ID``).

    Raises:
        UnknownRun: ``--discard`` names no unfinished run.
        ValueError: ``--discard`` names a run a live process holds.
        ConflictError: another process took the run over meanwhile.
    """
    journal = RunJournal(store)
    if args.discard is not None:
        record = journal.orphan(args.discard)
        journal.discard_orphan(record)
        out.emit({"discarded": record.run_id}, lambda o: o.write(f"discarded {record.run_id}\n"))
        return 0
    now = time.time()
    rows = [_row(record, now) for record in journal.pending()]
    out.emit(rows, lambda o: _show(rows, o))
    return 0


def _row(record: RunRecord, now: float) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "conversation_id": record.conversation_id,
        "agent": record.agent,
        "tool_results": sum(1 for m in record.messages[record.inputs :] if m.get("role") == "tool"),
        "owner": record.owner,
        "heartbeat": record.heartbeat,
        "orphaned": record.orphaned(now),
    }


def _show(rows: list[dict[str, Any]], out: TextIO) -> None:
    if not rows:
        out.write("no unfinished runs\n")
        return
    now = time.time()
    header = ("RUN", "CONVERSATION", "AGENT", "TOOL RESULTS", "OWNER", "LAST WRITE", "STATE")
    lines = [header] + [
        (
            row["run_id"],
            row["conversation_id"],
            row["agent"] or "-",
            str(row["tool_results"]),
            row["owner"],
            f"{max(0.0, now - row['heartbeat']):.0f} s ago",
            "orphaned" if row["orphaned"] else "live",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        out.write("\n")
