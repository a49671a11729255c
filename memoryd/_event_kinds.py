"""The event kinds and the record layout version: the constants of `memoryd.events`.

Pure and cheap to import: the codec and the wire format read these without loading the
event records (`memoryd._event_records`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["KINDS", "SCHEMA_VERSION", "EventKind"]

SCHEMA_VERSION = 1
"""The version of the stored event record layout written by this code."""


class EventKind(StrEnum):
    """The kinds of event; each member equals its lower-case str value."""

    APPENDED = "appended"
    CLEARED = "cleared"
    POPPED = "popped"
    FORKED = "forked"
    COMPACTED = "compacted"
    MEMO = "memo"


KINDS = frozenset(kind.value for kind in EventKind)
"""Every valid event kind, as plain str."""
