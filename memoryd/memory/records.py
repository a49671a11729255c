"""Memory records as events: where they live, what an event holds, and the pure fold.

Every add, update and delete of a record is one ``memo`` event (`StoreHandle.record`)
in the records conversation of its scope, so the log is the history of every record:

* ``memoryd.memory/global`` holds the records every conversation sees;
* ``memoryd.memory/session/<sha256 of the conversation id>`` holds one session's.

The event ``data`` is ``{"op": "add" | "update" | "delete", "id", ...}``; add and update
carry the whole record (`MemoryRecord.to_data`), delete only the id. `fold` rebuilds the
current records from the events, without I/O.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memoryd.events import Event, EventKind

__all__ = [
    "DEFAULT_IMPORTANCE",
    "GLOBAL",
    "RECORDS_PREFIX",
    "SCOPES",
    "SESSION",
    "MemoryRecord",
    "Provenance",
    "dedupe_key",
    "fold",
    "merge_provenance",
    "normalise",
    "records_conversation",
]

GLOBAL = "global"
SESSION = "session"
SCOPES = (GLOBAL, SESSION)
RECORDS_PREFIX = "memoryd.memory/"
DEFAULT_IMPORTANCE = 0.5
"""The importance of a record whose extraction gave none."""

Scope = Literal["global", "session"]
Op = Literal["add", "update", "delete"]


def records_conversation(scope: str, cid: str | None = None) -> str:
    """The conversation id holding a scope's records.

    Args:
        scope: ``"global"`` or ``"session"``.
        cid: The session's conversation id (session scope only).

    Returns:
        ``memoryd.memory/global`` or ``memoryd.memory/session/<sha256 hex of cid>``
        (at most 87 bytes, whatever the length of ``cid``).

    Raises:
        ValueError: An unknown scope, or a session scope without ``cid``.
    """
    if scope == GLOBAL:
        return RECORDS_PREFIX + GLOBAL
    if scope == SESSION:
        if not cid:
            raise ValueError("the session scope needs the conversation id")
        digest = hashlib.sha256(cid.encode("utf-8", "surrogatepass")).hexdigest()
        return f"{RECORDS_PREFIX}{SESSION}/{digest}"
    raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")


def normalise(text: str) -> str:
    """Case-, accent-width- and punctuation-insensitive form of ``text`` (for dedupe).

    Args:
        text: Any text.

    Returns:
        NFKC, case-folded, non-word characters dropped, whitespace collapsed.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", folded).split())


def dedupe_key(kind: str, body: Mapping[str, Any]) -> tuple[str, str]:
    """What makes two records the same fact: the kind plus the body's key, else its text.

    Args:
        kind: The record kind.
        body: The record body.

    Returns:
        ``(normalised kind, normalised key or text)``.
    """
    key = body.get("key")
    basis = key if isinstance(key, str) and key.strip() else body.get("text")
    if not isinstance(basis, str):
        basis = repr(sorted(body.items()))
    return normalise(kind), normalise(basis)


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    """Where a record came from: a conversation and the versions of it that said so."""

    conversation_id: str
    versions: tuple[int, ...] = ()

    def to_data(self) -> dict[str, Any]:
        """The JSON form stored in events."""
        return {"conversation_id": self.conversation_id, "versions": list(self.versions)}


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryRecord:
    """One long-term memory record, as folded from its events.

    Attributes:
        id: Stable record id.
        scope: ``"global"`` or ``"session"``.
        kind: What sort of fact (``"fact"``, ``"preference"``, ...).
        body: The record's content, valid against the body schema.
        tags: Free labels.
        importance: 0.0 to 1.0; breaks ranking ties.
        provenance: The conversations (and versions) the record came from.
        created_at: Epoch seconds of the add.
        updated_at: Epoch seconds of the latest update.
        version: The version of the event that set it (0 before it is stored); with
            ``id`` it names one state of the record (the embedding cache key).
    """

    id: str
    scope: str
    kind: str
    body: dict[str, Any]
    tags: tuple[str, ...] = ()
    importance: float = DEFAULT_IMPORTANCE
    provenance: tuple[Provenance, ...] = ()
    created_at: float = 0.0
    updated_at: float = 0.0
    version: int = 0

    @property
    def text(self) -> str:
        """The body's ``text``, or the body as compact text when it has none."""
        text = self.body.get("text")
        if isinstance(text, str):
            return text
        return " ".join(f"{k}: {v}" for k, v in sorted(self.body.items()))

    @property
    def conversations(self) -> frozenset[str]:
        """The conversation ids named in the provenance."""
        return frozenset(p.conversation_id for p in self.provenance)

    def to_data(self, op: Op) -> dict[str, Any]:
        """The ``data`` of the ``memo`` event that sets this record.

        Args:
            op: ``"add"`` or ``"update"``.

        Returns:
            A JSON-compatible mapping.
        """
        return {
            "op": op,
            "id": self.id,
            "scope": self.scope,
            "kind": self.kind,
            "body": self.body,
            "tags": list(self.tags),
            "importance": self.importance,
            "provenance": [p.to_data() for p in self.provenance],
            "timestamps": {"created_at": self.created_at, "updated_at": self.updated_at},
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> MemoryRecord:
        """Read a record back from an add/update event's ``data``.

        Args:
            data: The event data.

        Returns:
            The record.

        Raises:
            KeyError: A required field is missing.
            TypeError: A field has the wrong type.
        """
        stamps = data.get("timestamps") or {}
        return cls(
            id=str(data["id"]),
            scope=str(data["scope"]),
            kind=str(data["kind"]),
            body=dict(data["body"]),
            tags=tuple(str(t) for t in data.get("tags") or ()),
            importance=float(data.get("importance", DEFAULT_IMPORTANCE)),
            provenance=tuple(
                Provenance(
                    conversation_id=str(p["conversation_id"]),
                    versions=tuple(int(v) for v in p.get("versions") or ()),
                )
                for p in data.get("provenance") or ()
            ),
            created_at=float(stamps.get("created_at", 0.0)),
            updated_at=float(stamps.get("updated_at", 0.0)),
        )


def merge_provenance(
    old: Sequence[Provenance], cid: str, versions: Iterable[int]
) -> tuple[Provenance, ...]:
    """Add ``versions`` of ``cid`` to a provenance list (one entry per conversation).

    Args:
        old: The current provenance.
        cid: The conversation the fact came from.
        versions: Its versions that stated it.

    Returns:
        The merged provenance, conversations in first-seen order.
    """
    merged: dict[str, set[int]] = {p.conversation_id: set(p.versions) for p in old}
    merged.setdefault(cid, set()).update(versions)
    return tuple(
        Provenance(conversation_id=c, versions=tuple(sorted(v))) for c, v in merged.items()
    )


def fold(events: Iterable[Event]) -> dict[str, MemoryRecord]:
    """The current records, rebuilt from a records conversation's events. Pure.

    Events that are not ``memo`` events, and memo data that is malformed, are ignored
    (the log is never rewritten, so a bad event must not hide the others).

    Args:
        events: The events, oldest first.

    Returns:
        Record id -> record, in order of first addition.
    """
    records: dict[str, MemoryRecord] = {}
    for event in events:
        if event.kind != EventKind.MEMO or not isinstance(event.data, Mapping):
            continue
        data = event.data
        op = data.get("op")
        if op == "delete":
            records.pop(str(data.get("id")), None)
        elif op in ("add", "update"):
            try:
                record = MemoryRecord.from_data(data)
            except (KeyError, TypeError, ValueError):
                continue
            records[record.id] = dataclasses.replace(record, version=event.version)
    return records
