"""Write requests: the values a handle sends to a store actor. Pure, validated by the handle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryd.events import Event

__all__ = ["Add", "Clear", "Fork", "Import", "Pop", "Record", "WriteRequest"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Add:
    """Append ``messages`` to ``cid`` as one event."""

    cid: str
    messages: tuple[dict[str, Any], ...]
    idempotency_key: str | None = None
    expected_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Clear:
    """Delete ``cid``'s messages, keeping a ``cleared`` marker."""

    cid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Pop:
    """Remove ``cid``'s last message."""

    cid: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Fork:
    """Start ``target`` as a copy of ``source`` (at ``at_version``)."""

    source: str
    target: str
    at_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Record:
    """Append a ``memo`` or ``compacted`` event to ``cid``; its history is unchanged."""

    cid: str
    kind: str
    messages: tuple[dict[str, Any], ...] = ()
    data: dict[str, Any] | None = None
    idempotency_key: str | None = None
    expected_version: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Import:
    """Write ``events`` to ``cid`` as they are (versions, timestamps, keys, data kept).

    Events already in the log (version <= the conversation's version) must be
    identical and are skipped; the rest continue the log.
    """

    cid: str
    events: tuple[Event, ...]


WriteRequest = Add | Clear | Pop | Fork | Record | Import
