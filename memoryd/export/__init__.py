"""Export and import: schema-versioned JSONL of events, streamed.

An export is one header line, one line per event, one trailer line::

    {"format": "memoryd-export", "schema": 1, "store": "memoryd.default",
     "cut": "per-conversation"}
    {"conversation_id": "c", "version": 1, "kind": "appended", "messages": [...],
     "timestamp": 1717000000.5, "idempotency_key": null, "data": null}
    ...
    {"end": true, "conversations": 2, "events": 17}

It walks the store one conversation at a time, so memory stays bounded by the
largest conversation whatever the store's size. A conversation's events are
contiguous and in version order. Every conversation with events is exported, also
those holding no messages now: cleared ones, and logs of ``memo`` events only (where
long-term memory keeps its records).

Import reads the file once and checks it whole (reporting the line number of
anything bad) before it writes anything. A conversation the store holds already (same
version, same last event) is counted as present from its last line alone: its other
lines are checked for their conversation id and version only, not decoded, so
re-importing a file that is fully present writes nothing and costs little more than
reading it. The other conversations are decoded and checked, kept decoded up to 16 MiB
of lines (past that, read again when written), and written exactly as they are, with
`StoreHandle.import_events`, in chunks of at most 1,000 events and 8 MiB of lines
(well under a daemon's request body limit): same versions, kinds, messages, commit
timestamps, idempotency keys and data, ``forked``, ``memo`` and ``compacted`` events
included. Importing is idempotent: events already in the store identically are
skipped, so a conversation imported before is left alone (``present``), a new one (or
one holding no messages, for a log that starts with a cleared marker) is written
(``imported``), and one whose log differs from the file's, or runs past it, is reported
as a conflict (``reasons`` says why) and not touched. A log starting with a cleared
marker is refused over a conversation whose log holds memos or summaries, which the
marker would delete.

An export is a per-conversation cut (the header's ``"cut"``): each conversation's
log is read whole at one moment, the conversations one after another; writes made
meanwhile show in the conversations read after them. Run journals (``memoryd.run/``
ids) are never exported, and an import refuses them. Every line of a conversation to
import is checked as the target store's import will check it (message and data
sizes, idempotency keys), so a file it would refuse is refused before any write; so is
a line that gives its conversation id or version twice (JSON readers differ on which
one counts).
Conversations are written in parallel, so the global change feed (``tail``) keeps
each conversation's order but not the interleaving of the source store.
"""

from memoryd.errors import ExportFormatError
from memoryd.export.format import EXPORT_FORMAT, EXPORT_SCHEMA
from memoryd.export.importer import ImportSummary, import_jsonl
from memoryd.export.reader import read_export
from memoryd.export.writer import ExportSummary, export_jsonl

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_SCHEMA",
    "ExportFormatError",
    "ExportSummary",
    "ImportSummary",
    "export_jsonl",
    "import_jsonl",
    "read_export",
]
